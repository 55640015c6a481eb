"""The readable communication trajectory of a run (``run_<r>.trajectory.json`` / ``.md``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from descriptor.io import write_json_atomic, write_text_atomic
from descriptor.schema import TraceEvent


def _summary(ev: TraceEvent) -> str:
    p = ev.payload
    if ev.event_type == "tool_call":
        return f"calls {p.get('tool')}({p.get('arguments')})"
    if ev.event_type == "tool_result":
        return f"{p.get('tool')} -> {'ok' if p.get('ok') else 'FAILED'}: {str(p.get('output', ''))[:200]}"
    if ev.event_type == "verify":
        return f"decision: {p.get('reason', p.get('verdict', ''))} {p.get('reason_detail', '')}".strip()
    if ev.event_type == "error":
        return f"error: {p.get('error', '')}"[:300]
    if "answer_artifact" in p:
        return f"answer: {str(p['answer_artifact'])[:300]} (confidence {p.get('confidence')})"
    return str(p.get("content", ""))[:300]


def trajectory(events: list[TraceEvent]) -> list[dict[str, Any]]:
    """One entry per event: who, what, to whom, in order."""
    return [
        {
            "seq": ev.seq,
            "step_index": ev.payload.get("step_index"),
            "actor": ev.actor,
            "event_type": ev.event_type,
            "to": [s["to"] for s in ev.payload.get("sends", [])],
            "summary": _summary(ev),
        }
        for ev in events
    ]


def write_trajectory(json_path: Path, md_path: Path, events: list[TraceEvent], question: str,
                     answer: str | None) -> None:
    """Write the trajectory as JSON and as a Markdown transcript."""
    rows = trajectory(events)
    write_json_atomic(json_path, {"question": question, "final_answer": answer, "events": rows})
    lines = ["# Trajectory", "", f"**Task:** {question}", ""]
    for r in rows:
        step = f"step {r['step_index']}" if r["step_index"] is not None else "-"
        to = f" → {', '.join(r['to'])}" if r["to"] else ""
        lines.append(f"- `{r['seq']:03d}` [{step}] **{r['actor']}** {r['event_type']}{to}: {r['summary']}")
    lines += ["", f"**Final answer:** {answer if answer is not None else '(none)'}", ""]
    write_text_atomic(md_path, "\n".join(lines))
