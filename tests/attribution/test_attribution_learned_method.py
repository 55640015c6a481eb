"""``attribute --method learned``: a full method (agent head, step head), trained on train_dir, cross-fitted."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import main
from attribution.methods import METHODS
from attribution.methods import learned as learned_mod
from attribution.scorers.crossfit import group_key
from tests.attribution.test_attribution_data import write_wnw


def synthetic_record(rng: random.Random, i: int) -> dict:
    """An expert chat where the responsible expert 'assumes' a value and the terminal then fails."""
    n = rng.randint(6, 12)
    err = rng.randrange(1, n - 1)
    agents = ["Planner_Expert", "Data_Expert", "Computer_terminal"]
    history = []
    for k in range(n):
        name = agents[k % 3]
        text = "exitcode: 0\nCode output: 12" if name == "Computer_terminal" else f"Working on part {k}."
        if k == err:
            name = "Data_Expert"
            text = "I will assume the data is approximately the example placeholder and guess the value."
        if k == err + 1:
            name, text = "Computer_terminal", "exitcode: 1 (execution failed)\nTraceback (most recent call last): KeyError"
        history.append({"content": text, "name": name, "role": "user"})
    return {"question": f"question {i}", "ground_truth": "1", "mistake_agent": "Data_Expert",
            "mistake_step": str(err), "history": history}


def write_corpus(root: Path, k: int, seed: int) -> Path:
    rng = random.Random(seed)
    for i in range(k):
        write_wnw(root, "algorithm_generated", str(i), synthetic_record(rng, i))
    return root


def test_learned_is_a_registered_method_that_needs_a_train_dir(tmp_path: Path, capsys) -> None:
    assert "learned" in METHODS
    data = write_corpus(tmp_path / "data", 4, seed=0)
    argv = ["attribute", "--data-dir", str(data), "--method", "learned", "--out", str(tmp_path / "out")]
    assert main.main(argv) == 2
    assert "--method-option train_dir=DIR" in capsys.readouterr().err
    assert not (tmp_path / "out" / "predictions.jsonl").exists()
    assert main.main([*argv, "--method-option", "agent_head=sometimes"]) == 2
    assert "agent_head: expected unorchestrated, always or never" in capsys.readouterr().err


@pytest.mark.slow
def test_learned_predicts_agent_and_step_on_records_it_was_not_trained_on(tmp_path: Path) -> None:
    train = write_corpus(tmp_path / "train", 24, seed=1)
    data = write_corpus(tmp_path / "data", 8, seed=2)
    # other questions than the training set's, so one model fitted on all of train_dir predicts them
    for p in (data / "algorithm_generated").glob("*.json"):
        rec = json.loads(p.read_text())
        p.write_text(json.dumps({**rec, "question": "held out " + rec["question"]}))
    out = tmp_path / "out"
    assert main.main(["attribute", "--data-dir", str(data), "--method", "learned", "--out", str(out),
                      "--method-option", f"train_dir={train}"]) == 0
    res = json.loads((out / "results.json").read_text())
    m = res["metrics"]["algorithm_generated"]
    assert m["n"] == 8 and m["agent_accuracy"] >= 0.75 and m["step_accuracy"] >= 0.75
    assert res["method_settings"]["train_dir"] == str(train.resolve())
    lines = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert {x["details"]["fold"] for x in lines} == {None}  # the full model: no target question was trained on
    assert all(0.0 < x["confidence"] <= 1.0 and x["tokens"] == 0 for x in lines)
    assert sum(x["details"]["fit_seconds"] > 0 for x in lines) == 1  # fitted once, for the first case


@pytest.mark.slow
def test_learned_never_predicts_a_record_with_a_model_that_saw_its_question(tmp_path: Path, monkeypatch) -> None:
    data = write_corpus(tmp_path / "data", 12, seed=3)
    seen: list[set[str]] = []
    real_fit = learned_mod.fit_learned

    def spy(train, **kw):
        seen.append({group_key(t) for t in train})
        model = real_fit(train, **kw)
        real_predict = model.predict

        class Spied:
            def predict(self, t, head):
                assert group_key(t) not in seen_by[id(self)]
                return real_predict(t, head)

        s = Spied()
        seen_by[id(s)] = seen[-1]
        return s

    seen_by: dict[int, set[str]] = {}
    monkeypatch.setattr(learned_mod, "fit_learned", spy)
    out = tmp_path / "out"
    assert main.main(["attribute", "--data-dir", str(data), "--method", "learned", "--out", str(out),
                      "--method-option", f"train_dir={data}", "--method-option", "folds=3"]) == 0
    lines = [json.loads(x) for x in (out / "predictions.jsonl").read_text().splitlines()]
    assert all(x["error"] is None for x in lines) and len(lines) == 12
    assert len(seen) == 3 and {x["details"]["fold"] for x in lines} == {0, 1, 2}


def test_a_near_copy_of_a_question_shares_its_fold_and_cannot_train_the_model_that_scores_it(tmp_path: Path) -> None:
    from attribution.sources.loaders import load_who_and_when_dir

    rng = random.Random(5)
    for i in range(6):
        rec = synthetic_record(rng, i)
        # the same question again, made to look new: by an invisible character or punctuation (records without a
        # question id), or by added text under the same question id (one GAIA question in Who&When's two subsets)
        if i % 3 == 2:
            rec, copy = {**rec, "question_ID": f"q{i}"}, {**rec, "question_ID": f"q{i}", "question": rec["question"] +
                                                          " plus its code"}
        else:
            copy = {**rec, "question": rec["question"] + ("\u200b", " ?!")[i % 3]}
        write_wnw(tmp_path, "algorithm_generated", str(i), rec)
        write_wnw(tmp_path, "hand_crafted", str(i), copy)
    trajs = {t.id: t for t in load_who_and_when_dir(tmp_path).trajectories}
    for i in range(6):
        assert group_key(trajs[f"algorithm_generated/{i}"]) == group_key(trajs[f"hand_crafted/{i}"]), i
    assert len({group_key(t) for t in trajs.values()}) == 6
