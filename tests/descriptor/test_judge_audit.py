"""The judges' audit: does a judge model choose by content or by position, is it right when it matters, and does it
end discussions on agreement the answers do not show."""

from __future__ import annotations

import json
import random

import pytest

from descriptor.events import Decision, Election, FinalVote
from descriptor.stats import poisson_binomial_test
from descriptor.judge_audit import (
    JUDGE_AUDIT_FILE,
    AuditRow,
    ConsensusDigest,
    VoteDigest,
    audit_consensus,
    audit_votes,
    audit_warnings,
    consensus_digest,
    election_digests,
    vote_digest,
)
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


def election_events(*, elected="m1", shown=(1, 0), judged=True, recorded=True):
    sink = ListCollector()
    extra = {"answer_groups": [[0], [1]], "shown_order": list(shown) if judged else None} if recorded else {}
    Tracer("t", [sink]).emit("system:judge", "verify", Election(
        group=0, members=["m0", "m1"], elected=elected, representative="representative_0",
        vote_source="llm_judge" if judged else "lexical", groups=[["m0"], ["m1"]], **extra),
        model="m" if judged else None)
    return sink.events


def test_elections_are_digested_with_their_members_as_candidates():
    [d] = election_digests(election_events())
    assert d == VoteDigest(source="llm_judge", judged=True, n=2, winner=1, first=1, answer_groups=[[0], [1]],
                           groups=[[0], [1]])
    [d, e] = election_digests(election_events() + election_events(elected="m0", judged=False))
    assert (e.judged, e.winner, e.first) == (False, 0, 0)
    assert election_digests(election_events(recorded=False)) == []  # written before elections recorded the order
    assert election_digests(election_events(elected="stranger")) == []  # an edited trace
    assert vote_digest(election_events()) is None  # an election is no final vote


def test_a_judge_that_elects_the_first_member_it_sees_is_reported_apart_from_final_votes():
    rows = []
    for i in range(12):
        first = i % 2
        elections = [VoteDigest(source="llm_judge", judged=True, n=2, winner=first, first=first,
                                answer_groups=[[0], [1]], groups=[[0], [1]])] * 2
        rows.append(AuditRow(benchmark="arith", system="representative_exchange", success=i % 3 == 0, vote=None,
                             elections=elections))
    [a] = audit_votes(rows)
    assert (a["voter"], a["votes"], a["contested"], a["first"]["k"]) == ("election judge", 24, 24, 24)
    assert a["split"]["n"] == 0 and a["outvoted"] is None  # no verdict on a member's answer is kept
    assert a["warning"].startswith("arith/representative_exchange (elections): the judge's choice followed the order")
    assert "--set mas.election_mode=lexical" in a["warning"]


def row(winner, first, right=None, *, n=2, answers=2, success=None, merged=False):
    """A judged run's audit row: ``answers`` distinct answers (1: all agree), the judge's ``merged`` grouping."""
    answer_groups = [list(range(n))] if answers == 1 else [[i] for i in range(n)]
    vote = VoteDigest(source="llm_judge", judged=True, n=n, winner=winner, first=first, answer_groups=answer_groups,
                      groups=[list(range(n))] if merged else [[i] for i in range(n)])
    ok = right[winner] if right is not None else bool(success)
    return AuditRow(benchmark="arith", system="debate", success=ok, vote=vote, candidate_success=right)


def test_a_judge_that_always_takes_the_first_candidate_is_reported():
    rng = random.Random(0)
    rows = []
    for _ in range(20):
        first = rng.randrange(2)
        right = [rng.random() < 0.5 for _ in range(2)]
        rows.append(row(first, first, right))
    [a] = audit_votes(rows)
    assert a["contested"] == 20 and a["first"]["k"] == 20 and a["first_p"] < 1e-5
    assert "shown first won 20 of 20" in a["warning"] and "--set mas.final_vote_mode=lexical" in a["warning"]
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


def test_the_run_command_prints_the_reports_warnings(tmp_path):
    (tmp_path / JUDGE_AUDIT_FILE).write_text(json.dumps({
        "votes": [{"warning": "arith/debate: it votes by position"}, {"warning": None}],
        "consensus": [{"warning": "arith/debate: it stops on agreement the answers do not show"}]}))
    assert audit_warnings(tmp_path) == ["arith/debate: it votes by position",
                                        "arith/debate: it stops on agreement the answers do not show"]
    assert audit_warnings(tmp_path / "missing") == []
    (tmp_path / JUDGE_AUDIT_FILE).write_text("[1, 2]")  # not the audit's shape: no warnings, no crash
    assert audit_warnings(tmp_path) == []


def decision(*, stop=True, reason="consensus_reached", source="llm_judge", ratio=1.0, lexical=0.5):
    sink = ListCollector()
    Tracer("t", [sink]).emit("system:controller", "verify", Decision(
        stage="debate", round=0, max_rounds=2, stop=stop, reason=reason if stop else None, consensus_source=source,
        consensus_ratio=ratio, lexical_ratio=lexical if source == "llm_judge" else None))
    return sink.events


def test_the_judges_consensus_stops_beyond_an_exact_match_are_counted_and_warned_about():
    events = [*decision(), *decision(lexical=1.0), *decision(stop=False, ratio=0.5), *decision(source="lexical")]
    assert consensus_digest(events) == ConsensusDigest(judged=3, stops=2, beyond_exact=1)
    assert consensus_digest(decision(source="lexical")) is None
    rows = [AuditRow(benchmark="arith", system="debate", success=False, vote=None,
                     consensus=consensus_digest(decision(lexical=0.5 if i < 2 else 1.0))) for i in range(8)]
    [c] = audit_consensus(rows)
    assert (c["runs"], c["judged"], c["stops"], c["beyond_exact"]) == (8, 8, 8, 2)
    assert "in 2 of its 8 consensus stops" in c["warning"]
    rows[0].consensus = ConsensusDigest(judged=1, stops=1, beyond_exact=0)
    assert audit_consensus(rows)[0]["warning"] is None


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
    req = ExperimentRequest(cfg=cfg, benchmarks=["arith"], systems=["debate", "representative_exchange"],
                            task_limit=3, runs_per_task=1, experiment_id="e", progress="none")
    asyncio.run(run_experiment(req))
    index = write_report(tmp_path / "e")
    judges = json.loads((index.parent / JUDGE_AUDIT_FILE).read_text())
    [a, e, r] = judges["votes"]
    assert (a["system"], a["voter"], a["votes"], a["unusable"]) == ("debate", "judge", 3, 0)
    assert (e["system"], e["voter"], e["votes"]) == ("representative_exchange", "election judge", 9)  # 3 groups
    assert (r["system"], r["voter"], r["votes"]) == ("representative_exchange", "judge", 3)
    from descriptor.events import read_trace
    from mas.topologies.judge import shown_order

    for trace in sorted((tmp_path / "e" / "arith" / "representative_exchange").rglob("run_0.trace.jsonl")):
        meta = json.loads(trace.with_name("run_0.metadata.json").read_text())
        elections = [ev.payload for ev in read_trace(trace) if ev.payload.kind == "election"]
        assert [x.shown_order for x in elections] == [
            shown_order(meta["seed"], len(x.members), f"election {x.group}", meta["task_id"])
            for x in elections]  # each group's vote draws its own order, with its run's task
    c = judges["consensus"][0]  # scripted:judge also decides consensus
    assert c["runs"] == 3 and c["judged"] >= 3 and c["beyond_exact"] == 0  # it groups by exact match
    evals = [json.loads(p.read_text()) for p in sorted((tmp_path / "e" / "arith" / "debate").rglob("run_0.eval.json"))]
    assert [len(e["candidate_success"]) for e in evals] == [3, 3, 3]
    assert "Judges: do they decide well?" in index.read_text()
    # a digest whose vote is not one (an edited or foreign file) is no digest: the trace is read instead
    metrics = next((tmp_path / "e" / "arith" / "debate").rglob("run_0.trace_metrics.json"))
    record = json.loads(metrics.read_text())
    record["digest"]["vote"] = {"source": "llm_judge", "judged": True, "n": 2, "winner": 7}
    metrics.write_text(json.dumps(record))
    index = write_report(tmp_path / "e")
    assert json.loads((index.parent / JUDGE_AUDIT_FILE).read_text()) == judges


def test_run_report_and_summarize_print_the_judges_warnings(tmp_path, capsys, monkeypatch):
    import descriptor.report.build as build
    from main import main

    planted = {"votes": [], "consensus": [{"benchmark": "arith", "system": "debate", "runs": 1, "judged": 1, "stops": 1,
                                           "beyond_exact": 1, "warning": "arith/debate: a planted warning"}]}
    monkeypatch.setattr(build, "audit", lambda rows: planted)
    said = "warning: arith/debate: a planted warning (the report's \"Judges\")"
    assert main(["run", "--benchmark", "arith", "--systems", "debate", "--model", "scripted", "--task-limit", "1",
                 "--output-root", str(tmp_path), "--experiment-id", "e", "--progress", "none"]) == 0
    assert said in capsys.readouterr().err
    for argv in (["report"], ["summarize-experiment"]):
        assert main([*argv, "--experiment-root", str(tmp_path / "e")]) == 0
        assert said in capsys.readouterr().err


def test_the_trajectory_says_in_which_order_the_judge_saw_the_candidates(tmp_path):
    import asyncio

    from mas.config import ExperimentConfig, ModelRoute
    from mas.sweep.experiment import ExperimentRequest, run_experiment

    cfg = ExperimentConfig(output_root=str(tmp_path), models={"default": ModelRoute(provider="scripted",
                                                                                    model="scripted:judge")})
    asyncio.run(run_experiment(ExperimentRequest(cfg=cfg, benchmarks=["arith"], systems=["debate",
                                                 "representative_exchange"], task_limit=1, runs_per_task=1,
                                                 experiment_id="e", progress="none")))
    text = next((tmp_path / "e" / "arith" / "debate").rglob("run_0.trajectory.md")).read_text()
    vote = next(line for line in text.splitlines() if "final vote (llm_judge)" in line)
    assert "(the judge saw debater_" in vote and ", in that order)" in vote
    text = next((tmp_path / "e" / "arith" / "representative_exchange").rglob("run_0.trajectory.md")).read_text()
    election = next(line for line in text.splitlines() if "group 1 elects" in line)
    assert "(the judge saw member_1_" in election and ", in that order)" in election
