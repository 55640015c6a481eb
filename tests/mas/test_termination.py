"""The termination controller: each stop reason, their order, boundaries, normalisation, judge fallbacks."""

import json
from pathlib import Path

import pytest

from benchmark.registry import get_benchmark
from descriptor.events import read_trace
from mas.topologies.agent import RunContext
from mas.config import ExperimentConfig, ModelRoute, parse_config
from mas.topologies.judge import (
    consensus_judge,
    final_vote,
    parse_consensus,
    parse_vote,
    shown_order,
    vote_artifacts,
)
from mas.llm.models import ModelSet
from mas.sweep.runner import RunSpec, execute_run
from mas.topologies.termination import (
    STOP_REASONS,
    Candidate,
    ConsensusView,
    JudgeOutcome,
    LoopPosition,
    artifact_kind,
    decide,
    emit_decision,
    mean_delta,
    normalize_artifact,
)
from mas.tracing import ListCollector, Tracer, use_tracer


def cands(*answers: str, prefix: str = "a") -> list[Candidate]:
    return [Candidate(agent=f"{prefix}{i}", artifact=a, confidence=0.8) for i, a in enumerate(answers)]


def pos(round_: int = 1, max_rounds: int = 3, min_rounds: int = 0) -> LoopPosition:
    return LoopPosition(stage="test", round=round_, max_rounds=max_rounds, min_rounds=min_rounds)


async def lexical(position, current, previous=None, expected=None, consensus=None):
    return await decide(position, candidate_artifacts=current, previous_candidate_artifacts=previous,
                        consensus_artifacts=consensus, expected_count=len(current) if expected is None else expected,
                        mode="lexical")


# ---- each stop reason -------------------------------------------------------------------------


async def test_invalid_or_failed_branch():
    d = await lexical(pos(), cands("42", "", "  "), expected=3)
    assert d.stop and d.reason == "invalid_or_failed_branch"
    assert (d.valid_artifact_count, d.required_valid) == (1, 2)
    assert d.consensus_source == "none"  # no judge needed once a branch check fails


async def test_consensus_reached():
    d = await lexical(pos(), cands("42", "42", "42"))
    assert d.stop and d.reason == "consensus_reached" and d.consensus_ratio == 1.0
    assert d.consensus_groups == [["a0", "a1", "a2"]] and d.consensus_answer == "42"


async def test_no_meaningful_change():
    prev = cands("41", "43", "45")
    d = await lexical(pos(round_=1), cands("41", "43", "45"), prev)
    assert d.stop and d.reason == "no_meaningful_change"
    assert d.mean_delta == 0.0 and d.progress_source == "lexical" and d.progress_status == "stalled"


async def test_max_rounds_reached():
    prev = cands("1", "2", "3")
    d = await lexical(pos(round_=3, max_rounds=3), cands("10", "20", "30"), prev)
    assert d.stop and d.reason == "max_rounds_reached"
    assert d.mean_delta is not None and d.mean_delta > 0.05


async def test_continue_when_nothing_holds():
    d = await lexical(pos(round_=1, max_rounds=3), cands("10", "20", "30"), cands("1", "2", "3"))
    assert not d.stop and d.reason is None and d.reason_detail.startswith("continue")


# ---- order when several hold ------------------------------------------------------------------


async def test_invalid_branch_wins_over_max_rounds():
    d = await lexical(pos(round_=3, max_rounds=3), cands("42", "", ""), expected=3)
    assert d.reason == "invalid_or_failed_branch"


async def test_consensus_wins_over_no_progress_and_max_rounds():
    same = cands("42", "42", "42", "7")
    d = await lexical(pos(round_=3, max_rounds=3), same, same)
    assert d.reason == "consensus_reached" and d.should_stop_for_no_progress is True


async def test_no_progress_wins_over_max_rounds():
    same = cands("1", "2", "3")
    d = await lexical(pos(round_=3, max_rounds=3), same, same)
    assert d.reason == "no_meaningful_change"


async def test_invalid_branch_wins_over_consensus():
    agree = cands("42", "42", "", "", "")
    d = await lexical(pos(), agree, expected=5)
    assert d.reason == "invalid_or_failed_branch" and (d.valid_artifact_count, d.required_valid) == (2, 3)
    # the same answers with one required artifact fewer do reach consensus: both checks held above
    assert (await lexical(pos(), agree, expected=3)).reason == "consensus_reached"


async def test_invalid_branch_wins_over_no_progress():
    stalled = cands("41", "43", "", "", "")
    d = await lexical(pos(), stalled, stalled, expected=5)
    assert d.reason == "invalid_or_failed_branch"
    d = await lexical(pos(), stalled, stalled, expected=4)
    assert d.reason == "no_meaningful_change" and d.mean_delta == 0.0


async def test_consensus_wins_over_no_progress():
    same = cands("42", "42", "42")
    d = await lexical(pos(round_=1, max_rounds=3), same, same)
    assert d.reason == "consensus_reached" and d.mean_delta == 0.0 and d.should_stop_for_no_progress is True


async def test_minimum_rounds_hold_quality_stops_back():
    d = await lexical(pos(round_=0, max_rounds=3, min_rounds=1), cands("42", "42", "42"))
    assert not d.stop and d.held_back == "consensus_reached"
    # the failure stop is not held back
    d = await lexical(pos(round_=0, max_rounds=3, min_rounds=1), cands("42", "", ""), expected=3)
    assert d.reason == "invalid_or_failed_branch"


# ---- boundaries -------------------------------------------------------------------------------


@pytest.mark.parametrize(("expected", "valid", "stops"), [
    (4, 2, False), (4, 1, True), (5, 3, False), (5, 2, True), (1, 1, False), (2, 1, False), (3, 1, True),
])
async def test_ceil_half_boundary(expected, valid, stops):
    current = cands(*([f"x{i}" for i in range(valid)] + [""] * (expected - valid)))
    d = await lexical(pos(round_=1, max_rounds=5), current, expected=expected)
    assert (d.reason == "invalid_or_failed_branch") is stops


async def test_three_of_four_stops():
    d = await lexical(pos(), cands("42", "42", "42", "41"))
    assert d.reason == "consensus_reached" and d.consensus_ratio == 0.75


async def test_two_of_three_does_not_stop():
    d = await lexical(pos(), cands("42", "42", "41"))
    assert not d.stop and d.consensus_ratio == pytest.approx(2 / 3)


async def test_one_valid_artifact_is_never_consensus():
    d = await lexical(pos(), cands("42"), expected=1)
    assert not d.stop and d.valid_artifact_count == 1


async def test_blocked_majority_is_not_substantive_but_counts_as_present():
    d = await lexical(pos(), cands("Blocked: cannot determine", "blocked - cannot determine!", "BLOCKED cannot determine"))
    assert d.valid_artifact_count == 3 and d.consensus_ratio == 1.0
    assert d.is_substantive is False and not d.stop


# ---- normalisation and deltas -----------------------------------------------------------------


@pytest.mark.parametrize(("a", "b"), [
    ("The answer is 42.", "the answer is 42"), ("  42!\n", "42"), ("1,000", "1000"), ("Foo\t\tBar", "foo bar"),
])
def test_lexical_normalisation(a, b):
    assert normalize_artifact(a) == normalize_artifact(b)


async def test_normalised_answers_vote_together():
    d = await lexical(pos(), cands("The answer is 42.", "the answer is 42", "THE ANSWER IS 42!"))
    assert d.reason == "consensus_reached"


def moved(kept: int) -> tuple[list[Candidate], list[Candidate]]:
    """Eight agents with distinct answers (no consensus); a0 keeps ``kept`` of its 20 characters.

    A single pair cannot sit exactly on the boundary in floating point (one
    changed character of 20 gives 1 - 0.95 = 0.050000000000000044), so seven
    agents stand still and a0 moves by 1 - 2*12/40 = 0.4: the mean is 0.4 / 8.
    """
    others = [f"{k}{k}{k}" for k in "1234567"]
    before = "abcdefghijklmnopqrst"
    after = before[:kept] + "0123456789"[:20 - kept]  # digits: the replaced tail shares nothing with before
    return cands(after, *others), cands(before, *others)


async def test_lexical_no_progress_at_the_boundary_stops():
    current, previous = moved(12)
    d = await lexical(pos(round_=1, max_rounds=3), current, previous)
    assert d.mean_delta == 0.05 and d.consensus_ratio == 1 / 8
    assert d.reason == "no_meaningful_change" and d.progress_status == "stalled"


async def test_lexical_no_progress_just_above_the_boundary_continues():
    current, previous = moved(11)  # one more changed character: 1 - 2*11/40 = 0.45, mean 0.05625
    d = await lexical(pos(round_=1, max_rounds=3), current, previous)
    assert d.mean_delta == pytest.approx(0.05625) and d.mean_delta > 0.05
    assert not d.stop and d.progress_status == "improving" and d.should_stop_for_no_progress is False


def test_mean_delta_only_over_comparable_agents():
    cur = cands("abc", "xyz")
    assert mean_delta(cur, cands("abc", prefix="b")) is None  # no agent in both rounds
    assert mean_delta(cur, cands("abc", "xyz")) == 0.0
    assert 0 < mean_delta(cur, cands("abd", "xyz")) < 0.5


@pytest.mark.parametrize(("text", "kind"), [
    ("", "empty"), ("I am unable to solve it", "blocked"), ("42 (no evidence)", "no_evidence"),
    ("Plan: read, then add", "planning_only"), ("1. Read the numbers. 2. Add them.", "planning_only"), ("17", "direct"),
])
def test_artifact_kind(text, kind):
    assert artifact_kind(text) == kind


# ---- the LLM judge and its fallbacks --------------------------------------------------------


def scripted_rt(model: str = "scripted:judge", script: dict | None = None, **mas) -> RunContext:
    """A run context on the scripted double; ``script`` (contract -> answer) is this context's own answers."""
    cfg = ExperimentConfig(models={"default": ModelRoute(provider="scripted", model=model)}, mas=mas)
    models = ModelSet(cfg, seed=0, provider_args={"scripted": {"responders": script or {}}})
    return RunContext(cfg=cfg, models=models, question="What is 6 * 7?")


async def judged(rt, position, current, previous=None, expected=None):
    return await decide(position, candidate_artifacts=current, previous_candidate_artifacts=previous,
                        expected_count=len(current) if expected is None else expected, mode="llm_judge",
                        judge=consensus_judge(rt))


async def test_llm_judge_consensus_and_usage():
    d = await judged(scripted_rt(), pos(), cands("42", "42", "42", "41"))
    assert d.reason == "consensus_reached" and d.consensus_source == "llm_judge"
    assert d.judge_token_in > 0 and d.judge_token_out > 0 and d.judge_error is None


async def test_llm_judge_no_progress():
    same = cands("1", "2", "3")
    d = await judged(scripted_rt(), pos(round_=1), same, same)
    assert d.reason == "no_meaningful_change" and d.progress_source == "llm_judge"
    assert d.expected_improvement == "low"


@pytest.mark.parametrize("reply", [
    "I think they mostly agree.",
    '{"groups": [[0, 1, 2]]}',
    ('{"groups": [[0, 7]], "invalid_indices": [], "is_substantive": true, "progress_status": "stalled", '
    '"expected_improvement": "low", "should_stop_for_no_progress": true, "explanation": ""}'),
    ('{"groups": [[0, 1], [1, 2]], "invalid_indices": [], "is_substantive": true, "progress_status": "stalled", '
    '"expected_improvement": "low", "should_stop_for_no_progress": true, "explanation": ""}'),
    ('{"groups": [[0, 1, 2]], "invalid_indices": [], "is_substantive": "very", "progress_status": "stalled", '
    '"expected_improvement": "low", "should_stop_for_no_progress": true, "explanation": ""}'),
])
async def test_malformed_judge_json_falls_back_to_lexical(reply):
    d = await judged(scripted_rt(script={"judge.consensus": lambda ctx: reply}), pos(), cands("42", "42", "41"))
    assert d.consensus_source == "lexical_fallback" and "unusable judge reply" in d.judge_error
    # the lexical verdict applies: 2 of 3 is not consensus (the judge claimed all three agree)
    assert not d.stop and d.consensus_ratio == pytest.approx(2 / 3)
    assert d.judge_token_in > 0  # the failed call still costs tokens


async def test_judge_without_a_verdict_falls_back(monkeypatch):
    d = await judged(scripted_rt("scripted:nojudge"), pos(), cands("42", "42", "42"))
    assert d.reason == "consensus_reached" and d.consensus_source == "lexical_fallback"
    assert "unusable judge reply" in d.judge_error


async def test_a_failed_judge_call_is_not_replaced_by_a_lexical_verdict(monkeypatch):
    # A call that fails for good is an infrastructure error: it ends the run instead of silently changing
    # how the run was judged (issue 18).
    from mas.llm.call import LLMCallError

    def broken(ctx):
        raise RuntimeError("endpoint returned 500")

    with pytest.raises(LLMCallError, match="500"):
        await judged(scripted_rt(script={"judge.consensus": broken}), pos(), cands("42", "42", "42"))


async def test_judge_unsubstantive_verdict_blocks_consensus():
    async def judge(current, previous, work):
        return JudgeOutcome(view=ConsensusView(groups=[[0, 1, 2]], is_substantive=False, explanation="a plan"))

    d = await decide(pos(), candidate_artifacts=cands("42", "42", "42"), previous_candidate_artifacts=None,
                     expected_count=3, mode="llm_judge", judge=judge)
    assert not d.stop and d.consensus_source == "llm_judge" and d.is_substantive is False


async def test_consensus_denominator_leaves_out_the_judges_invalid_answers():
    """The seed's rule: valid_count = answers left after removing invalid_indices; 3 of 4 is consensus."""
    async def judge(current, previous, work):
        return JudgeOutcome(view=ConsensusView(groups=[[0, 1, 2], [3]], invalid_indices=[4], is_substantive=True))

    d = await decide(pos(), candidate_artifacts=cands("42", "42", "42", "41", "no idea, sorry"),
                     previous_candidate_artifacts=None, expected_count=5, mode="llm_judge", judge=judge)
    assert d.consensus_valid_count == 4 and d.consensus_ratio == 0.75
    assert d.stop and d.reason == "consensus_reached" and "3 of 4 valid" in d.reason_detail


async def test_mock_mode_reads_as_the_lexical_fallback():
    """The scripted double (mock mode) is no judge: no call is made and the source says lexical_fallback."""
    from mas.topologies.judge import MOCK_JUDGE

    rt = scripted_rt("scripted")
    d = await judged(rt, pos(), cands("42", "42", "41", "42"))
    assert d.reason == "consensus_reached" and d.consensus_source == "lexical_fallback"
    assert d.judge_error == MOCK_JUDGE and d.judge_token_in == 0
    out = await final_vote(rt, cands("41", "42", "42"))
    assert out.source == "lexical_fallback" and out.error == MOCK_JUDGE and out.usage.token_in == 0


async def test_identical_non_ascii_answers_reach_consensus():
    d = await lexical(pos(), cands("答案是四十二", "答案是四十二", "答案是四十二"))
    assert d.reason == "consensus_reached" and d.valid_artifact_count == 3 and d.consensus_ratio == 1.0


def test_parse_consensus_fills_uncovered_indices():
    v = parse_consensus({"groups": [[0, 2]], "invalid_indices": [], "is_substantive": True,
                         "progress_status": "unclear", "expected_improvement": "high",
                         "should_stop_for_no_progress": False}, 3)
    assert v.groups == [[0, 2], [1]]


def test_emit_decision_is_a_controller_verify_with_judge_usage():
    from descriptor.events import Decision

    d = Decision(stage="s", round=1, max_rounds=2, min_rounds=0, stop=True, reason="max_rounds_reached",
                            reason_detail="x", judge_token_in=10, judge_token_out=3, judge_latency_ms=5.0,
                            judge_cost_usd=0.001)
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])):
        emit_decision(d, state_id="ck")
    ev = sink.events[0]
    assert (ev.actor, ev.event_type, ev.token_in, ev.token_out, ev.state_id) == ("system:controller", "verify", 10, 3, "ck")
    logged = {"reason", "reason_detail", "consensus_mode", "consensus_source", "consensus_ratio", "consensus_groups",
              "consensus_explanation", "progress_source", "progress_status", "expected_improvement",
              "progress_explanation", "average_confidence", "mean_delta", "valid_artifact_count"}
    assert logged <= set(ev.payload.model_fields_set) and ev.payload.reason in STOP_REASONS


# ---- final vote --------------------------------------------------------------------------------


def test_vote_prefers_direct_evidence_backed_answers():
    c = [Candidate(agent="a", artifact="Blocked: no data"), Candidate(agent="b", artifact="Blocked: no data"),
         Candidate(agent="c", artifact="1. Read. 2. Compute."), Candidate(agent="d", artifact="12", evidence=1)]
    assert vote_artifacts(c).winner_index == 3
    # among direct answers, evidence beats a larger unsupported group
    c = [Candidate(agent="a", artifact="10"), Candidate(agent="b", artifact="10"),
         Candidate(agent="c", artifact="12", evidence=2)]
    assert vote_artifacts(c).winner_index == 2
    # otherwise the larger group wins, then confidence
    c = [Candidate(agent="a", artifact="10", confidence=0.3), Candidate(agent="b", artifact="10", confidence=0.9),
         Candidate(agent="c", artifact="12", confidence=1.0)]
    assert vote_artifacts(c).winner_index == 1


async def test_final_vote_judge_and_fallback(monkeypatch):
    rt = scripted_rt()
    c = cands("41", "42", "42")
    out = await final_vote(rt, c)
    assert out.source == "llm_judge" and c[out.winner_index].artifact == "42" and out.usage.token_in > 0
    rt = scripted_rt(script={"judge.vote": lambda ctx: '{"winner_index": 9, "groups": []}'})
    out = await final_vote(rt, c)
    assert out.source == "lexical_fallback" and "winner_index" in out.error and c[out.winner_index].artifact == "42"
    out = await final_vote(scripted_rt(final_vote_mode="lexical"), c)
    assert out.source == "lexical" and out.usage.token_in == 0


def test_vote_never_picks_an_empty_artifact_while_another_answered():
    # the empty ones are the most confident and claim evidence; a blocked answer still beats them
    c = [Candidate(agent="a", artifact="", confidence=1.0, evidence=3),
         Candidate(agent="b", artifact=" ?! ", confidence=1.0, evidence=3),
         Candidate(agent="c", artifact="", confidence=1.0, evidence=3),
         Candidate(agent="d", artifact="I cannot determine it", confidence=0.1)]
    out = vote_artifacts(c)
    assert out.winner_index == 3 and out.invalid_indices == [0, 1, 2]
    # with nothing answered there is still a winner (the run then has an empty answer)
    assert vote_artifacts(cands("", "  ")).winner_index in (0, 1)


def test_parse_vote_rejects_an_empty_winner():
    c = cands("", "42", "42")
    reply = {"groups": [[0], [1, 2]], "winner_index": 0, "invalid_indices": [], "explanation": "first"}
    with pytest.raises(ValueError, match="empty artifact"):
        parse_vote(reply, c)
    assert parse_vote({**reply, "winner_index": 1}, c).winner_index == 1


def choose(pick):
    """A judge reply naming the candidate (as the judge saw them) whose answer ``pick`` accepts."""
    def reply(ctx):
        rows = ctx.metadata["judge_candidates"]
        return json.dumps({"groups": [], "winner_index": next(r["index"] for r in rows if pick(r["answer"])),
                           "invalid_indices": [], "explanation": "chosen"})
    return reply


async def test_final_vote_falls_back_when_the_judge_picks_an_empty_artifact(monkeypatch):
    c = cands(" ", "42", "42")
    out = await final_vote(scripted_rt(script={"judge.vote": choose(lambda a: not a.strip())}), c)
    assert out.source == "lexical_fallback" and "empty artifact" in out.error
    assert c[out.winner_index].artifact == "42" and out.usage.token_in > 0  # the unusable call still costs tokens


def test_the_judge_sees_the_candidates_in_an_order_drawn_from_the_run_seed():
    orders = [shown_order(seed, 4) for seed in range(40)]
    assert all(sorted(o) == [0, 1, 2, 3] for o in orders)
    assert orders == [shown_order(seed, 4) for seed in range(40)]  # a run replays its order
    assert len({tuple(o) for o in orders}) > 10
    firsts = [shown_order(seed, 2)[0] for seed in range(400)]
    assert 150 < sum(firsts) < 250  # either candidate is shown first about half the time


def test_each_vote_of_a_run_draws_its_own_order():
    # one order for all of a run's votes made its elections show their members in the same positions
    pairs = [(shown_order(seed, 2, "election 0"), shown_order(seed, 2, "election 1")) for seed in range(200)]
    assert 60 < sum(a != b for a, b in pairs) < 140  # independent draws differ about half the time
    assert all(shown_order(seed, 3, "") == shown_order(seed, 3) for seed in range(20))  # the final vote's as before
    assert [shown_order(s, 2, "election 0") for s in range(20)] == [shown_order(s, 2, "election 0") for s in range(20)]


def test_each_task_draws_its_own_order_though_its_runs_share_the_seeds_of_other_tasks():
    """Run seeds are the same for every task (seed * 10_007 + r): drawn from the run seed alone, run 0 of every task
    of an experiment showed its candidates in one order (the identity order at --seed 7), so a judge's lean
    towards a position fell on the same agent in every task."""
    seed = 7 * 10_007
    orders = [shown_order(seed, 3, "", f"arith_7_{i:04d}") for i in range(60)]
    assert len({tuple(o) for o in orders}) == 6  # all six orders of three candidates occur across tasks
    firsts = [shown_order(seed, 2, "", f"task_{i}")[0] for i in range(400)]
    assert 150 < sum(firsts) < 250
    assert orders == [shown_order(seed, 3, "", f"arith_7_{i:04d}") for i in range(60)]  # and each replays


async def test_a_named_vote_shows_the_candidates_in_its_own_order():
    orders = []
    for seed in range(12):
        rt = scripted_rt(script={"judge.vote": choose(lambda a: a == "42")})
        rt = rt.with_models(rt.models.reseeded(seed))
        outs = [await final_vote(rt, cands("41", "42"), "llm_judge", vote=f"election {g}") for g in (0, 1)]
        assert [o.shown_order for o in outs] == [shown_order(rt.models.seed, 2, f"election {g}") for g in (0, 1)]
        orders.append(tuple(tuple(o.shown_order) for o in outs))
    assert any(a != b for a, b in orders)  # some run showed its two groups' members in different positions


@pytest.mark.parametrize("seed", range(6))
async def test_the_vote_names_the_candidate_the_judge_chose_whatever_order_it_saw(seed):
    c = cands("41", "42", "43")
    rt = scripted_rt(script={"judge.vote": choose(lambda a: a == "43")})
    rt = rt.with_models(rt.models.reseeded(seed))
    out = await final_vote(rt, c)
    assert out.source == "llm_judge" and c[out.winner_index].artifact == "43"
    assert out.shown_order == shown_order(rt.models.seed, 3)


async def test_the_final_vote_event_records_its_candidates_answers_and_order():
    from mas.topologies.roles import vote_among

    arts = [{"agent": f"debater_{i}", "answer_artifact": a, "confidence": 0.5} for i, a in enumerate(["7", "9", "7"])]
    sink = ListCollector()
    with use_tracer(Tracer("t", [sink])):
        _, out = await vote_among(scripted_rt(script={"judge.vote": choose(lambda a: a == "9")}), arts, state_id=None)
    vote = sink.events[-1].payload
    assert vote.candidates == ["debater_0", "debater_1", "debater_2"] and vote.winner_agent == "debater_1"
    assert vote.answer_groups == [[0, 2], [1]] and vote.shown_order == out.shown_order
    with use_tracer(Tracer("t", [sink])):
        await vote_among(scripted_rt("scripted"), arts, state_id=None)  # mock mode: no judge saw an order
    assert sink.events[-1].payload.shown_order is None


# ---- rounds = 1 runs exactly one cycle ---------------------------------------------------------


async def test_orchestrator_rounds_one_runs_exactly_one_cycle(tmp_path):
    # worker_1 is made wrong, so no consensus: only the round bound can stop the loop
    cfg = parse_config({"models": {"default": {"provider": "scripted", "model": "scripted"}},
                        "mas": {"rounds": 1}, "inject": {"agent": "worker_1", "step": 1}})
    bench = get_benchmark("arith", None)
    task = bench.load_tasks(1, seed=0)[0]
    spec = RunSpec(experiment_id="e", output_root=Path(tmp_path), benchmark="arith", system="orchestrator",
                   task=task, run_index=0, seed=0)
    await execute_run(spec, cfg, bench)
    events = read_trace(spec.paths.trace)
    decisions = [e.payload.model_dump() for e in events if e.actor == "system:controller" and e.event_type == "verify"]
    assert [d["reason"] for d in decisions] == ["max_rounds_reached"] and decisions[0]["consensus_ratio"] < 0.75
    assert sum(e.actor == "planner" for e in events) == 1 and sum(e.actor == "aggregator" and e.event_type in
                                                                    ("act", "revise") for e in events) == 1
    stages = json.loads(spec.paths.trace_metrics.read_text())["stages"]
    assert stages[0]["rounds_used"] == 1 and stages[0]["stop_reason"] == "max_rounds_reached"


async def test_missing_judge_is_logged_as_the_fallback_reason():
    prev = [Candidate(agent=a, artifact=t) for a, t in (("a", "41"), ("b", "42"), ("c", "43"))]
    d = await decide(LoopPosition(stage="debate", round=1, max_rounds=3), candidate_artifacts=prev,
                     previous_candidate_artifacts=prev, expected_count=3, mode="llm_judge", judge=None)
    assert d.consensus_source == "lexical_fallback" and d.judge_error == "no judge configured"
    assert d.reason == "no_meaningful_change"


async def test_no_progress_compares_candidates_even_when_the_vote_runs_over_other_artifacts():
    cands = [Candidate(agent=a, artifact=t) for a, t in (("a", "41"), ("b", "42"), ("c", "43"))]
    voters = [Candidate(agent=a, artifact=t) for a, t in (("a", "1"), ("b", "2"), ("c", "3"))]
    d = await decide(LoopPosition(stage="s", round=1, max_rounds=3), candidate_artifacts=cands,
                     previous_candidate_artifacts=cands, consensus_artifacts=voters, expected_count=3,
                     mode="lexical")
    assert d.mean_delta == 0.0 and d.progress_status == "stalled" and d.reason == "no_meaningful_change"


async def test_no_judge_call_before_the_minimum_rounds():
    calls = []

    async def judge(cands, prev, work):
        calls.append(1)
        raise AssertionError("not expected")

    c = [Candidate(agent=a, artifact="42") for a in ("a", "b", "c")]
    d = await decide(LoopPosition(stage="debate", round=0, max_rounds=3, min_rounds=1), candidate_artifacts=c,
                     previous_candidate_artifacts=None, expected_count=3, mode="llm_judge", judge=judge)
    assert not calls and not d.stop and d.held_back == "consensus_reached" and d.consensus_source == "lexical"


def test_judge_schemas_bound_generation_but_not_validation():
    from mas.topologies.judge import CONSENSUS_SCHEMA, MAX_EXPLANATION, VOTE_SCHEMA, VoteReply

    assert CONSENSUS_SCHEMA["properties"]["explanation"]["maxLength"] == MAX_EXPLANATION
    assert "maxLength" not in CONSENSUS_SCHEMA["properties"]["progress_status"]
    assert VOTE_SCHEMA["properties"]["groups"]["items"]["maxItems"] > 0
    long = VoteReply(groups=[[0, 1]], winner_index=0, explanation="x" * (MAX_EXPLANATION * 2))
    assert len(long.explanation) == 2 * MAX_EXPLANATION  # a hosted model's longer reply is still usable
