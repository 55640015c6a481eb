"""Plumbing of the LLM attribution methods with the scripted model.

Hand-made trajectories mark their decisive step with the word ERROR, which
the scripted responders (``attribution/methods/_scripted.py``) look for.
"""

from __future__ import annotations

import pytest

from attribution.methods import METHODS, MethodContext, Prediction
from attribution.methods.baselines import split_range
from attribution.trajectory import Step, Trajectory
from mas.scripted import ScriptedChatModel

LLM_METHODS = ["all_at_once", "step_by_step", "binary_search", "echo", "chief"]


def make_traj(agents: list[str], error_at: int, *, tid: str = "t", filler: str = "", gt: str | None = "42") -> Trajectory:
    steps = []
    for i, agent in enumerate(agents):
        text = f"Step {i} by {agent}: working on the plan and computing values. {filler}"
        if i == error_at:
            text = f"ERROR here: {agent} uses the wrong column and gets 17. {filler}"
        steps.append(Step(index=i, agent=agent, content=text))
    return Trajectory(
        id=tid, subset="test", query="How many clients get the sunset design?", ground_truth=gt,
        final_answer="17", steps=steps, mistake_agent=agents[error_at], mistake_step=error_at,
    )


TRAJS = [
    make_traj(["human", "Planner", "Coder", "Computer_terminal", "Verifier"], 2, tid="a"),
    make_traj(["human", "Planner", "Coder", "Computer_terminal", "Coder", "Verifier", "Planner"], 5, tid="b"),
    make_traj(["user", "Assistant", "Assistant", "Critic"], 1, tid="c", gt=None),
]


def ctx(**kw) -> MethodContext:
    return MethodContext(model=ScriptedChatModel(seed=0), route="scripted", **kw)


@pytest.mark.parametrize("method", LLM_METHODS)
@pytest.mark.parametrize("with_gt", [True, False])
async def test_method_end_to_end_finds_marked_step(method: str, with_gt: bool) -> None:
    run = METHODS[method]()
    for traj in TRAJS:
        pred = await run(traj, ctx(with_ground_truth=with_gt))
        assert isinstance(pred, Prediction)
        assert pred.step == traj.mistake_step, (method, traj.id, pred.details.get("fallbacks"))
        assert pred.agent is not None and pred.agent.lower() == traj.mistake_agent.lower()
        assert pred.nfe >= 1 and pred.tokens > 0 and pred.seconds >= 0
        assert pred.details["tokens_in"] + pred.details["tokens_out"] == pred.tokens
        assert pred.truncated is False


@pytest.mark.parametrize("lo,hi", [(0, 4), (0, 5), (3, 9), (2, 3), (0, 128)])
def test_split_range_halves_and_middle_goes_first(lo: int, hi: int) -> None:
    (a0, a1), (b0, b1) = split_range(lo, hi)
    assert a0 == lo and b1 == hi and b0 == a1 + 1
    n_a, n_b = a1 - a0 + 1, b1 - b0 + 1
    assert n_a - n_b == (hi - lo + 1) % 2  # odd length: the middle step is in the first half


def test_split_range_rejects_single_step() -> None:
    with pytest.raises(ValueError):
        split_range(3, 3)


@pytest.mark.parametrize("n,error_at", [(5, 0), (5, 2), (5, 4), (7, 3), (9, 8), (2, 1)])
async def test_binary_search_reaches_marked_step_on_odd_and_even_lengths(n: int, error_at: int) -> None:
    traj = make_traj([f"A{i % 3}" for i in range(n)], error_at)
    pred = await METHODS["binary_search"]()(traj, ctx())
    assert pred.step == error_at
    ranges = [p["range"] for p in pred.details["path"]]
    assert ranges[0] == [0, n - 1]
    assert pred.nfe == len(ranges)


# ------------------------------------------------------------------ ECHO voting

from attribution.methods.echo import (  # noqa: E402
    Analysis,
    Conclusion,
    agent_votes,
    disagreement,
    parse_analysis,
    sample_panel,
    step_votes,
    vote,
)


def analysis(agent: str | None, step: int | None, conf: float, alts: list[tuple[str, int, float]] = ()) -> Analysis:
    return Analysis(
        role="general",
        conclusion=Conclusion(agents=[agent] if agent else [], step=step, confidence=conf),
        alternatives=[Conclusion(agents=[a], step=s, confidence=c) for a, s, c in alts],
    )


def test_vote_confidence_weighted_winner_beats_majority() -> None:
    panel = [analysis("Coder", 2, 0.9), analysis("Planner", 1, 0.4), analysis("Planner", 1, 0.35)]
    res = vote(agent_votes(panel))
    assert res.winner == "Coder" and res.consensus
    assert res.scores == pytest.approx({"Coder": 0.9, "Planner": 0.75})
    assert vote(step_votes(panel)).winner == 2


def test_vote_ignores_votes_below_delta() -> None:
    # Two weak votes for Planner (0.2 + 0.25 = 0.45) lose to one vote of 0.35: only votes >= δ = 0.3 count.
    panel = [analysis("Planner", 1, 0.2), analysis("Planner", 1, 0.25), analysis("Coder", 2, 0.35)]
    res = vote(agent_votes(panel))
    assert res.winner == "Coder" and res.consensus and res.share == pytest.approx(1.0)


def test_vote_without_consensus_takes_heaviest_single_vote() -> None:
    panel = [analysis("Planner", 1, 0.1), analysis("Coder", 2, 0.25), analysis("Verifier", 4, 0.2)]
    res = vote(agent_votes(panel))
    assert res.winner == "Coder" and not res.consensus and res.scores == {}
    assert vote([]).winner is None


def test_alternatives_vote_at_half_weight() -> None:
    # Alternative (Coder, 0.8) counts 0.4 >= δ; together with a primary 0.5 it beats Planner's 0.7.
    panel = [analysis("Planner", 1, 0.7, alts=[("Coder", 2, 0.8)]), analysis("Coder", 2, 0.5)]
    assert vote(agent_votes(panel)).winner == "Coder"


def test_disagreement_flags_review_when_spread_exceeds_half() -> None:
    calm = disagreement([analysis("A", 1, 0.6), analysis("A", 1, 0.8)], "agent")
    assert calm == {"conclusion_diversity": 0.5, "confidence_spread": 0.2, "review": False}
    torn = disagreement([analysis("A", 1, 0.9), analysis("B", 3, 0.3), analysis("C", 2, 0.35)], "step")
    assert torn["conclusion_diversity"] == 1.0 and torn["review"] is True


def test_parse_analysis_discards_steps_outside_trajectory_and_unknown_agents() -> None:
    traj = TRAJS[0]
    obj = {
        "summary": "s",
        "agents": [{"agent": "coder", "error_likelihood": "80%"}, {"agent": "Ghost", "error_likelihood": 1}],
        "conclusion": {"agents": ["Coder", "Ghost"], "step": 17, "confidence": 0.9},
        "alternatives": [{"agents": ["Planner"], "step": "step 1", "confidence": "high"}],
    }
    a = parse_analysis(traj, "general", obj)
    assert a.evaluations == {"Coder": 0.8}
    assert a.conclusion.agents == ["Coder"] and a.conclusion.step is None and a.discarded_steps == 1
    assert a.alternatives[0].step == 1 and a.alternatives[0].confidence == 0.8
    assert step_votes([a]) == [(1, 0.4)]


def test_sample_panel_is_seeded_and_distinct() -> None:
    assert sample_panel(3, 7) == sample_panel(3, 7)
    assert len(set(sample_panel(6, 1))) == 6
    assert {r for s in range(20) for r in sample_panel(3, s)} >= {"conservative", "liberal"}
