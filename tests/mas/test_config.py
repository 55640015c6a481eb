"""Config loading: clear errors naming the file and key; overrides; API keys."""

import json
from pathlib import Path

import pytest

from descriptor.layout import RunPaths
from descriptor.run_config import read_metadata_with_config
from mas.config import ConfigError, load_config, parse_config, require_api_key
from mas.overrides import apply_overrides
from mas.systems import agent_roles

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "experiment.example.toml"


def test_example_config_loads():
    cfg = load_config(EXAMPLE)
    assert cfg.models["default"].provider == "embedded"
    assert cfg.route_for_role("judge") is cfg.models["default"]  # no judge route: default


def test_malformed_toml_names_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("seed = [1,\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: malformed TOML"):
        load_config(bad)


def test_bad_key_is_named(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[mas]\nmax_rounds = 0\n[models.default]\nprovider='scripted'\n")
    with pytest.raises(ConfigError) as err:
        load_config(bad)
    assert "mas.max_rounds" in str(err.value) and "bad.toml" in str(err.value)


def test_unknown_key_is_rejected():
    with pytest.raises(ConfigError, match="mas.rouds"):
        parse_config({"mas": {"rouds": 2}, "models": {"default": {"provider": "scripted"}}}, "x.toml")


@pytest.mark.parametrize("key, value", [("apikey", "hunter2verysecretvalue9876543210"), ("api-key", "hf_abcdefgh"),
                                        ("Api_Key", "AIzaSyD-short"), ("api_key", 12345678901234567890123),
                                        ("endpoint_id", "mk3f9a8b7c6d5e4f3a2b1c0d9e")])
def test_a_config_error_never_echoes_a_value_that_may_be_a_secret(key, value):
    # a key under a misspelt name, of the wrong type, or a value shaped like a key: named, never shown
    with pytest.raises(ConfigError) as err:
        parse_config({"models": {"default": {"provider": "scripted", key: value}}}, "x.toml")
    assert f"models.default.{key}" in str(err.value) and str(value) not in str(err.value)
    assert "value not shown" in str(err.value)
    with pytest.raises(ConfigError, match=r"got 'rouds-value'"):  # anything else is still shown
        parse_config({"mas": {"rouds": "rouds-value"}, "models": {"default": {"provider": "scripted"}}}, "x.toml")


def test_missing_file():
    with pytest.raises(ConfigError, match="not found"):
        load_config("/nonexistent/cfg.toml")


def test_model_override_replaces_every_route():
    cfg = load_config(EXAMPLE)
    cfg = apply_overrides(cfg, model="scripted", seed=7, **{"inject.rate": 0.5})
    assert cfg.seed == 7 and cfg.inject.rate == 0.5
    assert cfg.route_for_role("judge").provider == "scripted"
    assert list(cfg.used_routes(agent_roles())) == ["default"]


def test_unknown_route_override():
    with pytest.raises(ConfigError, match="unknown model route 'nope'"):
        apply_overrides(load_config(None), model="nope")


def test_missing_api_key_is_clear(monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    route = load_config(EXAMPLE).models["openrouter"]
    with pytest.raises(ConfigError, match="OPENROUTER_API_KEY"):
        require_api_key(route, "openrouter")
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-v1-abcdefghijklmnopqrstuvwxyz")
    assert require_api_key(route, "openrouter").startswith("sk-or")


def test_cost_usd_uses_per_million_prices():
    route = load_config(EXAMPLE).models["openrouter"]
    assert route.cost_usd(1_000_000, 0) == pytest.approx(0.15)
    assert route.cost_usd(1000, 2000) == pytest.approx((1000 * 0.15 + 2000 * 0.60) / 1e6)


def _cfg(**data):
    return parse_config({"models": {"default": {"provider": "embedded"}, **data.pop("models", {})}, **data}, "x.toml")


def test_used_routes_include_role_routes_under_models():
    cfg = _cfg(models={"critic": {"provider": "openai", "model": "gpt-4o-mini", "api_key_env": "CRITIC_KEY"},
                       "hosted": {"provider": "openai", "model": "m", "api_key_env": "UNUSED_KEY"}},
               roles={"planner": "scripted"})
    used = cfg.used_routes(agent_roles())
    assert list(used) == ["default", "scripted", "critic"]  # [models.hosted] is no role's route
    assert used["critic"] is cfg.route_for_role("critic") and used["critic"].provider == "openai"
    assert cfg.route_name_for_role("planner") == "scripted" and cfg.route_name_for_role("solver") == "default"


def test_missing_key_of_a_role_route_fails_before_any_run(tmp_path, monkeypatch):
    from mas.sweep.experiment import ExperimentRequest, validate_request

    monkeypatch.delenv("CRITIC_KEY", raising=False)
    cfg = _cfg(models={"default": {"provider": "scripted", "model": "scripted"},
                       "critic": {"provider": "openai", "model": "gpt-4o-mini", "api_key_env": "CRITIC_KEY"}})
    req = ExperimentRequest(cfg=cfg.model_copy(update={"output_root": str(tmp_path)}), benchmarks=["arith"],
                            systems=["orchestrator"], task_limit=1, runs_per_task=1, experiment_id="e")
    with pytest.raises(ConfigError, match=r"models\.critic.*CRITIC_KEY"):
        validate_request(req)


def test_embedded_role_route_is_prestarted(monkeypatch):
    from mas.sweep import experiment

    started = []
    monkeypatch.setattr("mas.serving.server.ensure_server", lambda settings: started.append(settings))
    experiment.prepare_models(_cfg(models={"default": {"provider": "scripted", "model": "scripted"},
                                           "critic": {"provider": "embedded"}}))
    assert len(started) == 1


def test_minimum_discussion_rounds_must_not_exceed_max_rounds():
    with pytest.raises(ConfigError, match=r"mas\.minimum_discussion_rounds \(4\) must not exceed mas\.max_rounds \(3\)"):
        _cfg(mas={"max_rounds": 3, "minimum_discussion_rounds": 4})
    assert _cfg(mas={"max_rounds": 2, "minimum_discussion_rounds": 2}).mas.minimum_discussion_rounds == 2


def test_set_options_override_any_key_with_toml_values():
    from mas.config import ConfigError, load_config
    from mas.overrides import apply_overrides, parse_set_options

    cfg = apply_overrides(load_config(None), **parse_set_options(
        ["mas.max_rounds=2", "mas.termination_consensus_mode=lexical", "models.default.temperature=0.0",
         "benchmarks.arith.count=7"]))
    assert cfg.mas.max_rounds == 2 and cfg.mas.termination_consensus_mode == "lexical"
    assert cfg.models["default"].temperature == 0.0 and cfg.benchmarks["arith"]["count"] == 7
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_set_options(["mas.max_rounds"])
    with pytest.raises(ConfigError, match="max_rounds"):
        apply_overrides(load_config(None), **parse_set_options(["mas.max_rounds=0"]))


def test_run_cli_accepts_set(tmp_path):
    from main import main

    code = main(["run", "--benchmark", "arith", "--task-limit", "1", "--systems", "debate", "--model", "scripted",
                 "--output-root", str(tmp_path), "--experiment-id", "s", "--progress", "none",
                 "--set", "mas.agents=2", "--set", "mas.termination_consensus_mode=lexical"])
    assert code == 0
    meta = read_metadata_with_config(RunPaths.parse(next((tmp_path / "s").rglob("run_0.metadata.json"))))
    assert meta.config["mas"]["agents"] == 2


def test_request_timeout_defaults_by_provider():
    from mas.config import ModelRoute

    # embedded: the longest call the route can make (a context window read at 10 tokens/s, max_tokens written at
    # 1 token/s, 30 s more), not 30 minutes; its requests wait for a server slot before the clock starts
    assert ModelRoute(provider="embedded", context_window=4096, max_tokens=512).request_timeout_s() == 951.6
    assert ModelRoute(provider="embedded", context_window=1024, max_tokens=128).request_timeout_s() == 260.4
    assert ModelRoute(provider="openai", model="m").request_timeout_s() == 120.0
    assert ModelRoute(provider="embedded", timeout_s=30).request_timeout_s() == 30


def test_credentials_in_a_routes_url_are_secrets_wherever_they_appear_alone(monkeypatch):
    from descriptor.redact import redact

    parse_config({"models": {"default": {"provider": "openai", "model": "m", "api_key_env": "K",
                                         "base_url": "http://bob:planted~pw1234@127.0.0.1:9/v1?api-key=planted~qk5678"}}},
                 "x.toml")
    echoed = redact("Incorrect API key provided: planted~pw1234; or planted~qk5678")
    assert "planted~pw1234" not in echoed and "planted~qk5678" not in echoed


def test_a_bad_flag_value_that_is_a_secret_is_not_echoed(monkeypatch, capsys):
    from main import main

    monkeypatch.setenv("OPENAI_API_KEY", "planted~flag98765")
    assert main(["run", "--cache", "planted~flag98765"]) == 2
    err = capsys.readouterr().err
    assert "--cache" in err and "planted~flag98765" not in err


def test_set_on_the_default_route_applies_to_the_route_model_chose():
    """``--model scripted --set models.default.temperature=0.0`` ran at the scripted route's own temperature:
    the override went to the configured default, which --model then replaced (the --help example did nothing)."""
    from mas.config import ExperimentConfig

    new = apply_overrides(ExperimentConfig(), model="scripted", **{
        "models.default.temperature": 0.0, "models.default.max_tokens": 64,
        "models.default.price_input_per_1m": 1.5, "mas.max_rounds": 4})
    route = new.models["default"]
    assert (route.provider, route.temperature, route.max_tokens, new.mas.max_rounds) == ("scripted", 0.0, 64, 4)
    assert route.price_input_per_1m == 1.5 and list(new.models) == ["default"]
    assert apply_overrides(ExperimentConfig(), model="scripted").models["default"].temperature == 0.2
    # the named route's own overrides still reach it
    assert apply_overrides(ExperimentConfig(), model="scripted",
                           **{"models.scripted.temperature": 0.5}).models["default"].temperature == 0.5
