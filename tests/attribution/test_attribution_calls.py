"""Attribution on the runtime's one LLM layer: retries by type, length refusals refitted, one token estimator,
one schema helper, and the layering (mas never imports attribution)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from attribution.llm.calls import CaseLedger
from attribution.llm.replies import contract, many, one_of, schema_of, text
from mas.config import ModelRoute
from mas.llm.call import LLMCallError, prompt_too_long
from mas.llm.models import BoundModel
from mas.llm.tokens import estimate_tokens
from mas.scripted.model import ScriptedChatModel
from tests.model_errors import bad_request as _bad_request
from tests.model_errors import prompt_too_long_error, server_error

ROOT = Path(__file__).resolve().parents[2]


def test_prompt_too_long_is_recognised_by_type() -> None:
    assert prompt_too_long(_bad_request({"error": {"type": "exceed_context_size_error", "message": "too big"}}))
    assert prompt_too_long(_bad_request({"code": "context_length_exceeded"}))
    assert prompt_too_long(_bad_request({}, "This model's maximum context length is 4096 tokens"))
    assert prompt_too_long(LLMCallError("x").with_traceback(None)) is False
    wrapped = LLMCallError("route: refused")
    wrapped.__cause__ = prompt_too_long_error("over the window")
    assert prompt_too_long(wrapped)
    assert not prompt_too_long(_bad_request({"error": {"type": "invalid_request_error"}}, "unknown field"))
    assert not prompt_too_long(ValueError("context length exceeded"))  # not a server refusal: no refit


async def test_a_ledger_call_is_retried_by_the_call_layer_and_every_attempt_counted(monkeypatch) -> None:
    monkeypatch.setattr("mas.llm.call.backoff_s", lambda attempt, rng: 0.0)
    state = {"n": 0}

    def flaky(ctx):
        state["n"] += 1
        if state["n"] == 1:
            raise server_error("503 from upstream")
        return "0.7"

    route = ModelRoute(provider="scripted", model="scripted", max_retries=2)
    model = ScriptedChatModel(seed=0, responders={"attribution.test.score": flaky})
    ledger = CaseLedger(bound=BoundModel(name="s", route=route, model=model, model_label="s"),
                        method="test", context_window=2048)
    reply = await ledger.ask("score", lambda budget: ([SystemMessage("s"), HumanMessage("p")], None))
    assert reply == "0.7" and ledger.calls == 2 and state["n"] == 2
    assert ledger.tokens_in == estimate_tokens("s") + estimate_tokens("p")  # the scripted usage, the one estimator


def test_reply_contracts_become_bounded_schemas_with_nested_models_inlined() -> None:
    item = contract("Item", name=text(20), pick=one_of([1, 2]))
    schema = schema_of(contract("Top", reason=text(), items=many(item, 3, 1), free=str))
    assert "$defs" not in schema and schema["additionalProperties"] is False
    assert schema["properties"]["items"]["items"]["properties"]["name"]["maxLength"] == 20
    assert schema["properties"]["items"]["maxItems"] == 3
    assert schema["properties"]["free"]["maxLength"] == 400  # unbounded strings get the default bound
    assert schema["required"] == ["reason", "items", "free"]


def test_one_token_estimator_and_no_session_class_of_its_own() -> None:
    sources = {p: p.read_text() for p in [*(ROOT / "attribution").rglob("*.py"), *(ROOT / "mas").rglob("*.py")]}
    for path, src in sources.items():
        if path != ROOT / "mas" / "llm" / "tokens.py":  # the estimator's one home
            assert "len(text) // 4" not in src and "/ CHARS_PER_TOKEN)" not in src, path
        if "attribution" in path.parts:  # attribution calls models only through mas.llm.call.call_llm
            assert "class LLMSession" not in src and ".ainvoke(" not in src and "asyncio.sleep(" not in src, path


def test_mas_never_imports_attribution() -> None:
    for path in (ROOT / "mas").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "attribution" or n.startswith("attribution.") for n in names), path
