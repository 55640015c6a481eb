"""ECHO as its appendices write it (the default, ``variant=paper``): A.3's extraction with its word limits, A.5's
analysts and context for both passes, A.7's consensus; the project's earlier pipeline stays ``variant=project``."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from attribution.methods import METHODS, MethodContext
from attribution.methods.echo.vote import Conclusion
from mas.scripted.model import ScriptedChatModel
from tests.attribution.test_attribution_echo_context import TEXTS, a3_traj
from tests.attribution.test_attribution_methods import RecordingModel, bound, make_traj

async def test_both_passes_see_the_analysts_context_with_a3s_levels() -> None:
    from attribution.methods.echo.extraction import key_decision, milestone

    model = RecordingModel(seed=0)
    pred = await METHODS["echo"]()(a3_traj(), MethodContext(model=bound(model)))
    calls = [(m["hints"]["attr_pass"], m["hints"]["attr_role"], p) for m, p in model.seen]
    assert sorted(c[0] for c in calls) == ["agent"] * 3 + ["step"] * 3 and pred.nfe == 6
    contexts = set()
    for which, role, prompt in calls:
        body = prompt.split("Task: How many rows?", 1)[1]
        context = body.split("Conduct an objective analysis", 1)[0]
        contexts.add(context)
        # Every step with its content, then step 0's hierarchical context (A.3's levels) as the example.
        assert "[3] Planner: Looking again." in context and "Hierarchical context of the first step" in context
        example = context.split("as an example of the levels:", 1)[1]
        assert f"  [2] Coder: {key_decision(TEXTS[2])}" in example
        assert f"  [8] Verifier: {milestone(TEXTS[8])}" in example and "distant (brief summaries):" in example
        assert "single_agent" in prompt and "multi_agent" in prompt and "mistake_step" in prompt
    assert len(contexts) == 1  # the agent pass sees what the step pass sees: A.5's context, not a view of its own


class BallotModel(ScriptedChatModel):
    """Answers ECHO's two passes with fixed A.5 conclusions per analyst (by position in the panel)."""

    agent_ballots: list = Field(default_factory=list)
    step_ballots: list = Field(default_factory=list)
    order: list = Field(default_factory=list)

    def _respond(self, messages, meta, kwargs):
        self.calls += 1
        ballots = self.agent_ballots if meta["hints"]["attr_pass"] == "agent" else self.step_ballots
        kind, agents, step, conf = ballots[self.order.index(meta["hints"]["attr_role"])]
        reply = {"analysis_summary": "s", "agent_evaluations": [{"agent_name": a, "step_index": step,
                                                                 "reasoning": "r", "evidence": "e",
                                                                 "error_likelihood": 0.7} for a in agents],
                 "primary_conclusion": {"reasoning": "r", "type": kind, "attribution": agents, "mistake_step": step,
                                        "confidence": conf},
                 "alternative_hypotheses": [{"reasoning": "r", "type": "single_agent", "attribution": ["Verifier"],
                                             "mistake_step": 6, "confidence": 0.95}]}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=json.dumps(reply)))])


async def test_a7_a_multi_agent_conclusion_keeps_its_agents_and_the_step_comes_from_the_step_pass() -> None:
    from attribution.methods.echo.method import sample_panel

    traj = make_traj(["human", "Planner", "Coder", "Computer_terminal", "Coder", "Verifier", "Planner"], 4)
    model = BallotModel(
        seed=0, order=sample_panel(3, 0),
        # Agent pass: one multi-agent ballot (0.9) outweighs two single-agent ones (0.4 + 0.35).
        agent_ballots=[("multi_agent", ["Planner", "Coder"], 1, 0.9), ("single_agent", ["Verifier"], 5, 0.4),
                       ("single_agent", ["Verifier"], 5, 0.35)],
        # Step pass: the winning type's conclusions vote their mistake_step (4: 0.5 + 0.45 against 2: 0.8 alone).
        step_ballots=[("single_agent", ["Coder"], 4, 0.5), ("single_agent", ["Coder"], 4, 0.45),
                      ("multi_agent", ["Coder", "Planner"], 2, 0.8)],
    )
    pred = await METHODS["echo"]()(traj, MethodContext(model=bound(model)))
    d = pred.details
    assert pred.nfe == 6  # one agent pass and one step pass per analyst, no per-step judgments
    assert d["attribution"] == ["Planner", "Coder"] and pred.agent == "Planner"
    assert pred.step == 4  # the step pass's winning conclusions' mistake_step, not the agent pass's (1)
    assert d["agent_vote"]["type_scores"] == pytest.approx({"multi_agent": 0.9, "single_agent": 0.75})
    assert d["step_vote"]["step_votes"] == pytest.approx({"4": 0.95})  # only the winning type's ballots vote
    assert pred.confidence == pytest.approx(0.9)  # the winning type's mean confidence
    dis = d["disagreement"]["agent"]
    assert dis == {"high_disagreement": False, "num_different_conclusions": 2, "confidence_spread": 0.55,
                   "requires_review": True}
    assert d["disagreement"]["agent_step_consistent"] is True  # step 4 is the Coder's
    from attribution.methods.echo.consensus import decide

    assert (decide(d).agent, decide(d).step) == (pred.agent, pred.step)
    # The project's earlier pipeline elects one agent and judges its steps one call each.
    old = await METHODS["echo"](variant="project")(traj, MethodContext(model=bound(ScriptedChatModel(seed=0))))
    assert old.nfe == 3 * (1 + 2) and "attribution" not in old.details


def test_a7_high_disagreement_is_more_than_two_conclusion_types_each_voted() -> None:
    from attribution.methods.echo.consensus import consensus

    def c(kind: str, conf: float) -> Conclusion:
        return Conclusion(agents=["A"], step=1, confidence=conf, type=kind)

    three = consensus([c("single_agent", 0.6), c("multi_agent", 0.5), c("no_clear_fault", 0.9)])
    assert three.disagreement["high_disagreement"] and three.disagreement["requires_review"]
    assert three.type == "no_clear_fault" and three.attribution is None and three.mistake_step is None  # as A.7
    two = consensus([c("single_agent", 0.6), c("multi_agent", 0.5), c("no_clear_fault", 0.2)])
    assert two.disagreement == {"high_disagreement": False, "num_different_conclusions": 2,
                                "confidence_spread": 0.1, "requires_review": False}
    assert consensus([c("single_agent", 0.2)]).type is None  # nothing clears δ: no conclusion


def test_the_paper_variant_refuses_the_project_variants_options() -> None:
    for bad in ({"candidates": 3}, {"compare_votes": True}, {"context": "paper"}):
        with pytest.raises(ValueError, match="variant=project"):
            METHODS["echo"](**bad)
    with pytest.raises(ValueError, match="variant=paper"):
        METHODS["echo"](variant="project", fallback="heuristic")
    with pytest.raises(ValueError, match="variant must be"):
        METHODS["echo"](variant="appendix")
    assert METHODS["echo"](variant="project", context="paper").settings["context"] == "paper"


def test_echo_votes_replays_a_paper_variant_run_under_both_rules(tmp_path) -> None:
    import main
    from tests.scripts_loader import load_script
    from tests.attribution.test_attribution_echo_vote import write_case
    from tests.attribution.test_attribution_methods import TRAJS

    for traj in TRAJS[:2]:
        write_case(tmp_path / "ww", traj)
    out = tmp_path / "echo"
    assert main.main(["attribute", "--data-dir", str(tmp_path / "ww"), "--method", "echo", "--model", "scripted",
                      "--out", str(out)]) == 0
    script = load_script("echo_votes")
    res = script.replay(script.read_records(out))
    assert not res["mismatches"] and not res["skipped"]
    for rule in ("paper", "weighted_share"):  # both rules vote on the same two passes: every step is known
        m = res["subsets"]["all"][rule]
        assert (m["n"], m["agent"], m["step"], m["step_known"]) == (2, 1.0, 1.0, 2)
