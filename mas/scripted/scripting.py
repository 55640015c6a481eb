"""What the scripted double answers: a registry of answers by prompt contract, and what an answer sees of a call.

The double's modules register how it answers each contract (``judge.vote``, ``personas.generate``,
``attribution.chief.graph``, ...) with :func:`responder`, keyed by the contract's name; the double looks answers
up here by the call's ``contract``. Installed packages add answers to contracts of their own through the
entry-point group ``mas_econ.scripted_responders``. Real models never see any of it: the contract, actor, step
and any hint an answer needs travel as invoke metadata, not inside the prompt (the caller's facts about the
call in ``metadata["hints"]``, :attr:`ScriptedContext.hints`; see :func:`mas.topologies.agent.agent_step` and
:meth:`attribution.llm.calls.CaseLedger.ask`). No module outside :mod:`mas.scripted` registers an answer
(``tests/project/test_layering.py`` checks).

>>> @responder("example.echo")
... def _echo(ctx: ScriptedContext) -> str:
...     return ctx.metadata.get("say", "")
>>> RESPONDERS.get("example.echo").answer.__name__
'_echo'
>>> RESPONDERS.unregister("example.echo")
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from descriptor.registry import Registry


@dataclass(kw_only=True, slots=True)
class ScriptedContext:
    """What a responder sees for one call."""

    messages: list[BaseMessage]
    metadata: dict[str, Any]
    """The call's invoke metadata: ``contract``, ``mas_actor``, ``mas_step``, ``mas_role`` and the caller's hints."""
    rng: random.Random
    inject: bool
    """True when this call should be the injected wrong step; the responder applies it (or ignores it)."""
    text_tools: bool
    """Write tool calls as fenced JSON text instead of native tool_calls."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra invoke kwargs (e.g. bound ``tools``, ``response_format``)."""
    player: Any = None
    """The double's play of this run's task (its own object, built by :mod:`mas.scripted` from the task's
    structured fields); None outside a benchmark's run. A responder whose answer depends on the task asks it
    through a protocol of its own (:class:`mas.scripted.orchestrator.Decomposer`)."""

    @property
    def contract(self) -> str:
        return str(self.metadata.get("contract", ""))

    @property
    def actor(self) -> str:
        return str(self.metadata.get("mas_actor", ""))

    @property
    def hints(self) -> dict[str, Any]:
        """What the caller told about this call (``metadata["hints"]``: the roster, the reports it shows, ...)."""
        return dict(self.metadata.get("hints") or {})

    def text(self) -> str:
        """All message contents joined, oldest first."""
        return "\n".join(str(m.content) for m in self.messages)


Answer = Callable[[ScriptedContext], "str | AIMessage"]
"""``(context) -> reply``: the reply's text, or a whole message (tool calls)."""


@dataclass(kw_only=True, slots=True, frozen=True)
class Responder:
    """The scripted answer to one contract."""

    answer: Answer
    judge: bool = False
    """A judge's contract: the ``scripted:nojudge`` variant answers it without a verdict."""


RESPONDERS: Registry[Responder] = Registry("scripted responder", "mas_econ.scripted_responders")
"""Contract -> its scripted answer (the double's modules, one per family of contracts, fill it)."""


def responder(contract: str, *, judge: bool = False) -> Callable[[Answer], Answer]:
    """Register ``fn`` as the scripted answer to ``contract`` (see the module docstring)."""

    def deco(fn: Answer) -> Answer:
        RESPONDERS.register(contract, Responder(answer=fn, judge=judge), origin=f"{fn.__module__}:{fn.__qualname__}")
        return fn

    return deco
