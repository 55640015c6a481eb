"""Grading by a model: a benchmark's grading prompt, or its own scorer's calls, sent to a grading route.

A benchmark asks for an LLM grader by returning a prompt from
:meth:`~benchmark.base.Benchmark.judge_prompt` (BrowseComp does). The judge
grades only when the experiment configures one, a ``[models.judge]`` route
or ``roles.judge``, and it is not the scripted double in mock mode (``--model
scripted``; ``scripted:judge`` plays a judge). Otherwise the benchmark grades
on its own (BrowseComp: exact match), and says which grader it used.

A benchmark that names its own grader (:meth:`~benchmark.base.Benchmark.grader_route`: a dataset with
``scorer = "model"``, an Inspect AI task) is always graded, through
:meth:`~benchmark.base.Benchmark.grade_answer`, by that route (``judge``: the judge's, else ``default``); its
scorer may call the route several times, and the details sum them.

The grading call is the evaluation's work, not the system's: it is made after
the run's trace is closed, so its tokens and cost are not the run's; the
evaluation's details record the judge's model, tokens and cost. A judge call
that fails for good (after the route's retries) leaves the run ungraded: an
infrastructure error, retried by the next invocation like any other. A grading prompt the judge refuses as over its
context is the answer's doing (a system that answers with 300,000 characters): the benchmark then grades on its
own rule, and the details say why, so an overlong answer never leaves the rates as an "error" while the same
system's right answers stay in them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from benchmark.base import Benchmark, GraderUnavailable, Task
from descriptor.errors import UserError
from mas.config import ExperimentConfig, ModelRoute
from mas.llm.call import LLMCallError, call_llm, prompt_too_long
from mas.topologies.agent import RunContext

GRADE_CONTRACT = "benchmark.grade"
"""The grading call's contract (the scripted double's ``scripted:judge`` answers it)."""
GRADER_ACTOR = "system:grader"


@dataclass(kw_only=True, slots=True)
class Grading:
    """The judge's reply to the benchmark's grading prompt (None: no judge graded), or why it could not."""

    reply: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    """The judge's model label, tokens and cost (tokens, USD), merged into the evaluation's details."""
    error: str | None = None


def judge_configured(cfg: ExperimentConfig) -> bool:
    """True when the experiment names a judge route (``[models.judge]`` or ``roles.judge``)."""
    return "judge" in cfg.roles or "judge" in cfg.models


def grader_role(cfg: ExperimentConfig, bench: Benchmark) -> str | None:
    """The role (or route) whose model grades ``bench``'s answers, or None: the benchmark's own grader
    (:meth:`~benchmark.base.Benchmark.grader_route`), else the judge when the experiment configures one and the
    benchmark has a grading prompt. An unknown grader is a :class:`UserError` naming the known ones."""
    own = bench.grader_route()
    if own is None:
        judged = type(bench).judge_prompt is not Benchmark.judge_prompt or \
            type(bench).grade_answer is not Benchmark.grade_answer
        return "judge" if judge_configured(cfg) and judged else None
    if own != "judge" and own not in cfg.models and own not in cfg.roles:
        known = ", ".join(sorted({"judge", *cfg.models, *cfg.roles}))
        raise UserError(f"benchmark {bench.name}: grader {own!r} is no route or role of this config; known: {known}")
    return own


def grading_routes(cfg: ExperimentConfig, benches: Iterable[Benchmark]) -> dict[str, ModelRoute]:
    """The routes that will grade some benchmark's answers, by name (their keys are checked before any run)."""
    roles = {role for b in benches if (role := grader_role(cfg, b)) is not None}
    return {cfg.route_name_for_role(r): cfg.route_for_role(r) for r in sorted(roles)}


class _Grader:
    """The :data:`~benchmark.base.Ask` of one grading: each call to the grading route, its tokens and cost summed."""

    def __init__(self, rt: RunContext, role: str, hints: dict[str, str]) -> None:
        self.bound = rt.models.for_role(role)
        self.hints = hints
        self.calls, self.tokens, self.cost = 0, 0, 0.0

    async def __call__(self, messages: list[tuple[str, str]]) -> str:
        if not self.bound.judges:
            raise GraderUnavailable(f"{self.bound.model_label} plays no grader")
        kinds = {"system": SystemMessage, "assistant": AIMessage}
        res = await call_llm(self.bound, [kinds.get(role, HumanMessage)(text) for role, text in messages],
                             contract=GRADE_CONTRACT, actor=GRADER_ACTOR, temperature=0.0,
                             metadata={"hints": self.hints})
        self.calls += 1
        self.tokens += res.token_in + res.token_out
        self.cost += res.cost_usd
        return res.text

    def details(self) -> dict[str, Any]:
        if not self.calls:
            return {}
        return {"judge_model": self.bound.model_label, "judge_tokens": self.tokens, "judge_cost_usd": self.cost,
                **({"judge_calls": self.calls} if self.calls > 1 else {})}


async def grade(bench: Benchmark, task: Task, rt: RunContext, answer: str | None, error: str | None) -> Grading:
    """The grading of ``answer`` when the benchmark or the experiment asks for one (:func:`grader_role`)."""
    if error is not None or (role := grader_role(rt.cfg, bench)) is None:
        return Grading()
    grader = _Grader(rt, role, bench.judge_fields(task, answer or ""))
    try:
        reply = await bench.grade_answer(task, answer or "", grader)
    except GraderUnavailable:
        return Grading(details=grader.details())
    except LLMCallError as err:
        if prompt_too_long(err):  # the answer made the prompt too long: the system's output, not the infrastructure
            return Grading(details={**grader.details(), "judge_error": (
                f"the grading prompt is over the judge's context with this {len(answer or '')}-character answer: "
                "graded by the benchmark's own rule")})
        return Grading(error=f"grading judge failed: {err}")
    return Grading(reply=reply, details=grader.details())
