"""The double's answer to the supervisor's contract (``supervisor.route``): it delegates to every worker of the
roster (the call's ``workers`` hint) and, asked for the final answer, gives the workers' plurality (the
``reports`` hint). Injected: it routes to a worker that does not exist, or reports a wrong final value."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from langchain_core.messages import AIMessage

from mas.scripted.replies import tool_call
from mas.scripted.scripting import ScriptedContext, responder
from mas.topologies.supervisor import CONTRACT
from mas.topologies.termination import normalize_artifact


def plurality(reports: list[dict[str, Any]]) -> tuple[str, float] | None:
    """The answer most workers reported (ties: the larger total confidence, then first seen) and its mean
    confidence."""
    if not reports:
        return None
    votes: Counter[str] = Counter()
    conf: Counter[str] = Counter()
    first: dict[str, str] = {}
    for rep in reports:
        key = normalize_artifact(rep["answer"])
        votes[key] += 1
        conf[key] += rep["confidence"]
        first.setdefault(key, rep["answer"])
    best = max(votes, key=lambda k: (votes[k], conf[k]))
    return first[best], conf[best] / votes[best]


@responder(CONTRACT)
def supervisor(ctx: ScriptedContext) -> str | AIMessage:
    """Delegates while its tool is bound; then the plurality of the reports (see the module docstring)."""
    if "tools" in ctx.kwargs:
        workers = list(ctx.hints.get("workers") or [])
        if ctx.inject:  # the wrong routing step: a worker that does not exist, so nobody gets the task
            workers = [f"worker_{len(workers) + 6}"]
        args = {"workers": workers,
                "instruction": "Solve the task step by step with the calculator and report the number."}
        return tool_call(ctx, "delegate", args)
    best = plurality(list(ctx.hints.get("reports") or []))
    if best is None:
        return json.dumps({"reasoning": "No reports arrived.", "answer_artifact": "0", "confidence": 0.1})
    answer, conf = best
    if ctx.inject:
        answer = str(int(answer) + 1) if answer.lstrip("-").isdigit() else answer + " (unchecked)"
    return json.dumps({"reasoning": "Most workers reported this value.", "answer_artifact": answer,
                       "confidence": round(conf, 2)})
