"""One typed trajectory for every attribution method, whatever the source.

A trajectory is the ordered list of steps of a failed multi-agent run: each
step is one message of one agent. Who&When logs and this project's own traces
load into the same model (see ``attribution/sources/loaders.py``).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

_SUFFIX_RE = re.compile(r"\s*\([^()]*\)\s*$")


def normalize_agent(name: str | None) -> str:
    """Agent names compare case-insensitively, without a trailing " (…)".

    >>> normalize_agent("WebSurfer (-> Orchestrator)")
    'websurfer'
    """
    if not name:
        return ""
    return _SUFFIX_RE.sub("", str(name)).strip().lower()


class Step(BaseModel):
    """One message of one agent."""

    model_config = ConfigDict(frozen=True)
    index: int = Field(ge=0)
    """0-based position in the trajectory."""
    agent: str
    """Speaker as written in the source."""
    role: str = ""
    """Structural role (e.g. assistant, planner, critic) when the source has one."""
    content: str = ""
    state_id: str | None = None
    """For this project's runs: the checkpoint to resume from to redo this step."""
    kind: str = ""
    """For this project's runs: the trace event type (plan, act, tool_call, ...); empty for Who&When."""

    @property
    def agent_key(self) -> str:
        """Normalised agent name for comparisons."""
        return normalize_agent(self.agent)


class Trajectory(BaseModel):
    """A failed run as attribution methods see it."""

    model_config = ConfigDict(frozen=True)
    id: str
    """Unique id, e.g. ``algorithm_generated/12`` or a run path."""
    subset: str = ""
    """``algorithm_generated``, ``hand_crafted`` or ``runs``."""
    query: str
    ground_truth: str | None = None
    final_answer: str | None = None
    steps: list[Step]
    mistake_agent: str | None = None
    """Labelled responsible agent, when known."""
    mistake_step: int | None = None
    """Labelled decisive error step (0-based), when known."""
    mistake_reason: str | None = None
    source_path: str | None = None
    question_id: str | None = None
    """The id the source gives the question (Who&When's ``question_ID``): records sharing it share a fold, even when
    their question texts differ (one subset's copy of a GAIA question carries code the other's does not)."""

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    @property
    def agent_keys(self) -> list[str]:
        """Distinct normalised agent names in order of first appearance."""
        return list(dict.fromkeys(s.agent_key for s in self.steps))

    @property
    def agents(self) -> list[str]:
        """Distinct speakers in order of first appearance."""
        seen: dict[str, None] = {}
        for s in self.steps:
            seen.setdefault(s.agent, None)
        return list(seen)
