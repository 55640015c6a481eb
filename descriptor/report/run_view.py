"""One run's page content: the transcript step by step, the verdict, attribution marks.

Rows are plain dicts for the template. A ``tool_result`` is shown inside the
``tool_call`` it answers (matched by ``tool_call_id``, else the call just
before it). Round headers follow the agents' ``payload.round`` (or
``payload.cycle``); system actors (controller, judge) never start a round:
their ``round`` counts differently per topology. Long texts are cut at
:data:`MAX_TEXT` characters, with the count of what was cut (the trace file
has it all).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from descriptor.events import Decision, Event, FinalAnswer, FinalVote, is_system_actor
from descriptor.report.attribution_inputs import RunAttribution

MAX_TEXT = 20_000
"""Characters of one content field shown on a run page."""
SHOWN = frozenset({
    "role", "content", "round", "cycle", "step_index", "tool", "arguments", "tool_call_id", "tool_protocol",
    "sends", "answer_artifact", "confidence", "reasoning", "parse", "input_messages", "ok", "output", "redo", "kind",
})
DECISION_KEYS = ("stage", "stop", "reason", "reason_detail", "held_back", "consensus_ratio", "consensus_groups",
                 "lexical_groups", "lexical_ratio", "consensus_answer", "consensus_source", "consensus_explanation", "progress_status",
                 "expected_improvement", "average_confidence", "valid_artifact_count", "expected_count")
VOTE_KEYS = ("kind", "vote_source", "winner_agent", "winner_index", "groups", "invalid_indices", "explanation",
             "judge_error", "selection", "source_agent")


_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str)
"""One encoder for every value shown (json.dumps with options builds a new encoder per call)."""


def cut(text: Any, limit: int = MAX_TEXT) -> str:
    """``text`` as a string, cut at ``limit`` characters with a note of how many were left out."""
    s = text if isinstance(text, str) else _JSON.encode(text)
    return s if len(s) <= limit else f"{s[:limit]}\n… ({len(s) - limit} more characters in the trace file)"


_PLAIN = frozenset({str, int, float, bool})


def payload_dict(ev: Event) -> dict[str, Any]:
    """The event's payload as plain data without its unset fields (declared fields and extra keys alike).

    Read from the model's attributes, not dumped: a dump per event cost seconds at 10,000 runs.
    """
    p = ev.payload
    out = {k: v for k, v in p.__dict__.items() if v is not None}
    if p.__pydantic_extra__:
        out.update((k, v) for k, v in p.__pydantic_extra__.items() if v is not None)
    if "sends" in out:
        out["sends"] = [{"from": x.from_, "to": x.to} if isinstance(x, BaseModel) else x for x in out["sends"]]
    for k, v in out.items():
        if type(v) in _PLAIN:  # most values: nothing to convert (a page is built for every run as it ends)
            continue
        if isinstance(v, BaseModel):
            out[k] = v.model_dump(by_alias=True, exclude_none=True)
        elif isinstance(v, list) and v and isinstance(v[0], BaseModel):  # input_messages
            out[k] = [x.model_dump(by_alias=True, exclude_none=True) for x in v]
    if ev.event_type == "error":
        out["error_kind"] = out.pop("kind", None)  # what failed: worth showing, unlike the other payload kinds
    return out


def step_positions(events: Sequence[Event]) -> dict[int, int]:
    """seq -> trajectory step position (the n-th event with a ``step_index``), as attribution counts."""
    out, n = {}, 0
    for ev in events:
        if ev.step_index is not None:
            out[ev.seq] = n
            n += 1
    return out


def _messages(p: dict[str, Any]) -> list[dict[str, str]] | None:
    msgs = p.get("input_messages")
    if not isinstance(msgs, list):
        return None
    out = []
    for m in msgs:
        if isinstance(m, dict):
            out.append({"role": str(m.get("role", "?")), "content": cut(m.get("content", ""))})
        else:
            out.append({"role": "?", "content": cut(m)})
    return out


def show(v: Any) -> str:
    """A payload value for people: floats to 3 significant digits, agent groups as {a, b} | {c}."""
    if isinstance(v, bool) or v is None:
        return "true" if v is True else "false" if v is False else "null"
    if isinstance(v, float):
        return f"{v:.3g}"
    if isinstance(v, list) and v and all(isinstance(g, list) for g in v):
        return " | ".join("{" + ", ".join(map(str, g)) + "}" for g in v)
    return cut(v, 2000)


def _pick(p: dict[str, Any], keys: Sequence[str]) -> list[tuple[str, str]]:
    return [(k, show(p[k])) for k in keys if p.get(k) is not None and p.get(k) != ""]


def _decision(p: dict[str, Any]) -> list[tuple[str, str]]:
    """A controller verify event: the decision first (stop and why, or continue), then the evidence."""
    head = f"stop: {p.get('reason') or 'no reason given'}" if p.get("stop") is True else "continue"
    return [("decision", head), *[kv for kv in _pick(p, DECISION_KEYS) if kv[0] not in ("stop", "reason")]]


def _results_by_call(events: Sequence[Event]) -> tuple[dict[int, Event], set[int]]:
    """tool_call seq -> its tool_result event, and the seqs of results placed that way."""
    calls: dict[str, int] = {}
    last_open: int | None = None
    out: dict[int, Event] = {}
    for ev in events:
        if ev.event_type not in ("tool_call", "tool_result"):
            continue
        call_id = ev.payload.tool_call_id  # type: ignore[union-attr]
        if ev.event_type == "tool_call":
            if call_id:
                calls[str(call_id)] = ev.seq
            last_open = ev.seq
        elif ev.event_type == "tool_result":
            seq = calls.pop(str(call_id), None) if call_id else None
            if seq is None and last_open is not None and last_open not in out:
                seq = last_open
            if seq is not None and seq not in out:
                out[seq] = ev
    return out, {ev.seq for ev in out.values()}


_DECISION_USED = SHOWN | set(DECISION_KEYS)
_VOTE_USED = SHOWN | set(VOTE_KEYS)


def _ms(v: float | None) -> float | None:
    """A latency (ms) to the 0.1 ms the viewer shows: the digits below are noise that compresses badly."""
    return None if v is None else round(v, 1)


def _tool(p: dict[str, Any], res: Event | None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.get("tool") or ""}
    if "arguments" in p:
        out["args"] = cut(p["arguments"], 4000)
    if res is not None:
        rp = res.payload
        out["result"] = {"ok": getattr(rp, "ok", True) is not False, "output": cut(getattr(rp, "output", "")),
                         "ms": _ms(res.latency_ms)}
    return out


def event_row(ev: Event, pos: int | None, marks: list[tuple[str, str]], result: Event | None,
              p: dict[str, Any]) -> dict[str, Any]:
    """One event for the page's script; empty fields are left out (the script reads a missing field as empty).
    ``p``: the event's :func:`payload_dict`."""
    system = is_system_actor(ev.actor)
    row: dict[str, Any] = {"seq": ev.seq, "actor": ev.actor, "type": ev.event_type, "ms": _ms(ev.latency_ms)}
    if pos is not None:
        row["step"] = pos
    if system:
        row["system"] = True
    if p.get("role"):
        row["role"] = p["role"]
    if ev.token_in or ev.token_out:
        row["tin"], row["tout"] = ev.token_in, ev.token_out
    if ev.cost_usd:
        row["usd"] = ev.cost_usd
    content = p.get("content")
    if content:
        row["content"] = cut(content)
    sends = p.get("sends")
    if sends:
        row["to"] = [x.get("to") for x in sends if isinstance(x, dict)]
    if p.get("answer_artifact") not in (None, ""):
        row["answer"] = cut(p["answer_artifact"], 2000)
        if p.get("confidence") is not None:
            row["confidence"] = p["confidence"]
    if p.get("redo") is True:
        row["redo"] = True
    if "input_messages" in p and (msgs := _messages(p)):
        row["prompt"] = msgs
    if marks:
        row["marks"] = marks
    used = SHOWN
    if ev.event_type in ("tool_call", "tool_result"):
        row["tool"] = _tool(p, result if ev.event_type == "tool_call" else ev)
        if ev.event_type == "tool_call" and isinstance(content, str) and content.startswith(f"{p.get('tool')}("):
            row.pop("content", None)  # the call's text only repeats tool name and arguments
    if isinstance(ev.payload, Decision):
        row["decision"], used = _decision(p), _DECISION_USED
    elif isinstance(ev.payload, FinalVote | FinalAnswer):
        row["vote"], used = _pick(p, VOTE_KEYS), _VOTE_USED
    other = [(k, show(v)) for k, v in sorted(p.items()) if k not in used]
    if other:
        row["other"] = other
    return row


def transcript(events: Sequence[Event], marks: dict[int, list[tuple[str, str]]],
               positions: dict[int, int]) -> list[dict[str, Any]]:
    """Rows for the page's script: ``{"header": "round 1"}`` or an :func:`event_row` (see the module docstring).

    ``marks``: step position -> [(css class, text)] shown on that step; ``positions``: :func:`step_positions`.
    """
    results, nested = _results_by_call(events)
    rows: list[dict[str, Any]] = []
    current: tuple[str, Any] | None = None
    for ev in events:
        if ev.seq in nested:
            continue
        p = payload_dict(ev)
        if not is_system_actor(ev.actor):
            rnd, cyc = p.get("round"), p.get("cycle")
            phase = ("round", rnd) if rnd is not None else ("cycle", cyc) if cyc is not None else None
            if phase is not None and phase != current:
                current = phase
                rows.append({"header": f"{phase[0]} {phase[1]}"})
        pos = positions.get(ev.seq)
        rows.append(event_row(ev, pos, marks.get(pos, []) if pos is not None else [], results.get(ev.seq), p))
    return rows


def step_marks(steps: Sequence[Sequence[Any]], attribution: RunAttribution | None, rollbacks: Sequence[Any],
               injected: dict[str, Any] | None) -> tuple[dict[int, list[tuple[str, str]]], list[str]]:
    """Step position -> marks from attribution outputs, rollbacks and the scripted injected error; and notes
    about records that do not fit this trace (their step count differs).

    ``steps``: per step position, ``[step_index, actor, event_type]`` (:func:`descriptor.report.page_file.page_data`).
    """
    n = len(steps)
    marks: dict[int, list[tuple[str, str]]] = {}
    notes: list[str] = []

    def add(pos: int | None, cls: str, text: str) -> None:
        if pos is not None and 0 <= pos < n:
            marks.setdefault(pos, []).append((cls, text))

    if injected and step_index_value(injected.get("step")) is not None:
        by_index = {step[0]: pos for pos, step in enumerate(steps)}
        add(by_index.get(injected["step"]), "truth", f"injected error ({injected.get('agent') or 'agent'})")
    if attribution is not None:
        bad = {label for label, m in attribution.n_steps if m != n}
        notes += [f"{label}: the record has a different step count than this trace ({n}); not shown" for label in sorted(bad)]
        for label, scores in attribution.scores:
            if label in bad:
                continue
            top = max(range(len(scores)), key=lambda i: (scores[i], -i)) if scores else None
            add(top, "top1", f"top-1 of {label} ({scores[top]:.2f})" if top is not None else "")
        for label, members in attribution.sets:
            if label not in bad:
                for s in members:
                    add(s, "set", f"in {label} set")
        for label, agent, step, conf, err in attribution.methods:
            if label not in bad and err is None:
                add(step, "blame", f"{label} blames {agent or '?'} here")
    for rb in rollbacks:
        if rb.record is not None:
            add(rb.record.restart_step, "rollback", f"rollback {rb.index} restarts here")
    return marks, notes


def step_index_value(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None
