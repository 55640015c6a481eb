"""A misspelt system, benchmark, option, route or config key is answered with the close names ("did you mean")."""

from __future__ import annotations

import doctest

import pytest

import descriptor.suggest
import main
from benchmark.registry import get_benchmark
from descriptor.errors import UserError
from descriptor.registry import Registry
from descriptor.suggest import close_names, did_you_mean, keys_at
from mas.config import ConfigError, ExperimentConfig, load_config, parse_config
from mas.overrides import apply_overrides, parse_set_options
from mas.systems import get_system


def test_the_doctests_hold():
    assert doctest.testmod(descriptor.suggest).failed == 0


def test_close_names_fold_case_and_nothing_far_is_suggested():
    assert close_names("GSM8K", ["gsm8k", "arith"]) == ["gsm8k"]
    assert close_names("Debate", ["debate", "sas"]) == ["debate"]
    assert did_you_mean("zzzz", ["debate", "sas"]) == ""
    assert did_you_mean("debat", ["debate", "debater"]) == " (did you mean 'debate' or 'debater'?)"


def test_the_registry_suggests_the_close_name():
    colours: Registry[str] = Registry("colour", "mas_econ.test_colours")
    colours.register("green", "#0f0")
    colours.register("red", "#f00")
    with pytest.raises(UserError, match=r"unknown colour 'gren' \(did you mean 'green'\?\); known: green, red"):
        colours.get("gren")


def test_an_unknown_benchmark_and_option_are_answered_with_the_close_ones(capsys):
    assert main.main(["benchmark-info", "--benchmark", "arth"]) == 2
    assert "unknown benchmark 'arth' (did you mean 'arith'?); known: arith" in capsys.readouterr().err
    with pytest.raises(UserError, match=r"unknown option\(s\) min_opps \(did you mean 'min_ops'"):
        get_benchmark("arith", {"min_opps": 2})


def test_an_unknown_system_is_answered_with_the_close_one(tmp_path, capsys):
    with pytest.raises(UserError, match=r"unknown system 'debte' \(did you mean 'debate'\?\)"):
        get_system("debte")
    code = main.main(["run", "--benchmark", "arith", "--systems", "sas,supervsor", "--model", "scripted",
                      "--output-root", str(tmp_path), "--progress", "none"])
    assert code == 2
    assert "unknown system(s) supervsor (did you mean 'supervisor'?); known:" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(("data", "said"), [
    ({"concurency": 2}, "x.toml: concurency: unknown key (did you mean 'concurrency'?); keys here: seed,"),
    ({"mas": {"max_round": 2}}, "x.toml: mas.max_round: unknown key (did you mean 'max_rounds'"),
    ({"models": {"default": {"provider": "scripted", "temprature": 0}}},
     "models.default.temprature: unknown key (did you mean 'temperature'?)"),
    ({"models": {"default": {"rate_limit": {"max_concurent": 1}}}},
     "models.default.rate_limit.max_concurent: unknown key (did you mean 'max_concurrent'?); keys here: "
     "requests_per_minute, max_concurrent"),
    ({"systems": {"mine": {"graph": "m:f", "anser_key": "a"}}},
     "systems.mine.anser_key: unknown key (did you mean 'answer_key'?)"),
])
def test_an_unknown_config_key_names_the_close_key_and_the_keys_there(data, said):
    with pytest.raises(ConfigError) as err:
        parse_config(data, "x.toml")
    assert said in str(err.value)
    assert "Extra inputs are not permitted" not in str(err.value)


def test_an_unknown_key_with_nothing_close_lists_the_keys_without_a_guess():
    with pytest.raises(ConfigError) as err:
        parse_config({"limits": {"zzz": 1}}, "x.toml")
    assert "limits.zzz: unknown key; keys here: tokens, cost_usd, wall_s, model_calls, sweep_cost_usd" in str(err.value)


def test_a_set_option_and_a_model_route_are_answered_with_the_close_ones():
    with pytest.raises(ConfigError, match=r"<command line>: mas\.rouds: unknown key \(did you mean 'rounds'"):
        apply_overrides(load_config(None), **parse_set_options(["mas.rouds=2"]))
    with pytest.raises(ConfigError, match=r"unknown model route 'scriptd' \(did you mean 'scripted'\?\)"):
        load_config(None).route("scriptd")


def test_keys_at_walks_fields_dict_values_and_typed_extras():
    assert "temperature" in keys_at(ExperimentConfig, ["models", "anyroute"])
    assert keys_at(ExperimentConfig, ["systems", "an_app"]) == ["graph", "input_key", "answer_key"]
    assert keys_at(ExperimentConfig, ["seed"]) == []  # an int holds no keys
    assert keys_at(ExperimentConfig, ["no_such_table", "x"]) == []
