"""Route prices: a route without prices is priced from the maintained table (genai-prices), the config's prices win,
and a model the table does not know costs 0 with a warning on the console and in the summary and report."""

from __future__ import annotations

import html
import json

import pytest

from main import main
from mas.config import parse_config
from mas.llm.prices import price_routes, table_price
from mas.sweep.metadata import price_records
from tests.fake_endpoint import answer

KEY_VAR = "MAS_TEST_PRICES_KEY"


def config(tmp_path, base_url: str, model: str, **route: object) -> str:
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in route.items())
    path = tmp_path / "cfg.toml"
    path.write_text(f'[models.default]\nprovider = "openai"\nmodel = "{model}"\nbase_url = "{base_url}"\n'
                    f'api_key_env = "{KEY_VAR}"\n{extra}')
    return str(path)


def sweep(tmp_path, cfg: str, exp: str = "e") -> int:
    return main(["run", "--config", cfg, "--benchmark", "arith", "--systems", "sas", "--task-limit", "1",
                 "--output-root", str(tmp_path / "out"), "--experiment-id", exp, "--progress", "none"])


def run_files(tmp_path, exp: str = "e") -> tuple[dict, dict, list[dict]]:
    [d] = [p.parent for p in (tmp_path / "out" / exp).rglob("run_0.result.json")]
    events = [json.loads(line) for line in (d / "run_0.trace.jsonl").read_text().splitlines()]
    return (json.loads((d / "run_0.result.json").read_text()), json.loads((d / "run_0.metadata.json").read_text()),
            events)


@pytest.fixture
def priced_endpoint(endpoint, monkeypatch):
    monkeypatch.setenv(KEY_VAR, "k")
    return endpoint(lambda n, request: answer("7", n))


def test_a_route_naming_gpt_4o_mini_without_prices_costs_what_the_table_says(tmp_path, priced_endpoint, capsys):
    assert sweep(tmp_path, config(tmp_path, priced_endpoint.base_url, "gpt-4o-mini")) == 0
    result, meta, events = run_files(tmp_path)
    price = meta["prices"]["default"]
    assert price["source"] == "table" and price["model"] == "openai:gpt-4o-mini"
    assert price["table"].startswith("genai-prices ") and len(price["date"]) == 10
    assert (price["input_per_1m"], price["output_per_1m"]) == (0.15, 0.6)  # the table's gpt-4o-mini
    llm = [e for e in events if e["token_in"] or e["token_out"]]
    expected = sum(e["token_in"] * 0.15 + e["token_out"] * 0.6 for e in llm) / 1e6
    assert result["cost_total_usd"] > 0 and result["cost_total_usd"] == pytest.approx(expected)
    assert "price table" not in capsys.readouterr().err  # a known model: no warning


def test_the_configs_prices_win_over_the_table(tmp_path, priced_endpoint):
    assert sweep(tmp_path, config(tmp_path, priced_endpoint.base_url, "gpt-4o-mini", price_input_per_1m=2.0)) == 0
    result, meta, events = run_files(tmp_path)
    assert meta["prices"]["default"] == {"input_per_1m": 2.0, "output_per_1m": 0.0, "source": "config",
                                         "table": None, "model": None, "date": None}
    assert result["cost_total_usd"] == pytest.approx(sum(e["token_in"] for e in events) * 2.0 / 1e6)


def test_a_model_the_table_does_not_know_costs_0_with_a_warning_in_console_summary_and_report(
        tmp_path, priced_endpoint, capsys):
    assert sweep(tmp_path, config(tmp_path, priced_endpoint.base_url, "my-own-finetune-7b")) == 0
    result, meta, _ = run_files(tmp_path)
    assert result["cost_total_usd"] == 0 and meta["prices"]["default"]["source"] == "unknown"
    err = capsys.readouterr().err
    line = "models.default: model 'my-own-finetune-7b' is not in genai-prices"
    assert err.count(line) == 2  # when the sweep starts, and under its summary
    root = tmp_path / "out" / "e"
    assert any(line in n for n in json.loads((root / "experiment_summary.json").read_text())["notes"])
    assert line in html.unescape((root / "report" / "index.html").read_text())


def test_local_and_unused_routes_are_never_looked_up():
    cfg = parse_config({"models": {"default": {"provider": "scripted", "model": "scripted"},
                                   "spare": {"provider": "openai", "model": "gpt-4o-mini"},
                                   "used": {"provider": "openai", "model": "gpt-4o-mini"}}})
    priced, warnings = price_routes(cfg, ["default", "used"])
    assert warnings == []
    assert [(n, r.price_input_per_1m, r.price_table) for n, r in priced.models.items() if n != "used"] == [
        ("default", 0.0, None), ("spare", None, None)]
    assert priced.models["used"].price_table.model == "openai:gpt-4o-mini"
    assert price_routes(priced, ["default", "used"])[0] == priced  # settled once: a second pass changes nothing
    records = price_records(priced)
    assert {n: r.source for n, r in records.items()} == {"default": "local", "spare": "unpriced", "used": "table"}


@pytest.mark.parametrize(("route", "match"), [
    ({"provider": "openai", "model": "openai/gpt-4o-mini", "base_url": "https://openrouter.ai/api/v1"},
     "openrouter:openai/gpt-4o-mini"),
    ({"provider": "langchain", "model": "anthropic:claude-3-5-haiku-latest"}, "anthropic:claude-3-5-haiku-latest"),
    ({"provider": "openai", "model": "gpt-4o-mini"}, "openai:gpt-4o-mini"),
])
def test_the_provider_comes_from_the_url_or_the_langchain_prefix(route, match):
    cfg = parse_config({"models": {"default": route}})
    found = table_price(cfg.models["default"])
    assert found is not None and found[2].model == match and found[0] > 0 and found[1] > 0
