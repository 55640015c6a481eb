"""The JSON records of a run: metadata, evaluation, trace metrics and result.

Together with the trace (:mod:`descriptor.events`) and the directory layout
(:mod:`descriptor.layout`) they are the run-record contract: the runtime
writes runs only through these models, and summaries, reports, attribution
and rollback read them only through :mod:`descriptor.run_files`.
"""

from __future__ import annotations

import hashlib
import json

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from descriptor.redact import may_hold_secret, redact
from descriptor.run_metrics import RunMetrics
from descriptor.trace_digest import TraceDigest

RECORD_VERSION = 2

RunStatus = Literal["running", "finished", "error"]


class _Record(BaseModel):
    # Tolerant readers: a newer writer's extra keys are kept, never an error.
    model_config = ConfigDict(extra="allow")


class RunIdentity(_Record):
    """The fields that name a run, in every record that names one (result, metadata, manifest entry)."""

    run_id: str
    """``<experiment>/<benchmark>/<system>/<task_id>/run_<r>``."""
    benchmark: str
    system: str
    task_id: str
    run_index: int
    seed: int


class TaskRecord(_Record):
    """The benchmark task as the run saw it."""

    question: str
    reference: Any = None
    """Ground truth the evaluator compares against (never shown to agents)."""
    metadata: dict[str, Any] = Field(default_factory=dict)


class InjectionRecord(_Record):
    """Where the scripted model injects (plan) or injected (fired) its one wrong step."""

    agent: str | None = None
    step: int | None = None


class InjectionPlanRecord(InjectionRecord):
    """Where the scripted model plans its wrong step, and for a rollback scenario how the step was placed."""

    position: str | None = None
    """The rollback scenario (``left``, ``mid``, ``right``, ``uniform``) that placed ``step``; None: the old rule."""
    fraction: float | None = None
    """With ``position``: the drawn relative position in [0, 1)."""
    probe_steps: int | None = None
    """With ``position``: steps the run takes without the error (``step`` = floor(fraction × it))."""


class PriceRecord(_Record):
    """The prices a route's calls were charged at, and where they come from."""

    input_per_1m: float
    """USD per one million input tokens."""
    output_per_1m: float
    """USD per one million output tokens."""
    source: Literal["config", "table", "unknown", "local", "unpriced"]
    """``config``: the experiment's config gave them; ``table``: a maintained price table (``table``, ``model``,
    ``date``); ``unknown``: the table does not know the model, priced 0 (its costs are not measured); ``local``: a
    model served here (embedded, scripted), 0; ``unpriced``: none given and none looked up, since the sweep did
    not call the route (0 if something did)."""
    table: str | None = None
    """The price table and its version (``genai-prices 0.2.5``) when ``source`` is ``table`` or ``unknown``."""
    model: str | None = None
    """The table's ``provider:model`` the route matched."""
    date: str | None = None
    """UTC day (``YYYY-MM-DD``) the run started, whose table prices it was charged at."""


class RunMetadata(RunIdentity):
    """``run_<r>.metadata.json``: what a run was and what it ran with (written first, rewritten at the end)."""

    version: int = RECORD_VERSION
    experiment_id: str
    status: RunStatus
    """``running`` until the run ends; then ``finished`` or ``error`` (an infrastructure failure)."""
    started_at: str
    """UTC ISO time the run started."""
    task: TaskRecord
    thread_id: str
    """The LangGraph thread id of the run's checkpoints."""
    checkpoint_db: str | None = None
    """File name of the checkpoint database beside the run's files; None when it was not kept."""
    config_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    """SHA-256 of the effective experiment config (routes name env variables, never keys), stored once per
    experiment as ``<root>/configs/<config_sha256>.json`` (:mod:`descriptor.run_config`); None in older runs."""
    config: dict[str, Any] | None = None
    """The effective config inline: only in runs written before ``config_sha256`` existed, still read."""
    models: dict[str, str] = Field(default_factory=dict)
    """Route name -> ``provider:model`` (or the label of the model actually called, at the end)."""
    prices: dict[str, PriceRecord] | None = None
    """Route name -> the prices its calls' ``cost_usd`` is computed with, and their source; None in older runs."""
    injection_plan: InjectionPlanRecord | None = None
    personas: dict[str, str] | None = None
    """Agent -> persona generated for this run (``mas.persona_mode = "generated"``); None otherwise."""
    system_options: dict[str, Any] | None = None
    """Options the sweep chose for this run's system (``sas_matched``'s matched ``k``)."""
    injected_error: InjectionRecord | None = None
    """The scripted model's injected wrong step (ground truth for attribution tests)."""
    versions: dict[str, str | None] = Field(default_factory=dict)
    """Python's and the key packages' versions (numpy and scipy too: the summaries' statistics use them)."""
    plugins: list[str] | None = None
    """The plugin modules the sweep's process had loaded (``--plugin``, config ``plugins``): code outside the
    commit that may define the run's benchmark, system or model. None: none."""
    git_commit: str | None = None
    """The code's git commit (``+dirty`` with uncommitted changes); None when unknown."""
    git_commit_reason: str | None = None
    """Why ``git_commit`` is None (e.g. not installed from a git checkout); None when it is known."""
    host: str = ""
    error: str | None = None
    wall_time_s: float | None = None
    """Wall time of the graph run (s); set at the end."""
    otel_trace_id: str | None = None
    """The run's OpenTelemetry trace id (32 hex digits): the trace its spans have, exported or not."""


class EvalRecord(_Record):
    """``run_<r>.eval.json``: the benchmark's verdict on the final answer."""

    success: bool = Field(strict=True)
    completion: bool | None = Field(default=None, strict=True)
    """A final answer was produced without an explicit runtime failure (None in files that predate it)."""
    score: float = Field(strict=True)
    """Benchmark-native score in [0, 1]."""
    details: dict[str, Any] = Field(default_factory=dict)
    candidate_success: list[bool] | None = None
    """The benchmark's verdict on each candidate of the run's final vote (the trace's ``final_vote`` event lists
    them in this order), on benchmarks whose evaluation is a quick comparison of answers; None where there was no
    vote or such an evaluation. For the vote audit only (:mod:`descriptor.judge_audit`): the run's success is its
    published answer's."""


class TraceMetricsRecord(RunMetrics):
    """``run_<r>.trace_metrics.json``: the run-level metrics of its trace, with its outcome and stages."""

    model_config = ConfigDict(extra="allow", frozen=False)
    success: bool
    completion: bool
    stages: list[dict[str, Any]] = Field(default_factory=list)
    """Per looped stage: rounds used, stop reason, consensus (see the topologies)."""
    digest: TraceDigest | None = None
    """What summaries and the report need of the trace, with its hash (:mod:`descriptor.trace_digest`); absent
    in runs written before the digest existed (their traces are parsed)."""
    check: str | None = None
    """SHA-256 of this record's other fields (:meth:`content_check`), written with it: a reader takes the record
    in place of its trace only while the two agree, so a record edited by hand (its figures no longer its
    trace's) is not taken; absent in older runs, whose traces are then parsed."""

    def content_check(self, text: str | None = None) -> str:
        """The SHA-256 (hex) of the record without ``check``, as pydantic-core serializes it (``text``: that
        serialization, when the caller has it)."""
        text = self.model_dump_json(exclude={"check"}) if text is None else text
        return hashlib.sha256(text.encode()).hexdigest()

    def sealed(self) -> TraceMetricsRecord:
        """This record as it is written, with its ``check``: redacted first when it may hold a secret, as every JSON
        artifact is (:func:`descriptor.io.json_bytes`), so the check is of what a reader will find, not of a value
        the file never held."""
        text = self.model_dump_json(exclude={"check"})
        if not may_hold_secret(text):  # the common case: serialized once
            return self.model_copy(update={"check": self.content_check(text)})
        record = TraceMetricsRecord.model_validate(redact(json.loads(text)))
        return record.model_copy(update={"check": record.content_check()})


class RunResult(RunIdentity):
    """``run_<r>.result.json``: written last, atomically; its presence marks a finished run."""

    version: int = RECORD_VERSION
    status: Literal["finished", "error"] = "finished"
    """``finished``: the system ran to its end (its answer evaluated, right or wrong) or failed on its own (a graph
    exception: completion and success false); ``error``: an infrastructure failure (model calls failed after
    retries, a dead server, no sandbox) ended it: not a task result, retried by the next invocation of the
    sweep."""
    success: bool
    """Benchmark correctness of the final answer."""
    completion: bool
    """A final answer was produced without an explicit runtime failure."""
    score: float
    """Benchmark-native score in [0, 1]."""
    answer: str
    tokens_total: int
    """Tokens of every model call of the run (tokens)."""
    latency_total_ms: float
    """Sum of the events' latencies (ms)."""
    cost_total_usd: float
    """Price of every model call of the run (USD)."""
    wall_time_s: float
    """Wall time of the graph run (s)."""
    error: str | None = None
    limit: str | None = None
    """The budget that stopped the run (``tokens``, ``cost_usd``, ``wall_s``, ``model_calls``; config ``limits``):
    the run is ``finished``, its answer evaluated as any other, completion false when it left none."""
    grading_cost_usd: float = 0.0
    """What grading the answer by the experiment's judge cost (USD; BrowseComp's LLM grader): the evaluation's, not
    the system's, so not in ``cost_total_usd``, but spent by the sweep and counted against
    ``limits.sweep_cost_usd``."""
    problem: str | None = None
    """The problem the task is one sub-step of (the task's ``metadata["problem"]``: SciCode's main problem); None
    for tasks that are not sub-steps (:mod:`descriptor.problems`)."""
    problem_tasks: int | None = Field(default=None, ge=1)
    """How many tasks that problem has (``metadata["problem_tasks"]``): a problem is solved in run r when all of
    them passed in run r."""

    @property
    def spent_usd(self) -> float:
        """What the run spent (USD): its model calls and the grading of its answer (``limits.sweep_cost_usd``)."""
        return self.cost_total_usd + self.grading_cost_usd


ROLLBACK_STRATEGIES: tuple[str, ...] = ("conformal", "top1", "restart", "retry", "oracle")
"""How a rollback picks its restart step: the conformal set's first step, the most likely step, step 0, step 0
without the rollback note (a plain rerun with another seed: the baseline a user has without this project), or
the known decisive step. ``oracle`` (scripted runs with an injected error only) is the least any strategy that
restores the run can redo."""


class RollbackRecord(_Record):
    """``run_<r>.rollback_<k>.json``: what one rollback of a failed run did and what it cost (written by attribution)."""

    version: int = 3
    """2: ``set`` is the true set (may be empty), with ``fallback`` and ``chosen_step``; 3: ``restart_covers`` and
    ``origin``."""
    run: str
    """Path prefix of the original run (``.../task/run_<r>``)."""
    rollback_index: int
    strategy: str
    set: list[int]
    """Steps the strategy flagged (conformal set, the top-1 step, or all steps); may be empty (see fallback)."""
    fallback: bool = False
    """True when ``set`` was empty and the restart point was substituted (the last step)."""
    chosen_step: int | None = None
    """The step the strategy pointed at (first of ``set``, or the substitute)."""
    restart_step: int
    """First step redone: the first step of ``chosen_step``'s super-step; steps before it are kept."""
    n_steps: int
    """Trajectory steps of the original run."""
    steps_redone: int
    """Trajectory steps the rollback produced."""
    cost: float
    """(n_steps - restart_step) / n_steps: the fraction of the original steps redone (restart = 1.0)."""
    tokens: int
    """Tokens spent by the resumed run (tokens)."""
    cost_usd: float = 0.0
    """What the resumed run cost (USD)."""
    scoring_nfe: int = 0
    """Model calls spent scoring the steps."""
    success: bool
    answer: str
    decisive_step: int | None
    """The known decisive error (scripted injection), when there is one."""
    covered: bool | None
    """Whether ``set`` (the true set, never the substitute) holds the decisive step (None when unknown)."""
    restart_covers: bool | None = None
    """Rollback coverage as the conformal-attribution paper defines it: ``restart_step <= decisive_step``, so the
    redone part holds the error (None when the decisive step is unknown or the record predates it)."""
    wall_time_s: float
    status: Literal["finished", "error"] = "finished"
    """``error``: the rollback could not run to its end (a damaged checkpoint, a model call that failed for
    good): no outcome, left out of success rates and counted apart."""
    error: str | None = None
    origin: Literal["manual", "sweep", "label"] = "manual"
    """``sweep``: made by ``run --rollback`` (summaries count only these, one per run); ``manual``: by ``rollback``
    or ``rollback-experiment``; ``label``: a replay of ``label-failures``."""
    note: bool | None = None
    """The resumed agents were told of the failed continuation (the rollback note): False for ``retry`` and for a
    rollback made with ``--no-note``; None in records that predate it (then ``retry`` alone had none)."""


class RollbackSweepRecord(_Record):
    """``<root>/rollback_sweep.json``: how ``run --rollback`` rolled back a sweep's failed runs (written by
    attribution, rewritten by each invocation; the per-run outcomes are the ``origin: sweep`` rollback records)."""

    version: int = 1
    strategy: str
    """conformal, top1, restart, retry or oracle."""
    calibration: str | None = None
    """The ``--calibration`` file; ``self``: calibrated on replay labels (see ``labels``); None: on the sweep's own
    injected labels, cross-fitted (see ``folds``)."""
    labels: str | None = None
    """``calibration: self``: the labels.jsonl of ``label-failures`` the calibration's decisive steps came from."""
    label_tokens: int = 0
    """``calibration: self`` on the sweep's own failures: tokens the labelling replays spent (beyond the rollbacks)."""
    note: bool = True
    """The resumed agents were told of the failure (the rollback note); False for ``retry`` and with
    ``--no-rollback-note`` (then the sweep's own replay labels were made without it too)."""
    scorer: str | None = None
    """Step scorer of conformal and top1."""
    method: str | None = None
    """Conformal method asked for (``auto`` chooses per fold)."""
    alpha: float | None = None
    folds: list[dict[str, Any]] = Field(default_factory=list)
    """Self-calibration only: per fold, the runs it rolled back and what its calibration, fitted on the other folds'
    runs, resolved to (method, q_hat, n)."""
    n_failed: int
    """Failed runs of the sweep (finished, not successful)."""
    n_rolled_back: int
    """Runs this invocation rolled back."""
    n_already: int = 0
    """Failed runs that already had their sweep rollback (an earlier invocation): never rolled back twice."""
    n_errors: int = 0
    """Rollbacks that could not run (e.g. no checkpoint): the run stays failed."""
    n_without_choice: int = 0
    """Failed runs the strategy had no restart step for (oracle: no known decisive step): left as they are."""
    errors: list[str] = Field(default_factory=list)
    """The first rollbacks that could not run, with why."""
    wall_time_s: float = 0.0
    """Wall time of scoring, calibrating and rolling back (s)."""
