"""ECHO's vote as its paper defines it (δ a minimum confidence, type first, no alternative votes), the earlier
rule by name, the recorded analyst outputs, and their replay by ``scripts/echo_votes.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import main
from attribution.methods import METHODS, MethodContext
from attribution.methods.echo.vote import (
    Analysis,
    Ballot,
    Conclusion,
    Judgment,
    choose_step,
    conclusion_type,
    elect_agent,
)
from attribution.methods.echo.consensus import decide
from mas.scripted.model import ScriptedChatModel
from tests.scripts_loader import load_script
from tests.attribution.test_attribution_methods import TRAJS, bound, make_traj


def analyst(agent: str, conf: float, kind: str = "", alts: tuple = ()) -> Analysis:
    return Analysis(role="general", conclusion=Conclusion(agents=[agent], step=None, confidence=conf, type=kind),
                    alternatives=[Conclusion(agents=[a], step=None, confidence=c) for a, c in alts])


def test_delta_is_a_minimum_confidence_low_votes_are_dropped() -> None:
    panel = [analyst("Planner", 0.28, "wrong plan"), analyst("Planner", 0.28, "wrong plan"), analyst("Coder", 0.5, "bad code")]
    agent, res, basis = elect_agent(panel, "paper")
    assert (agent, basis, res.dropped) == ("Coder", "consensus", 2)
    # The earlier rule sums every vote (0.56 against 0.5) and applies δ to the share.
    agent, res, _ = elect_agent(panel, "weighted_share")
    assert agent == "Planner" and res.share == pytest.approx(0.56 / 1.06)


def test_the_issue_example_elects_the_agent_two_analysts_blame_in_different_words() -> None:
    """Issue 32 item 7: A at 0.6 twice (different wordings) against B at 0.7; the paper's A.7 rule elects A."""
    panel = [analyst("A", 0.6, "wrong plan"), analyst("A", 0.6, "Planning error"), analyst("B", 0.7, "bad code")]
    agent, res, basis = elect_agent(panel, "paper")
    assert (agent, basis, res.type) == ("A", "consensus", "single_agent")
    assert res.scores == pytest.approx({"A": 1.2, "B": 0.7})


def test_the_paper_type_is_single_or_multi_agent_and_a_multi_agent_ballot_gives_each_agent_full_confidence() -> None:
    both = Analysis(role="general", conclusion=Conclusion(agents=["Planner", "Coder"], step=None, confidence=0.9,
                                                          type="handoff"))
    panel = [both, analyst("Verifier", 0.4, "x"), analyst("Verifier", 0.4, "x")]
    agent, res, _ = elect_agent(panel, "paper")
    assert res.type == "multi_agent" and res.type_scores == pytest.approx({"multi_agent": 0.9, "single_agent": 0.8})
    assert agent == "Planner" and res.scores == pytest.approx({"Planner": 0.9, "Coder": 0.9})
    assert conclusion_type(Ballot(choice=("Coder",), confidence=0.5)) == "single_agent"


def test_alternatives_do_not_vote_under_the_paper_rule() -> None:
    panel = [analyst("Planner", 0.7, alts=(("Coder", 0.8),)), analyst("Coder", 0.5)]
    assert elect_agent(panel, "paper")[0] == "Planner"
    assert elect_agent(panel, "weighted_share")[0] == "Coder"  # 0.5 + 0.8 / 2


def test_no_ballot_above_delta_means_no_consensus_and_the_fallbacks() -> None:
    panel = [analyst("Planner", 0.1), analyst("Coder", 0.2)]
    assert elect_agent(panel, "paper", heuristic="Verifier") == ("Verifier", elect_agent(panel, "paper")[1], "heuristic")
    judgments = [Judgment(role="a", step=5, decisive=True, confidence=0.2, type="x") for _ in range(3)]
    judgments.append(Judgment(role="b", step=8, decisive=True, confidence=0.4, type="y"))
    assert choose_step(judgments, [5, 8], "weighted_share")[0] == 5  # 0.6 against 0.4
    step, res, basis = choose_step(judgments, [5, 8], "paper")
    assert (step, basis, res.dropped) == (8, "consensus", 3)
    step, _, basis = choose_step(judgments[:3], [5, 8], "paper")
    assert (step, basis) == (5, "agent_pass_proposal")  # every "yes" below δ: the agent pass's first proposal


@pytest.mark.parametrize("variant", ["paper", "project"])
async def test_echo_records_every_analyst_output_and_its_answer_replays(variant: str) -> None:
    for traj in TRAJS:
        pred = await METHODS["echo"](variant=variant)(traj, MethodContext(model=bound(ScriptedChatModel(seed=0))))
        d = pred.details
        assert d["vote"] == "paper" and d["variant"] == variant and len(d["analyses"]) == len(d["panel"]) == 3
        if variant == "project":
            assert all(isinstance(a["raw"], dict) and a["raw"]["conclusion"] for a in d["analyses"])
            assert all(j["agent"] == pred.agent and "type" in j for j in d["judgments"])
        else:
            assert len(d["step_analyses"]) == 3
            assert all(isinstance(a["raw"], dict) and a["raw"]["primary_conclusion"]
                       for a in d["analyses"] + d["step_analyses"])
        replay = decide(json.loads(json.dumps(d)), "paper")  # as read back from predictions.jsonl
        assert (replay.agent, replay.step) == (pred.agent, pred.step) == (traj.mistake_agent, traj.mistake_step)


class SplitPanelModel(ScriptedChatModel):
    """Two analysts blame the Planner at confidence 0.28, one the Coder at 0.5 (the rules disagree)."""

    def _respond(self, messages, meta, kwargs):
        if meta.get("contract") != "attribution.echo.agent_panel":
            return super()._respond(messages, meta, kwargs)
        self.calls += 1
        first = meta["hints"]["attr_role"] == self.first_role
        agent, conf = ("Coder", 0.5) if first else ("Planner", 0.28)
        step = 2 if agent == "Coder" else 1
        reply = {"summary": "s", "agents": [], "conclusion": {"type": "t", "agents": [agent], "step": step,
                                                              "confidence": conf}, "alternatives": []}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=json.dumps(reply)))])

    first_role: str = ""


async def test_compare_votes_judges_both_rules_agents_and_counts_the_calls() -> None:
    traj = make_traj(["human", "Planner", "Coder", "Computer_terminal", "Coder", "Verifier", "Planner"], 4)
    from attribution.methods.echo.method import sample_panel

    model = SplitPanelModel(seed=0, first_role=sample_panel(3, 0)[0])
    pred = await METHODS["echo"](variant="project", compare_votes=True)(traj, MethodContext(model=bound(model)))
    d = pred.details
    assert pred.agent == "Coder" and d["candidates_by_agent"] == {"Coder": [2, 4], "Planner": [1, 6]}
    assert pred.nfe == 3 * (1 + 2 + 2)  # the agent pass, then both agents' two candidates by every analyst
    assert {j["agent"] for j in d["judgments"]} == {"Coder", "Planner"}
    old = decide(d, "weighted_share")
    assert old.agent == "Planner" and old.step in (1, 6) and old.step_basis != "not_judged"
    plain = await METHODS["echo"](variant="project")(traj, MethodContext(model=bound(model)))  # no compare_votes
    assert plain.nfe == 3 * (1 + 2) and decide(plain.details, "weighted_share").step_basis == "not_judged"


def write_case(root: Path, traj) -> None:
    record = {"question": traj.query, "ground_truth": traj.ground_truth, "mistake_agent": traj.mistake_agent,
              "mistake_step": str(traj.mistake_step), "history": [{"content": s.content, "name": s.agent, "role": "user"}
                                                                  for s in traj.steps]}
    path = root / "algorithm_generated" / f"{traj.id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record), encoding="utf-8")


def test_echo_votes_script_recomputes_both_votes_from_one_run(tmp_path: Path, capsys) -> None:
    data = tmp_path / "ww"
    for traj in TRAJS[:2]:
        write_case(data, traj)
    out = tmp_path / "echo"
    argv = ["attribute", "--data-dir", str(data), "--method", "echo", "--model", "scripted", "--out", str(out),
            "--method-option", "variant=project", "--method-option", "compare_votes=true"]
    assert main.main(argv) == 0
    script = load_script("echo_votes")
    res = script.replay(script.read_records(out))
    assert not res["mismatches"] and not res["skipped"]
    for rule in ("paper", "weighted_share"):
        m = res["subsets"]["all"][rule]
        assert (m["n"], m["agent"], m["step"], m["step_known"]) == (2, 1.0, 1.0, 2)
    capsys.readouterr()
    assert script.main([str(out), "--json", str(tmp_path / "votes.json")]) == 0
    printed = capsys.readouterr().out
    assert "weighted_share" in printed and "paper" in printed
    assert json.loads((tmp_path / "votes.json").read_text())["subsets"]["all"]["agreement"]["same_agent"] == 1.0
    # A resumed run must use the same vote: cases made under another one are never mixed in.
    assert main.main([*argv[:-2], "--method-option", "vote=weighted_share"]) == 2
    assert "was written with method_settings=" in capsys.readouterr().err
    assert main.main([*argv[:-2], "--method-option", "votes=paper"]) == 2  # no such option
    assert "--method-option for echo" in capsys.readouterr().err


def test_echo_votes_script_flags_a_replay_that_differs(tmp_path: Path) -> None:
    script = load_script("echo_votes")
    row = {"id": "x", "subset": "s", "predicted_agent": "Nobody", "predicted_step": 0, "gold_agent": "Coder",
           "gold_step": 2, "details": {"vote": "paper", "analyses": [analyst("Coder", 0.9).record()],
                                       "candidates_by_agent": {"Coder": [2]}, "judgments": [], "heuristic": [None, None]}}
    (tmp_path / "predictions.jsonl").write_text(json.dumps(row) + "\n")
    res = script.replay(script.read_records(tmp_path))
    assert res["mismatches"] == [{"id": "x", "predicted": ["Nobody", 0], "replayed": ["Coder", 2]}]
    assert script.main([str(tmp_path)]) == 1
