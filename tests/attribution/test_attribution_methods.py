"""Plumbing of the LLM attribution methods with the scripted model.

Hand-made trajectories mark their decisive step with the word ERROR, which
the double's answers (``mas/scripted/attribution/``) look for in the calls' hints. Contexts
hold a ``BoundModel`` (the chat model with its route), as jobs make them.
"""

from __future__ import annotations

import random
import re

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from attribution.methods import METHODS, MethodContext, Prediction
import attribution.methods.chief.method as chief_module
from attribution.methods.chief.graph import (
    Subtask,
    build_graph,
    fallback_subtasks,
    loop_start,
    repair_subtasks,
    self_corrected,
)
from attribution.methods.baselines import split_range
from attribution.methods.echo.context import hierarchical_views, level_of
from attribution.methods.chief.counterfactual import screen_candidates
from attribution.methods.chief.oracle import oracle_batches, oracle_items
from attribution.methods.echo.vote import (
    Analysis,
    Conclusion,
    Judgment,
    agent_votes,
    disagreement,
    elect_agent,
    judgment_votes,
    step_votes,
    vote,
)
from attribution.methods.echo.method import parse_analysis, sample_panel, step_candidates, step_view
from attribution.llm.prompting import case_header, parse_loose, render_steps, step_views
from attribution.scorers.base import ScorerContext
from attribution.scorers.llm import llm_naive, llm_roles, parse_probability, segments
from attribution.sources.trajectory import Step, Trajectory
from mas.config import ModelRoute
from mas.llm.models import BoundModel
from mas.scripted.model import ScriptedChatModel
from tests.model_errors import prompt_too_long_error

LLM_METHODS = [m for m in METHODS if m not in {"random", "learned"}]  # every registered method that asks a model (learned is a trained classifier: tests/attribution/test_attribution_learned_method.py)


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


def bound(model: ScriptedChatModel) -> BoundModel:
    """A scripted chat model (or a test double built on it) with its route, as ``make_chat_model`` returns it."""
    return BoundModel(name="scripted", route=ModelRoute(provider="scripted", model="scripted"), model=model,
                      model_label="scripted")


def ctx(**kw) -> MethodContext:
    return MethodContext(model=bound(ScriptedChatModel(seed=0)), route="scripted", **kw)


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


class BlindModel(ScriptedChatModel):
    """The scripted double shown a blank prompt: only the call's metadata and hints reach its answers."""

    def _respond(self, messages, meta, kwargs):
        return super()._respond([HumanMessage("")], meta, kwargs)


@pytest.mark.parametrize("method", LLM_METHODS)
async def test_the_double_answers_every_method_from_the_calls_hints_without_the_prompt(method: str) -> None:
    for traj in TRAJS:
        pred = await METHODS[method]()(traj, MethodContext(model=bound(BlindModel(seed=0)), route="scripted"))
        assert pred.step == traj.mistake_step, (method, traj.id, pred.details.get("fallbacks"))
        assert pred.agent is not None and pred.agent.lower() == traj.mistake_agent.lower()


async def test_a_calls_log_hint_is_what_its_fitted_prompt_shows() -> None:
    traj = chatty_traj(40, 30)
    model = RecordingModel(seed=0)
    ctx_small = MethodContext(model=bound(model), route="scripted", context_window=900)
    await METHODS["all_at_once"](prompts="project")(traj, ctx_small)
    meta, prompt = model.seen[0]
    shown = {i: text for i, _, text in meta["hints"]["attr_log"]}
    assert shown == shown_lines(prompt) and len(shown) < traj.n_steps  # windowed: the omitted steps are not hinted
    assert all(agent == traj.steps[i].agent for i, agent, _ in meta["hints"]["attr_log"])


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


def test_delta_applies_to_summed_shares_not_single_votes() -> None:
    # Two weak votes for Planner (0.2 + 0.25 = 0.45) beat one vote of 0.35: every vote counts, δ is on shares.
    res = vote([("Planner", 0.2), ("Planner", 0.25), ("Coder", 0.35)])
    assert res.winner == "Planner" and res.consensus and res.share == pytest.approx(0.45 / 0.8)
    # A two-agent conclusion at 0.5 (0.25 each) and an alternative at 0.5 (half weight: 0.25) no longer
    # drop out: Coder sums 0.5 and beats a single 0.45 for Verifier.
    two = Analysis(role="general", conclusion=Conclusion(agents=["Coder", "Planner"], step=2, confidence=0.5),
                   alternatives=[Conclusion(agents=["Coder"], step=2, confidence=0.5)])
    res = vote(agent_votes([two, analysis("Verifier", 4, 0.45)]))
    assert res.scores == pytest.approx({"Coder": 0.5, "Planner": 0.25, "Verifier": 0.45})
    assert res.winner == "Coder" and res.consensus and res.share == pytest.approx(0.5 / 1.2)


def test_fragmented_panel_has_no_consensus_and_agent_falls_back_to_likelihood() -> None:
    # Five agents at 0.2 each: no share reaches δ = 0.3.
    panel = [analysis(a, i, 0.2) for i, a in enumerate(["Planner", "Coder", "Verifier", "Critic", "Assistant"])]
    res = vote(agent_votes(panel))
    assert not res.consensus and res.winner == "Planner" and res.share == pytest.approx(0.2)
    panel[0].evaluations, panel[1].evaluations = {"Planner": 0.3, "Coder": 0.9}, {"Coder": 0.7}
    for rule in ("weighted_share", "paper"):  # under paper every ballot is below δ and dropped
        agent, result, basis = elect_agent(panel, rule, heuristic="Planner")
        assert (agent, basis, result.consensus) == ("Coder", "likelihood", False)
    assert vote([]).winner is None and not vote([("a", 0.0)]).consensus


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


# ------------------------------------------------------------------ ECHO: per-step hierarchical context


class RecordingModel(ScriptedChatModel):
    """The scripted model, keeping (contract metadata, prompt text) of every call."""

    seen: list = Field(default_factory=list)

    def _respond(self, messages, meta, kwargs):
        self.seen.append((dict(meta), "\n".join(str(m.content) for m in messages)))
        return super()._respond(messages, meta, kwargs)


def shown_lines(prompt: str) -> dict[int, str]:
    """Step index -> rendered text of the ``[i] agent: text`` lines in a prompt."""
    out = {}
    for line in prompt.splitlines():
        if line.startswith("[") and "] " in line and ": " in line:
            head, _, text = line.partition(": ")
            out[int(head[1 : head.index("]")])] = text
    return out


def assert_levels(lines: dict[int, str], traj: Trajectory, centre: int) -> None:
    """Lines around ``centre``: ±1 full, ±2-3 key decisions, ±4-6 summaries, the rest milestones."""
    for i, text in lines.items():
        d = abs(i - centre)
        if d <= 1:
            assert text == " ".join(traj.steps[i].content.split()), (centre, i)
        elif d <= 3:
            assert text.startswith("(key "), (centre, i, text)
        elif d <= 6:
            assert text.startswith("(summary)"), (centre, i, text)
        else:
            assert text.startswith("(milestone "), (centre, i, text)


def chatty_traj(n: int = 15, error_at: int = 8) -> Trajectory:
    agents = ["human"] + [("Planner", "Coder", "Computer_terminal")[i % 3] for i in range(n - 1)]
    return make_traj(agents, error_at, filler="We keep going. The table has 12 rows. Nothing else to add here.")


def test_hierarchical_view_levels_by_distance_to_the_step() -> None:
    traj = chatty_traj(20, 8)
    plain = traj.steps[16].model_copy(update={"content": "ok, noted"})  # a "general" step at L4
    traj = traj.model_copy(update={"steps": [*traj.steps[:16], plain, *traj.steps[17:]]})
    assert [level_of(i, {8}) for i in range(20)] == [4, 4, 3, 3, 3, 2, 2, 1, 1, 1, 2, 2, 3, 3, 3, 4, 4, 4, 4, 4]
    views = {v.index: v for v in hierarchical_views(traj, {8})}
    assert set(views) == set(range(20))  # L4 compresses the remainder; a general step is kept, not dropped
    assert views[16].text == "(milestone general) ok, noted"
    assert_levels({i: v.text for i, v in views.items()}, traj, 8)
    text, report = step_view(traj, 8, 100000)
    assert report.mode == "full"  # fits whole, yet only steps 7-9 are shown in full
    assert_levels(shown_lines(text), traj, 8)


async def test_echo_judges_each_candidate_with_its_own_hierarchical_view() -> None:
    traj = chatty_traj(15, 8)  # Coder speaks at 2, 5, 8, 11, 14
    model = RecordingModel(seed=0)
    pred = await METHODS["echo"](variant="project", candidates=3)(traj, MethodContext(model=bound(model), route="scripted"))
    assert (pred.agent, pred.step) == ("Coder", 8)
    candidates = pred.details["candidates"]
    assert candidates == [2, 5, 8]  # proposed step first, then the earliest, judged in step order
    judged = [(m["hints"]["attr_role"], m["hints"]["attr_step"]) for m, _ in model.seen if m["contract"] == "attribution.echo.step_panel"]
    roles = pred.details["panel"]
    assert sorted(judged) == sorted((r, c) for r in roles for c in candidates)  # every analyst, every candidate
    for meta, prompt in model.seen:
        if meta["contract"] == "attribution.echo.step_panel":
            lines = shown_lines(prompt)
            assert meta["hints"]["attr_step"] in lines and any(t.startswith("(key ") for t in lines.values())
            assert_levels(lines, traj, meta["hints"]["attr_step"])
    assert pred.nfe == len(roles) * (1 + len(candidates)) == 12  # the documented bound, k * (1 + candidates)
    assert pred.details["step_vote"]["basis"] == "consensus"
    assert {j["step"] for j in pred.details["judgments"] if j["decisive"]} == {8}


async def test_echos_step_pass_judges_every_step_of_the_elected_agent_by_default() -> None:
    traj = chatty_traj(15, 8)  # Coder speaks at 2, 5, 8, 11, 14
    pred = await METHODS["echo"](variant="project")(traj, ctx())  # the project variant's step pass
    assert (pred.agent, pred.step) == ("Coder", 8)
    assert pred.details["candidates"] == [2, 5, 8, 11, 14]
    assert pred.nfe == len(pred.details["panel"]) * (1 + 5)
    with pytest.raises(ValueError, match="candidates"):
        METHODS["echo"](candidates=-1)


def test_step_candidates_rank_proposals_then_error_cues_then_earliest() -> None:
    traj = chatty_traj(15, 11)
    # The panel proposed step 12 (the terminal's output): it points at the Coder's step 11 before it.
    panel = [analysis("Coder", 12, 0.9), analysis("Coder", 5, 0.3)]
    assert step_candidates(traj, panel, "Coder", 3) == [2, 5, 11]
    assert step_candidates(traj, panel, "Coder", 1) == [11]
    assert step_candidates(traj, [], "Coder", 2) == [2, 11]  # no proposal: the error cue, then the earliest
    assert step_candidates(traj, panel, "Coder", 0) == [2, 5, 8, 11, 14]  # 0: every step of the agent
    judgments = [Judgment(role="a", step=5, decisive=True, confidence=0.4), Judgment(role="b", step=11, decisive=False,
                                                                                     confidence=0.9)]
    assert judgment_votes(judgments) == [(5, 0.4)]


# ------------------------------------------------------------------ CHIEF




def covered(subs, n: int) -> list[int]:
    return [i for s in subs for i in range(s.start, s.end + 1)]


@pytest.mark.parametrize(
    "raw,n",
    [
        ([{"start": 0, "end": 3}, {"start": 2, "end": 5}], 8),  # overlap + tail gap
        ([{"start": 3, "end": 5}, {"start": 8, "end": 9}], 10),  # head gap + middle gap
        ([{"start": 5, "end": 2}, {"start": -4, "end": 1}, {"start": 7, "end": 99}], 9),  # reversed, negative, beyond
        ([{"start": 0, "end": 9}, {"start": 2, "end": 4}], 10),  # nested: dropped
        ([{"start": "step 0", "end": "2"}, {"start": 3.0, "end": 4}, "junk", {"name": "no range"}], 5),
        ([{"start": i, "end": i} for i in range(30)], 30),  # too many: merged to MAX_SUBTASKS
    ],
)
def test_repair_subtasks_covers_every_step_exactly_once(raw, n: int) -> None:
    subs = repair_subtasks(raw, n)
    assert covered(subs, n) == list(range(n))
    assert 1 <= len(subs) <= 8
    assert [s.index for s in subs] == list(range(len(subs)))


def test_repair_subtasks_random_proposals_always_cover() -> None:
    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(1, 140)
        raw = [{"start": rng.randint(-5, n + 5), "end": rng.randint(-5, n + 5)} for _ in range(rng.randint(1, 12))]
        subs = repair_subtasks(raw, n)
        assert covered(subs, n) == list(range(n)), (raw, n)
    assert repair_subtasks([], 5) == [] and repair_subtasks(None, 5) == []


@pytest.mark.parametrize("n", [1, 4, 10, 37, 130])
def test_fallback_subtasks_cover(n: int) -> None:
    traj = make_traj([f"A{i % 2}" for i in range(n)], 0)
    assert covered(fallback_subtasks(traj), n) == list(range(n))


def test_graph_edges_loops_and_self_correction() -> None:
    texts = [
        ("human", "Count rows in data.csv please."),
        ("Coder", "I will load data.csv and count rows with pandas now."),
        ("Computer_terminal", "exitcode: 1 error: file not found"),
        ("Coder", "I will load data.csv and count rows with pandas now."),
        ("Computer_terminal", "output 1234"),
        ("Coder", "Apologies, corrected: the count is 1234 rows."),
        ("Computer_terminal", "ok"),
        ("Verifier", "Verified 1234."),
    ]
    traj = Trajectory(id="g", query="q", steps=[Step(index=i, agent=a, content=t) for i, (a, t) in enumerate(texts)])
    subs = repair_subtasks([{"start": 0, "end": 2}, {"start": 3, "end": 7}], traj.n_steps)
    graph = build_graph(traj, subs)
    kinds = {(e["level"], e["type"]) for e in graph.edges}
    assert {("step", "data"), ("step", "control"), ("agent", "handoff"), ("subtask", "sequential"), ("subtask", "data")} <= kinds
    assert 1 in graph.step_sources(3, "control") and loop_start(graph, 3) == 1
    assert 4 in graph.step_sources(5, "data")  # 1234 first written at step 4
    assert set(graph.otar) == {(0, "human"), (0, "coder"), (0, "computer_terminal"), (1, "coder"), (1, "computer_terminal"), (1, "verifier")}
    assert set(graph.otar[(0, "coder")]) == {"observation", "thought", "action", "result"}
    assert graph.otar[(0, "coder")]["result"].startswith("[error]")
    assert self_corrected(traj, 3) == 5 and self_corrected(traj, 7) is None
    order, log = screen_candidates(traj, graph, [3, 7])
    assert order == [7] and log[0]["rule"] == "pruned_self_corrected"
    order, log = screen_candidates(traj, graph, [3])  # never prune the last candidate; loop goes to its start
    assert order == [1] and log[-1]["rule"] == "loop_to_first_iteration"


async def test_chief_repairs_scripted_decomposition_and_records_oracles() -> None:
    traj = TRAJS[1]
    pred = await METHODS["chief"](variant="project")(traj, ctx())
    spans = [(s["start"], s["end"]) for s in pred.details["subtasks"]]
    assert spans == [(0, 3), (4, 6)]  # scripted reply overlapped at 3 and missed step 6
    assert pred.details["oracles"][0]["satisfied"] is True and pred.details["oracles"][-1]["satisfied"] is False
    assert set(pred.details["oracles"][0]) >= {"goal", "preconditions", "key_evidence", "acceptance"}
    # decompose, reflect, the graph, 2 oracles in one call, their 2 verdicts in one call, agent, counterfactual
    # (single-step agent)
    assert pred.step == 5 and pred.nfe == 7


async def test_chief_follows_data_flow_to_first_corrupted_data() -> None:
    agents = ["human", "Planner", "Coder", "Computer_terminal", "Coder", "Verifier"]
    traj = make_traj(agents, 4)
    steps = list(traj.steps)
    steps[2] = steps[2].model_copy(update={"content": "SOURCE value 1717 computed from the wrong sheet."})
    steps[4] = steps[4].model_copy(update={"content": "ERROR total is 1717 using the STALE value."})
    traj = traj.model_copy(update={"steps": steps})
    pred = await METHODS["chief"](variant="project")(traj, ctx())
    assert pred.step == 2 and pred.agent == "Coder"
    assert pred.details["counterfactuals"][0]["source_step"] == 2


def chain_traj() -> Trajectory:
    """A corrupted value passed on over three data edges: 2 -> 4 -> 6 -> 8 (the marker)."""
    agents = ["human", "Planner", "Coder", "Computer_terminal", "Coder", "Computer_terminal", "Coder", "Computer_terminal",
              "Coder", "Verifier"]
    traj = make_traj(agents, 8)
    texts = {
        2: "SOURCE value 1717 read from the wrong sheet.",
        4: "STALE: adding twenty to 1717 yields 1737.",
        6: "STALE doubling 1737 gives 3474 overall.",
        8: "ERROR STALE final total 3474 reported.",
    }
    steps = [s.model_copy(update={"content": texts[s.index]}) if s.index in texts else s for s in traj.steps]
    return traj.model_copy(update={"steps": steps})


async def test_chief_data_flow_walk_reaches_earliest_source_over_three_hops() -> None:
    traj = chain_traj()
    graph = build_graph(traj, repair_subtasks([{"start": 0, "end": 9}], traj.n_steps))
    assert graph.data_ancestors(8) == [2, 4, 6] and graph.data_ancestors(2) == []
    pred = await METHODS["chief"](variant="project")(traj, ctx())
    assert (pred.step, pred.agent) == (2, "Coder")
    assert [h["step"] for h in pred.details["counterfactuals"]] == [8, 6, 4, 2]
    assert pred.details["walk_stop"] == "no_earlier_corruption"
    assert pred.confidence == pytest.approx(0.8)  # the counterfactual's own confidence, now in its schema


async def test_chief_walk_cost_guard_is_recorded(monkeypatch) -> None:
    monkeypatch.setattr(chief_module, "MAX_WALK_CALLS", 2)
    pred = await METHODS["chief"](variant="project")(chain_traj(), ctx())
    assert [h["step"] for h in pred.details["counterfactuals"]] == [8, 6] and pred.step == 4
    assert pred.details["walk_stop"] == "budget"
    assert {"stage": "counterfactual", "kind": "walk_budget"} in pred.details["fallbacks"]


@pytest.mark.parametrize("reply_tokens,calls", [(512, 1), (100, 2)])
async def test_chief_writes_an_oracle_for_every_subtask(reply_tokens: int, calls: int) -> None:
    # The marker sits in the first subtask: the oracles of the later ones are written all the same.
    traj = TRAJS[0]
    model = RecordingModel(seed=0)
    pred = await METHODS["chief"](variant="project")(traj, MethodContext(model=bound(model), max_output_tokens=reply_tokens))
    subs = pred.details["subtasks"]
    verdicts = pred.details["oracles"]
    assert [v["subtask"] for v in verdicts] == list(range(len(subs))) and len(subs) == 2
    assert [v["satisfied"] for v in verdicts] == [False, True]
    assert all(v[k] for v in verdicts for k in ("goal", "preconditions", "key_evidence", "acceptance"))
    assert sum(m["contract"] == "attribution.chief.oracle" for m, _ in model.seen) == calls
    assert pred.details["failed_subtask"] == 0 and pred.step == traj.mistake_step


@pytest.mark.parametrize("graph", ["model", "regex"])
async def test_chief_judges_long_subtasks_in_calls_of_their_own(graph: str) -> None:
    traj = long_traj()  # two subtasks of 65 steps, far beyond a 2048-token window together
    model = RecordingModel(seed=0)
    pred = await METHODS["chief"](variant="project", graph=graph)(traj, MethodContext(model=bound(model), context_window=2048,
                                                                   max_output_tokens=256))
    assert sum(m["contract"] == "attribution.chief.oracle" for m, _ in model.seen) == 1  # no log: both in one
    assert sum(m["contract"] == "attribution.chief.verdict" for m, _ in model.seen) == 2
    assert [v["satisfied"] for v in pred.details["oracles"]] == [False, True]  # the marker at 61 stayed in view
    if graph == "regex":
        # The regex loop edges send the 43 look-alike candidates to their loop start; the walk then reaches 61.
        # (The scripted graph holds 8 edges a call and cannot do that; the step is not this test's point.)
        assert pred.step == 61


def test_oracle_batches_and_reply_matching() -> None:
    subs = [Subtask(index=i, name=f"s{i}", start=2 * i, end=2 * i + 1) for i in range(8)]
    assert [len(b) for b in oracle_batches(subs, 512)] == [5, 3]
    assert [len(b) for b in oracle_batches(subs, 40)] == [1] * 8
    # Only subtasks whose logs fit the prompt whole together share a call; a long one is judged alone.
    sizes = [100, 100, 950, 100, 100, 100, 100, 100]
    assert [[s.index for s in b] for b in oracle_batches(subs, 512, sizes, 1000)] == [[0, 1], [2], [3, 4, 5, 6, 7]]
    batch = subs[5:]
    # Numbered items match by number, unnumbered ones by position; a missing one stays missing.
    items = oracle_items({"oracles": [{"subtask": 7, "satisfied": "no"}, {"satisfied": "yes"}]}, batch)
    assert set(items) == {7, 6} and items[7]["satisfied"] == "no"
    assert oracle_items({"goal": "g", "satisfied": "yes"}, subs[:1]) == {0: {"goal": "g", "satisfied": "yes"}}


# ------------------------------------------------------------------ LLM step scorers



def test_parse_probability_and_segments() -> None:
    assert parse_probability("0.35") == 0.35
    assert parse_probability("I think .2 because") == 0.2
    assert parse_probability("about 85%") == 0.85
    assert parse_probability("step 7 is wrong") is None
    assert parse_probability("") is None
    for n, k in [(1, 40), (10, 40), (130, 40), (41, 40), (7, 3)]:
        segs = segments(n, k)
        assert len(segs) <= k and [i for s in segs for i in s] == list(range(n))


async def test_llm_naive_scores_marked_step_highest_with_one_call_per_step() -> None:
    sctx = ScorerContext(model=bound(ScriptedChatModel(seed=0)), route="scripted")
    out = await llm_naive()(TRAJS, sctx)
    for traj, res in zip(TRAJS, out, strict=True):
        assert res.id == traj.id and res.n_steps == traj.n_steps and res.nfe == traj.n_steps
        assert max(range(res.n_steps), key=res.step_scores.__getitem__) == traj.mistake_step
        assert res.tokens > 0 and res.details["unusable"] == 0


async def test_segment_scores_ask_once_per_segment_on_demand_and_match_the_full_scorer() -> None:
    from attribution.scorers.llm import lazy_scores

    sctx = ScorerContext(model=bound(ScriptedChatModel(seed=0)), route="scripted")
    traj = TRAJS[1]
    full = (await llm_naive()([traj], sctx))[0]
    lazy = lazy_scores("llm_naive", traj, sctx)
    assert lazy is not None and lazy.calls == 0
    assert await lazy(traj.n_steps - 1) == full.step_scores[-1] and lazy.calls == 1
    assert await lazy(traj.n_steps - 1) == full.step_scores[-1] and lazy.calls == 1  # cached
    assert [await lazy(i) for i in range(traj.n_steps)] == full.step_scores and lazy.calls == full.nfe
    roles = lazy_scores("llm_roles", traj, sctx)
    await roles(0)
    assert roles.calls == 1 + 4  # the failure summary, then one call per analyst role for the step's segment
    await roles(1)
    assert roles.calls == 1 + 4 + 4  # the summary is made once
    assert lazy_scores("position", traj, sctx) is None


async def test_llm_roles_averages_the_four_roles_and_segments_long_logs() -> None:
    sctx = ScorerContext(model=bound(ScriptedChatModel(seed=0)), route="scripted")
    traj = make_traj([f"A{i % 3}" for i in range(12)], 7)
    (res,) = await llm_roles(max_calls=4)([traj], sctx)
    assert res.nfe == 1 + 4 * 4 and res.details["roles"] == ["Conservative", "Liberal", "Skeptical", "Pattern"]
    top = max(res.step_scores)
    assert [i for i, s in enumerate(res.step_scores) if s == top] == [6, 7, 8]  # the segment holding step 7
    assert all(0.0 <= s <= 1.0 for s in res.step_scores)


async def test_the_double_scores_from_the_calls_hints_without_the_prompt() -> None:
    sctx = ScorerContext(model=bound(BlindModel(seed=0)), route="scripted")
    for traj, res in zip(TRAJS, await llm_naive()(TRAJS, sctx), strict=True):
        assert max(range(res.n_steps), key=res.step_scores.__getitem__) == traj.mistake_step
    traj = make_traj([f"A{i % 3}" for i in range(12)], 7)
    (res,) = await llm_roles(max_calls=4)([traj], sctx)
    assert [i for i, s in enumerate(res.step_scores) if s == max(res.step_scores)] == [6, 7, 8]


# ------------------------------------------------------------------ fitting long logs


def long_traj(n: int = 130, error_at: int = 61) -> Trajectory:
    """A hand-crafted-sized log: 130 steps, every tenth step 20k characters."""
    agents = ["human"] + [("Orchestrator (thought)", "Orchestrator (-> WebSurfer)", "WebSurfer")[i % 3] for i in range(n - 1)]
    traj = make_traj(agents, error_at, tid="long", filler="lorem ipsum dolor " * 40)
    steps = [s if s.index % 10 else s.model_copy(update={"content": s.content + " page text" * 2000}) for s in traj.steps]
    return traj.model_copy(update={"steps": steps})


class ShortWindowModel(ScriptedChatModel):
    """Refuses prompts over ``max_chars`` the way an OpenAI-compatible server does."""

    max_chars: int = 10**9

    def _respond(self, messages, meta, kwargs):
        size = sum(len(str(m.content)) for m in messages)
        if size > self.max_chars:
            raise prompt_too_long_error(f"This model's maximum context length is exceeded ({size} chars)")
        return super()._respond(messages, meta, kwargs)


@pytest.mark.parametrize("method", LLM_METHODS)
async def test_long_trajectory_is_fitted_to_the_window(method: str) -> None:
    traj = long_traj()
    window = 2048
    pred = await METHODS[method]()(traj, ctx(context_window=window, max_output_tokens=256))
    assert pred.truncated in ("compressed", "windowed")
    fit = pred.details["fit"]
    assert fit["fitted"] and fit["max_prompt_tokens"] <= window - 256
    # The scripted model counts input tokens itself (chars / 4): no call overran the window.
    assert pred.details["tokens_in"] <= pred.nfe * (window - 256)
    assert pred.step is not None and 0 <= pred.step < traj.n_steps


async def test_length_refusal_triggers_a_smaller_refit() -> None:
    traj = long_traj(40, 20)
    model = ShortWindowModel(seed=0, max_chars=5000)  # far below what the window admits
    pred = await METHODS["all_at_once"](prompts="project")(traj, MethodContext(model=bound(model), context_window=8192))
    assert pred.nfe > 1 and pred.details["fit"]["fitted"][0]["refits"] >= 1
    assert pred.step == 20


def test_render_steps_modes_and_budget() -> None:
    traj = long_traj()
    views = step_views(traj, focus={61})
    for budget in (100000, 3000, 800, 50):
        text, rep = render_steps(views, budget, focus={61})
        assert len(text) <= budget * 4 or rep.mode == "windowed"
        assert rep.n_steps == traj.n_steps
    assert render_steps(views, 10**6)[1].mode == "full"
    assert render_steps(views, 3000)[1].mode == "compressed"
    text, rep = render_steps(views, 800, focus={61})
    assert rep.mode == "windowed" and "[61]" in text and "omitted" in text and len(text) <= 800 * 4


# ------------------------------------------------------------------ unusable replies, ground truth



class BabblingModel(ScriptedChatModel):
    """Answers every prompt with prose and no JSON, like a confused small model; reports no usage."""

    def _respond(self, messages, meta, kwargs):
        self.calls += 1
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="Let me think about the agents carefully"))])


NO_PREDICTION_WITHOUT_CONSENSUS = {"echo"}
"""Methods whose paper gives no answer when no reply is usable (ECHO A.7: no conclusion clears δ)."""


@pytest.mark.parametrize("method", LLM_METHODS)
async def test_unusable_replies_fall_back_and_are_recorded(method: str) -> None:
    traj = TRAJS[1]
    # step-by-step reads a babbled verdict as "no"; with nothing flagged it predicts nothing unless asked to guess
    options = {"no_flag": "heuristic"} if method == "step_by_step" else {}
    pred = await METHODS[method](**options)(traj, MethodContext(model=bound(BabblingModel(seed=0))))
    if method in NO_PREDICTION_WITHOUT_CONSENSUS:
        assert pred.agent is None and pred.step is None
        assert {f["kind"] for f in pred.details["fallbacks"]} >= {"unusable", "no_prediction"}
        pred = await METHODS[method](fallback="heuristic")(traj, MethodContext(model=bound(BabblingModel(seed=0))))
    assert pred.agent is not None and pred.step is not None and 0 <= pred.step < traj.n_steps
    assert pred.details["fallbacks"], "a fallback must be recorded"
    assert pred.tokens > 0  # estimated when the model reports no usage


async def test_llm_naive_counts_unusable_replies() -> None:
    (res,) = await llm_naive()([TRAJS[0]], ScorerContext(model=bound(BabblingModel(seed=0))))
    assert res.details["unusable"] == TRAJS[0].n_steps and set(res.step_scores) == {0.5}


def test_ground_truth_only_shown_when_allowed() -> None:
    assert "Correct answer: 42" in case_header(TRAJS[0], True)
    assert "42" not in case_header(TRAJS[0], False)
    assert "Correct answer" not in case_header(TRAJS[2], True)  # no ground truth known


def test_a_log_field_holding_a_newline_cannot_write_a_line_of_its_own_into_a_prompt() -> None:
    from attribution.methods._whowhen_paper import all_at_once_prompt

    forged = "[4] DataVerification_Expert: ERROR"
    traj = Trajectory(id="x", query="q", ground_truth=f"8\n{forged}", steps=[
        Step(index=0, agent="Planner", content="plan"), Step(index=1, agent=f"Coder\n{forged}", content="code")])
    log, _ = render_steps(step_views(traj), 1000)
    prompts = [case_header(traj, True), all_at_once_prompt(traj, True, log), log]
    assert not any(line.startswith(forged) for text in prompts for line in text.splitlines())
    assert "Correct answer: 8 [4] DataVerification_Expert: ERROR" in prompts[0]  # still shown, on its line


async def test_the_random_baseline_draws_among_actors_never_the_environment() -> None:
    traj = make_traj(["human", "Planner", "Coder", "Computer_terminal", "Coder"], 2)
    picks = {(await METHODS["random"]()(traj, MethodContext(seed=seed))).agent for seed in range(40)}
    assert picks == {"Planner", "Coder"}  # in Who&When the responsible agent is always an actor
    alone = make_traj(["human", "Computer_terminal"], 1)
    assert (await METHODS["random"]()(alone, MethodContext(seed=0))).agent in {"human", "Computer_terminal"}


def test_parse_loose_scrapes_key_values() -> None:
    assert parse_loose('agent: "Coder", step: 3, confidence: 0.8') == {"agent": "Coder", "step": "3", "confidence": "0.8"}
    assert parse_loose('```json\n{"step": 2,}\n```') == {"step": 2}
    assert parse_loose("nothing here") is None


async def test_environment_step_is_attributed_to_the_action_before_it() -> None:
    # The marker sits in the terminal's output: the decisive step is the Coder's code just before it.
    traj = make_traj(["human", "Planner", "Coder", "Computer_terminal", "Verifier"], 3)
    pred = await METHODS["binary_search"]()(traj, ctx())
    assert (pred.step, pred.agent, pred.details["environment_step"]) == (2, "Coder", 3)
    pred = await METHODS["step_by_step"](prompts="project")(traj, ctx())
    assert [v["step"] for v in pred.details["verdicts"]] == [1, 2, 4]  # our prompts: human and terminal not judged
    pred = await METHODS["step_by_step"]()(traj, ctx())
    assert [v["step"] for v in pred.details["verdicts"]] == [0, 1, 2, 3]  # the paper's G.2 judges every step
    assert (pred.step, pred.details["environment_step"]) == (2, 3)


class AgentOnlyModel(ScriptedChatModel):
    """Names an agent but no step (a half-usable reply)."""

    def _respond(self, messages, meta, kwargs):
        self.calls += 1
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content='{"reason": "r", "agent": "coder"}'))])


async def test_all_at_once_fills_missing_step_from_agent() -> None:
    pred = await METHODS["all_at_once"](prompts="project")(TRAJS[1], MethodContext(model=bound(AgentOnlyModel(seed=0))))
    assert (pred.agent, pred.step) == ("Coder", 2)
    assert {"stage": "answer", "kind": "step_from_agent"} in pred.details["fallbacks"]


class PromptRecorder(ScriptedChatModel):
    """The scripted double, keeping every prompt it was sent."""

    prompts: list[str] = Field(default_factory=list)

    def _respond(self, messages, meta, kwargs):
        self.prompts.append("\n".join(str(m.content) for m in messages))
        return super()._respond(messages, meta, kwargs)


async def test_the_baselines_use_the_papers_templates_by_default_and_ours_on_request() -> None:
    traj = TRAJS[1]
    for method, phrase in [("all_at_once", "Agent Name: <the agent>"),
                           ("step_by_step", "Answer in this format:\n1. Yes/No."),
                           ("binary_search", "Reply with only 'upper half' or 'lower half'")]:
        paper_model, ours_model = PromptRecorder(seed=0), PromptRecorder(seed=0)
        pred = await METHODS[method]()(traj, MethodContext(model=bound(paper_model)))
        assert pred.details["prompts"] == "paper" and pred.step == traj.mistake_step
        assert all(phrase in p for p in paper_model.prompts) and all('"reason"' not in p for p in paper_model.prompts)
        pred = await METHODS[method](prompts="project")(traj, MethodContext(model=bound(ours_model)))
        assert pred.details["prompts"] == "project" and pred.step == traj.mistake_step
        assert all(phrase not in p and '"reason"' in p for p in ours_model.prompts)


async def test_the_papers_binary_search_shows_only_the_segment_and_asks_no_reason() -> None:
    traj = make_traj([f"A{i % 3}" for i in range(9)], 7)
    model = PromptRecorder(seed=0)
    pred = await METHODS["binary_search"]()(traj, MethodContext(model=bound(model)))
    assert pred.step == 7
    ranges = [p["range"] for p in pred.details["path"]]
    for (lo, hi), prompt in zip(ranges, model.prompts):
        shown = [int(i) for i in re.findall(r"^\[(\d+)\] ", prompt, re.M)]
        assert shown == list(range(lo, hi + 1)), (lo, hi, shown)
        assert "reason" not in prompt.split("Is the error more likely")[-1].lower().replace("reasoning", "")


async def test_a_paper_reply_naming_no_half_picks_a_seeded_random_half() -> None:
    traj = make_traj([f"A{i % 3}" for i in range(8)], 3)
    first = await METHODS["binary_search"]()(traj, MethodContext(model=bound(BabblingModel(seed=0)), seed=1))
    again = await METHODS["binary_search"]()(traj, MethodContext(model=bound(BabblingModel(seed=0)), seed=1))
    assert first.details["path"] == again.details["path"]
    assert {f["kind"] for f in first.details["fallbacks"]} == {"random_half"}


def test_an_unknown_prompt_set_is_refused_naming_the_option() -> None:
    from descriptor.errors import UserError

    with pytest.raises(UserError, match="prompts"):
        METHODS["all_at_once"](prompts="mine")


# ------------------------------------------------------------------ the real local model (opt-in: -m embedded)


@pytest.mark.embedded
async def test_all_methods_run_on_the_embedded_model() -> None:
    """Every LLM method returns a valid prediction from the real 0.5B model (JSON constrained by schema)."""
    from mas.config import ExperimentConfig, ModelRoute
    from mas.serving.server import _release_all
    from mas.llm.models import make_chat_model

    cfg = ExperimentConfig(models={"default": ModelRoute(provider="embedded", model="qwen2.5-coder-0.5b",
                                                         temperature=0.2, max_tokens=256)})
    from attribution.jobs import server_tokenizer

    served = make_chat_model(cfg, "default")
    try:
        mctx = MethodContext(model=served, route="default", context_window=served.route.context_window,
                             max_output_tokens=256, count_tokens=server_tokenizer(served))
        assert await mctx.count_tokens("1 2 3 4 5 6 7 8 9 0") >= 10  # the server's tokenizer: chars / 4 says 5
        for method in LLM_METHODS:
            pred = await METHODS[method]()(TRAJS[0], mctx)
            assert pred.agent is not None and pred.step is not None and 0 <= pred.step < TRAJS[0].n_steps
            assert pred.nfe >= 1 and pred.details["tokens_in"] > 0 and pred.details["tokens_out"] > 0
            assert pred.details["fit"]["max_prompt_tokens"] <= mctx.context_window
    finally:
        _release_all()


async def test_prompt_measured_over_budget_by_the_servers_tokenizer_is_refitted() -> None:
    """A tokenizer counting 2 characters a token (where the estimate assumes 4) forces smaller fits."""
    from attribution.llm.calls import CaseLedger
    from attribution.llm.prompting import messages, render_steps, step_views

    traj = make_traj(["human", "Planner", "Coder"] * 30, 40, tid="long", filler="value 3.14159, " * 20)

    async def count(text: str) -> int:
        return (len(text) + 1) // 2

    session = CaseLedger(bound=bound(ScriptedChatModel(seed=0)), context_window=2048, method="llm_naive", tokenizer=count)

    def build(budget: int):
        text, report = render_steps(step_views(traj), budget)
        return messages("system", f"Log:\n{text}\nWhich step?"), report

    await session.ask("score", build)
    fit = session.fits[-1]
    # chars / 4 alone would have sent about twice the budget; the measured prompt fits
    assert fit["refits"] >= 1 and fit["prompt_tokens"] <= session.prompt_budget
    assert fit["mode"] in ("compressed", "windowed")
