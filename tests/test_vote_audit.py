"""The final-vote audit: does a judge model choose by content or by position, and is it right when it matters."""

from __future__ import annotations

import json
import random

import pytest

from descriptor.events import FinalVote
from descriptor.stats import poisson_binomial_test
from descriptor.vote_audit import VOTE_AUDIT_FILE, VoteDigest, VoteRow, audit_votes, audit_warnings, vote_digest
from mas.tracing import ListCollector, Tracer


def vote_events(*, winner=0, candidates=("a", "b"), answer_groups=((0,), (1,)), groups=(("a",), ("b",)),
                shown=None, source="llm_judge", judged=True):
    sink = ListCollector()
    Tracer("t", [sink]).emit("system:judge", "verify", FinalVote(
        vote_source=source, winner_index=winner, winner_agent="a", groups=[list(g) for g in groups],
        candidates=list(candidates), answer_groups=[list(g) for g in answer_groups], shown_order=shown),
        model="m" if judged else None, token_in=10 if judged else 0)
    return sink.events


def test_the_digest_reads_the_last_vote_with_both_groupings_as_candidate_indices():
    d = vote_digest(vote_events(winner=1, shown=[1, 0], groups=(("a", "b"),)))
    assert d == VoteDigest(source="llm_judge", judged=True, n=2, winner=1, first=1, answer_groups=[[0], [1]],
                           groups=[[0, 1]])
    assert vote_digest([]) is None
    assert vote_digest(vote_events(candidates=())) is None  # a trace from before votes recorded their candidates
    assert vote_digest(vote_events(winner=1, candidates=("a",), answer_groups=((0,),))) is None  # an edited trace


def row(winner, first, right=None, *, n=2, answers=2, success=None, merged=False):
    """A judged run's audit row: ``answers`` distinct answers (1: all agree), the judge's ``merged`` grouping."""
    answer_groups = [list(range(n))] if answers == 1 else [[i] for i in range(n)]
    vote = VoteDigest(source="llm_judge", judged=True, n=n, winner=winner, first=first, answer_groups=answer_groups,
                      groups=[list(range(n))] if merged else [[i] for i in range(n)])
    ok = right[winner] if right is not None else bool(success)
    return VoteRow(benchmark="arith", system="debate", success=ok, vote=vote, candidate_success=right)


def test_a_judge_that_always_takes_the_first_candidate_is_reported():
    rng = random.Random(0)
    rows = []
    for _ in range(20):
        first = rng.randrange(2)
        right = [rng.random() < 0.5 for _ in range(2)]
        rows.append(row(first, first, right))
    [a] = audit_votes(rows)
    assert a["contested"] == 20 and a["first"]["k"] == 20 and a["first_p"] < 1e-5
    assert "shown first won 20 of 20" in a["warning"]
    [a] = audit_votes([row(1 - r.vote.first, r.vote.first, r.candidate_success) for r in rows])
    assert a["first"]["k"] == 0 and "shown first won 0 of 20" in a["warning"]  # always the other one: as biased


def test_a_judge_that_reads_the_answers_is_not_reported_and_its_accuracy_is_counted():
    rng = random.Random(1)
    rows = []
    for _ in range(30):
        first = rng.randrange(2)
        right = [True, False] if rng.random() < 0.5 else [False, True]
        rows.append(row(right.index(True), first, right))  # always picks the right one, wherever it stands
    rows.append(row(0, 0, [False, False]))  # both wrong: a failure no vote could mend, not a split vote
    rows.append(row(0, 1, [True, True], answers=1))  # agreed: not contested
    [a] = audit_votes(rows)
    assert a["warning"] is None
    assert a["contested"] == 31 and (a["split"]["k"], a["split"]["n"]) == (30, 30)
    assert a["split_chance"] == 0.5 and a["split_p"] < 1e-6 and a["outvoted"] == 0


def test_a_judge_no_better_than_chance_on_split_votes_is_reported_and_outvoted_runs_counted():
    rows = [row(i % 2, (i // 2) % 2, [True, False] if i % 4 < 2 else [False, True]) for i in range(16)]
    [a] = audit_votes(rows)
    assert a["split"]["n"] == 16 and a["split"]["k"] == 8 and a["outvoted"] == 8
    assert a["first_p"] > 0.5 and "no better than choosing at random" in a["warning"]


def test_a_judge_that_groups_a_right_and_a_wrong_answer_as_one_is_reported():
    rows = [row(i % 2, (i // 3) % 2, [i % 2 == 0, i % 2 == 1], merged=i < 5) for i in range(10)]
    rows += [row(0, 0, [False, False], merged=True)]  # two wrong answers merged: merged, but not mixed
    [a] = audit_votes(rows)
    assert (a["merged"], a["mixed"]) == (6, 5) and "a right and a wrong answer as one in 5 of 10" in a["warning"]
    rows[0].vote = rows[0].vote.model_copy(update={"groups": [[0], [1]]})
    assert audit_votes(rows)[0]["warning"] is None


def test_lexical_votes_are_audited_apart_and_an_unusable_reply_is_no_evidence_about_the_judge():
    lexical = [row(i % 2, 0, [True, False]) for i in range(8)]
    for r in lexical:
        r.vote = r.vote.model_copy(update={"judged": False, "source": "lexical"})
    fallback = row(0, 0, [True, False])
    fallback.vote = fallback.vote.model_copy(update={"source": "lexical_fallback"})
    judge, lex = audit_votes([*lexical, fallback])
    assert (judge["voter"], judge["votes"], judge["unusable"], judge["contested"]) == ("judge", 1, 1, 0)
    assert (lex["voter"], lex["votes"], lex["contested"], lex["first"], lex["merged"]) == ("lexical", 8, 8, None, None)
    assert (lex["split"]["k"], lex["split"]["n"]) == (4, 8)
    assert "the lexical vote chose a right one in 4 of 8" in lex["warning"]


def test_the_run_command_prints_the_reports_vote_warnings(tmp_path):
    (tmp_path / VOTE_AUDIT_FILE).write_text(json.dumps([{"warning": "arith/debate: it votes by position"},
                                                        {"warning": None}]))
    assert audit_warnings(tmp_path) == ["arith/debate: it votes by position"]
    assert audit_warnings(tmp_path / "missing") == []


@pytest.mark.parametrize(("k", "probs"), [(3, [0.5] * 10), (0, [0.25] * 12), (7, [1 / 3] * 9), (20, [0.5] * 20)])
def test_the_exact_test_equals_scipys_binomial_test_when_every_probability_is_the_same(k, probs):
    from scipy.stats import binomtest

    assert poisson_binomial_test(k, probs) == pytest.approx(binomtest(k, len(probs), probs[0]).pvalue, rel=1e-9)


def test_the_exact_test_with_mixed_probabilities_sums_the_outcomes_no_more_likely():
    # two trials, p = 0.5 and 0.25: P(0) = 0.375, P(1) = 0.5, P(2) = 0.125
    assert poisson_binomial_test(2, [0.5, 0.25]) == pytest.approx(0.125)
    assert poisson_binomial_test(0, [0.5, 0.25]) == pytest.approx(0.5)
    assert poisson_binomial_test(1, [0.5, 0.25]) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        poisson_binomial_test(3, [0.5, 0.25])


def test_each_candidate_of_the_vote_is_judged_by_the_benchmark_where_that_is_a_quick_comparison(monkeypatch):
    from benchmark.registry import get_benchmark
    from mas.config import ExperimentConfig, ModelRoute
    from mas.sweep.runner import candidate_verdicts, run_context

    cfg = ExperimentConfig(models={"default": ModelRoute(provider="scripted", model="scripted")})
    bench = get_benchmark("arith", None)
    task = bench.load_tasks(1, seed=0)[0]
    rt = run_context(cfg, bench, task, seed=0, injection=None)
    right = bench.reference_answer(task)
    state = {"answer": {"answer_artifact": right, "candidates": [right, "-1", right]}}
    assert candidate_verdicts(bench, task, rt, state, None) == [True, False, True]
    assert candidate_verdicts(bench, task, rt, state, "the run failed") is None
    assert candidate_verdicts(bench, task, rt, {"answer": {"answer_artifact": right}}, None) is None  # no vote
    monkeypatch.setattr(bench, "evaluation_blocks", True)  # an evaluation that runs code is not repeated per candidate
    assert candidate_verdicts(bench, task, rt, state, None) is None


def test_a_judged_debate_sweep_writes_the_audit_into_its_report(tmp_path):
    import asyncio

    from descriptor.report import write_report
    from mas.config import ExperimentConfig, ModelRoute
    from mas.sweep.experiment import ExperimentRequest, run_experiment

    cfg = ExperimentConfig(output_root=str(tmp_path), models={"default": ModelRoute(provider="scripted",
                                                                                    model="scripted:judge")})
    req = ExperimentRequest(cfg=cfg, benchmarks=["arith"], systems=["debate"], task_limit=3, runs_per_task=1,
                            experiment_id="e", progress="none")
    asyncio.run(run_experiment(req))
    index = write_report(tmp_path / "e")
    [a] = json.loads((index.parent / VOTE_AUDIT_FILE).read_text())
    assert (a["system"], a["voter"], a["votes"], a["unusable"]) == ("debate", "judge", 3, 0)
    evals = [json.loads(p.read_text()) for p in sorted((tmp_path / "e").rglob("run_0.eval.json"))]
    assert [len(e["candidate_success"]) for e in evals] == [3, 3, 3]
    assert "Final votes: do they choose well?" in index.read_text()
    # a digest whose vote is not one (an edited or foreign file) is no digest: the trace is read instead
    metrics = next((tmp_path / "e").rglob("run_0.trace_metrics.json"))
    record = json.loads(metrics.read_text())
    record["digest"]["vote"] = {"source": "llm_judge", "judged": True, "n": 2, "winner": 7}
    metrics.write_text(json.dumps(record))
    index = write_report(tmp_path / "e")
    assert json.loads((index.parent / VOTE_AUDIT_FILE).read_text()) == [a]
