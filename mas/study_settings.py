"""The settings of a study's controls: the response cache, budgets and system options (``[cache]``, ``[limits]``,
``[systems.<name>]``), and the strict base every settings model of :mod:`mas.config` shares."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class Strict(BaseModel):
    """Unknown keys are errors, and assignments are validated too."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class CacheSettings(Strict):
    """The response cache (:mod:`mas.llm.cache`): model replies kept in SQLite and reused by identical calls."""

    mode: Literal["off", "read", "write", "readwrite"] = "off"
    """``read`` reuses stored replies, ``write`` stores new ones, ``readwrite`` both (``--cache``)."""
    path: str | None = None
    """The SQLite file; default ``<cache dir>/responses.sqlite`` (``$MAS_CACHE_DIR`` or ``~/.cache/mas-econ``)."""
    expire_days: float | None = Field(default=None, gt=0)
    """Entries older than this many days are not reused (and are replaced when written again)."""
    nondeterministic: bool = False
    """Also cache calls with temperature > 0 and no seed sent (their replies would differ if asked again)."""
    share_runs: bool = False
    """Let repeated runs of one task reuse each other's replies (by default each run's seed is in the key, so the
    run-to-run variance the descriptor measures is kept)."""


class LimitSettings(Strict):
    """Budgets: per run (a run that reaches one stops at its next model call and is recorded as finished with
    ``limit``) and per sweep (no new run is scheduled once the sweep has spent ``sweep_cost_usd``)."""

    tokens: int | None = Field(default=None, gt=0)
    """Tokens (in + out) one run may use; it may pass this by one call's tokens (tokens)."""
    cost_usd: float | None = Field(default=None, gt=0)
    """What one run may spend (USD)."""
    wall_s: float | None = Field(default=None, gt=0)
    """Wall time one run may take before its next model call is refused (s)."""
    model_calls: int | None = Field(default=None, gt=0)
    """Model calls one run may make."""
    sweep_cost_usd: float | None = Field(default=None, gt=0)
    """What the whole sweep may spend (USD): past it, runs in flight finish and no new run starts; a run starts only
    while what was spent and what the runs in flight may spend stay under it (:mod:`mas.sweep.spending`); the
    command exits with status 3 and a later invocation with a higher limit resumes."""

    def per_run(self) -> bool:
        """Whether any per-run limit is set."""
        return any(v is not None for v in (self.tokens, self.cost_usd, self.wall_s, self.model_calls))


class SasMatchedSettings(Strict):
    """``sas_matched``: k SAS samples and the final vote (:mod:`mas.topologies.sas_matched`)."""

    k: int = Field(default=5, ge=1, le=64)
    """Samples per run, when not matched."""
    match: str | None = None
    """A system of the same sweep (e.g. ``"debate"``): k is chosen per benchmark so that the mean tokens per run
    come near that system's, from its finished runs and the ``sas`` runs (which must be in the sweep)."""


GRAPH_SPEC = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
"""``MODULE:ATTRIBUTE``: a dotted module name and an attribute (path) of it."""
APP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
"""The name of an application system declared in the config: a directory name without ``@`` or ``:``."""


class AppSettings(Strict):
    """An application system: a LangGraph graph the user already has, run as a system (``[systems.<name>]
    graph = "MODULE:FACTORY"``; see :mod:`mas.apps`)."""

    graph: str
    """``MODULE:FACTORY``: a function returning a LangGraph ``StateGraph`` or compiled graph (a function that takes
    a ``model`` argument gets the route's chat model), or such a graph itself."""
    input_key: str | None = None
    """The state key the task's text enters as; None: ``messages``, a list of one human message holding it."""
    answer_key: str | None = None
    """The state key the answer is read from; None: the last AI message of ``messages``."""

    @field_validator("graph")
    @classmethod
    def _spec(cls, value: str) -> str:
        if GRAPH_SPEC.fullmatch(value) is None:
            raise ValueError("expected MODULE:FACTORY (a dotted module name, a colon, and a function or graph in it)")
        return value


class SystemsSettings(Strict):
    """Options of the systems that take any (``[systems.<name>]``), and the application systems the config declares
    (``[systems.<name>] graph = "MODULE:FACTORY"``: every table besides the built-in systems' is one)."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)
    __pydantic_extra__: dict[str, AppSettings] = Field(init=False)  # type: ignore[assignment]

    sas_matched: SasMatchedSettings = Field(default_factory=SasMatchedSettings)

    @model_validator(mode="after")
    def _app_names(self) -> SystemsSettings:
        for name in self.apps():
            if APP_NAME.fullmatch(name) is None:
                raise ValueError(f"systems.{name}: an application system's name is 1-100 letters, digits, '.', '_' "
                                 "or '-' (it names the directory its runs go to)")
        return self

    def apps(self) -> dict[str, AppSettings]:
        """The application systems declared here, by name."""
        return dict(self.__pydantic_extra__ or {})
