"""The scripted chat model: a deterministic test double, selected by name only.

It answers every contract the runtime sends (agent turns, judges, attribution
prompts) through responders registered per contract name
(:data:`mas.scripted.scripting.RESPONDERS`, filled by this package's modules). A test scripts its own instance instead: ``responders`` (contract ->
answer) or :meth:`ScriptedChatModel.enqueue` (fixed replies in order). The
contract, actor, step index and the caller's hints reach it as invoke metadata,
never inside the prompt, so real models see the same prompts. What it knows of
the run's task is its ``player`` (:mod:`mas.scripted.players`: the benchmark's
player, built from the task's structured fields), which every responder sees as
``ctx.player``.

It can inject one wrong step into a run (ground truth for attribution and
rollback tests). Injection is one-shot: once fired it is recorded and never
repeats, also when the run is resumed from an earlier checkpoint. It fires
only on a call whose output the injection actually changes: a responder
branch that ignores ``ctx.inject`` (a planner's fixed plan, say) leaves it for
the next eligible step, so ``injected_error`` never names an unchanged step.

Variants by route model name: ``scripted`` (everything; judges are in mock
mode: the runtime calls no judge and uses the lexical fallback, see
:mod:`mas.topologies.judge`), ``scripted:judge`` (it also plays the LLM judge,
to test that code path), ``scripted:nojudge`` (judge contracts get a reply
without a verdict, so callers exercise their lexical fallback),
``scripted:text-tools`` (tool calls written as fenced JSON text instead of
native ``tool_calls``, like small local models do).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
from collections import deque
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field, PrivateAttr

from mas.llm.injection import INJECTED_KEY, InjectionPlan
from mas.llm.limits import endpoint_slot
from mas.scripted.scripting import RESPONDERS, Answer, ScriptedContext, responder
from mas.llm.tokens import estimate_tokens

__all__ = ["InjectionPlan", "ScriptedChatModel", "ScriptedContext", "ScriptedModelError", "responder"]


class ScriptedModelError(RuntimeError):
    """The scripted model was asked for something it has no responder for."""


def _as_message(out: str | AIMessage) -> AIMessage:
    return out if isinstance(out, AIMessage) else AIMessage(content=out)


def _gist(msg: AIMessage) -> tuple[str, list[tuple[str, str]]]:
    """What a reply says, without the random tool-call ids (two replies with equal gists are the same step)."""
    calls = [(c["name"], json.dumps(c.get("args") or {}, sort_keys=True)) for c in msg.tool_calls or []]
    return str(msg.content), calls


class ScriptedChatModel(BaseChatModel):
    """Deterministic given ``seed``; see the module docstring."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    seed: int = 0
    variant: str = "scripted"
    latency_ms: float = 0.0
    """Simulated wall time per call (ms); asyncio.sleep, so concurrent calls overlap."""
    injection: InjectionPlan | None = None
    max_concurrent: int | None = None
    """The simulated endpoint's slots (``rate_limit.max_concurrent``): calls beyond it wait for a slot."""
    calls: int = Field(default=0)
    player: Any = None
    """The play of this run's task (:mod:`mas.scripted.players`; None: no benchmark named, or one it does not play)."""
    responders: dict[str, Answer] = Field(default_factory=dict)
    """This instance's own answers by contract, ahead of the registered ones (a test scripts its model here)."""
    _queued: dict[str, deque[str | AIMessage]] = PrivateAttr(default_factory=dict)
    _bound_kwargs: dict[str, Any] = PrivateAttr(default_factory=dict)

    def enqueue(self, contract: str, *replies: str | AIMessage) -> ScriptedChatModel:
        """Queue fixed replies to ``contract``, given in order (before any responder) and never injected.

        >>> m = ScriptedChatModel().enqueue("t.x", "first", "second")
        >>> [m.invoke("hi", config={"metadata": {"contract": "t.x"}}).content for _ in range(2)]
        ['first', 'second']
        """
        self._queued.setdefault(contract, deque()).extend(replies)
        return self

    def knows(self, contract: str) -> bool:
        """Whether this instance can answer ``contract`` (queued, its own, or registered)."""
        return bool(self._queued.get(contract)) or contract in self.responders or contract in RESPONDERS

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"variant": self.variant, "seed": self.seed}

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        # The runtime binds tools for real models; the scripted model knows them already.
        return self.bind(tools=[(t.name if hasattr(t, "name") else str(t)) for t in tools], **kwargs)

    def _may_inject(self, meta: dict[str, Any]) -> bool:
        """True when this call is eligible for the injection (it is not marked fired here)."""
        plan = self.injection
        step = meta.get("mas_step")
        if plan is None or plan.fired or step is None:
            return False
        if plan.agent is not None and meta.get("mas_actor") != plan.agent:
            return False
        return plan.step is None or step >= plan.step

    def _mark_fired(self, meta: dict[str, Any]) -> None:
        assert self.injection is not None
        self.injection.fired = True
        self.injection.fired_at = {"agent": meta.get("mas_actor"), "step": meta.get("mas_step")}

    def _reply(self, messages: list[BaseMessage], meta: dict[str, Any], kwargs: dict[str, Any],
               seed: int) -> tuple[AIMessage, bool]:
        """The responder's reply and whether it is the injected wrong step.

        An eligible call is answered twice, honestly and injected (each with a
        fresh generator from the same seed, so only ``inject`` differs); the
        injection fires only when the two differ, i.e. when the responder
        really applied it.
        """
        contract = str(meta.get("contract", ""))
        if self._queued.get(contract):
            return _as_message(self._queued[contract].popleft()), False
        answer = self.responders.get(contract) or RESPONDERS.get(contract).answer

        def ask(inject: bool) -> AIMessage:
            return _as_message(answer(ScriptedContext(
                messages=list(messages), metadata=dict(meta), rng=random.Random(seed), inject=inject,
                text_tools=self.variant == "scripted:text-tools", kwargs=kwargs, player=self.player,
            )))

        honest = ask(False)
        if not self._may_inject(meta):
            return honest, False
        wrong = ask(True)
        if _gist(wrong) == _gist(honest):
            return honest, False  # this branch ignores the injection: leave it for a later step
        self._mark_fired(meta)
        return wrong, True

    def _respond(self, messages: list[BaseMessage], meta: dict[str, Any], kwargs: dict[str, Any]) -> ChatResult:
        contract = str(meta.get("contract", ""))
        if not self.knows(contract):
            raise ScriptedModelError(f"scripted model has no responder for contract {contract!r}")
        if self.variant == "scripted:nojudge" and contract in RESPONDERS and RESPONDERS.get(contract).judge:
            # A reply without a verdict (not a failed call, which would end the run): callers fall back.
            msg, injected = AIMessage(content=f"no verdict: scripted:nojudge does not judge ({contract})"), False
        else:
            digest = hashlib.sha256(
                f"{self.seed}|{contract}|{meta.get('mas_actor')}|{meta.get('mas_step')}|".encode()
                + "\n".join(str(m.content) for m in messages).encode()
            ).hexdigest()
            msg, injected = self._reply(messages, meta, kwargs, int(digest[:16], 16))
        prompt_tokens = sum(estimate_tokens(str(m.content)) for m in messages)
        completion_tokens = estimate_tokens(str(msg.content) + str(msg.tool_calls or ""))
        msg.usage_metadata = {
            "input_tokens": prompt_tokens,
            "output_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        msg.response_metadata = {"model_name": self.variant, INJECTED_KEY: injected}
        self.calls += 1
        return ChatResult(generations=[ChatGeneration(message=msg)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_ms:
            time.sleep(self.latency_ms / 1000)
        meta = dict(run_manager.metadata) if run_manager else {}
        return self._respond(messages, meta, kwargs)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        meta = dict(run_manager.metadata) if run_manager else {}
        async with endpoint_slot(self.variant, self.max_concurrent):
            return await self._serve(messages, meta, kwargs)

    async def _serve(self, messages: list[BaseMessage], meta: dict[str, Any], kwargs: dict[str, Any]) -> ChatResult:
        """What the simulated endpoint does with one request, inside one of its slots: wait, then answer."""
        if self.latency_ms:
            await asyncio.sleep(self.latency_ms / 1000)
        return self._respond(messages, meta, kwargs)
