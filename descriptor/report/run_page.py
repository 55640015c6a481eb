"""What the run viewer shows of a run and of its rollbacks (from :class:`collect.RunData`), as plain data.

These dicts are the per-run data of the shared viewer page ``run.html`` (see
:mod:`descriptor.report.run_data`): texts are cut and formatted here, the
viewer only places them (as text, never as markup). Run file links are file
names: the viewer joins them to the task directory's path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from descriptor.records import RollbackRecord
from descriptor.report.attribution_inputs import RunAttribution
from descriptor.report.collect import RollbackData, RunData
from descriptor.report.render import json_text
from descriptor.report.page_file import page_data
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
        out += [("tokens", f"{m.tokens_total:,}"), ("cost", f"${m.cost_total:.6f}"), ("summed model latency", f"{m.latency_total:,.0f} ms"),
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


def _rollback_row(rb: RollbackData) -> dict[str, Any]:
    rec = rb.record or _UNKNOWN
    cls, outcome = _outcome(rec.success if rb.record is not None else None)
    return {
        "index": rb.index, "strategy": rec.strategy,
        "set": ", ".join(map(str, rec.set)) + (" (empty: fell back to the last step)" if rec.fallback else ""),
        "restart_step": rec.restart_step, "cls": cls, "outcome": outcome, "answer": cut(rec.answer, 200),
        "cost": f"{rec.cost:.2f}", "tokens": rec.tokens,
        "viewable": rb.events is not None, "problem": rb.problem,
    }


_UNKNOWN = RollbackRecord.model_construct(strategy="?", set=[], fallback=False, restart_step="?", answer="", cost=float("nan"),
                                          tokens="?", success=None, n_steps="?", decisive_step=None, covered=None)
"""Shown for a rollback whose record is unreadable (its problem is listed beside it)."""


def _attribution_panel(steps: Sequence[Sequence[Any]], attr: RunAttribution | None, marks: dict[int, list],
                       notes: list[str], run: RunData) -> dict[str, Any] | None:
    if attr is None and not run.rollbacks:
        return None
    labels = [label for label, _ in attr.scores] if attr else []
    scores = dict(attr.scores) if attr else {}
    rows = []
    for pos, (_, actor, event_type) in enumerate(steps):
        vals = [scores[label][pos] if pos < len(scores[label]) else None for label in labels]
        rows.append({"step": pos, "agent": actor, "type": event_type, "scores": vals,
                     "marks": marks.get(pos, []), "cls": "marked" if marks.get(pos) else ""})
    summary = []
    if attr:
        for label, members in attr.sets:
            summary.append(f"{label} set: steps {', '.join(map(str, members)) or '(empty)'} ({len(members)} of {len(steps)})")
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


def run_view(run: RunData, attr: RunAttribution | None) -> dict[str, Any]:
    """Everything the viewer shows of ``run`` (its own view; the task's other runs come from the runs index).

    The trace's part comes from the run's page data file when it matches the trace (:attr:`RunData.page`),
    else from the parsed events."""
    page = run.page
    if page is None:
        page = page_data(run.record.events if run.record is not None else ())
    steps = page["steps"]
    marks, notes = step_marks(steps, attr, run.rollbacks, run.injected)
    cls, badge, text = verdict(run)
    details = run.eval.details if run.eval is not None else None
    return {
        "verdict_cls": cls, "verdict": badge, "verdict_text": text, "answer": cut(run.answer, 4000),
        "reference": reference(run),
        "error": cut(run.result.error, 4000) if run.result is not None and run.result.error else None,
        "eval_details": json_text(details) if details else None, "question": cut(run.question, 8000),
        "facts": _facts(run, len(steps)), "issues": [i.warning().removeprefix("warning: ") for i in run.issues],
        "files": list(run.files.values()), "trace": run.files.get("trace"), "rollback_of": None,
        "attribution": _attribution_panel(steps, attr, marks, notes, run),
        "rollbacks": [_rollback_row(rb) for rb in run.rollbacks],
        "rows": page["rows"], "n_events": page["n_events"], "n_steps": len(steps),
        # Step position -> its marks, which the viewer places on the rows (kept as the page data file wrote them).
        "marks": {str(pos): m for pos, m in marks.items()},
    }


def rollback_view(run: RunData, rb: RollbackData) -> dict[str, Any]:
    """The viewer's data of rollback ``rb`` of ``run`` (its resumed trace)."""
    rec = rb.record or _UNKNOWN
    events = rb.events or []
    positions = step_positions(events)
    cls, badge = _outcome(rec.success if rb.record is not None else None)
    decisive = (f"; decisive step {rec.decisive_step} {'covered' if rec.covered else 'not covered'} by the set"
                if rec.decisive_step is not None else "")
    summary = (f"Strategy {rec.strategy}: flagged steps {rec.set}, restarted at step {rec.restart_step} of "
               f"{rec.n_steps} (share redone {rec.cost:.2f}), {rec.tokens} tokens; outcome: {badge}{decisive}.")
    return {
        "verdict_cls": cls, "verdict": badge,
        "verdict_text": json_text(rb.eval.model_dump()) if rb.eval is not None else "no eval file",
        "answer": cut(rec.answer, 4000), "reference": reference(run), "error": None, "eval_details": None,
        "question": "", "facts": [], "issues": [rb.problem] if rb.problem else [], "files": list(rb.files.values()),
        "trace": rb.files.get("trace"),
        "rollback_of": {"index": rb.index, "summary": summary, "restart_step": rec.restart_step},
        "attribution": None, "rollbacks": [], "rows": transcript(events, {}, positions),
        "n_events": len(events), "n_steps": len(positions),
    }
