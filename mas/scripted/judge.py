"""Scripted answers to the judge contracts: group answers by normalised equality, like a good judge would."""

from __future__ import annotations

import json
from typing import Any

from mas.scripted.model import ScriptedContext, responder
from mas.topologies.judge import CANDIDATES_HEADER, vote_artifacts
from mas.topologies.termination import Candidate, lexical_view, normalize_artifact


def _scripted_candidates(ctx: ScriptedContext) -> tuple[list[Candidate], list[dict[str, Any]]]:
    text = str(ctx.messages[-1].content)
    rows = json.loads(text.split(CANDIDATES_HEADER, 1)[1])
    return [Candidate(agent=r["agent"], artifact=r["answer"], confidence=r.get("confidence", 0.5),
                      evidence=r.get("tool_results_received", 0)) for r in rows], rows


@responder("judge.consensus", judge=True)
def scripted_consensus(ctx: ScriptedContext) -> str:
    cands, rows = _scripted_candidates(ctx)
    view = lexical_view(cands, None)
    changed = [normalize_artifact(r["answer"]) != normalize_artifact(r["previous_answer"])
               for r in rows if "previous_answer" in r]
    stalled = bool(changed) and not any(changed)
    return json.dumps({
        "groups": view.groups, "invalid_indices": view.invalid_indices, "is_substantive": view.is_substantive,
        "progress_status": "unclear" if not changed else "stalled" if stalled else "improving",
        "expected_improvement": "low" if stalled else "medium", "should_stop_for_no_progress": stalled,
        "explanation": f"{len(view.groups)} distinct answers; " + ("no agent changed its answer" if stalled
                                                                   else "answers are still moving"),
    })


@responder("judge.vote", judge=True)
def scripted_vote(ctx: ScriptedContext) -> str:
    cands, _ = _scripted_candidates(ctx)
    out = vote_artifacts(cands)
    return json.dumps({"groups": out.groups, "winner_index": out.winner_index,
                       "invalid_indices": out.invalid_indices, "explanation": out.explanation})
