"""The readable communication trajectory of a run (``run_<r>.trajectory.json`` / ``.md``).

The Markdown transcript is what a person opens first: the task, the expected
answer, every step with its tokens and latency under a header per round,
the controller's decisions with their reason, the final vote, and at the
end the answer with the benchmark's verdict.
"""

from __future__ import annotations

from typing import Any

from descriptor.events import (
    AgentOutput,
    Decision,
    Election,
    ErrorInfo,
    Event,
    FinalAnswer,
    FinalVote,
    PersonaAssignment,
    ToolCall,
    ToolResult,
)
from descriptor.io import write_json_atomic, write_text_atomic
from descriptor.layout import RunPaths

SUMMARY_CHARS = 300


def _seen(order: list[int] | None, candidates: list[str]) -> str:
    """The order a judge model saw the candidates in (its explanation numbers them so), or nothing."""
    if not order or not all(0 <= i < len(candidates) for i in order):
        return ""
    return f" (the judge saw {', '.join(candidates[i] for i in order)}, in that order)"


def _clip(text: str, n: int = SUMMARY_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def summary(ev: Event) -> str:
    """One line saying what the event did."""
    p = ev.payload
    if isinstance(p, ToolCall):
        return f"calls {p.tool}({_clip(str(p.arguments), 200)})"
    if isinstance(p, ToolResult):
        status = ("ok, changed the environment" if p.state_changing else "ok") if p.ok else "FAILED"
        return f"{p.tool} -> {status}: {_clip(p.output, 200)}"
    if isinstance(p, Decision):
        verdict = f"stop: {p.reason}" if p.stop else "continue"
        groups = " | ".join(", ".join(g) for g in p.consensus_groups)
        return (f"{p.stage} round {p.round}: {verdict} — {p.reason_detail} (consensus {p.consensus_ratio:.2f} "
                f"by {p.consensus_source}{'; groups: ' + groups if groups else ''})")
    if isinstance(p, FinalVote):
        groups = " | ".join(", ".join(g) for g in p.groups)
        return (f"final vote ({p.vote_source}): {p.winner_agent} wins; groups: {groups}"
                f"{_seen(p.shown_order, p.candidates)}. {_clip(p.explanation, 200)}")
    if isinstance(p, PersonaAssignment):
        return _clip("personas: " + (p.content or p.error or "none"), 600)
    if isinstance(p, Election):
        groups = " | ".join(", ".join(g) for g in p.groups)
        return (f"group {p.group} elects {p.elected}, who speaks as {p.representative} ({p.vote_source}); "
                f"groups: {groups}{_seen(p.shown_order, p.members)}")
    if isinstance(p, FinalAnswer):
        return f"publishes {p.source_agent}'s answer ({p.selection}): {_clip(p.answer_artifact)}"
    if isinstance(p, ErrorInfo):
        retry = " (will retry)" if p.will_retry else ""
        return _clip(f"error [{p.kind}]{retry}: {p.error}")
    if isinstance(p, AgentOutput):
        if ev.event_type == "verify":  # a critic's verdict: the answer it finds right, and the errors it found
            return (f"verdict: {_clip(p.answer_artifact)} (confidence {p.confidence:.2f})"
                    + (f" — {_clip(p.reasoning, 300)}" if p.reasoning else ""))
        return f"answer: {_clip(p.answer_artifact)} (confidence {p.confidence:.2f})"
    return _clip(getattr(p, "content", ""))


def _round_of(ev: Event) -> str | None:
    p = ev.payload
    if isinstance(p, Decision):
        return None
    extra = p.__pydantic_extra__
    for field in ("round", "cycle"):
        # getattr(p, field, None) without pydantic's raising __getattr__ for a payload that has no such field
        value = p.__dict__.get(field)
        if value is None and extra:
            value = extra.get(field)
        if isinstance(value, int):
            return f"{field} {value}"
    return None


TRAJECTORY_COLUMNS = ("seq", "step_index", "actor", "role", "event_type", "round", "to", "tokens", "latency_ms",
                      "summary")
"""The fields of a trajectory row, in ``trajectory.json``'s column order."""


def trajectory(events: list[Event]) -> list[dict[str, Any]]:
    """One entry per event: who, what, to whom, at what cost, in order."""
    return [
        {
            "seq": ev.seq,
            "step_index": ev.step_index,
            "actor": ev.actor,
            "role": getattr(ev.payload, "role", None),
            "event_type": ev.event_type,
            "round": _round_of(ev),
            "to": [s.to for s in ev.payload.sends or ()],
            "tokens": ev.token_in + ev.token_out,
            "latency_ms": round(ev.latency_ms, 1),
            "summary": summary(ev),
        }
        for ev in events
    ]


def _verdict_line(evaluation: dict[str, Any] | None) -> str:
    if evaluation is None:
        return "**Verdict:** not evaluated"
    mark = "correct" if evaluation.get("success") else "WRONG"
    return f"**Verdict:** {mark} (score {evaluation.get('score')})"


def write_trajectory(paths: RunPaths, events: list[Event], question: str, answer: str | None, *,
                     reference: Any = None, evaluation: dict[str, Any] | None = None,
                     error: str | None = None, staged: bool = False) -> None:
    """Write the trajectory as JSON and as a Markdown transcript (``staged``: see
    :func:`descriptor.io.write_bytes_atomic`)."""
    rows = trajectory(events)
    # Compact: the Markdown transcript is the one people read; indentation was half of this file's bytes. The
    # events are a table, its column names once and a row of values per event (pandas' "split" orient:
    # ``pd.DataFrame(**data["events"])``): the names repeated in every event were a third of the file
    # (4.2 -> 2.9 KB a run of a scripted sweep), and no field is dropped.
    table = {"columns": list(TRAJECTORY_COLUMNS), "data": [[r[c] for c in TRAJECTORY_COLUMNS] for r in rows]}
    # Not fsynced: result.json, written after it with an fsync, is the run's commit.
    write_json_atomic(paths.trajectory_json, {"question": question, "expected": reference, "final_answer": answer,
                                              "evaluation": evaluation, "error": error, "events": table},
                      indent=None, durable=False, staged=staged)
    lines = ["# Trajectory", "", f"**Task:** {question}", ""]
    if reference is not None:
        lines += [f"**Expected:** {_clip(str(reference), 500)}", ""]
    current: str | None = None
    for r in rows:
        if r["round"] is not None and r["round"] != current:
            current = r["round"]
            lines += ["", f"## {current.capitalize()}", ""]
        step = f"step {r['step_index']}" if r["step_index"] is not None else "-"
        to = f" → {', '.join(r['to'])}" if r["to"] else ""
        cost = f" ({r['tokens']} tokens, {r['latency_ms']:.0f} ms)" if r["tokens"] else ""
        lines.append(f"- `{r['seq']:03d}` [{step}] **{r['actor']}** {r['event_type']}{to}{cost}: {r['summary']}")
    lines += ["", f"**Final answer:** {answer if answer is not None else '(none)'}", ""]
    if error is not None:
        lines += [f"**Run error:** {_clip(error, 500)}", ""]
    lines += [_verdict_line(evaluation), ""]
    write_text_atomic(paths.trajectory_md, "\n".join(lines), durable=False, staged=staged)
