"""Inspect AI tasks as benchmarks: a task file's dataset becomes the tasks of any system, and the task's own scorer
judges the final answer (a model-graded one through the grading route), on the scripted model and on a local
OpenAI-compatible endpoint; samples the adapter cannot serve are refused with a count."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from benchmark.registry import get_benchmark, spec_benchmark
from descriptor.errors import UserError
from main import main
from tests.fake_endpoint import Reply, answer, completion, prompt_text

pytest.importorskip("inspect_ai")

TINY = '''
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match


@task
def tiny():
    return Task(dataset=[Sample(input="What is 2+2?", target="4", id="two"),
                         Sample(input="What is 3+3?", target="6", id="three"),
                         Sample(input="What is 5+5?", target="10", id="five")],
                scorer=match())
'''

GRADED = '''
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import choice, model_graded_qa


@task
def graded():
    return Task(dataset=[Sample(input="Which city is the capital of France?", target="Paris", id="paris"),
                         Sample(input="Which city is the capital of Italy?", target="Rome", id="rome")],
                scorer=model_graded_qa())


@task
def quiz():
    return Task(dataset=[Sample(input="Which is a prime?", choices=["4", "7", "9"], target="B", id="prime")],
                scorer=choice())
'''

MIXED = '''
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageUser, ContentImage, ContentText
from inspect_ai.scorer import match


@task
def mixed():
    picture = ChatMessageUser(content=[ContentText(text="What is shown?"), ContentImage(image="data:image/png;base64,AA==")])
    return Task(dataset=[Sample(input="What is 1+1?", target="2", id="ok"),
                         Sample(input="Read the file.", target="x", id="file", files={"a.txt": "hello"}),
                         Sample(input=[picture], target="cat", id="pic")],
                scorer=match())
'''

KEY_VAR = "MAS_TEST_INSPECT_KEY"
RIGHT = {"2+2": "4", "3+3": "6", "5+5": "11"}  # the endpoint's answers: two right, one wrong


def task_file(tmp_path: Path, source: str, name: str = "tasks.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def endpoint_config(tmp_path: Path, base_url: str, extra: str = "") -> Path:
    path = tmp_path / "cfg.toml"
    path.write_text(f'concurrency = 2\n[models.default]\nprovider = "openai"\nmodel = "gpt-4o-mini"\n'
                    f'base_url = "{base_url}"\napi_key_env = "{KEY_VAR}"\n[mas]\nagents = 2\nmax_rounds = 1\n'
                    f'builtin_tools = false\n{extra}')
    return path


def run(tmp_path: Path, benchmark: str, *extra: str, systems: str = "sas,debate", exp: str = "e") -> int:
    return main(["run", "--benchmark", benchmark, "--systems", systems, "--task-limit", "3", "--output-root",
                 str(tmp_path / "out"), "--experiment-id", exp, "--progress", "none", *extra])


def evals(root: Path) -> dict[tuple[str, str], dict]:
    return {(p.parent.parent.name, p.parent.name): json.loads(p.read_text())
            for p in sorted(root.rglob("run_0.eval.json"))}


def test_a_task_file_runs_under_sas_and_debate_on_the_scripted_model(tmp_path, capsys):
    path = task_file(tmp_path, TINY)
    assert run(tmp_path, f"inspect:{path}@tiny", "--model", "scripted") == 0
    assert "wrote 6 runs" in capsys.readouterr().out
    root = tmp_path / "out" / "e"
    got = evals(root)
    assert sorted(got) == [(s, t) for s in ("debate", "sas") for t in ("five", "three", "two")]
    for ev in got.values():  # the double answers without knowing the task: match() says incorrect, and why
        assert ev["details"]["scorer"] == "inspect_ai/match" and ev["details"]["value"] == "I"
        assert ev["details"]["explanation"] is not None and ev["success"] is False
    meta = json.loads(next(root.rglob("run_0.metadata.json")).read_text())
    assert meta["benchmark"] == "inspect-tiny" and meta["task"]["reference"] in ("4", "6", "10")
    config = json.loads(next((root / "configs").glob("*.json")).read_text())
    assert config["benchmarks"]["inspect-tiny"] == {"adapter": "inspect", "task": f"{path}@tiny"}


def test_on_an_endpoint_the_tasks_own_scorer_decides(tmp_path, endpoint, monkeypatch):
    monkeypatch.setenv(KEY_VAR, "k")

    def reply(n: int, request: dict) -> Reply:
        prompt = prompt_text(request)
        return answer(next((a for q, a in RIGHT.items() if q in prompt), "no idea"), n)

    server = endpoint(reply)
    path = task_file(tmp_path, TINY)
    assert run(tmp_path, f"inspect:{path}@tiny", "--config", str(endpoint_config(tmp_path, server.base_url))) == 0
    got = evals(tmp_path / "out" / "e")
    for system in ("sas", "debate"):
        assert [(t, got[(system, t)]["success"]) for t in ("two", "three", "five")] == [
            ("two", True), ("three", True), ("five", False)]
        assert got[(system, "five")]["details"]["scores"][0]["answer"] == "11"
    results = [json.loads(p.read_text()) for p in (tmp_path / "out" / "e").rglob("run_0.result.json")]
    assert all(r["cost_total_usd"] > 0 for r in results)  # gpt-4o-mini: priced from the table


def test_a_model_graded_scorer_calls_the_judge_route_and_records_it(tmp_path, endpoint, monkeypatch):
    """``model_graded_qa()`` grades through the route the experiment's judge resolves to (here a [models.judge] on
    the same endpoint); the grading calls' tokens and cost are the evaluation's, its explanation is in eval.json."""
    monkeypatch.setenv(KEY_VAR, "k")
    graded = []

    def reply(n: int, request: dict) -> Reply:
        prompt = prompt_text(request)
        if "[BEGIN DATA]" in prompt:  # Inspect's grading template
            graded.append(request["model"])
            right = "[Submission]: Paris" in prompt
            return completion(f"The submission {'matches' if right else 'differs'}.\nGRADE: {'C' if right else 'I'}", n)
        return answer("Paris" if "France" in prompt else "Milan", n)

    server = endpoint(reply)
    judge = (f'[models.judge]\nprovider = "openai"\nmodel = "judge-model"\nbase_url = "{server.base_url}"\n'
             f'api_key_env = "{KEY_VAR}"\nprice_input_per_1m = 1.0\nprice_output_per_1m = 1.0\n')
    cfg = endpoint_config(tmp_path, server.base_url, judge)
    path = task_file(tmp_path, GRADED)
    assert run(tmp_path, f"inspect:{path}@graded", "--config", str(cfg), systems="sas") == 0
    got = evals(tmp_path / "out" / "e")
    assert (got[("sas", "paris")]["success"], got[("sas", "rome")]["success"]) == (True, False)
    details = got[("sas", "paris")]["details"]
    assert details["scorer"].endswith("model_graded_qa") and "GRADE: C" in details["explanation"]
    assert details["judge_tokens"] == 16 and details["judge_cost_usd"] == pytest.approx(16 / 1e6)
    assert details["judge_model"].endswith("judge-model") and graded == ["judge-model", "judge-model"]


def test_choices_are_shown_with_inspects_template_and_marked_from_the_answer(tmp_path, endpoint, monkeypatch):
    monkeypatch.setenv(KEY_VAR, "k")
    prompts = []

    def reply(n: int, request: dict) -> Reply:
        prompts.append(prompt_text(request))
        return answer("B", n)

    server = endpoint(reply)
    path = task_file(tmp_path, GRADED)
    cfg = endpoint_config(tmp_path, server.base_url)
    assert run(tmp_path, f"inspect:{path}@quiz", "--config", str(cfg), systems="sas") == 0
    [ev] = evals(tmp_path / "out" / "e").values()
    assert ev["success"] is True and ev["details"]["scorer"] == "inspect_ai/choice"
    assert any("ANSWER: $LETTER" in p and "A) 4\nB) 7\nC) 9" in p for p in prompts)


def test_samples_the_adapter_cannot_serve_are_refused_with_a_count(tmp_path, capsys):
    path = task_file(tmp_path, MIXED)
    assert run(tmp_path, f"inspect:{path}@mixed", "--model", "scripted") == 2
    err = capsys.readouterr().err
    assert "2 of 3 samples cannot be served here" in err and "1 need files" in err
    assert "1 need images, audio, video or documents" in err and 'unsupported = "skip"' in err
    assert not (tmp_path / "out" / "e").exists()
    assert run(tmp_path, f"inspect:{path}@mixed", "--model", "scripted", "--set",
               'benchmarks.inspect-mixed.unsupported="skip"') == 0
    captured = capsys.readouterr()
    assert "2 of 3 samples cannot be served here" in captured.err and "1 samples run" in captured.err
    assert "wrote 2 runs" in captured.out  # the one servable sample, under both systems


def test_an_installed_tasks_registry_name_is_a_benchmark_too(tmp_path, monkeypatch, capsys):
    """A task registered with Inspect by an imported module (an installed package's, here a plugin's) is named by
    its registry name, as ``inspect eval`` takes it."""
    task_file(tmp_path, TINY.replace("def tiny", "def tiny_registered"), "my_inspect_tasks.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("descriptor.registry._PLUGINS", [])  # later sweeps' workers must not import it
    assert main(["--plugin", "my_inspect_tasks", "benchmark-check", "--benchmark", "inspect:tiny_registered"]) == 0
    assert "inspect:tiny_registered: oracle solved 3/3, empty solved 0/3" in capsys.readouterr().out


def test_names_and_bad_specs():
    assert spec_benchmark("inspect:inspect_evals/gsm8k") == ("inspect-gsm8k", {"adapter": "inspect",
                                                                                "task": "inspect_evals/gsm8k"})
    name, options = spec_benchmark("inspect:some/dir/tasks.py@my_task")
    assert name == "inspect-my_task" and Path(options["task"].split("@")[0]).is_absolute()
    with pytest.raises(UserError, match=r"expected inspect:FILE\.py@TASK"):
        spec_benchmark("inspect:tasks.py")
    with pytest.raises(UserError, match="no such file"):
        get_benchmark("inspect-x", {"adapter": "inspect", "task": "/nowhere/tasks.py@x"}).load_tasks(1)
    with pytest.raises(UserError, match="a built-in benchmark's name"):
        get_benchmark("gsm8k", {"adapter": "inspect", "task": "x.py@y"})


SCALED = '''
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import get_model
from inspect_ai.scorer import model_graded_qa


@task
def essay(judge_model: str = "openai/gpt-4o"):
    grader = model_graded_qa(template="Rate: {answer} {criterion} score", grade_pattern=r'"score"\\s*:\\s*(10|[1-9])',
                             model=get_model(judge_model))
    return Task(dataset=[Sample(input="Write a haiku.", target="a haiku", id="good"),
                         Sample(input="Write a limerick.", target="a limerick", id="weak")], scorer=grader)
'''


def test_a_judge_model_task_argument_and_a_scale_of_its_own(tmp_path, endpoint, monkeypatch):
    """A task that builds its judge from an argument (WritingBench's ``judge_model``) grades through the grading
    route when given ``mas_econ/judge``; its 1-10 scores become success at ``success_at`` and a score in [0, 1]."""
    monkeypatch.setenv(KEY_VAR, "k")

    def reply(n: int, request: dict) -> Reply:
        prompt = prompt_text(request)
        if prompt.startswith("Rate:"):
            return completion('{"score": 9}' if "haiku" in prompt else '{"score": 5}', n)
        return answer("a haiku" if "haiku" in prompt else "a limerick", n)

    server = endpoint(reply)
    options = ('[benchmarks.inspect-essay]\ntask_args = { judge_model = "mas_econ/judge" }\nvalue_range = [1, 10]\n'
               'success_at = 8\n')
    cfg = endpoint_config(tmp_path, server.base_url, options)
    path = task_file(tmp_path, SCALED)
    assert run(tmp_path, f"inspect:{path}@essay", "--config", str(cfg), systems="sas") == 0
    got = {t: ev for (_, t), ev in evals(tmp_path / "out" / "e").items()}
    assert (got["good"]["success"], got["good"]["score"]) == (True, pytest.approx(8 / 9))
    assert (got["weak"]["success"], got["weak"]["score"]) == (False, pytest.approx(4 / 9))
    assert got["weak"]["details"]["value"] == "5" and got["weak"]["details"]["judge_tokens"] == 16  # one call
