"""The methods as their source texts write them (docs/fidelity.md): one test per item, each failing on the code
before it followed the text."""

from __future__ import annotations

import pytest

from mas.llm.confidence import parse_confidence
from mas.topologies.agent import parse_answer

# ---- confidence: the harness README's rule ("Average confidence") ----------------------------------------------


@pytest.mark.parametrize(("raw", "want"), [
    ("1.5", 1.0), ("-0.2", 0.0), ("0.7", 0.7), (0.25, 0.25), (85, 1.0), ("1e-1", 0.1),
    (None, 0.5), ("high", 0.5), ("9/10", 0.5), ("70%", 0.5), ("", 0.5), ("nan", 0.5), (True, 0.5), ([0.3], 0.5),
])
def test_an_answers_confidence_is_clipped_into_0_1_and_half_when_missing_or_unparsable(raw, want):
    answer = parse_answer({"answer_artifact": "42", "confidence": raw}, "")
    assert answer.confidence == pytest.approx(want)
    assert parse_confidence(raw, 0.5, "clip") == pytest.approx(want)


def test_the_percent_reading_is_one_setting_away():
    from mas.config import ExperimentConfig

    assert ExperimentConfig().mas.confidence_scale == "clip"
    assert parse_answer({"answer_artifact": "42", "confidence": "1.5"}, "", "percent").confidence == 0.015
    assert parse_answer({"answer_artifact": "42", "confidence": "high"}, "", "percent").confidence == 0.8


# ---- the orchestrator's termination judge sees the workers' artifacts (harness README, Progress / stall) -------


def test_the_orchestrators_judge_sees_each_workers_part_beside_its_previous_part(tmp_path, monkeypatch):
    import asyncio
    import json

    import mas.topologies.judge as judge_module
    from benchmark.registry import get_benchmark
    from mas.config import ExperimentConfig, ModelRoute
    from mas.sweep.runner import RunSpec, execute_run

    seen: list[tuple[str, dict]] = []
    real = judge_module.call_llm

    async def recording(model, messages, **kw):
        res = await real(model, messages, **kw)
        if kw.get("contract") == "judge.consensus":
            seen.append((messages[-1].content, kw["metadata"]))
            if len(seen) == 1:  # the first cycle's critic and aggregator agree: say they do not, for a second cycle
                res.parsed = {**res.parsed, "groups": [[0], [1]], "should_stop_for_no_progress": False}
        return res

    monkeypatch.setattr(judge_module, "call_llm", recording)
    cfg = ExperimentConfig(output_root=str(tmp_path), mas={"rounds": 2, "agents": 2},
                           models={"default": ModelRoute(provider="scripted", model="scripted:judge")})
    bench = get_benchmark("arith", None)
    spec = RunSpec(experiment_id="e", output_root=tmp_path, benchmark="arith", system="orchestrator",
                   task=bench.load_tasks(1)[0], run_index=0, seed=0)
    asyncio.run(execute_run(spec, cfg, bench))
    assert seen
    for prompt, meta in seen:
        workers = [row["agent"] for row in meta["judge_work"]]
        assert workers == ["worker_0", "worker_1"]
        shown = json.loads(prompt.split(judge_module.WORK_HEADER, 1)[1])
        assert [row["agent"] for row in shown] == workers
    later = [meta for _, meta in seen if any("previous_answer" in r for r in meta["judge_work"])]
    assert later and all("previous_answer" in r for meta in later for r in meta["judge_work"])


async def test_the_judge_and_the_lexical_fallback_judge_progress_on_the_same_artifacts():
    from mas.topologies.termination import Candidate, LoopPosition, decide

    def cands(*answers, prefix):
        return [Candidate(agent=f"{prefix}{i}", artifact=a) for i, a in enumerate(answers)]

    got = []

    async def judge(voters, previous, work):
        got.append(work)
        from mas.topologies.termination import ConsensusView, JudgeOutcome
        return JudgeOutcome(view=ConsensusView(groups=[[0], [1]], is_substantive=True))

    workers, before = cands("12", "30", prefix="w"), cands("12", "29", prefix="w")
    await decide(LoopPosition(stage="orchestrator", round=2, max_rounds=3), candidate_artifacts=workers,
                 previous_candidate_artifacts=before, consensus_artifacts=cands("42", "41", prefix="v"),
                 previous_consensus_artifacts=cands("40", "41", prefix="v"), expected_count=2, mode="llm_judge",
                 judge=judge)
    assert [c.agent for c in got[0].current] == ["w0", "w1"] and got[0].previous == before
