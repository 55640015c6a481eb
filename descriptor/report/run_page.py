"""Template context of a run page and of its rollbacks' pages (from :class:`collect.RunData`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from descriptor.events import Event
from descriptor.records import RollbackRecord
from descriptor.report.attribution_inputs import RunAttribution
from descriptor.report.collect import RollbackData, RunData
from descriptor.report.render import RUN_UP, Layout, json_text, script_json
from descriptor.report.run_view import cut, step_marks, step_positions, transcript


def reference(run: RunData) -> str:
    """The expected answer as text (``not recorded`` when neither metadata nor eval has it)."""
    ref = run.reference
    return "not recorded" if ref is None else cut(ref, 4000)


def _outcome(ok: bool | None) -> tuple[str, str]:
    return ("ok", "solved") if ok else ("fail", "not solved") if ok is False else ("skip", "unknown")


def verdict(run: RunData) -> tuple[str, str, str]:
    """(css class, badge, sentence) of the run's outcome."""
    if run.record is None:
        return "skip", "skipped", "skipped by the summaries (see below); the files are shown as they are"
    rec = run.record
    score = f" (score {rec.eval_score:g})"
    if rec.success:
        return "ok", "solved", "✓ correct" + score
    why = "no final answer" if not rec.completion else f"✗ wrong: answered {cut(run.answer, 200)}, expected {reference(run)}"
    return "fail", "not solved", why + score


def _facts(run: RunData, n_steps: int) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if run.record is not None:
        m = run.record.metrics
        out += [("tokens", f"{m.tokens_total:,}"), ("cost", f"${m.cost_total:.6f}"), ("latency", f"{m.latency_total:,.0f} ms"),
                ("events", str(m.steps_total)), ("tool calls", f"{m.tool_calls_total} ({m.tool_fail_total} failed)")]
    out.append(("steps", str(n_steps)))
    if run.result is not None:
        out.append(("wall time", f"{run.result.wall_time_s:.2f} s"))
        if run.result.status != "finished":
            out.append(("status", run.result.status))
    meta = run.metadata
    if meta is not None:
        out.append(("seed", str(meta.seed)))
        if meta.models:
            out.append(("models", ", ".join(f"{k}={v}" for k, v in sorted(meta.models.items()))))
        out.append(("started", meta.started_at))
    if (inj := run.injected) is not None:
        out.append(("injected error (scripted)", f"{inj['agent']} at step_index {inj['step']}"))
    return out


def _files(run: RunData, names: Sequence[str], layout: Layout) -> list[tuple[str, str]]:
    return [(name, RUN_UP + layout.file_rel(run.task_dir / name)) for name in names]


def _rollback_row(rb: RollbackData, layout: Layout, run: RunData) -> dict[str, Any]:
    rec = rb.record or _UNKNOWN
    cls, outcome = _outcome(rec.success if rb.record is not None else None)
    return {
        "index": rb.index, "strategy": rec.strategy,
        "set": ", ".join(map(str, rec.set)) + (" (empty: fell back to the last step)" if rec.fallback else ""),
        "restart_step": rec.restart_step, "cls": cls, "outcome": outcome, "answer": cut(rec.answer, 200),
        "cost": f"{rec.cost:.2f}", "tokens": rec.tokens,
        "href": (RUN_UP + layout.run_rel(run.benchmark, run.system, run.task_id, run.run_index, rb.index)
                 if rb.events is not None else None), "problem": rb.problem,
    }


_UNKNOWN = RollbackRecord.model_construct(strategy="?", set=[], fallback=False, restart_step="?", answer="", cost=float("nan"),
                                          tokens="?", success=None, n_steps="?", decisive_step=None, covered=None)
"""Shown for a rollback whose record is unreadable (its problem is listed beside it)."""


def _attribution_panel(events: Sequence[Event], positions: dict[int, int], attr: RunAttribution | None,
                       marks: dict[int, list], notes: list[str], run: RunData) -> dict[str, Any] | None:
    if attr is None and not run.rollbacks:
        return None
    labels = [label for label, _ in attr.scores] if attr else []
    scores = dict(attr.scores) if attr else {}
    rows = []
    for ev in events:
        pos = positions.get(ev.seq)
        if pos is None:
            continue
        vals = [scores[label][pos] if pos < len(scores[label]) else None for label in labels]
        rows.append({"step": pos, "agent": ev.actor, "type": ev.event_type, "scores": vals,
                     "marks": marks.get(pos, []), "cls": "marked" if marks.get(pos) else ""})
    summary = []
    if attr:
        for label, members in attr.sets:
            summary.append(f"{label} set: steps {', '.join(map(str, members)) or '(empty)'} ({len(members)} of {len(positions)})")
        for label, s in attr.scores:
            if s:
                top = max(range(len(s)), key=lambda i: (s[i], -i))
                summary.append(f"top-1 of {label}: step {top} (score {s[top]:.2f})")
        for label, agent, step, conf, err in attr.methods:
            summary.append(f"{label}: failed ({err})" if err else
                           f"{label} blames {agent or '?'} at step {step if step is not None else '?'}"
                           + (f" (confidence {conf:.2f})" if conf is not None else ""))
    if (inj := run.injected) is not None:
        summary.append(f"ground truth (scripted injection): {inj['agent']} at step_index {inj['step']}")
    for rb in run.rollbacks:
        if rb.record is not None:
            summary.append(f"rollback {rb.index} ({rb.record.strategy}) restarted at step {rb.record.restart_step}: "
                           f"{_outcome(rb.record.success)[1]}")
    return {"rows": rows, "score_labels": labels, "summary": summary, "notes": notes}


def run_context(run: RunData, layout: Layout, attr: RunAttribution | None,
                siblings: list[dict[str, Any]]) -> dict[str, Any]:
    """Everything ``run.html.j2`` needs for ``run``'s own page."""
    events = list(run.record.events) if run.record is not None else []
    positions = step_positions(events)
    marks, notes = step_marks(events, positions, attr, run.rollbacks, run.injected)
    cls, badge, text = verdict(run)
    details = run.eval.details if run.eval is not None else None
    trace = run.files.get("trace")
    return {
        "title": f"{run.system} · {run.task_id} · run {run.run_index}",
        "run": {"benchmark": run.benchmark, "system": run.system, "task_id": run.task_id,
                "run_index": run.run_index, "verdict_cls": cls, "verdict": badge, "verdict_text": text,
                "answer": cut(run.answer, 4000), "reference": reference(run),
                "error": cut(run.result.error, 4000) if run.result is not None and run.result.error else None,
                "eval_details": json_text(details) if details else None, "question": cut(run.question, 8000),
                "facts": _facts(run, len(positions)), "issues": [i.warning().removeprefix("warning: ") for i in run.issues],
                "files": _files(run, list(run.files.values()), layout)},
        "grid_href": RUN_UP + layout.task_rel(run.benchmark, run.task_id),
        "siblings": siblings, "rollback_of": None,
        "attribution": _attribution_panel(events, positions, attr, marks, notes, run),
        "rollbacks": [_rollback_row(rb, layout, run) for rb in run.rollbacks],
        "rows_json": script_json(transcript(events, marks, positions)), "n_events": len(events),
        "n_steps": len(positions), "trace_href": RUN_UP + layout.file_rel(run.task_dir / trace) if trace else None,
    }


def rollback_context(run: RunData, rb: RollbackData, layout: Layout) -> dict[str, Any]:
    """``run.html.j2`` context of rollback ``rb``'s page (its resumed trace)."""
    rec = rb.record or _UNKNOWN
    events = rb.events or []
    positions = step_positions(events)
    cls, badge = _outcome(rec.success if rb.record is not None else None)
    files = _files(run, list(rb.files.values()), layout)
    decisive = (f"; decisive step {rec.decisive_step} {'covered' if rec.covered else 'not covered'} by the set"
                if rec.decisive_step is not None else "")
    summary = (f"Strategy {rec.strategy}: flagged steps {rec.set}, restarted at step {rec.restart_step} of "
               f"{rec.n_steps} (share redone {rec.cost:.2f}), {rec.tokens} tokens; outcome: {badge}{decisive}.")
    trace = rb.files.get("trace")
    return {
        "title": f"{run.system} · {run.task_id} · run {run.run_index} · rollback {rb.index}",
        "run": {"benchmark": run.benchmark, "system": run.system, "task_id": run.task_id, "run_index": run.run_index,
                "verdict_cls": cls, "verdict": badge,
                "verdict_text": json_text(rb.eval.model_dump()) if rb.eval is not None else "no eval file",
                "answer": cut(rec.answer, 4000), "reference": reference(run), "error": None, "eval_details": None,
                "question": "", "facts": [], "issues": [rb.problem] if rb.problem else [], "files": files},
        "grid_href": RUN_UP + layout.task_rel(run.benchmark, run.task_id), "siblings": [],
        "rollback_of": {"index": rb.index, "summary": summary, "restart_step": rec.restart_step,
                        "href": RUN_UP + layout.run_rel(run.benchmark, run.system, run.task_id, run.run_index)},
        "attribution": None, "rollbacks": [], "rows_json": script_json(transcript(events, {}, positions)),
        "n_events": len(events), "n_steps": len(positions),
        "trace_href": RUN_UP + layout.file_rel(run.task_dir / trace) if trace else None,
    }
