"""Application systems: a user's LangGraph graph swept, traced, budgeted, cached, labelled and rolled back like a
built-in system (the apps are in ``tests/app_fixtures.py``, written without any import of the project)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attribution.rollback.restart import NOTE_OPENING
from descriptor.events import read_trace
from descriptor.layout import RunPaths
from main import main

APP = "app:tests.app_fixtures:"
TWO_NODE = APP + "two_node"
OWN = APP + "own_models"


def sweep(root: Path, exp: str, systems: str, *args: str, tasks: int = 2) -> Path:
    assert main(["run", "--benchmark", "arith", "--systems", systems, "--task-limit", str(tasks),
                 "--output-root", str(root), "--experiment-id", exp, "--progress", "none", *args]) == 0
    return root / exp


def runs(exp: Path, system: str) -> list[tuple[dict, list]]:
    """(result, trace events) of every run of ``system``."""
    out = []
    for result in sorted((exp / "arith" / system).rglob("run_*.result.json")):
        if ".rollback_" in result.name:
            continue
        out.append((json.loads(result.read_text()), read_trace(result.with_name(
            result.name.replace(".result.json", ".trace.jsonl")))))
    assert out, f"no runs of {system}"
    return out


def test_the_doctests_hold():
    import doctest

    import mas.apps.handler
    import mas.apps.topology

    for module in (mas.apps.handler, mas.apps.topology):
        result = doctest.testmod(module)
        assert result.attempted and not result.failed, module.__name__


def model_events(events: list) -> list:
    return [e for e in events if e.token_in or e.token_out]


@pytest.fixture(scope="module")
def with_sas(tmp_path_factory):
    """The two-node app (scripted, through its ``model`` argument) and ``sas`` on two arith tasks."""
    return sweep(tmp_path_factory.mktemp("apps"), "e", f"{TWO_NODE},sas", "--model", "scripted")


def test_a_two_node_app_is_traced_like_a_built_in_system_and_compared_with_sas(with_sas):
    for result, events in runs(with_sas, TWO_NODE):
        assert result["status"] == "finished" and result["success"] and result["completion"], result
        calls = model_events(events)
        assert [e.actor for e in calls] == ["planner", "solver"]  # the LangGraph nodes are the agents
        assert all(e.token_in > 0 and e.token_out > 0 and e.latency_ms > 0 for e in calls)
        assert all(e.model == "scripted" and e.route == "default" and e.usage_source == "provider" for e in calls)
        assert [e.step_index for e in events if e.step_index is not None] == [0, 1]  # one step index per call
        assert all(e.state_id for e in calls) and calls[0].state_id != calls[1].state_id  # each node its checkpoint
        assert all(e.event_type == "act" and e.payload.role == e.actor for e in calls)
        final = events[-1]
        assert (final.actor, final.event_type, final.payload.source_agent) == ("system:app", "finalize", "solver")
        assert final.payload.answer_artifact == result["answer"]
        assert result["tokens_total"] == sum(e.token_in + e.token_out for e in events)
        task_dir = with_sas / "arith" / TWO_NODE / result["task_id"]
        assert (task_dir / "run_0.trajectory.md").is_file() and (task_dir / "descriptor.json").is_file()
    rollups = {r["system"]: r for r in json.loads((with_sas / "experiment_summary.json").read_text())["rollups"]}
    assert set(rollups) == {TWO_NODE, "sas"} and rollups[TWO_NODE]["n_runs"] == 2
    (row,) = json.loads((with_sas / "economics.json").read_text())["rows"]
    assert (row["system"], row["baseline"], row["n_shared_tasks"]) == (TWO_NODE, "sas", 2)
    assert (with_sas / "arith" / TWO_NODE / "mas_graph.mmd").read_text().count("planner -.-> solver") == 1
    assert (with_sas / "report" / "index.html").is_file()


def test_an_app_with_its_own_models_is_traced_the_same_way(tmp_path):
    from tests.app_fixtures import CRITIC_REPLY, WRITER_REPLY

    exp = sweep(tmp_path, "own", OWN, "--model", "scripted")
    for result, events in runs(exp, OWN):
        assert result["status"] == "finished" and result["answer"] == CRITIC_REPLY and result["completion"]
        writer, critic = model_events(events)
        assert (writer.actor, critic.actor) == ("writer", "critic")
        assert writer.payload.content == WRITER_REPLY and critic.payload.content == CRITIC_REPLY
        assert writer.usage_source == "estimate" and writer.token_in > 0 and writer.token_out > 0
        assert (critic.usage_source, critic.token_in, critic.token_out) == ("provider", 31, 7)
        assert all(e.model == "fake-messages-list-chat-model" and e.route is None and e.cost_usd == 0.0
                   for e in (writer, critic))
        assert writer.state_id and critic.state_id and [writer.step_index, critic.step_index] == [0, 1]
        assert writer.latency_ms > 0


@pytest.mark.parametrize("variant", ["scripted", "scripted:text-tools"])
def test_tool_calls_and_their_results_are_traced_whichever_way_the_model_writes_them(tmp_path, variant):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[models.default]\nprovider = "scripted"\nmodel = "{variant}"\n')
    exp = sweep(tmp_path, "t", APP + "tool_loop", "--config", str(cfg), tasks=1)
    ((result, events),) = runs(exp, APP + "tool_loop")
    assert result["success"], result
    calls = [e for e in events if e.event_type == "tool_call"]
    results = [e for e in events if e.event_type == "tool_result"]
    assert calls and len(calls) == len(results)
    protocol = "text" if variant.endswith("text-tools") else "native"
    for call, res in zip(calls, results, strict=True):
        assert call.actor == res.actor == "solver" and call.payload.tool == res.payload.tool == "calculator"
        assert res.payload.tool_call_id == call.payload.tool_call_id and res.payload.ok
        assert call.payload.tool_protocol == res.payload.tool_protocol == protocol
        assert call.step_index is not None and res.step_index is None
    assert [e.step_index for e in events if e.step_index is not None] == list(range(len(calls) + 1))


def test_conventions_are_overridden_in_the_config(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[models.default]\nprovider = "scripted"\nmodel = "scripted"\n[systems.keyed]\n'
                   'graph = "tests.app_fixtures:keyed"\ninput_key = "question"\nanswer_key = "final"\n')
    exp = sweep(tmp_path, "k", "keyed", "--config", str(cfg), tasks=1)
    ((result, events),) = runs(exp, "keyed")
    assert result["success"] and result["answer"] != "0", result  # read from `final`, not the last AI message
    assert [e.actor for e in model_events(events)] == ["answerer"]
    assert events[-1].payload.selection == "state key final"


def test_a_budget_stops_the_apps_run_at_the_limit(tmp_path):
    exp = sweep(tmp_path, "b", f"{TWO_NODE},{OWN}", "--model", "scripted", "--set", "limits.model_calls=1", tasks=1)
    for system in (TWO_NODE, OWN):
        ((result, events),) = runs(exp, system)
        assert result["status"] == "finished" and result["limit"] == "model_calls", result
        assert not result["completion"] and not result["success"]
        assert len(model_events(events)) == 1  # the second call was refused before it was made
        assert events[-1].event_type == "error" and events[-1].payload.kind == "limit"


def test_the_response_cache_serves_the_route_models_calls(tmp_path):
    args = ("--model", "scripted", "--cache", "readwrite", "--set", f'cache.path="{tmp_path / "cache.sqlite"}"')
    first = sweep(tmp_path, "c1", TWO_NODE, *args, tasks=1)
    second = sweep(tmp_path, "c2", TWO_NODE, *args, tasks=1)
    ((_, before),) = runs(first, TWO_NODE)
    ((result, after),) = runs(second, TWO_NODE)
    assert not any(e.cache_hit for e in before)
    hits = model_events(after)
    assert len(hits) == 2 and all(e.cache_hit and e.cost_usd == 0.0 for e in hits) and result["success"]
    assert [e.token_in for e in hits] == [e.token_in for e in model_events(before)]


def test_a_graph_that_raises_inside_a_run_is_the_systems_failure(tmp_path, capsys):
    exp = sweep(tmp_path, "r", APP + "raises", "--model", "scripted", tasks=1)
    ((result, events),) = runs(exp, APP + "raises")
    assert result["status"] == "finished" and not result["success"] and not result["completion"]
    assert result["error"] == "ValueError: the app's own bug"
    assert events[-1].payload.kind == "system_failure"
    assert "ended in an error of the system's own" in capsys.readouterr().err


@pytest.mark.parametrize(("system", "expected"), [
    (APP + "x", "tests.app_fixtures' has no 'x'; expected a LangGraph StateGraph or compiled graph"),
    ("app:tests.no_such_module:build", "module 'tests.no_such_module' could not be imported"),
    (APP + "not_a_graph", "the factory returned a dict; expected a LangGraph StateGraph or compiled graph"),
    (APP + "no_messages", "the graph's input has no key 'messages' for the task"),
    ("app:tests.app_fixtures", "expected app:MODULE:FACTORY"),
])
def test_an_app_that_cannot_be_run_is_refused_before_any_run(tmp_path, capsys, system, expected):
    assert main(["run", "--benchmark", "arith", "--systems", f"sas,{system}", "--model", "scripted",
                 "--output-root", str(tmp_path), "--experiment-id", "x", "--progress", "none"]) == 2
    err = capsys.readouterr().err
    assert expected in err and system.split(":")[1] in err
    assert not (tmp_path / "x").exists()  # nothing half-written


def test_a_state_without_the_answer_key_and_other_misconfigurations_are_refused(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[systems.plain]\ngraph = "tests.app_fixtures:no_messages"\ninput_key = "question"\n')
    assert main(["run", "--config", str(cfg), "--benchmark", "arith", "--systems", "plain", "--model", "scripted",
                 "--output-root", str(tmp_path), "--progress", "none"]) == 2
    err = capsys.readouterr().err
    assert "systems.plain.graph = 'tests.app_fixtures:no_messages'" in err
    assert "the graph's final state has no key 'messages' to read the answer from" in err
    assert main(["run", "--benchmark", "arith", "--systems", TWO_NODE, "--model", "scripted", "--set",
                 'mas.persona_mode="generated"', "--output-root", str(tmp_path), "--progress", "none"]) == 2
    assert "would never read them" in capsys.readouterr().err
    cfg.write_text('[systems.sas]\ngraph = "tests.app_fixtures:two_node"\n')
    assert main(["run", "--config", str(cfg), "--benchmark", "arith", "--systems", "sas", "--model", "scripted",
                 "--output-root", str(tmp_path), "--progress", "none"]) == 2
    assert "'sas' is a built-in system" in capsys.readouterr().err


def test_an_installed_packages_entry_point_may_name_a_graph_factory(tmp_path, monkeypatch):
    from descriptor.registry import Registry, RegistryError
    from mas.apps.spec import installed_system
    from mas.apps.topology import AppTopology

    info = tmp_path / "myapp-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: myapp\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[mas_econ.test_app_systems]\nmine = tests.app_fixtures:two_node\n"
                                           "[mas_econ.test_bad_app_systems]\nbad = tests.app_fixtures:not_a_graph\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = Registry("system", "mas_econ.test_app_systems", adapt=installed_system)
    app = reg.get("mine")
    assert isinstance(app, AppTopology) and app.role_names() == ("planner", "solver")
    with pytest.raises(RegistryError, match=r"system plugin myapp:tests.app_fixtures:not_a_graph .* is not usable: "
                                            r".*the factory returned a dict"):
        Registry("system", "mas_econ.test_bad_app_systems", adapt=installed_system).names()


def test_spans_of_an_apps_runs_reach_an_otlp_receiver(tmp_path, monkeypatch):
    import dataclasses

    from mas.otel.receiver import OtlpReceiver
    from tests.otel_helpers import by_trace, chat_token_sums, check_tree, jsonl_tokens, runs_of, scripted_sweep

    with OtlpReceiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.base_url)
        exp = scripted_sweep(tmp_path, systems=[TWO_NODE, OWN], tasks=1)
        spans = [dataclasses.asdict(s) for s in rx.spans]
    traces = by_trace(spans)
    for trace, meta in runs_of(exp):
        got = traces[meta["otel_trace_id"]]
        check_tree(got)
        assert chat_token_sums(got) == jsonl_tokens(trace) != (0, 0)
        agents = {s["attributes"].get("gen_ai.agent.name") for s in got if s["name"].startswith("chat ")}
        assert agents == ({"planner", "solver"} if meta["system"] == TWO_NODE else {"writer", "critic"})


@pytest.fixture(scope="module")
def injected(tmp_path_factory):
    """The two-node app on three arith tasks, each run's solver step made wrong by the scripted double (its
    messages kept in the trace: record_inputs)."""
    return sweep(tmp_path_factory.mktemp("apps_failed"), "f", TWO_NODE, "--model", "scripted",
                 "--inject-errors", "1.0", "--set", "inject.step=1", "--set", "tracing.record_inputs=true", tasks=3)


def test_a_failed_run_of_the_app_is_labelled_by_replay_and_rolled_back(injected, tmp_path):
    failed = runs(injected, TWO_NODE)
    assert all(not r["success"] for r, _ in failed)
    out = tmp_path / "labels.jsonl"
    assert main(["label-failures", "--experiment-root", str(injected), "--out", str(out)]) == 0
    labels = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(labels) == 3
    for lab in labels:
        assert lab["status"] == "labelled" and lab["decisive_step"] == lab["injected_step"] == 1
        assert lab["decisive_agent"] == "solver" and lab["flip_probability"] == 1.0

    result, _ = failed[0]
    run = RunPaths(injected / "arith" / TWO_NODE / result["task_id"], 0)
    assert main(["rollback", "--run-dir", str(run.prefix), "--strategy", "oracle"]) == 0
    k = run.rollbacks()[-1]
    record = json.loads(run.for_rollback(k).rollback_record.read_text())
    assert (record["status"], record["success"], record["restart_step"], record["origin"]) == (
        "finished", True, 1, "manual")
    redone = read_trace(run.for_rollback(k).trace)
    (step,) = [e for e in redone if e.step_index is not None]
    assert (step.actor, step.step_index, step.payload.redo) == ("solver", 1, True)
    # the rollback's note reached the resumed solver, as a message in the app's own conversation
    assert any(m.role == "user" and NOTE_OPENING in m.content
               for m in step.payload.input_messages)


def test_failed_runs_of_the_app_are_attributed_and_their_steps_scored(injected, tmp_path):
    out = tmp_path / "attribution"
    assert main(["attribute", "--runs-dir", str(injected), "--method", "all_at_once", "--model", "scripted",
                 "--out", str(out)]) == 0
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 3 and all(p["gold_agent"] == "solver" and p["gold_step"] == 1 for p in predictions)
    assert all(p["predicted_agent"] in ("planner", "solver") for p in predictions)
    scores = tmp_path / "scores.jsonl"
    assert main(["score-steps", "--runs-dir", str(injected), "--scorer", "position", "--out", str(scores)]) == 0
    rows = [json.loads(line) for line in scores.read_text().splitlines()]
    assert len(rows) == 3 and all(r["n_steps"] == 2 and len(r["step_scores"]) == 2 for r in rows)
