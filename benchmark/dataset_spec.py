"""The ``[datasets.<name>]`` table of the config: a dataset as a benchmark (:mod:`benchmark.dataset`), checked when
the config is loaded (this module is light: the config imports it)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Scorer = Literal["exact", "numeric", "includes", "choice", "model"]


class DatasetSpec(BaseModel):
    """One ``[datasets.<name>]`` table of the config."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1)
    """A ``.jsonl`` (or ``.jsonl.gz``) or ``.csv`` file, or ``hf:ORG/NAME[:split]`` (split default ``test``)."""
    input: str = Field(min_length=1)
    """The field holding the task text shown to the agents."""
    target: str = Field(min_length=1)
    """The field holding the expected answer (never shown to agents)."""
    id: str | None = None
    """The field holding each row's id; None: ``<name>_<row>`` with the row counted from 0."""
    scorer: Scorer = "exact"
    """How an answer is judged: ``exact``, ``numeric``, ``includes``, ``choice`` or ``model`` (a grader model)."""
    choices: str | None = None
    """A field holding the options (a list; in a CSV, a JSON list), shown lettered after the input."""
    grader: str = "judge"
    """``scorer = "model"``: the route (or role) that grades; ``judge`` resolves as the judge role does."""
    subset: str | None = None
    """``hf:`` only: the dataset's configuration (e.g. ``main`` for GSM8K)."""


def beside(path: str, config_dir: Path) -> str:
    """``path`` as the config in ``config_dir`` means it: a relative file path is relative to the config's directory
    (wherever the command starts); an absolute path and an ``hf:`` reference are kept."""
    if path.startswith("hf:") or Path(path).expanduser().is_absolute():
        return path
    return str(config_dir.absolute() / path)
