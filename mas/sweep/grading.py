"""Grading by the experiment's judge: a benchmark's grading prompt sent to the ``judge`` route.

A benchmark asks for an LLM grader by returning a prompt from
:meth:`~benchmark.base.Benchmark.judge_prompt` (BrowseComp does). The judge
grades only when the experiment configures one, a ``[models.judge]`` route
or ``roles.judge``, and it is not the scripted double in mock mode (``--model
scripted``; ``scripted:judge`` plays a judge). Otherwise the benchmark grades
on its own (BrowseComp: exact match), and says which grader it used.

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

from langchain_core.messages import HumanMessage

from benchmark.base import Benchmark, Task
from mas.config import ExperimentConfig, ModelRoute
from mas.llm.call import LLMCallError, call_llm, prompt_too_long
from mas.topologies.agent import RunContext
from mas.topologies.judge import is_mock_judge

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


def grading_routes(cfg: ExperimentConfig, benches: Iterable[Benchmark]) -> dict[str, ModelRoute]:
    """The judge route by name when it will grade some benchmark's answers (its key is checked before any run)."""
    if not judge_configured(cfg) or all(type(b).judge_prompt is Benchmark.judge_prompt for b in benches):
        return {}
    return {cfg.route_name_for_role("judge"): cfg.route_for_role("judge")}


async def grade(bench: Benchmark, task: Task, rt: RunContext, answer: str | None, error: str | None) -> Grading:
    """The judge's grading of ``answer`` when the benchmark and the experiment both ask for one."""
    if error is not None or not judge_configured(rt.cfg) or is_mock_judge(rt):
        return Grading()
    prompt = bench.judge_prompt(task, answer or "")
    if prompt is None:
        return Grading()
    bound = rt.models.for_role("judge")
    try:
        res = await call_llm(bound, [HumanMessage(prompt)], contract=GRADE_CONTRACT, actor=GRADER_ACTOR, temperature=0.0,
                             metadata={"hints": bench.judge_fields(task, answer or "")})
    except LLMCallError as err:
        if prompt_too_long(err):  # the answer made the prompt too long: the system's output, not the infrastructure
            return Grading(details={"judge_error": f"the grading prompt is over the judge's context with this "
                                                   f"{len(answer or '')}-character answer: graded by the benchmark's "
                                                   "own rule"})
        return Grading(error=f"grading judge failed: {err}")
    return Grading(reply=res.text, details={"judge_model": res.model_label, "judge_tokens": res.token_in + res.token_out,
                                            "judge_cost_usd": res.cost_usd})
