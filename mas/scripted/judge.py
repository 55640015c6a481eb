"""The double's answers to the judge's contracts (``judge.consensus``, ``judge.vote``): a good judge, grouping
answers by normalised equality. The candidates (and the work under revision) arrive as the call's metadata
(``judge_candidates``, ``judge_work``), never read from the prompt. Both are judge contracts: the
``scripted:nojudge`` variant answers them without a verdict, and plain ``scripted`` is never asked (mock mode,
:mod:`mas.topologies.judge`)."""

from __future__ import annotations

import json
from typing import Any

from mas.scripted.scripting import ScriptedContext, responder
from mas.topologies.judge import vote_artifacts
from mas.topologies.termination import Candidate, lexical_view, normalize_artifact


def candidates(ctx: ScriptedContext) -> tuple[list[Candidate], list[dict[str, Any]]]:
    """The candidates the judge is shown, and their rows as the call's metadata carries them."""
    rows = ctx.metadata["judge_candidates"]
    return [Candidate(agent=r["agent"], artifact=r["answer"], confidence=r.get("confidence", 0.5),
                      evidence=r.get("tool_results_received", 0)) for r in rows], rows


@responder("judge.consensus", judge=True)
def consensus(ctx: ScriptedContext) -> str:
    cands, rows = candidates(ctx)
    view = lexical_view(cands, None)
    # progress as the lexical fallback measures it: over the work under revision when there is one
    changed = [normalize_artifact(r["answer"]) != normalize_artifact(r["previous_answer"])
               for r in ctx.metadata.get("judge_work") or rows if "previous_answer" in r]
    stalled = bool(changed) and not any(changed)
    return json.dumps({
        "groups": view.groups, "invalid_indices": view.invalid_indices, "is_substantive": view.is_substantive,
        "progress_status": "unclear" if not changed else "stalled" if stalled else "improving",
        "expected_improvement": "low" if stalled else "medium", "should_stop_for_no_progress": stalled,
        "explanation": f"{len(view.groups)} distinct answers; " + ("no agent changed its answer" if stalled
                                                                   else "answers are still moving"),
    })


@responder("judge.vote", judge=True)
def vote(ctx: ScriptedContext) -> str:
    cands, _ = candidates(ctx)
    out = vote_artifacts(cands)
    return json.dumps({"groups": out.groups, "winner_index": out.winner_index,
                       "invalid_indices": out.invalid_indices, "explanation": out.explanation})
