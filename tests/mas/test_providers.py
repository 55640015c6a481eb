"""Providers are registry entries: a route's ``provider`` is checked against them, and a ``langchain`` route
(any chat model ``init_chat_model`` builds) runs a sweep traced, redacted and summarised like an ``openai`` one."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from descriptor.errors import UserError
from descriptor.events import read_trace
from mas.config import ExperimentConfig, ModelRoute
from mas.llm.models import ModelSet
from mas.llm.providers import PROVIDERS, BoundModel, ProviderRequest

SECRET = "sk-fake-langchain-9f8e7d6c5b4a"
REPLY = {"reasoning": f"I echo {SECRET} by mistake.", "answer_artifact": "42", "confidence": 0.9}
USAGE = {"input_tokens": 123, "output_tokens": 7, "total_tokens": 130}


def test_a_route_naming_an_unknown_provider_is_refused_naming_the_known_ones() -> None:
    cfg = ExperimentConfig(models={"default": ModelRoute(provider="anthropic", model="claude-x")})
    with pytest.raises(UserError) as err:
        ModelSet(cfg, seed=0).for_role("default")
    assert "models.default.provider: unknown provider 'anthropic'" in str(err.value)
    assert "known: embedded, langchain, openai, scripted" in str(err.value)


def test_a_provider_registered_by_a_module_builds_its_routes_models() -> None:
    from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel

    @PROVIDERS.register("parrot")
    def parrot(req: ProviderRequest) -> BoundModel:
        return BoundModel(name=req.route_name, route=req.route, model=ParrotFakeChatModel(),
                          model_label=f"parrot/{req.route.model}")

    try:
        cfg = ExperimentConfig(models={"default": ModelRoute(provider="parrot", model="p")})
        assert ModelSet(cfg, seed=0).for_role("solver").model_label == "parrot/p"
    finally:
        PROVIDERS.unregister("parrot")


def test_a_provider_that_cannot_build_its_model_ends_the_runs_as_infrastructure_errors_not_task_results(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A plugin's provider raising as it builds (a missing key of its own) failed every run as the system's own
    failure: ``status: finished``, success 0, counted in the rates, exit 0."""
    from main import main

    @PROVIDERS.register("needs_key")
    def needs_key(req: ProviderRequest) -> BoundModel:
        raise ValueError("MYPROV_KEY is not set")

    try:
        code = main(["run", "--benchmark", "arith", "--task-limit", "2", "--systems", "sas", "--output-root",
                     str(tmp_path), "--experiment-id", "e", "--progress", "none",
                     "--set", "models.default.provider=needs_key", "--set", "models.default.model=m"])
    finally:
        PROVIDERS.unregister("needs_key")
    results = [json.loads(p.read_text()) for p in sorted((tmp_path / "e").rglob("run_0.result.json"))]
    assert len(results) == 2 and {r["status"] for r in results} == {"error"} and code != 0
    assert all("provider 'needs_key' could not build its model: ValueError: MYPROV_KEY is not set" in r["error"]
               for r in results)


@pytest.fixture
def fake_langchain_family(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """``fake:<model>`` built by ``init_chat_model`` as LangChain's own ``GenericFakeChatModel``.

    ``init_chat_model`` builds only the model families it lists, so the test adds LangChain's fake chat model
    as one more family (its private table, the way it lists anthropic or ollama). Returns the keyword
    arguments each model was built with.
    """
    from langchain.chat_models import base

    built: list[dict] = []

    def replies():
        while True:
            yield AIMessage(content=json.dumps(REPLY), usage_metadata=dict(USAGE))

    def create(cls, model: str, **kwargs):
        built.append({"model": model, **kwargs})
        return cls(messages=replies())

    monkeypatch.setitem(base._BUILTIN_PROVIDERS, "fake",
                        ("langchain_core.language_models.fake_chat_models", "GenericFakeChatModel", create))
    return built


def test_a_langchain_route_sweeps_traced_redacted_and_summarised(fake_langchain_family, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from descriptor.summaries import summarize_experiment
    from mas.sweep.experiment import ExperimentRequest, run_experiment

    monkeypatch.setenv("FAKE_LANGCHAIN_KEY", SECRET)
    route = {"provider": "langchain", "api_key_env": "FAKE_LANGCHAIN_KEY", "price_input_per_1m": 1.0,
             "rate_limit": {"requests_per_minute": 60000, "max_concurrent": 2}}
    cfg = ExperimentConfig(output_root=str(tmp_path), seed=1, mas={"agents": 2, "max_rounds": 1}, models={
        "default": ModelRoute(model="fake:agent-model", **route),
        "judge": ModelRoute(model="fake:judge-model", **route)})
    req = ExperimentRequest(cfg=cfg, benchmarks=["arith"], systems=["debate"], task_limit=1, runs_per_task=1,
                            experiment_id="lc", progress="none")
    asyncio.run(run_experiment(req))
    summarize_experiment(tmp_path / "lc", plots=False)

    assert {b["model"] for b in fake_langchain_family} == {"agent-model", "judge-model"}
    assert all(b["api_key"] == SECRET and b["max_retries"] == 0 for b in fake_langchain_family)
    (trace,) = (tmp_path / "lc").rglob("run_0.trace.jsonl")
    calls = [e for e in read_trace(trace) if e.model is not None]
    by_route = {(e.route, e.model) for e in calls}
    assert by_route == {("default", "fake:agent-model"), ("judge", "fake:judge-model")}
    judged = [e for e in calls if e.actor == "system:judge" or e.actor == "system:controller"]
    assert judged and all(e.route == "judge" for e in judged)
    assert all((e.token_in, e.token_out, e.usage_source) == (123, 7, "provider") for e in calls)
    assert all(e.cost_usd == pytest.approx(123 / 1e6) for e in calls)
    summary = json.loads((tmp_path / "lc" / "experiment_summary.json").read_text(encoding="utf-8"))
    assert summary["benchmarks"]["arith"]["systems"]["debate"]["n_runs"] == 1
    for path in (tmp_path / "lc").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_native_tools_invoke_the_model_with_its_binding_kwargs_unless_the_binding_carries_a_config() -> None:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    model = ChatOpenAI(model="m", api_key="k", base_url="http://127.0.0.1:9/v1")
    bound = BoundModel(name="default", route=ModelRoute(), model=model, model_label="m")
    runnable, kwargs = bound.with_tools([add])
    assert runnable is model and [t["function"]["name"] for t in kwargs["tools"]] == ["add"]
    assert bound.with_tools([add])[1] is kwargs  # bound once per list of tools

    class Tagging(ChatOpenAI):  # a model whose binding carries a config: invoked as the binding, never unwrapped
        def bind_tools(self, tools, **kw):  # type: ignore[no-untyped-def, override]
            return super().bind_tools(tools, **kw).with_config(tags=["mine"])

    tagging = Tagging(model="m", api_key="k", base_url="http://127.0.0.1:9/v1")
    runnable, kwargs = BoundModel(name="default", route=ModelRoute(), model=tagging, model_label="m").with_tools([add])
    assert runnable is not tagging and runnable.config["tags"] == ["mine"] and kwargs == {}
