"""The seed harness's rules where issue 32 found the runtime deviating: one test per item (see docs/fidelity.md)."""

from __future__ import annotations

import asyncio
import csv
import json
from pathlib import Path

import pytest

from descriptor.events import read_trace
from mas.topologies.termination import (
    Candidate,
    ConsensusView,
    JudgeOutcome,
    LoopPosition,
    decide,
    mean_delta,
    normalize_artifact,
)
from tests.mas.test_sweep import flaky_model, no_backoff, request, scripted_cfg  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parents[2]


def cands(*answers: str, prefix: str = "a") -> list[Candidate]:
    return [Candidate(agent=f"{prefix}{i}", artifact=a, confidence=0.8) for i, a in enumerate(answers)]


# ---- 1. lexical canonicalisation keeps the marks of every script, after NFKC ------------------


def test_devanagari_words_that_differ_by_a_vowel_sign_do_not_agree():
    words = ("काम", "कम", "कोमा")
    assert len({normalize_artifact(w) for w in words}) == 3
    d = asyncio.run(decide(LoopPosition(stage="t", round=1, max_rounds=3), candidate_artifacts=cands(*words),
                           previous_candidate_artifacts=None, expected_count=3, mode="lexical"))
    assert d.reason != "consensus_reached" and d.consensus_ratio == pytest.approx(1 / 3)


def test_a_precomposed_accent_equals_the_letter_with_a_combining_accent():
    assert normalize_artifact("Caf\u00e9!") == normalize_artifact("cafe\u0301") == "caf\u00e9"
    assert normalize_artifact("ｆｕｌｌ　ｗｉｄｔｈ ４２") == "full width 42"  # NFKC folds compatibility forms


# ---- 2. completion_r: the system's own failure is a finished run with completion 0 ---------------


def _run_one(tmp_path: Path, system: str = "debate"):
    from benchmark.registry import get_benchmark
    from mas.config import ExperimentConfig, ModelRoute
    from mas.sweep.runner import RunSpec, execute_run

    cfg = ExperimentConfig(output_root=str(tmp_path), models={"default": ModelRoute(provider="scripted",
                                                                                    model="scripted")})
    bench = get_benchmark("arith", None)
    spec = RunSpec(experiment_id="e", output_root=tmp_path, benchmark="arith", system=system,
                   task=bench.load_tasks(1)[0], run_index=0, seed=0)
    return spec, asyncio.run(execute_run(spec, cfg, bench))


def test_a_graph_that_hits_the_recursion_limit_is_a_finished_run_that_did_not_complete(tmp_path, monkeypatch):
    monkeypatch.setattr("mas.sweep.runner.RECURSION_LIMIT", 2)
    spec, result = _run_one(tmp_path)
    assert (result.status, result.completion, result.success) == ("finished", False, False)
    assert "GraphRecursionError" in result.error
    assert read_trace(spec.paths.trace)[-1].payload.kind == "system_failure"
    from descriptor.summaries import summarize_experiment

    s = summarize_experiment(tmp_path / "e", plots=False)
    assert s.n_errors == 0 and s.rollups[0]["n_runs"] == 1 and s.rollups[0]["completion_rate"] == 0.0


def test_a_bug_in_a_node_is_the_systems_failure_and_an_endpoint_failure_is_infrastructure():
    from mas.llm.call import LLMCallError
    from tests.model_errors import prompt_too_long_error
    from mas.sweep.runner import is_infrastructure_error

    assert not is_infrastructure_error(KeyError("answer_artifact"))
    assert is_infrastructure_error(LLMCallError("default route (openai/gpt-4o-mini): RateLimitError: 429"))
    too_long = LLMCallError("default route")
    too_long.__cause__ = prompt_too_long_error("9000 > 8192")
    assert not is_infrastructure_error(too_long)


async def test_errored_runs_count_as_failures_only_when_asked(tmp_path, monkeypatch, no_backoff):
    from descriptor.summaries import summarize_experiment
    from mas.sweep.experiment import run_experiment

    flaky_model(monkeypatch, fail_first=10)  # the endpoint is down: infrastructure errors
    results = await run_experiment(request(scripted_cfg(tmp_path, max_retries=0), tasks=1, runs=2))
    assert [r.status for r in results] == ["error", "error"]
    default = summarize_experiment(tmp_path / "e", plots=False)
    assert default.n_errors == 2 and default.rollups[0]["completion_rate"] is None
    literal = summarize_experiment(tmp_path / "e", plots=False, count_errors_as_failures=True)
    row = literal.rollups[0]
    assert literal.n_errors == 0 and (row["n_runs"], row["completion_rate"], row["success_rate"]) == (2, 0.0, 0.0)
    assert json.loads((tmp_path / "e" / "experiment_summary.json").read_text())["count_errors_as_failures"] is True
    again = summarize_experiment(tmp_path / "e", plots=False)  # the cache does not carry the rule over
    assert again.n_errors == 2 and again.rollups[0]["completion_rate"] is None


def test_the_flag_is_on_the_command_line(tmp_path):
    from mas_econ.cli import build_parser

    args = build_parser().parse_args(["summarize-experiment", "--experiment-root", str(tmp_path),
                                      "--count-errors-as-failures"])
    assert args.count_errors_as_failures is True


# ---- 3. the judge compares the agents it is shown with their own previous answers ----------------


def test_the_orchestrators_judge_gets_the_critic_and_aggregator_previous_answers(tmp_path, monkeypatch):
    seen: list[tuple[list[str], list[str] | None]] = []

    def recording_judge(rt):
        async def judge(candidates, previous, work):
            seen.append(([c.agent for c in candidates], None if previous is None else [p.agent for p in previous]))
            return JudgeOutcome(view=ConsensusView(groups=[[0], [1]], is_substantive=True))  # go on
        return judge

    monkeypatch.setattr("mas.topologies.orchestrator.consensus_judge", recording_judge)
    from benchmark.registry import get_benchmark
    from mas.config import ExperimentConfig, ModelRoute
    from mas.sweep.runner import RunSpec, execute_run

    cfg = ExperimentConfig(output_root=str(tmp_path), mas={"rounds": 2},
                           models={"default": ModelRoute(provider="scripted", model="scripted:judge")})
    bench = get_benchmark("arith", None)
    spec = RunSpec(experiment_id="e", output_root=tmp_path, benchmark="arith", system="orchestrator",
                   task=bench.load_tasks(1)[0], run_index=0, seed=0)
    asyncio.run(execute_run(spec, cfg, bench))
    later = [(shown, before) for shown, before in seen if before is not None]
    assert later, seen
    assert all(set(before) <= set(shown) for shown, before in later)


async def test_a_vote_over_other_agents_shows_the_judge_those_agents_previous_answers():
    got = []

    async def judge(voters, previous, work):
        got.append(previous)
        return JudgeOutcome(view=ConsensusView(groups=[[0, 1]], is_substantive=True))

    workers = cands("1", "2", prefix="w")
    d = await decide(LoopPosition(stage="s", round=2, max_rounds=3), candidate_artifacts=workers,
                     previous_candidate_artifacts=workers, consensus_artifacts=cands("9", "9", prefix="v"),
                     previous_consensus_artifacts=cands("8", "9", prefix="v"), expected_count=2,
                     mode="llm_judge", judge=judge)
    assert [p.agent for p in got[0]] == ["v0", "v1"] and d.consensus_source == "llm_judge"


# ---- 4. the no-progress delta is on the raw text --------------------------------------------------


def test_mean_delta_compares_the_raw_text():
    assert mean_delta(cands("answer 42!!!"), cands("Answer: 42")) == pytest.approx(0.2727, abs=1e-4)


# ---- 5. confidence: 0.5 when missing, and the prompt says what it is -------------------------------


def test_a_turn_without_an_answer_has_the_seeds_default_confidence():
    from mas.topologies.agent import TurnResult, parse_answer
    from mas.topologies.roles import artifact_of
    from mas.topologies.sas import SOLVER

    assert parse_answer(None, '{"name": "calculator", "arguments": {"expression": "1+1"}}').confidence == 0.5
    art = artifact_of(SOLVER, 0, TurnResult(answer=None, steps=0, tool_results=[]))
    assert art["answer_artifact"] == "" and art["confidence"] == 0.5


def test_the_answer_format_defines_confidence_in_the_current_answer():
    from mas.topologies.prompts import ANSWER_FORMAT

    assert "confidence is your probability that this answer_artifact, your current answer, is correct" in ANSWER_FORMAT


# ---- 6. CSVs keep blank pass@k columns ---------------------------------------------------------------


def test_csvs_keep_pass_at_k_columns_even_when_every_cell_is_blank(tmp_path):
    from descriptor.summaries import summarize_experiment
    from tests.descriptor_fixtures import build_experiment

    root = build_experiment(tmp_path / "x", tasks=2, runs=2)  # N = 2: pass@3, 5, 8 blank everywhere
    summarize_experiment(root, plots=False)
    for path in (root / "experiment_summary.csv", root / "arith" / "sas" / "summary.csv",
                 root / "arith" / "sas" / "t0" / "descriptor.csv"):
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        assert "pass_at_8" in rows[0] and all(r["pass_at_8"] == "" for r in rows), path


# ---- 11. latency: summed model latency, one rule for the experiment-level figure --------------------


def test_the_reports_latency_is_the_summaries_mean_of_task_p95s_and_named_as_summed():
    from descriptor.report.analysis import RunRow, overview

    rows = [RunRow(benchmark="b", system="s", task_id=t, run_index=r, included=True, success=True,
                   latency_ms=ms, wall_time_s=1.0)
            for t, lat in (("t0", (100.0, 100.0)), ("t1", (1000.0, 3000.0))) for r, ms in enumerate(lat)]
    descriptors = [{"benchmark": "b", "system": "s", "task_id": "t0", "C1_latency_p95": 100.0, "C2_tokens_total": 1},
                   {"benchmark": "b", "system": "s", "task_id": "t1", "C1_latency_p95": 2900.0, "C2_tokens_total": 1}]
    [row] = overview(rows, descriptors, seed=0)
    assert row["latency_p95"] == pytest.approx(1500.0)  # the roll-up's rule: mean over tasks of per-task p95
    assert row["wall_time_s"] == pytest.approx(1.0)
    template = (ROOT / "descriptor" / "report" / "templates" / "index.html.j2").read_text()
    assert "summed model latency" in template and "wall time" in template


def test_the_run_page_names_the_sum_of_latencies_for_what_it_is():
    from descriptor.report import run_page

    source = Path(run_page.__file__).read_text()
    assert '("summed model latency"' in source and '("latency"' not in source


# ---- 12. smaller things a new user hit ----------------------------------------------------------------


def test_full_experiment_leaves_the_summary_table_to_run():
    script = (ROOT / "scripts" / "full_experiment.sh").read_text()
    assert "main.py summarize-experiment" not in script  # `run` prints the table (once) and writes the report


def test_a_scripted_sweep_on_gsm8k_says_why_it_scores_zero():
    from mas.config import ExperimentConfig, ModelRoute
    from mas.sweep.experiment import scripted_notes

    cfg = ExperimentConfig(models={"default": ModelRoute(provider="scripted", model="scripted")})
    notes = scripted_notes(cfg, ["arith", "gsm8k"], ["sas"])
    assert len(notes) == 1 and "gsm8k" in notes[0] and "success is 0 unless that happens to be right" in notes[0]
    real = ExperimentConfig(models={"default": ModelRoute(provider="embedded", model="x")})
    assert scripted_notes(real, ["gsm8k"], ["sas"]) == []


def test_an_answer_in_a_box_is_recorded_as_the_boxed_value():
    from mas.topologies.agent import parse_answer

    ans = parse_answer(None, "She sells 16 - 3 - 4 = 9 eggs at $2: 9 * 2 = \\boxed{18}")
    assert (ans.answer_artifact, ans.parse) == ("18", "boxed")
    assert parse_answer(None, "so \\boxed{\\frac{1}{2}}").answer_artifact == "\\frac{1}{2}"


async def test_a_judge_grouping_different_numbers_is_logged_beside_the_lexical_view():
    async def judge(voters, previous, work):
        return JudgeOutcome(view=ConsensusView(groups=[[0, 1, 2]], is_substantive=True))

    d = await decide(LoopPosition(stage="s", round=1, max_rounds=3), candidate_artifacts=cands("18", "9", "9"),
                     previous_candidate_artifacts=None, expected_count=3, mode="llm_judge", judge=judge)
    assert d.reason == "consensus_reached" and d.consensus_ratio == 1.0  # the seed's rule: the judge decides
    assert d.lexical_groups == [["a1", "a2"], ["a0"]] and d.lexical_ratio == pytest.approx(2 / 3)
    assert "lexically, 2 of 3 answers match" in d.reason_detail


# ---- 13. docs/fidelity.md lists every item until it is fixed --------------------------------------------


def test_the_fidelity_document_lists_every_item_of_the_check():
    text = (ROOT / "docs" / "fidelity.md").read_text()
    section = text.split("## The independent check", 1)[1]
    for item in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13):
        assert f"\n| {item} |" in section, item
    assert "letters and digits of every script kept | none" not in text  # the old, untrue claim


# ---- the seed's credentials: a key in config/experiment.toml, the environment variable first ---------------

KEY_TOML = """
[models.default]
provider = "scripted"
model = "scripted"

[models.openrouter]
provider = "openai"
model = "openai/gpt-4o-mini"
base_url = "https://openrouter.ai/api/v1"
api_key = "{key}"
"""


def test_a_key_in_the_config_file_is_used_unless_the_environment_variable_is_set(tmp_path, monkeypatch):
    from mas.config import load_config, require_api_key

    key = "cfgkey~" + "7f3a9c" * 4
    (tmp_path / "experiment.toml").write_text(KEY_TOML.format(key=key))
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    cfg = load_config(tmp_path / "experiment.toml")
    assert require_api_key(cfg.models["openrouter"], "openrouter") == key
    monkeypatch.setenv("OPENROUTER_API_KEY", "envkey~" + "0b1c2d" * 4)
    assert require_api_key(cfg.models["openrouter"], "openrouter").startswith("envkey~")


def test_a_key_in_the_config_file_reaches_no_artifact_log_or_argv(tmp_path, monkeypatch):
    from benchmark.registry import get_benchmark
    from descriptor.redact import REDACTED, redact
    from mas.config import ConfigError, load_config
    from mas.overrides import apply_overrides
    from mas.sweep.runner import RunSpec, execute_run

    key = "cfgkey~" + "5e6f7a" * 4
    (tmp_path / "experiment.toml").write_text(KEY_TOML.format(key=key))
    cfg = load_config(tmp_path / "experiment.toml")
    assert key not in repr(cfg) and key not in json.dumps(cfg.model_dump(mode="json"))
    assert redact(f"401 for {key}") == f"401 for {REDACTED}"
    moved = apply_overrides(cfg, **{"mas.max_rounds": 2})  # a copy through the dump keeps the key
    assert moved.models["openrouter"].api_key.get_secret_value() == key
    with pytest.raises(ConfigError, match="never given on the command line"):
        apply_overrides(cfg, **{"models.openrouter.api_key": "x"})
    cfg.output_root = str(tmp_path / "out")
    bench = get_benchmark("arith", None)
    spec = RunSpec(experiment_id="e", output_root=tmp_path / "out", benchmark="arith", system="sas",
                   task=bench.load_tasks(1)[0], run_index=0, seed=0)
    asyncio.run(execute_run(spec, cfg, bench))
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert files and all(key.encode() not in p.read_bytes() for p in files)


# ---- UMAP: exercised when umap-learn is installed, otherwise null with the reason --------------------------


def _topology(n_tasks: int):
    from descriptor.economics import EconomicsSettings
    from descriptor.topology_analysis import analyse_benchmark
    from tests.descriptor_fixtures import build_experiment
    from descriptor.summaries import summarize_experiment
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        s = summarize_experiment(build_experiment(Path(d), tasks=n_tasks, runs=3), plots=False)
    return analyse_benchmark(s.descriptors, EconomicsSettings.for_unit("tokens", lam=None, baseline="sas", seed=0))


def test_without_umap_learn_the_topology_says_why_umap_is_null(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_umap(name, *a, **k):
        if name == "umap":
            raise ImportError("no umap")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_umap)
    t = _topology(3)  # 6 task descriptors
    assert t["umap"] is None and "umap-learn is not installed" in t["umap_note"]
    assert len(t["pca"]["points"]) == 6


@pytest.mark.slow
def test_umap_embeds_every_task_descriptor_when_umap_learn_is_installed():
    pytest.importorskip("umap")
    t = _topology(4)  # 8 task descriptors
    assert t["umap_note"] is None and len(t["umap"]) == 8 and all(len(p) == 2 for p in t["umap"])
