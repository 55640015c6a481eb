"""Prompt-side helpers of the LLM attribution methods: the case header, agent and step names, tolerant reading.

Calling and accounting live in :mod:`attribution.llm.calls` (on the runtime's
call layer), fitting steps into a budget in :mod:`attribution.llm.prompt_fit`,
reply contracts in :mod:`attribution.llm.replies`. Here: what every prompt states
about a case (:func:`case_header`), the agents offered to the model
(:func:`agent_names`, the environment left out), reading a model's agent,
step and confidence back (:func:`resolve_actor`, :func:`resolve_step`,
:func:`parse_loose`; a confidence through :func:`mas.llm.confidence.parse_confidence`), the model-free fallback
(:func:`heuristic_guess`) and a case's :class:`Prediction` (:func:`finish`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from attribution.llm.prompt_fit import (
    MIN_STEP_CHARS,
    FitReport,
    StepView,
    clip,
    one_line,
    render_steps,
    step_views,
)
from attribution.sources.trajectory import Trajectory, normalize_agent
from mas.llm.jsonparse import parse_json_object
from mas.llm.tokens import CHARS_PER_TOKEN, estimate_tokens

__all__ = [
    "CHARS_PER_TOKEN", "MIN_STEP_CHARS", "FitReport", "StepView", "actor_step", "agent_names",
    "ENVIRONMENT_KEYS", "case_header", "clip", "display_agent", "estimate_tokens", "finish", "heuristic_guess",
    "messages", "parse_loose", "render_steps", "resolve_actor", "resolve_agent", "resolve_step", "steps_of",
    "step_views",
]

QUERY_CHARS = 1200
ANSWER_CHARS = 300


def case_header(traj: Trajectory, with_ground_truth: bool) -> str:
    """The task (and, when allowed, its correct answer) as every prompt states it."""
    parts = [f"Task: {clip(one_line(traj.query), QUERY_CHARS)}"]
    if with_ground_truth and traj.ground_truth:
        parts.append(f"Correct answer: {clip(one_line(traj.ground_truth), ANSWER_CHARS)}")
    if traj.final_answer:
        parts.append(f"The team's final answer: {clip(one_line(traj.final_answer), ANSWER_CHARS)}")
    parts.append("The team FAILED this task.")
    return "\n".join(parts)


def display_agent(name: str) -> str:
    """Agent name without its trailing " (…)", case kept, on one line (:func:`one_line`)."""
    shown = re.sub(r"\s*\([^()]*\)\s*$", "", name or "").strip() or name
    return one_line(shown) if shown else shown


ENVIRONMENT_KEYS = frozenset({"human", "user", "computer_terminal", "computerterminal", "terminal", "system"})
"""Speakers that pose the task or execute code: never the responsible agent while an actor exists."""


def agent_names(traj: Trajectory, *, actors_only: bool = True) -> list[str]:
    """Distinct agents by normalised key, shown with their first spelling.

    With ``actors_only`` the environment (human, terminal, system) is left
    out unless nobody else speaks: in Who&When the responsible agent is
    always an actor.
    """
    seen: dict[str, str] = {}
    for s in traj.steps:
        seen.setdefault(s.agent_key, display_agent(s.agent))
    actors = [name for key, name in seen.items() if key not in ENVIRONMENT_KEYS]
    return actors if actors_only and actors else list(seen.values())


def resolve_agent(traj: Trajectory, name: Any) -> str | None:
    """The trajectory agent (display spelling) the model meant by ``name``, or None."""
    if not isinstance(name, str) or not name.strip():
        return None
    key = normalize_agent(name.strip().strip("'\"`"))
    names = {normalize_agent(a): a for a in agent_names(traj, actors_only=False)}
    if key in names:
        return names[key]
    hits = [a for k, a in names.items() if k and (k in key or key in k)]
    return hits[0] if len(hits) == 1 else None


def resolve_actor(traj: Trajectory, name: Any) -> str | None:
    """Like :func:`resolve_agent`, but None for the environment while actors exist."""
    agent = resolve_agent(traj, name)
    return agent if agent is None or agent in agent_names(traj) else None


def actor_step(traj: Trajectory, step: int) -> int:
    """``step``, or when the environment spoke there, the nearest earlier actor step (the action it reacts to).

    >>> from attribution.sources.trajectory import Step
    >>> t = Trajectory(id="x", query="q", steps=[Step(index=0, agent="Coder"), Step(index=1, agent="Computer_terminal")])
    >>> actor_step(t, 1)
    0
    """
    if traj.steps[step].agent_key not in ENVIRONMENT_KEYS:
        return step
    earlier = [s.index for s in traj.steps[:step] if s.agent_key not in ENVIRONMENT_KEYS]
    return earlier[-1] if earlier else step


def steps_of(traj: Trajectory, agent: str, within: Sequence[int] | None = None) -> list[int]:
    """Indices of ``agent``'s steps (by normalised name), optionally only those in ``within``."""
    key = normalize_agent(agent)
    idx = range(traj.n_steps) if within is None else within
    return [i for i in idx if traj.steps[i].agent_key == key]


def resolve_step(traj: Trajectory, value: Any) -> int | None:
    """``value`` as a step index of ``traj``, or None when absent or outside it."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and float(value).is_integer():
        i = int(value)
    elif isinstance(value, str) and (m := re.search(r"-?\d+", value)):
        i = int(m.group())
    else:
        return None
    return i if 0 <= i < traj.n_steps else None


_KV_RE = re.compile(r'"?([A-Za-z_][\w ]{0,30}?)"?\s*[:=]\s*("([^"\n]*)"|-?\d+(?:\.\d+)?|true|false|yes|no)', re.I)


def parse_loose(text: str) -> dict[str, Any] | None:
    """A JSON object from model text, else ``key: value`` pairs scraped from it, else None."""
    obj = parse_json_object(text)
    if obj is not None:
        return obj
    pairs: dict[str, Any] = {}
    for m in _KV_RE.finditer(text or ""):
        key = m.group(1).strip().lower().replace(" ", "_")
        val = m.group(3) if m.group(3) is not None else m.group(2)
        pairs.setdefault(key, val)
    return pairs or None


def messages(system: str, user: str) -> list[BaseMessage]:
    """A system + user message pair."""
    return [SystemMessage(content=system), HumanMessage(content=user)]


ERROR_CUE_RE = re.compile(
    r"\b(error|exception|traceback|failed|failure|incorrect|wrong|not found|unable|cannot|can't|invalid|"
    r"mistake|exitcode: [1-9]|timed? ?out|no results?|unfortunately)\b",
    re.I,
)


def heuristic_guess(traj: Trajectory) -> tuple[str | None, int | None]:
    """Model-free fallback: the first non-human step with an error cue, else the first non-human step.

    Used only when a model's replies are unusable; every use is recorded.
    """
    actors = [s for s in traj.steps if s.agent_key not in ENVIRONMENT_KEYS] or list(traj.steps)
    if not actors:
        return None, None
    for s in traj.steps:
        if not ERROR_CUE_RE.search(s.content or ""):
            continue
        # A terminal or user reporting an error points at the actor who spoke before it.
        prior = [a for a in actors if a.index <= s.index]
        if prior:
            return display_agent(prior[-1].agent), prior[-1].index
    return display_agent(actors[0].agent), actors[0].index


def finish(
    ledger: Any, traj: Trajectory, agent: str | None, step: int | None, confidence: float, details: dict[str, Any],
    *, infer_agent: bool = True,
) -> Any:
    """The :class:`~attribution.methods.base.Prediction` of a case, with the accounting of its
    :class:`~attribution.llm.calls.CaseLedger`.

    A step where the environment spoke (terminal output, the human) moves to
    the actor step it reacts to (recorded as ``environment_step``); with
    ``infer_agent`` a missing or environment agent becomes the step's agent (a
    method whose text decides the agent apart from the step passes False).
    """
    from attribution.methods.base import Prediction

    if step is not None and (moved := actor_step(traj, step)) != step:
        details = {**details, "environment_step": step}
        step = moved
    if infer_agent and step is not None and (agent is None or resolve_actor(traj, agent) is None):
        agent = display_agent(traj.steps[step].agent)
    modes = {f["mode"] for f in ledger.fits}
    truncated: bool | str = "windowed" if "windowed" in modes else "compressed" if "compressed" in modes else False
    return Prediction(
        agent=agent,
        step=step,
        confidence=min(1.0, max(0.0, float(confidence))),
        tokens=ledger.tokens_in + ledger.tokens_out,
        seconds=ledger.seconds,
        nfe=ledger.calls,
        details={**details, **ledger.accounting()},
        truncated=truncated,
    )
