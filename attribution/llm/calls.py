"""Model calls of the attribution methods: the runtime's call layer plus a case's accounting.

Every call goes through :func:`mas.llm.call.call_llm` (retries by exception
type, traced errors, schema-constrained output by the route's provider, usage
counting); nothing here retries or guesses a provider. What attribution adds
is plain bookkeeping per case (:class:`CaseLedger`):

- **prompt fitting**: a prompt is built for a token budget (the route's
  context window minus the reply reserve); the steps are fitted by
  :func:`attribution.llm.prompt_fit.render_steps`. Tokens are estimated
  (:func:`mas.llm.tokens.estimate_tokens`); on the embedded route the fitted
  prompt is then measured with the server's own tokenizer and refitted while
  it is over budget (llama-server would otherwise cut its head off silently).
  A server that refuses a prompt as too long (:func:`mas.llm.call.prompt_too_long`)
  gets it rebuilt with half the budget, so no method fails on length;
- **accounting**: calls (NFE, every attempt of the call layer counted),
  input/output tokens as the call layer reports them, wall time, fits and
  recorded fallbacks, returned by :meth:`CaseLedger.accounting` for
  ``Prediction.details``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from attribution.llm.prompt_fit import FitReport, clip
from attribution.llm.prompting import parse_loose
from mas.llm.call import LLMCallError, call_llm, prompt_too_long
from mas.llm.jsonparse import parse_json_object
from mas.llm.models import BoundModel
from mas.llm.tokens import count_tokens, estimate_tokens

REPLY_RESERVE_TOKENS = 512
"""Tokens kept free for the model's answer (also sent as the call's ``max_tokens``)."""
SAFETY_MARGIN_TOKENS = 96
TEMPLATE_TOKENS_PER_MESSAGE = 8
"""Chat-template tokens around each message (role markers), added to a measured prompt."""
MAX_REFITS = 5
"""Rebuilds of a prompt over budget or refused as too long, each with a smaller budget."""

Build = Callable[[int], tuple[list[BaseMessage], FitReport | None]]
"""``budget (tokens) -> (messages, fit report or None)``: a prompt built to fit ``budget``."""
Tokenizer = Callable[[str], Awaitable[int]]


def server_tokenizer(bound: BoundModel) -> Tokenizer | None:
    """``async (text) -> tokens`` by the embedded server's own tokenizer; None for other routes.

    Characters / 4 undercounts code and numbers: the server then cut the
    front of a prompt off (system prompt and task) without a word.
    """
    if bound.provider != "embedded":
        return None

    async def count(text: str) -> int:
        return (await count_tokens(bound, text))[0]

    return count


def _fit(build: Build, limit: int) -> tuple[list[BaseMessage], FitReport | None, int]:
    """Messages from ``build`` whose whole prompt fits ``limit`` estimated tokens (the fixed text is subtracted)."""
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


@dataclass(kw_only=True, slots=True)
class CaseLedger:
    """One method's calls on one case, and what they cost (see the module docstring)."""

    bound: BoundModel
    method: str
    context_window: int
    """Tokens a prompt plus its reply may use (the route's window, or a smaller one asked for)."""
    reply_tokens: int = REPLY_RESERVE_TOKENS
    tokenizer: Tokenizer | None = None
    """Measures fitted prompts; None: the estimate alone."""
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

    async def ask(self, stage: str, build: Build, *, temperature: float | None = None,
                  hints: dict[str, Any] | None = None, schema: dict[str, Any] | None = None) -> str:
        """The reply text to the prompt ``build(budget)`` makes, by one :func:`call_llm`.

        The contract is ``attribution.<method>.<stage>``; ``hints`` (the
        caller's ``attr_*`` facts about the call: the step under review, the
        ranges asked about, ...) go along as the call's ``metadata["hints"]``,
        with ``attr_log``, the steps the fitted prompt shows
        (:attr:`~attribution.llm.prompt_fit.FitReport.shown`), so a test double
        reads them instead of the prompt; ``schema`` constrains decoding where
        the route supports it (prompts still describe the JSON, and replies are
        still parsed tolerantly).
        """
        limit = self.prompt_budget
        for attempt in range(MAX_REFITS + 1):
            messages, report, prompt_tokens = _fit(build, limit)
            if self.tokenizer is not None and attempt < MAX_REFITS:
                prompt_tokens = await self._measured(messages)
                if prompt_tokens > self.prompt_budget and report is not None and report.n_steps:
                    limit = max(64, limit * self.prompt_budget // prompt_tokens - 16)
                    continue
            shown = {"attr_log": [list(line) for line in report.shown]} if report is not None else {}
            try:
                result = await call_llm(self.bound, messages, contract=f"attribution.{self.method}.{stage}",
                                        actor=f"attribution:{self.method}", json_schema=schema,
                                        temperature=temperature, metadata={"hints": {**(hints or {}), **shown}},
                                        max_tokens=self.reply_tokens)
            except LLMCallError as err:
                self.calls += 1  # the refused call was made
                if attempt < MAX_REFITS and prompt_too_long(err):
                    limit = max(64, limit // 2)
                    continue
                raise
            self.calls += result.attempts
            self.tokens_in += result.token_in
            self.tokens_out += result.token_out
            self._record_fit(stage, report, prompt_tokens, attempt)
            return result.text
        raise LLMCallError(f"{self.method}.{stage}: prompt still too long after {MAX_REFITS} refits")  # pragma: no cover

    async def _measured(self, messages: list[BaseMessage]) -> int:
        """Prompt tokens by the served model's tokenizer, plus the chat template's per-message tokens."""
        assert self.tokenizer is not None
        counts = [await self.tokenizer(str(m.content)) for m in messages]
        return sum(counts) + TEMPLATE_TOKENS_PER_MESSAGE * len(messages)

    def _record_fit(self, stage: str, report: FitReport | None, prompt_tokens: int, refits: int) -> None:
        if report is None:
            self.fits.append({"stage": stage, "mode": "full", "prompt_tokens": prompt_tokens, "refits": refits})
            return
        report.prompt_tokens = prompt_tokens
        self.fits.append({"stage": stage, **report.as_dict(), "refits": refits})

    def parse(self, stage: str, text: str) -> dict[str, Any] | None:
        """The reply's JSON object, else ``key: value`` pairs scraped from it (:func:`attribution.llm.prompting.parse_loose`);
        a scrape or a miss is recorded as a fallback."""
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


def new_ledger(ctx: Any, method: str) -> CaseLedger:
    """A ledger on ``ctx``'s model and window (``ctx``: a method or scorer context)."""
    from attribution.methods.base import require_model

    bound = require_model(ctx, method)
    reply = min(int(getattr(ctx, "max_output_tokens", REPLY_RESERVE_TOKENS)), REPLY_RESERVE_TOKENS)
    tokenizer = getattr(ctx, "count_tokens", None) or server_tokenizer(bound)
    return CaseLedger(bound=bound, method=method, context_window=int(ctx.context_window), reply_tokens=reply,
                      tokenizer=tokenizer)
