"""The graph node a topology's code runs in: the checkpoint it started from, which its trace events name."""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config


def state_id_of(config: RunnableConfig | None = None) -> str | None:
    """The top-level checkpoint a node runs from (its resumable point): read from ``config``, by default from the
    running node's own (LangGraph's ``get_config``); None outside a graph's node or without a checkpointer.

    The kit's functions read it themselves where they trace a turn, a decision or an answer, so a node passes
    none.
    """
    if config is None:
        try:
            config = get_config()
        except RuntimeError:  # not called from a graph's node
            return None
    return (config.get("configurable", {}).get("checkpoint_map") or {}).get("")
