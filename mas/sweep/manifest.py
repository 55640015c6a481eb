"""The experiment manifest: ``<experiment_root>/manifest.json``.

It records the effective config (redacted), what each invocation asked
for, every planned run and whether it is finished. It is rewritten
atomically whenever a run finishes, so a reader (or a crash) never sees a
half-written file. The run files stay the source of truth: a run is
finished when its ``result.json`` is (see :func:`mas.sweep.runner.finished_result`);
the manifest is the index a person or a dashboard reads.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from descriptor.errors import UserError
from descriptor.io import write_json_atomic
from descriptor.layout import MANIFEST_NAME
from descriptor.records import RunIdentity, RunResult
from descriptor.redact import redact
from descriptor.run_config import config_differences
from mas.config import ExperimentConfig
from mas.sweep.provenance import git_commit
from mas.sweep.runner import RunSpec
from mas.tracing import utc_now_iso

MANIFEST_VERSION = 1

# Keys that may change between invocations of one experiment without changing any run's outcome.
RunStatus = Literal["pending", "finished", "error"]
SweepStatus = Literal["running", "finished", "interrupted", "crashed", "over_budget"]


class ManifestRun(RunIdentity):
    """One planned run and what became of it."""

    status: RunStatus = "pending"
    """``finished``: its ``result.json`` says the system ran to its end (right or wrong); ``error``: the
    result says an infrastructure failure ended it (redone by a later invocation while it has retries
    left, see ``attempts``); ``pending``: no result yet."""
    attempts: int = 0
    """Times the run was executed (the first try plus retries of errored attempts)."""
    success: bool | None = None
    error: str | None = None
    """The run's recorded error, when it ended with one."""
    tokens_total: int | None = None
    cost_total_usd: float | None = None
    spent_on_errors_usd: float = 0.0
    """What the run's earlier attempts that ended in an infrastructure error spent (USD, grading included): their
    files are cleared when the run is redone, and the sweep budget (``limits.sweep_cost_usd``) still counts it."""
    finished_at: str | None = None
    """UTC ISO time this sweep saw it finish; None for runs finished by an earlier invocation and not seen."""


class Invocation(BaseModel):
    """One command invocation that worked on the experiment."""

    started_at: str
    ended_at: str | None = None
    status: SweepStatus = "running"
    stopped_by: str | None = None
    """Signal name (``SIGTERM``, ``SIGINT``) when the invocation was interrupted; ``limits.sweep_cost_usd`` when
    it stopped scheduling at its spending limit (status ``over_budget``)."""
    executor: str
    concurrency: int
    host: str
    pid: int
    request: dict[str, Any]
    """Benchmarks, systems, task limit, runs per task and tracing of this invocation."""
    git_commit: str | None = None
    """The code's git commit (``+dirty`` with changes; None: unknown), so a summary can say when the runs of
    one experiment ran on different code (:mod:`descriptor.provenance`)."""
    skipped: int = 0
    """Runs already finished when it started (their files untouched)."""
    ran: int = 0
    """Runs it finished."""


class Manifest(BaseModel):
    """The whole ``manifest.json``."""

    version: int = MANIFEST_VERSION
    experiment_id: str
    created_at: str
    updated_at: str
    status: SweepStatus = "running"
    config: dict[str, Any]
    """The effective config, redacted (routes name env variables, never keys)."""
    counts: dict[str, int] = Field(default_factory=dict)
    """``total``, ``finished`` (task results), ``succeeded`` and ``failed`` (finished runs whose answer was
    right or wrong), ``errors`` (runs that ended in an infrastructure error: not task results), ``pending``."""
    invocations: list[Invocation] = Field(default_factory=list)
    runs: list[ManifestRun] = Field(default_factory=list)


def spec_entry(spec: RunSpec) -> ManifestRun:
    return ManifestRun(**spec.key.identity())


class ManifestStore:
    """Reads, updates and atomically rewrites one experiment's manifest."""

    def __init__(self, root: Path, manifest: Manifest) -> None:
        self.path = root / MANIFEST_NAME
        self.manifest = manifest
        self._index = {r.run_id: r for r in manifest.runs}

    @classmethod
    def open(cls, root: Path, experiment_id: str, cfg: ExperimentConfig) -> ManifestStore:
        """Load the manifest (resume) or start a new one; a changed config is refused.

        Resuming with a different config would mix runs of two experiments in
        one directory, so it raises :class:`UserError` naming the keys.
        """
        config = redact(cfg.redacted())
        path = root / MANIFEST_NAME
        if path.is_file():
            try:
                manifest = Manifest.model_validate_json(path.read_text(encoding="utf-8"))
            except ValueError as err:
                raise UserError(f"{path}: not a valid experiment manifest ({str(err).splitlines()[0]}); "
                                "move it away to rebuild it from the run files (its check that a resume uses the "
                                "same config goes with it: the summary then says when the runs' configs differ)"
                                ) from None
            diff = config_differences(manifest.config, config)
            if diff:
                raise UserError(f"{path}: experiment {experiment_id!r} was started with a different config "
                                f"(differs in: {', '.join(diff[:10])}); resume it with the same config "
                                "or use a new experiment id")
            return cls(root, manifest)
        now = utc_now_iso()
        return cls(root, Manifest(experiment_id=experiment_id, created_at=now, updated_at=now, config=config))

    def begin(self, specs: list[RunSpec], *, executor: str, concurrency: int, request: dict[str, Any]) -> Invocation:
        """Add this invocation and any runs not yet listed (earlier runs stay listed)."""
        for spec in specs:
            if spec.run_id not in self._index:
                entry = spec_entry(spec)
                self.manifest.runs.append(entry)
                self._index[spec.run_id] = entry
        for earlier in self.manifest.invocations:
            if earlier.status == "running":  # this one holds the sweep's lock: that one died without a word (kill -9)
                earlier.status = "crashed"
        inv = Invocation(started_at=utc_now_iso(), executor=executor, concurrency=concurrency,
                         host=platform.node(), pid=os.getpid(), request=request, git_commit=git_commit()[0])
        self.manifest.invocations.append(inv)
        self.manifest.status = "running"
        return inv

    def attempts(self, spec: RunSpec) -> int:
        """Times ``spec`` has been executed so far (at least 1 once it has a result)."""
        return self._index[spec.run_id].attempts

    def mark_finished(self, spec: RunSpec, result: RunResult, *, seen_now: bool) -> None:
        """Record a run's result, finished or errored (``seen_now``: this invocation ran it, rather than found
        it done)."""
        entry = self._index[spec.run_id]
        entry.status = "error" if result.status == "error" else "finished"
        entry.attempts = entry.attempts + 1 if seen_now else max(entry.attempts, 1)
        entry.success = result.success
        entry.error = result.error
        entry.tokens_total = result.tokens_total
        entry.cost_total_usd = result.cost_total_usd
        if seen_now:
            entry.finished_at = utc_now_iso()
            self.manifest.invocations[-1].ran += 1

    def note_errored_spend(self, spec: RunSpec, result: RunResult) -> None:
        """An errored attempt about to be cleared and redone: keep what it spent (USD)."""
        self._index[spec.run_id].spent_on_errors_usd += result.spent_usd

    def spent_on_errors(self, specs: list[RunSpec]) -> float:
        """What the errored attempts of ``specs``, cleared since, spent (USD)."""
        return sum(self._index[s.run_id].spent_on_errors_usd for s in specs)

    def mark_pending(self, spec: RunSpec, *, retry: bool = False) -> None:
        """A run without a result (never run, interrupted, or its ``result.json`` deleted by hand) is pending;
        ``retry``: an errored run about to be redone (its last error stays on record until then)."""
        entry = self._index[spec.run_id]
        entry.status, entry.success, entry.finished_at = "pending", None, None
        if not retry:
            entry.error = None

    def end(self, status: SweepStatus, stopped_by: str | None = None) -> None:
        inv = self.manifest.invocations[-1]
        inv.ended_at, inv.status, inv.stopped_by = utc_now_iso(), status, stopped_by
        self.manifest.status = status

    def save(self) -> None:
        """Recount and rewrite ``manifest.json`` atomically."""
        runs = self.manifest.runs
        finished = [r for r in runs if r.status == "finished"]
        errors = sum(r.status == "error" for r in runs)
        succeeded = sum(bool(r.success) for r in finished)
        self.manifest.counts = {
            "total": len(runs), "finished": len(finished), "errors": errors,
            "pending": len(runs) - len(finished) - errors, "succeeded": succeeded,
            "failed": len(finished) - succeeded,
        }
        self.manifest.updated_at = utc_now_iso()
        # compact (``jq .`` indents it): indentation was 28 % of a 400-run manifest, rewritten as runs finish
        write_json_atomic(self.path, self.manifest.model_dump(mode="json"), indent=None)
