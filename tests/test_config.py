"""Config loading: clear errors naming the file and key; overrides; API keys."""

from pathlib import Path

import pytest

from mas.config import ConfigError, apply_overrides, load_config, parse_config, require_api_key

EXAMPLE = Path(__file__).resolve().parent.parent / "config" / "experiment.example.toml"


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


def test_missing_file():
    with pytest.raises(ConfigError, match="not found"):
        load_config("/nonexistent/cfg.toml")


def test_model_override_replaces_every_route():
    cfg = load_config(EXAMPLE)
    cfg = apply_overrides(cfg, model="scripted", seed=7, **{"inject.rate": 0.5})
    assert cfg.seed == 7 and cfg.inject.rate == 0.5
    assert cfg.route_for_role("judge").provider == "scripted"
    assert list(cfg.used_routes()) == ["default"]


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
