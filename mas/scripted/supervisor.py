"""Scripted answers to the supervisor's routing contract (``supervisor.route``)."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter

from langchain_core.messages import AIMessage

from mas.scripted.model import ScriptedContext, responder
from mas.topologies.supervisor import CONTRACT
from mas.topologies.termination import normalize_artifact

_WORKER_LINE = re.compile(r"^- (?P<name>worker_\d+)\b", re.MULTILINE)
_PACKET = re.compile(r"^\[(?P<sender>[^\]]+)\] answer: (?P<answer>.*?) \(confidence (?P<conf>[0-9.]+)\)",
                     re.MULTILINE | re.DOTALL)  # DOTALL: a code answer (SciCode) spans lines



def _plurality(packets: list[re.Match[str]]) -> tuple[str, float] | None:
    """The answer most workers reported (ties: the larger total confidence, then first seen)."""
    if not packets:
        return None
    votes: Counter[str] = Counter()
    conf: Counter[str] = Counter()
    first: dict[str, str] = {}
    for m in packets:
        key = normalize_artifact(m["answer"])
        votes[key] += 1
        conf[key] += float(m["conf"])
        first.setdefault(key, m["answer"].strip())
    best = max(votes, key=lambda k: (votes[k], conf[k]))
    return first[best], conf[best] / votes[best]


@responder(CONTRACT)
def scripted_supervisor(ctx: ScriptedContext) -> str | AIMessage:
    """Delegates to every listed worker; answers with the workers' plurality once asked for the final answer.

    Injected: routes to a worker that does not exist, or reports a wrong final value.
    """
    last = str(ctx.messages[-1].content)
    if "tools" in ctx.kwargs:
        workers = [m["name"] for m in _WORKER_LINE.finditer(last)]
        if ctx.inject:  # the wrong routing step: a worker that does not exist, so nobody gets the task
            workers = [f"worker_{len(workers) + 6}"]
        args = {"workers": workers, "instruction": "Solve the task step by step with the calculator and report the number."}
        if ctx.text_tools:
            return AIMessage(content="```json\n" + json.dumps({"name": "delegate", "arguments": args}) + "\n```")
        return AIMessage(content="", tool_calls=[{"name": "delegate", "args": args, "id": f"call_{uuid.uuid4().hex[:10]}"}])
    best = _plurality(list(_PACKET.finditer(last)))
    if best is None:
        return json.dumps({"reasoning": "No reports arrived.", "answer_artifact": "0", "confidence": 0.1})
    answer, conf = best
    if ctx.inject:
        answer = str(int(answer) + 1) if answer.lstrip("-").isdigit() else answer + " (unchecked)"
    return json.dumps({"reasoning": "Most workers reported this value.", "answer_artifact": answer,
                       "confidence": round(conf, 2)})
