"""Every file a command reads is untrusted (issue 30, item 5), through the commands themselves.

Each attack is a file a person, another program or a damaged disk could hand a command: span trees whose
parents loop, spans of the wrong types, JSON nested a hundred thousand levels deep, a step label "²", NaN
step scores, a damaged summaries' cache, a config nested too deeply. The rule is the project's damage rule:
a file among many is skipped with a warning naming it; the command's single input is refused with exit 2,
naming the file and the field. Never a traceback, never a hang.
"""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from attribution.sources.loaders import load_runs_dir, load_who_and_when_dir
from attribution.sources.span_loader import load_spans
from descriptor.errors import UserError
from tests.descriptor_fixtures import build_experiment, ev, metadata_record, result_record, write_run

DEEP = "[" * 100_000 + "]" * 100_000
"""JSON nested far past Python's recursion limit."""
TRACE = "0af7651916cd43dd8448eb211c80319c"


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Code that loops (a span that is its own ancestor did, growing ~60 MB/s) fails instead of hanging."""

    def hang(*_: object) -> None:
        raise TimeoutError(f"did not return within {seconds} s")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def main(capsys, *args: str) -> tuple[int, str, str]:
    """``python main.py ARGS`` in this process: exit code, stdout, stderr."""
    import main as cli

    capsys.readouterr()
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


# ---------------------------------------------------------------- spans


def otlp_span(span_id: str, parent: str | None, *, llm: bool = False, **extra: object) -> dict:
    attrs = [{"key": "openinference.span.kind", "value": {"stringValue": "LLM" if llm else "AGENT"}}]
    if llm:
        attrs.append({"key": "llm.output_messages.0.message.content", "value": {"stringValue": "2 + 2 = 5"}})
    span = {"traceId": TRACE, "spanId": span_id, "name": "llm" if llm else "agent", "startTimeUnixNano": "1",
            "attributes": attrs}
    if parent:
        span["parentSpanId"] = parent
    return {**span, **extra}


def otlp(*spans: dict) -> dict:
    return {"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}


GOOD = otlp(otlp_span("00000000000000a1", None), otlp_span("00000000000000b2", "00000000000000a1", llm=True))


def score_steps_on(capsys, spans: Path, tmp_path: Path) -> tuple[int, str]:
    code, _, err = main(capsys, "score-steps", "--spans", str(spans), "--scorer", "llm_naive", "--model", "scripted",
                        "--out", str(tmp_path / "scores.jsonl"))
    return code, err


ROOT_SPAN = otlp_span("00000000000000a1", None)


@pytest.mark.parametrize(("spans", "says"), [
    (otlp(ROOT_SPAN, otlp_span("00000000000000b2", "00000000000000b2", llm=True)),
     "span 00000000000000b2 is its own parent"),
    (otlp(ROOT_SPAN, otlp_span("00000000000000b2", "00000000000000c3"),
          otlp_span("00000000000000c3", "00000000000000b2", llm=True)), "is its own ancestor"),
    (otlp(otlp_span("00000000000000b2", "00000000000000b2", llm=True)), "is its own parent"),
], ids=["its-own-parent", "two-spans-parents-of-each-other", "no-root"])
def test_a_span_tree_whose_parents_loop_is_refused_naming_the_file(capsys, tmp_path, spans, says):
    bad = tmp_path / "loop.json"
    bad.write_text(json.dumps(spans))
    with deadline(5), pytest.raises(UserError, match=says):
        load_spans(bad)
    code, err = score_steps_on(capsys, bad, tmp_path)
    assert code == 2 and "loop.json" in err and says in err, err[-2000:]
    (tmp_path / "good.json").write_text(json.dumps(GOOD))
    loaded = load_spans(tmp_path)  # in a directory the looping file is skipped, the good one read
    assert [len(t.steps) for t in loaded.trajectories] == [1]
    assert [Path(s.path).name for s in loaded.skipped] == ["loop.json"]


@pytest.mark.parametrize(("doc", "field"), [
    ({"resourceSpans": "nope"}, "resourceSpans: expected a list, got str"),
    ({"resourceSpans": [5]}, "resourceSpans[0]: expected an object"),
    ({"resourceSpans": [{"scopeSpans": {"spans": []}}]}, "scopeSpans: expected a list, got dict"),
    (otlp("a span"), "span 0: expected an object, got str"),
    (otlp(otlp_span("00000000000000a1", None, attributes="x")), "span 0.attributes: expected a list"),
    (otlp(otlp_span("00000000000000a1", None, attributes=[{"key": 7, "value": {}}])), "attributes[0].key"),
    (otlp(otlp_span("00000000000000a1", None, attributes=[{"key": "n", "value": {"intValue": "many"}}])),
     "attributes[0].value.intValue: expected a number"),
    (otlp(otlp_span("00000000000000a1", None, attributes=[{"key": "n", "value": {"arrayValue": [1]}}])),
     "attributes[0].value.arrayValue: expected an object"),
    (otlp(otlp_span("00000000000000a1", None, startTimeUnixNano=float("nan"))), "startTimeUnixNano: expected a time"),
    (otlp(otlp_span("00000000000000a1", None, startTimeUnixNano="²")), "startTimeUnixNano: expected a time"),
    ({"data": [5]}, "data[0]: expected an object"),
    ({"data": [{"context": {"trace_id": TRACE, "span_id": "00000000000000a1"}, "attributes": [1]}]},
     "data[0].attributes: expected an object"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_spans_of_the_wrong_types_are_refused_naming_file_and_field(capsys, tmp_path, doc, field):
    bad = tmp_path / "typed.json"
    bad.write_text(json.dumps(doc))
    code, err = score_steps_on(capsys, bad, tmp_path)
    assert code == 2 and "typed.json" in err and field in err, err[-2000:]


def test_span_attributes_of_unexpected_types_are_ignored_not_fatal(tmp_path):
    odd = {"gen_ai.output.messages": "5", "gen_ai.input.messages": '{"role": "user"}', "metadata": "[1]",
           "llm.input_messages.².message.content": "x", "output.value": '{"messages": [{"kwargs": "text"}]}'}
    llm = otlp_span("00000000000000b2", "00000000000000a1", llm=True)
    llm["attributes"] += [{"key": k, "value": {"stringValue": v}} for k, v in odd.items()]
    root = otlp_span("00000000000000a1", None)
    root["attributes"].append({"key": "output.value", "value": {"stringValue": '{"messages": [{"kwargs": 5}]}'}})
    (tmp_path / "odd.json").write_text(json.dumps(otlp(root, llm)))
    (traj,) = load_spans(tmp_path / "odd.json").trajectories
    assert [s.content for s in traj.steps] == ["2 + 2 = 5"] and traj.final_answer is None


def test_deeply_nested_span_file_is_refused_naming_the_file(capsys, tmp_path):
    bad = tmp_path / "deep.json"
    bad.write_text(DEEP)
    code, err = score_steps_on(capsys, bad, tmp_path)
    assert code == 2 and "deep.json" in err and "nested deeper than 200 levels" in err, err[-2000:]


# ---------------------------------------------------------------- run files: summaries and report


@pytest.fixture
def experiment(tmp_path) -> Path:
    return build_experiment(tmp_path / "e", systems=("sas",), tasks=1, runs=4)


def damage_runs(root: Path) -> list[str]:
    """Runs 1-3 of the experiment's task damaged three ways; the files named in the warnings."""
    task = root / "arith" / "sas" / "t0"
    (task / "run_1.result.json").write_text('{"run_id": ' + DEEP + "}")
    (task / "run_2.eval.json").write_text(DEEP)
    trace = (task / "run_3.trace.jsonl").read_text().splitlines()
    trace.insert(1, '{"version":1, "payload": ' + DEEP + "}")  # a version-1 line, read as data first
    (task / "run_3.trace.jsonl").write_text("\n".join(trace) + "\n")
    return ["run_1.result.json", "run_2.eval.json", "run_3.trace.jsonl:2"]


def test_summaries_skip_runs_with_deeply_nested_files_naming_each_file(capsys, experiment):
    named = damage_runs(experiment)
    code, _, err = main(capsys, "summarize-experiment", "--experiment-root", str(experiment), "--no-plots")
    assert code == 0, err[-3000:]
    for name in named:
        assert any(name in line and "run skipped" in line for line in err.splitlines()), (name, err[-3000:])
    summary = json.loads((experiment / "experiment_summary.json").read_text())
    assert summary["n_runs"] == 1 and len(summary["issues"]) == 3


def test_report_skips_runs_with_deeply_nested_files(capsys, experiment, tmp_path):
    damage_runs(experiment)
    code, _, err = main(capsys, "report", "--experiment-root", str(experiment), "--out", str(tmp_path / "r"))
    assert code == 0, err[-3000:]
    assert "run_1.result.json" in (tmp_path / "r" / "index.html").read_text()


def test_report_reads_a_run_file_named_with_a_superscript_digit(capsys, experiment, tmp_path):
    task = experiment / "arith" / "sas" / "t0"
    (task / "run_².result.json").write_bytes((task / "run_0.result.json").read_bytes())
    code, _, err = main(capsys, "report", "--experiment-root", str(experiment), "--out", str(tmp_path / "r"))
    assert code == 0, err[-3000:]


def test_nan_and_infinite_step_scores_are_skipped_with_a_note_in_the_report(capsys, experiment, tmp_path):
    (experiment / "attribution").mkdir()
    (experiment / "attribution" / "scores.jsonl").write_text(
        '{"id": "arith/sas/t0/run_0", "n_steps": 3, "step_scores": [NaN, 0.5, Infinity], "scorer": "x"}\n'
        '{"id": "arith/sas/t0/run_1", "n_steps": 1, "step_scores": [' + DEEP + '], "scorer": "x"}\n')
    code, _, err = main(capsys, "report", "--experiment-root", str(experiment), "--out", str(tmp_path / "r"))
    assert code == 0, err[-3000:]
    page = (tmp_path / "r" / "index.html").read_text()
    assert "step_scores is not a list of numbers in [0, 1]" in page and "scores.jsonl:2: not JSON" in page


def test_a_damaged_summaries_cache_or_descriptor_is_rebuilt_not_trusted(capsys, experiment):
    args = ("summarize-experiment", "--experiment-root", str(experiment), "--no-plots")
    assert main(capsys, *args)[0] == 0
    descriptor = experiment / "arith" / "sas" / "t0" / "descriptor.json"
    expected = descriptor.read_bytes()
    descriptor.write_text("[]")  # the task's run files are unchanged: the cache would vouch for this file
    code, _, err = main(capsys, *args)
    assert code == 0 and descriptor.read_bytes() == expected, err[-3000:]
    cache = next(experiment.glob(".summary*"))
    state = json.loads(cache.read_text())
    state["tasks"] = {key: [] for key in state["tasks"]}
    cache.write_text(json.dumps(state))
    code, _, err = main(capsys, *args)
    assert code == 0 and descriptor.read_bytes() == expected, err[-3000:]
    cache.write_text(DEEP)
    code, _, err = main(capsys, *args)
    assert code == 0 and descriptor.read_bytes() == expected, err[-3000:]


# ---------------------------------------------------------------- score files and calibrations


def score_line(i: int) -> str:
    return json.dumps({"id": f"c{i}", "n_steps": 4, "step_scores": [0.1, 0.6, 0.2, 0.1], "mistake_step": i % 4})


@pytest.fixture
def calibration(capsys, tmp_path) -> Path:
    scores, cal = tmp_path / "cal_scores.jsonl", tmp_path / "calibration.json"
    scores.write_text("".join(score_line(i) + "\n" for i in range(20)))
    code, _, err = main(capsys, "calibrate", "--scores", str(scores), "--method", "rf", "--alpha", "0.2",
                        "--out", str(cal))
    assert code == 0, err[-3000:]
    return cal


def test_predict_set_refuses_a_deeply_nested_score_line_naming_file_and_line(capsys, tmp_path, calibration):
    scores = tmp_path / "new.jsonl"
    scores.write_text(score_line(0) + "\n" + DEEP + "\n")
    code, _, err = main(capsys, "predict-set", "--calibration", str(calibration), "--scores", str(scores))
    assert code == 2 and "new.jsonl line 2: not valid JSON" in err, err[-2000:]


def test_predict_set_refuses_a_deeply_nested_calibration_naming_it(capsys, tmp_path):
    cal, scores = tmp_path / "calibration.json", tmp_path / "new.jsonl"
    cal.write_text(DEEP)
    scores.write_text(score_line(0) + "\n")
    code, _, err = main(capsys, "predict-set", "--calibration", str(cal), "--scores", str(scores))
    assert code == 2 and "calibration.json: not a readable JSON calibration file" in err, err[-2000:]


# ---------------------------------------------------------------- Who&When


def who_and_when(mistake_step: object) -> dict:
    return {"question": "2+2?", "ground_truth": "4", "mistake_agent": "B", "mistake_step": mistake_step,
            "history": [{"name": "A", "role": "user", "content": "2+2?"},
                        {"name": "B", "role": "assistant", "content": "5"}]}


@pytest.fixture
def who_and_when_dir(tmp_path) -> Path:
    d = tmp_path / "ww" / "algorithm_generated"
    d.mkdir(parents=True)
    (d / "1.json").write_text(json.dumps(who_and_when("1")))
    (d / "2.json").write_text(json.dumps(who_and_when("²")))
    (d / "3.json").write_text(DEEP)
    (d / "².json").write_text(json.dumps(who_and_when("0")))
    return d.parent


def test_who_and_when_skips_bad_records_naming_file_and_field_and_keeps_the_rest(who_and_when_dir):
    loaded = load_who_and_when_dir(who_and_when_dir)
    assert sorted(t.id for t in loaded.trajectories) == ["algorithm_generated/1", "algorithm_generated/²"]
    reasons = {Path(s.path).name: s.reason for s in loaded.skipped}
    assert set(reasons) == {"2.json", "3.json"}
    assert "field 'mistake_step'" in reasons["2.json"] and "nested deeper than 200" in reasons["3.json"]


def test_attribute_runs_on_the_good_who_and_when_records(capsys, who_and_when_dir, tmp_path):
    code, _, err = main(capsys, "attribute", "--data-dir", str(who_and_when_dir), "--method", "random",
                        "--out", str(tmp_path / "out"))
    assert code == 0, err[-3000:]
    assert len((tmp_path / "out" / "predictions.jsonl").read_text().splitlines()) == 2
    assert "2.json" in err and "3.json" in err  # the skipped files are named


# ---------------------------------------------------------------- configs


def test_a_config_nested_too_deeply_is_refused_in_one_line(capsys, tmp_path):
    cfg = tmp_path / "deep.toml"
    cfg.write_text("concurrency = " + "[" * 5000 + "]" * 5000 + "\n")
    code, _, err = main(capsys, "run", "--config", str(cfg), "--benchmark", "arith", "--output-root",
                        str(tmp_path / "out"))
    assert code == 2 and "deep.toml: malformed TOML: arrays or inline tables nested too deeply" in err, err[-2000:]


# ---------------------------------------------------------------- this project's failed runs


def test_a_failed_run_whose_answer_is_not_utf8_still_loads_for_attribution(tmp_path):
    task = tmp_path / "e" / "arith" / "sas" / "t0"
    write_run(task, 0, [ev("solver", "plan", content="6*7=41", step_index=0)], success=False)
    (task / "run_0.metadata.json").write_text(json.dumps(metadata_record(task, 0)))
    (task / "run_0.result.json").write_text(json.dumps(result_record(task, 0, success=False)))
    (task / "run_0.answer.txt").write_bytes(b"4\xff\xfe1")
    loaded = load_runs_dir(tmp_path / "e")
    assert not loaded.skipped and loaded.trajectories[0].final_answer == "4\ufffd\ufffd1"
