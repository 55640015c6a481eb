"""``digits``: a provider of the example plugin, a tiny offline chat model that adds up a number's digits.

A provider is a function ``(ProviderRequest) -> BoundModel`` registered in ``PROVIDERS`` under the name a
route's ``provider`` field gives; this module is the ``mas_econ.providers`` entry point ``digits``
(``pyproject.toml``), so a route names it once the package is installed::

    [models.default]
    provider = "digits"
    model = "digit-adder"

Its chat model is a LangChain ``BaseChatModel`` like any client's: the runtime traces, retries, rate-limits,
redacts and counts its calls exactly as for ``openai`` (see :mod:`mas.llm.call`). It answers every call in the
runtime's answer format with the digit sum of the longest number in the conversation's first user message
(``digit_sum`` tasks; anything else gets that sum too, with low confidence). It calls no tools
(``native_tools=False``: tools would be offered as text, and it never uses them) and plays no LLM judge
(``judges=False``: the controller and the final vote decide lexically).
"""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from mas.llm.providers import PROVIDERS, BoundModel, ProviderRequest

_NUMBER = re.compile(r"\d+")


def digit_sum_reply(messages: list[BaseMessage]) -> str:
    """The answer JSON for a conversation: the digit sum of the longest number in its first user message.

    >>> digit_sum_reply([HumanMessage("What is the sum of the decimal digits of 4096?")])
    '{"reasoning": "4 + 0 + 9 + 6", "answer_artifact": "19", "confidence": 0.9}'
    """
    first = next((str(m.content) for m in messages if isinstance(m, HumanMessage)), "")
    numbers = _NUMBER.findall(first)
    if not numbers:
        return json.dumps({"reasoning": "no number in the task", "answer_artifact": "0", "confidence": 0.1})
    n = max(numbers, key=len)
    confident = "digits" in first
    return json.dumps({"reasoning": " + ".join(n), "answer_artifact": str(sum(int(d) for d in n)),
                       "confidence": 0.9 if confident else 0.2})


class DigitAdder(BaseChatModel):
    """The chat model behind the ``digits`` provider (deterministic, offline)."""

    model_name: str = "digit-adder"

    @property
    def _llm_type(self) -> str:
        return "digit-adder"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        message = AIMessage(content=digit_sum_reply(messages), response_metadata={"model_name": self.model_name})
        return ChatResult(generations=[ChatGeneration(message=message)])


@PROVIDERS.register("digits")
def digits_provider(req: ProviderRequest) -> BoundModel:
    """The route's ``model`` names the model (recorded as the events' ``model``); nothing else is configured."""
    name = req.route.model or "digit-adder"
    return BoundModel(name=req.route_name, route=req.route, model=DigitAdder(model_name=name), model_label=name,
                      native_tools=False, judges=False)
