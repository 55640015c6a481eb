"""Shared plumbing of the LLM attribution methods: fitting, calling, parsing.

Fitting: a trajectory is rendered one line block per step (``[i] agent:
text``). When the rendering does not fit the prompt budget (the route's
context window minus the reply reserve), step texts are cut to a common
per-step cap (head and tail kept, focus steps get a larger share); when even
a minimum cap does not fit, steps far from the focus are collapsed into
``… steps a–b omitted …`` lines. Every fit is recorded (:class:`FitReport`).
Tokens are estimated as characters / 4; on the embedded route the fitted
prompt is then measured with the server's own tokenizer and refitted while it
is over budget (llama-server would otherwise cut its head off silently). If a
server still refuses a prompt as too long, the call is rebuilt with a smaller
budget, so no method fails on length.

Calling: :class:`LLMSession` wraps one case: it calls the model with the
contract name as metadata, counts calls (NFE), input/output tokens from
``response.usage_metadata`` (estimated when absent), wall time, fits and JSON
fallbacks.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from attribution._prompt_fit import (
    CHARS_PER_TOKEN,
    MIN_STEP_CHARS,
    FitReport,
    StepView,
    clip,
    estimate_tokens,
    render_steps,
    step_views,
)
from attribution.trajectory import Trajectory, normalize_agent
from mas.llm.jsonparse import parse_json_object

__all__ = [
    "CHARS_PER_TOKEN", "MIN_STEP_CHARS", "FitReport", "LLMSession", "ModelCallError", "StepView", "actor_step", "agent_names",
    "ENVIRONMENT_KEYS", "case_header", "clip", "display_agent", "estimate_tokens", "finish", "heuristic_guess", "json_mode", "messages",
    "new_session", "parse_loose", "render_steps", "resolve_actor", "resolve_agent", "resolve_step", "steps_of", "s_enum", "s_list", "s_obj",
    "s_step", "s_text", "s_unit", "step_views", "to_unit",
]

REPLY_RESERVE_TOKENS = 512
"""Tokens kept free for the model's answer (also sent as ``max_tokens``)."""
SAFETY_MARGIN_TOKENS = 96
TEMPLATE_TOKENS_PER_MESSAGE = 8
"""Chat-template tokens around each message (role markers), added to a measured prompt."""
TRANSIENT_RETRIES = 2
"""Retries of a call that failed with a timeout, connection error, 429 or 5xx."""
_TRANSIENT_RE = re.compile(r"timeout|timed out|connection|rate limit|\b429\b|\b5\d\d\b|overloaded|unavailable", re.I)
MAX_REFITS = 5
"""Rebuilds of a prompt the server refused as too long, each with half the budget."""
QUERY_CHARS = 1200
ANSWER_CHARS = 300
_OVERFLOW_RE = re.compile(r"context|too long|exceed|maximum.{0,20}tokens|too many tokens", re.I)


def case_header(traj: Trajectory, with_ground_truth: bool) -> str:
    """The task (and, when allowed, its correct answer) as every prompt states it."""
    parts = [f"Task: {clip(' '.join(traj.query.split()), QUERY_CHARS)}"]
    if with_ground_truth and traj.ground_truth:
        parts.append(f"Correct answer: {clip(str(traj.ground_truth), ANSWER_CHARS)}")
    if traj.final_answer:
        parts.append(f"The team's final answer: {clip(str(traj.final_answer), ANSWER_CHARS)}")
    parts.append("The team FAILED this task.")
    return "\n".join(parts)


def display_agent(name: str) -> str:
    """Agent name without its trailing " (…)", case kept."""
    return re.sub(r"\s*\([^()]*\)\s*$", "", name or "").strip() or name


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

    >>> from attribution.trajectory import Step
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


def to_unit(value: Any, default: float | None = None) -> float | None:
    """A probability/confidence in [0, 1] from a number, "0.7", "70%" or "high"."""
    words = {"very high": 0.9, "high": 0.8, "medium": 0.5, "moderate": 0.5, "low": 0.2, "very low": 0.1}
    if isinstance(value, bool) or value is None:
        return default
    if isinstance(value, str):
        s = value.strip().lower()
        if s in words:
            return words[s]
        m = re.search(r"-?\d+(?:\.\d+)?", s)
        if not m:
            return default
        x = float(m.group()) / (100.0 if "%" in s else 1.0)
    elif isinstance(value, (int, float)):
        x = float(value)
    else:
        return default
    if x > 1.0 and x <= 100.0:
        x /= 100.0
    return min(1.0, max(0.0, x)) if math.isfinite(x) else default


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


def _fit(
    build: Callable[[int], tuple[list[BaseMessage], FitReport | None]], limit: int
) -> tuple[list[BaseMessage], FitReport | None, int]:
    """Messages from ``build`` whose whole prompt fits ``limit`` tokens (the fixed text is subtracted)."""
    steps_budget = limit
    msgs, report = build(steps_budget)
    total = sum(estimate_tokens(str(m.content)) for m in msgs)
    for _ in range(6):
        if total <= limit or report is None or report.n_steps == 0:
            break
        steps_budget = max(16, steps_budget - (total - limit) - 16)
        msgs, report = build(steps_budget)
        total = sum(estimate_tokens(str(m.content)) for m in msgs)
    return msgs, report, total


def json_mode(model: Any) -> str | None:
    """How to constrain a reply to JSON on ``model``'s server.

    ``json_schema`` for the embedded llama-server (recognised by the
    ``cache_prompt`` body field the model factory sets for it: its grammar
    sampler enforces the schema), ``json_object`` for other OpenAI-compatible
    clients, None for anything else (the scripted model, unknown clients).
    """
    extra = getattr(model, "extra_body", None)
    if isinstance(extra, dict) and "cache_prompt" in extra:
        return "json_schema"
    if type(model).__name__ in ("ChatOpenAI", "AzureChatOpenAI"):
        return "json_object"
    return None


class ModelCallError(RuntimeError):
    """The model call failed for a reason other than prompt length."""


@dataclass(kw_only=True, slots=True)
class LLMSession:
    """Calls and accounting for one method on one case."""

    model: Any
    context_window: int
    method: str
    reply_tokens: int = REPLY_RESERVE_TOKENS
    count_tokens: Any = None
    """``async (text) -> tokens`` by the served model's tokenizer; None: the estimate alone."""
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    fits: list[dict[str, Any]] = field(default_factory=list)
    fallbacks: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    @property
    def prompt_budget(self) -> int:
        """Tokens a whole prompt (system + user) may use."""
        reply = min(self.reply_tokens, max(64, self.context_window // 4))
        return max(128, self.context_window - reply - SAFETY_MARGIN_TOKENS)

    @property
    def truncated(self) -> bool:
        """True when any prompt of this case was compressed or windowed."""
        return any(f["mode"] != "full" for f in self.fits)

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started

    async def ask(
        self,
        stage: str,
        build: Callable[[int], tuple[list[BaseMessage], FitReport | None]],
        *,
        temperature: float | None = None,
        meta: dict[str, Any] | None = None,
        schema: dict[str, Any] | None = None,
    ) -> str:
        """Call the model with the prompt ``build(budget)`` makes; returns the reply text.

        ``schema`` (a JSON schema of the reply) constrains decoding where the
        server supports it (see :func:`json_mode`); prompts still describe
        the JSON, and replies are still parsed tolerantly.

        ``build`` receives the token budget left for the variable part (steps)
        and returns the messages and its fit report. On a length refusal the
        prompt is rebuilt with half the budget (up to MAX_REFITS times).
        """
        limit = self.prompt_budget
        for attempt in range(MAX_REFITS + 1):
            messages, report, prompt_tokens = _fit(build, limit)
            if self.count_tokens is not None and attempt < MAX_REFITS:
                # A server that truncates instead of refusing would silently drop the prompt's head.
                prompt_tokens = await self._measured(messages)
                if prompt_tokens > self.prompt_budget and report is not None and report.n_steps:
                    limit = max(64, limit * self.prompt_budget // prompt_tokens - 16)
                    continue
            try:
                reply = await self._invoke(stage, messages, temperature, meta, schema)
            except ModelCallError as err:
                if attempt < MAX_REFITS and _OVERFLOW_RE.search(str(err)):
                    limit = max(64, limit // 2)
                    continue
                raise
            self._record_fit(stage, report, prompt_tokens, attempt)
            return reply
        raise ModelCallError(f"{self.method}.{stage}: prompt still too long after {MAX_REFITS} refits")  # pragma: no cover

    async def _measured(self, messages: list[BaseMessage]) -> int:
        """Prompt tokens by the served model's tokenizer, plus the chat template's per-message tokens."""
        counts = [await self.count_tokens(str(m.content)) for m in messages]
        return sum(counts) + TEMPLATE_TOKENS_PER_MESSAGE * len(messages)

    def _record_fit(self, stage: str, report: FitReport | None, prompt_tokens: int, refits: int) -> None:
        if report is None:
            self.fits.append({"stage": stage, "mode": "full", "prompt_tokens": prompt_tokens, "refits": refits})
            return
        report.prompt_tokens = prompt_tokens
        self.fits.append({"stage": stage, **report.as_dict(), "refits": refits})

    async def _invoke(
        self,
        stage: str,
        messages: list[BaseMessage],
        temperature: float | None,
        meta: dict[str, Any] | None,
        schema: dict[str, Any] | None,
    ) -> str:
        kwargs: dict[str, Any] = {"max_tokens": self.reply_tokens}
        mode = json_mode(self.model) if schema is not None else None
        if mode == "json_schema":
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {"name": stage, "schema": schema}}
        elif mode == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        if temperature is not None:
            kwargs["temperature"] = temperature
        extra = getattr(self.model, "extra_body", None)
        if isinstance(extra, dict) and "max_tokens" in extra:
            # llama-server reads max_tokens from the body the route set; override it per call too.
            kwargs["extra_body"] = {**extra, "max_tokens": self.reply_tokens}
        runnable = self.model.bind(**kwargs) if hasattr(self.model, "bind") else self.model
        config = {"metadata": {"contract": f"attribution.{self.method}.{stage}", **(meta or {})}}
        for attempt in range(TRANSIENT_RETRIES + 1):
            self.calls += 1
            try:
                response = await runnable.ainvoke(messages, config=config)
                break
            except Exception as err:  # the client's error types vary by provider
                msg = f"{self.method}.{stage}: {type(err).__name__}: {err}"
                if attempt < TRANSIENT_RETRIES and _TRANSIENT_RE.search(msg) and not _OVERFLOW_RE.search(msg):
                    await asyncio.sleep(2.0 * (attempt + 1))
                    continue
                raise ModelCallError(msg) from err
        text = response.content if isinstance(response.content, str) else str(response.content)
        usage = getattr(response, "usage_metadata", None) or {}
        self.tokens_in += int(usage.get("input_tokens") or sum(estimate_tokens(str(m.content)) for m in messages))
        self.tokens_out += int(usage.get("output_tokens") or estimate_tokens(text))
        return text

    def parse(self, stage: str, text: str) -> dict[str, Any] | None:
        """Tolerant JSON parse of a reply; a scrape or a miss is recorded as a fallback."""
        obj = parse_json_object(text)
        if obj is not None:
            return obj
        loose = parse_loose(text)
        self.fallbacks.append({"stage": stage, "kind": "scraped" if loose else "unusable", "reply": clip(text, 200)})
        return loose

    def note_fallback(self, stage: str, kind: str) -> None:
        """Record that a stage fell back to a non-model decision (``kind`` says which)."""
        self.fallbacks.append({"stage": stage, "kind": kind})

    def fit_summary(self) -> dict[str, Any]:
        """Per-mode call counts, the largest prompt (tokens) and the first 20 non-full fits."""
        modes: dict[str, int] = {}
        for f in self.fits:
            modes[f["mode"]] = modes.get(f["mode"], 0) + 1
        return {
            "modes": modes,
            "max_prompt_tokens": max((f["prompt_tokens"] for f in self.fits), default=0),
            "fitted": [f for f in self.fits if f["mode"] != "full"][:20],
        }

    def accounting(self) -> dict[str, Any]:
        """Calls, tokens, fits and fallbacks of this case, for ``Prediction.details``."""
        return {
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "fit": self.fit_summary(),
            "fallbacks": self.fallbacks,
            "context_window": self.context_window,
        }


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


def new_session(ctx: Any, method: str) -> LLMSession:
    """A session on ``ctx``'s model and window (``ctx``: a method or scorer context)."""
    from attribution.methods.base import require_model

    model = require_model(ctx, method)
    reply = min(int(getattr(ctx, "max_output_tokens", REPLY_RESERVE_TOKENS)), REPLY_RESERVE_TOKENS)
    return LLMSession(model=model, context_window=int(ctx.context_window), method=method, reply_tokens=reply,
                      count_tokens=getattr(ctx, "count_tokens", None))


def finish(
    session: LLMSession, traj: Trajectory, agent: str | None, step: int | None, confidence: float, details: dict[str, Any]
) -> Any:
    """The :class:`~attribution.methods.base.Prediction` of a case, with the session's accounting.

    A step where the environment spoke (terminal output, the human) moves to
    the actor step it reacts to (recorded as ``environment_step``); a missing
    or environment agent becomes the step's agent.
    """
    from attribution.methods.base import Prediction

    if step is not None and (moved := actor_step(traj, step)) != step:
        details = {**details, "environment_step": step}
        step = moved
    if step is not None and (agent is None or resolve_actor(traj, agent) is None):
        agent = display_agent(traj.steps[step].agent)
    modes = {f["mode"] for f in session.fits}
    truncated: bool | str = "windowed" if "windowed" in modes else "compressed" if "compressed" in modes else False
    return Prediction(
        agent=agent,
        step=step,
        confidence=min(1.0, max(0.0, float(confidence))),
        tokens=session.tokens_in + session.tokens_out,
        seconds=session.seconds,
        nfe=session.calls,
        details={**details, **session.accounting()},
        truncated=truncated,
    )


# JSON-schema pieces for constrained replies (llama-server turns them into a grammar).


def s_text(max_len: int = 160) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_len}


def s_enum(values: Sequence[Any]) -> dict[str, Any]:
    return {"enum": list(values)}


def s_step(lo: int, hi: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": lo, "maximum": max(lo, hi)}


def s_unit() -> dict[str, Any]:
    return {"type": "number", "minimum": 0, "maximum": 1}


def s_list(item: dict[str, Any], max_items: int, min_items: int = 0) -> dict[str, Any]:
    return {"type": "array", "items": item, "minItems": min_items, "maxItems": max_items}


def s_obj(**props: dict[str, Any]) -> dict[str, Any]:
    """An object schema with every property required, in the given order (reasons before answers)."""
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
