"""``write_report``: the experiment report, from the run files to ``<root>/report/index.html``.

One pass over the task directories (runs are read, their data files written,
and their events dropped, so memory stays flat at 10,000 runs), then the
index and grid pages, the runs index and the run viewer page from the per-run
rows and task descriptors.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from descriptor.economics import EconomicsSettings, compute_economics
from descriptor.errors import UserError
from descriptor.io import write_derived_json
from descriptor.judge_audit import JUDGE_AUDIT_FILE, AuditRow, audit, audit_warnings
from descriptor.layout import ATTRIBUTION_DIR, split_unit
import descriptor.report.collect as collect
from descriptor.provenance import price_notes, provenance_notes
from descriptor.report.analysis import (
    FEW_TASKS,
    MATCHED_SAS,
    RunRow,
    compare_roots,
    matching_sentence,
    overview,
    paired_rows,
    problem_overview,
)
from descriptor.report.attribution_inputs import AttributionIndex, load_attribution
from descriptor.report.charts import difference_chart, pca_chart, quality_cost_chart
from descriptor.report.render import (
    GRID_PAGE,
    Layout,
    environment,
    href,
    staged,
    write_assets,
    write_file,
    write_page,
)
from descriptor.report.run_data import index_js
from descriptor.report.runs_pass import Also, Pages, PassResult, read_all, read_experiment
from descriptor.report.svg import PALETTE
from descriptor.stats import bootstrap_mean_ci
from descriptor.topology_analysis import analyse_topology

FAILURES_SHOWN = 200
"""Failed runs listed on the index (all of them are in the grid)."""


def write_report(experiment_root: str | Path, *, out: str | Path | None = None, compare: Sequence[str | Path] = (),
                 baseline: str | None = None, attribution: Sequence[str | Path] = (), lam: float | None = None,
                 cost_unit: str = "tokens", seed: int = 0) -> Path:
    """Write the experiment report and return the path of its ``index.html``.

    ``out``: the report directory (default ``<experiment_root>/report``).
    ``compare``: other experiment roots shown against this one. ``attribution``:
    extra score, predict-set or attribute outputs (``<root>/attribution/`` is
    always searched). ``lam``/``cost_unit``/``baseline``/``seed``: as for
    ``summarize-experiment``. Raises :class:`UserError` for a root without finished runs.

    >>> # write_report("artifacts/e1")  -> Path("artifacts/e1/report/index.html")
    """
    with report_build(experiment_root, out=out, compare=compare, baseline=baseline, attribution=attribution,
                      lam=lam, cost_unit=cost_unit, seed=seed) as build:
        pass
    return build.index


@dataclass(kw_only=True, slots=True)
class ReportBuild:
    """A report being written (see :func:`report_build`): its pass over the runs, then its pages."""

    root: Path
    task_dirs: list[collect.TaskDir]
    pages: Pages
    settings: EconomicsSettings
    others: list[Path]
    out_dir: Path
    result: PassResult | None = None

    @property
    def index(self) -> Path:
        return self.out_dir / "index.html"

    def read(self, also: Also | None = None, only: Sequence[Path] = (), *,
             meanwhile: Callable[[], object] | None = None) -> dict[Path, Any]:
        """The report's one pass over every run (once); ``also`` is called with the runs of the task
        directories ``only`` as they are read (the summaries' descriptors: the runs are read once for both),
        and what it returned is returned by task directory. ``meanwhile``: see
        :func:`~descriptor.parallel.fork_chunks`."""
        assert self.result is None, "the report's runs are read once"
        self.result = read_all(self.root, self.task_dirs, self.pages,
                               (also, frozenset(only)) if also is not None else None, meanwhile)
        return self.result.also


@contextlib.contextmanager
def report_build(experiment_root: str | Path, *, out: str | Path | None = None, compare: Sequence[str | Path] = (),
                 baseline: str | None = None, attribution: Sequence[str | Path] = (), lam: float | None = None,
                 cost_unit: str = "tokens", seed: int = 0) -> Iterator[ReportBuild]:
    """The report of :func:`write_report` as a context: its runs are read by :meth:`ReportBuild.read` (in the
    body, or at its end when the body did not), its pages written when the body ends without an error, and
    nothing is replaced when it raises. ``summarize-experiment`` reads the runs of its summaries through it."""
    root = Path(experiment_root)
    if not root.is_dir():
        raise UserError(f"--experiment-root {root}: not a directory (expected <root>/<benchmark>/<system>/<task_id>/)")
    settings = EconomicsSettings.for_unit(cost_unit, lam=lam, baseline=baseline or "sas", seed=seed)
    out_dir = Path(out) if out is not None else root / "report"
    others = [Path(c) for c in compare]
    for c in others:
        if not c.is_dir():
            raise UserError(f"--compare {c}: not a directory (expected another experiment root)")
    task_dirs = collect.scan(root)
    if not any(td.finished for td in task_dirs):
        raise UserError(f"{root}: no finished run found (expected <benchmark>/<system>/<task_id>/run_<r>.result.json)")
    for c in others:  # a root to compare against that holds no run would show as an empty column
        if not any(td.finished for td in collect.scan(c)):
            raise UserError(f"--compare {c}: no finished run found (expected another experiment root)")
    systems = {td.system for td in task_dirs if td.finished}
    if baseline is not None and baseline not in systems:  # as summarize-experiment refuses it: nothing to compare
        raise UserError(f"--baseline {baseline!r}: no such system under {root}; systems: {', '.join(sorted(systems))}")
    run_keys = [f"{td.benchmark}/{td.system}/{td.task_id}/run_{r}" for td in task_dirs for r in td.finished]
    attr = load_attribution([root / ATTRIBUTION_DIR], run_keys, explicit=[Path(a) for a in attribution])
    tasks_by_bench: dict[str, list[str]] = {}
    for td in task_dirs:
        tasks_by_bench.setdefault(td.benchmark, []).append(td.task_id)
    with staged(out_dir) as stage:
        # Built in a staging directory beside out_dir (same parent): relative links are the same from both.
        layout = Layout(out=stage, root=root)
        layout.plan_grid(tasks_by_bench)
        write_assets(stage)
        build = ReportBuild(root=root, task_dirs=task_dirs, pages=Pages(layout=layout, attribution=attr),
                            settings=settings, others=others, out_dir=out_dir)
        yield build
        if build.result is None:
            build.read()
        assert build.result is not None
        compared = [(c, read_experiment(c, None).descriptors) for c in others]
        _write_index(layout, root, build.result, attr, settings, compared, out_dir)
        _write_viewer(layout, root, build.result)


def _colors(systems: Sequence[str], baseline: str) -> dict[str, str]:
    ordered = sorted(systems, key=lambda s: (s != baseline, s))
    return {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(ordered)}


def _charts(layout: Layout, ov: list[dict[str, Any]], paired: list[dict[str, Any]], descriptors: list[dict[str, Any]],
            settings: EconomicsSettings, colors: dict[str, str]) -> list[dict[str, Any]]:
    topology = analyse_topology(descriptors, settings) if descriptors else {}
    unit = "tokens per run" if settings.cost_unit == "tokens" else "USD per run"
    out = []
    for bench in sorted({o["benchmark"] for o in ov}):
        pts = []
        for o in (o for o in ov if o["benchmark"] == bench):
            costs = [settings.cost(d) for d in descriptors if d["benchmark"] == bench and d["system"] == o["system"]]
            lo, hi = bootstrap_mean_ci(costs, seed=settings.seed)
            pts.append({"system": o["system"], "cost": sum(costs) / len(costs), "cost_lo": lo, "cost_hi": hi,
                        "success": o["success"], "success_lo": o["success_lo"], "success_hi": o["success_hi"]})
        hrefs = {t: layout.task_rel(bench, t) for t in layout_tasks(layout, bench)}
        diffs = [difference_chart(r, colors[r["system"]], hrefs, cost_label=unit.removesuffix(" per run"))
                 for r in paired if r["benchmark"] == bench]
        out.append({"benchmark": bench, "quality_cost": quality_cost_chart(bench, pts, colors, cost_label=unit),
                    "differences": diffs, "pca": pca_chart(bench, topology[bench]["pca"], colors) if bench in topology else ""})
    return out


def layout_tasks(layout: Layout, bench: str) -> list[str]:
    return [t for page in layout.grid_pages.get(bench, []) for t in page]


def _grids(layout: Layout, rows: list[RunRow], facts: dict[str, Any], baseline: str) -> list[dict[str, Any]]:
    """Every grid page (benchmark, page number) with its rows; hrefs relative to the report directory (the
    template prefixes them with the page's way up)."""
    by_cell: dict[tuple[str, str, str], list[RunRow]] = {}
    for r in rows:
        by_cell.setdefault((r.benchmark, r.task_id, r.system), []).append(r)
    pages = []
    for bench, task_pages in layout.grid_pages.items():
        systems = sorted({r.system for r in rows if r.benchmark == bench}, key=lambda s: (s != baseline, s))
        n_tasks = sum(len(p) for p in task_pages)
        for n, tasks in enumerate(task_pages, 1):
            grid_rows = []
            for t in tasks:
                cells, rates = [], []
                for s in systems:
                    cell = []
                    for r in sorted(by_cell.get((bench, t, s), []), key=lambda r: r.run_index):
                        cls = r.cls
                        title = (f"{s} run {r.run_index}: " + (
                                 "infrastructure error (no task result)" if r.errored else
                                 "skipped (damaged files)" if not r.included else
                                 f"{'solved' if r.success else 'not solved'}, answer {r.answer!r}, {r.tokens:,} tokens"
                                 + ("; U: its tests compare no target (a pass checks properties, not the reference's "
                                    "values)" if r.untargeted and r.success else "")))
                        cell.append({"run_index": r.run_index, "cls": cls, "title": title, "flags": r.flags,
                                     "href": r.href})
                    inc = [r for r in by_cell.get((bench, t, s), []) if r.included]
                    if inc:
                        rates.append(sum(1 for r in inc if r.success) / len(inc))
                    cells.append(cell)
                ref, question = facts["tasks"].get((bench, t), ("", ""))
                grid_rows.append({"task_id": t, "anchor": layout.anchor(bench, t), "reference": ref, "question": question,
                                  "cells": cells, "differs": len(set(rates)) > 1,
                                  "failed": any(c["cls"] != "ok" for cell in cells for c in cell)})
            pages.append({"benchmark": bench, "systems": systems, "rows": grid_rows, "page": n, "n_tasks": n_tasks,
                          "first": (n - 1) * GRID_PAGE + 1, "last": (n - 1) * GRID_PAGE + len(tasks),
                          "pages": [{"n": k, "href": layout.grid_rel(bench, k)}
                                    for k in range(1, len(task_pages) + 1)]})
    return pages


def _failures(rows: list[RunRow], attr: AttributionIndex, facts: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        if not r.included or r.success:
            continue
        key = f"{r.benchmark}/{r.system}/{r.task_id}/run_{r.run_index}"
        a = attr.by_run.get(key)
        bits = []
        if a:
            bits += [f"{label}: {{{', '.join(map(str, s))}}}" for label, s in a.sets]
            bits += [f"top-1 {label}: {max(range(len(s)), key=lambda i: (s[i], -i))}" for label, s in a.scores if s]
            bits += [f"{label}: {agent} @ {step}" for label, agent, step, _, err in a.methods if not err]
        out.append({"label": key, "href": r.href, "answer": r.answer, "reference": facts["tasks"].get((r.benchmark, r.task_id), ("",))[0],
                    "attribution": "; ".join(bits) or "–", "rollbacks": "yes" if "R" in r.flags else "–"})
    return out


def _write_index(layout: Layout, root: Path, result: PassResult, attr: AttributionIndex, settings: EconomicsSettings,
                 compared: list[tuple[Path, list[dict[str, Any]]]], final_out: Path) -> None:
    env = environment()
    rows, descriptors, issues = result.rows, result.descriptors, result.issues
    facts = {"models": result.models, "tasks": result.tasks}
    ov = overview(rows, descriptors, settings.seed)
    economics = compute_economics(descriptors, settings)
    paired = paired_rows(economics, descriptors, settings)
    for p in paired:
        lo, hi = p["G_ci_low"], p["G_ci_high"]
        p["verdict"] = "better" if lo is not None and lo > 0 else "worse" if hi is not None and hi < 0 else "undecided"
    benches = sorted({o["benchmark"] for o in ov})
    systems = sorted({o["system"] for o in ov})
    kinds = {split_unit(s)[0] for s in systems}  # a model matrix's units (debate@gpt) by their system
    if MATCHED_SAS in kinds and settings.baseline != MATCHED_SAS:  # each MAS against the SAS given its budget too
        vs_matched = settings.model_copy(update={"baseline": MATCHED_SAS})
        others = [d for d in descriptors if split_unit(d["system"])[0] != settings.baseline]
        matched = {(e["benchmark"], e["system"]): e
                   for e in paired_rows(compute_economics(others, vs_matched), others, vs_matched)}
        for p in paired:
            if (m := matched.get((p["benchmark"], p["system"]))) is not None:
                p["sentence"] += " " + matching_sentence(p, m)
    colors = _colors(systems, settings.baseline)
    findings = [(b, [p for p in paired if p["benchmark"] == b]) for b in benches] if settings.baseline in kinds else []
    grids = _grids(layout, rows, facts, settings.baseline)
    failures = _failures(rows, attr, facts)
    cmp_rows = compare_roots(descriptors, [(str(c), d) for c, d in compared], settings)
    for c in cmp_rows:
        idx = Path(c["root"]) / "report" / "index.html"
        c["href"] = href(idx, final_out) if idx.is_file() else None
    common = {"cost_unit": settings.cost_unit, "baseline": settings.baseline, "lam": f"{settings.lam:g}",
              "generated_from": str(root)}
    for g in grids:
        if g["page"] > 1:
            write_page(env, "grid.html.j2", layout.grid_file(g["benchmark"], g["page"]), "../",
                       title=f"{root.name}: {g['benchmark']} tasks {g['first']}–{g['last']}", g=g, **common)
    n_included = sum(1 for r in rows if r.included)
    n_errored = sum(1 for r in rows if r.errored)
    judges = audit([AuditRow(benchmark=r.benchmark, system=r.system, success=bool(r.success), vote=r.vote,
                             elections=r.elections, candidate_success=r.candidate_success, consensus=r.consensus)
                    for r in rows if r.included])
    write_derived_json(layout.out / JUDGE_AUDIT_FILE, judges)
    write_page(
        env, "index.html.j2", layout.out / "index.html", "", title=f"Experiment {root.resolve().name}",
        n_runs=len(rows), n_included=n_included, n_errored=n_errored, n_skipped=len(rows) - n_included - n_errored,
        benchmarks=benches,
        systems=systems, models=sorted(facts["models"]), findings=findings, overview=ov,
        problems=problem_overview(rows, descriptors),
        charts=_charts(layout, ov, paired, descriptors, settings, colors),
        cost_label="tokens per run" if settings.cost_unit == "tokens" else "USD per run",
        pictures=_pictures(root, layout, final_out), grids=[g for g in grids if g["page"] == 1],
        failures=failures[:FAILURES_SHOWN], failures_total=len(failures),
        attribution_sources=attr.sources, attribution_notes=attr.notes, compare=cmp_rows, issues=issues, judges=judges,
        notes=provenance_notes(root) + price_notes(root),
        n_boot=settings.n_boot, seed=settings.seed, few_tasks=FEW_TASKS, **common)


def _write_viewer(layout: Layout, root: Path, result: PassResult) -> None:
    """The run viewer page and the runs index it navigates by (every run's grid page and outcome class)."""
    write_page(environment(), "run.html.j2", layout.out / "run.html", "", title=f"Run · {root.resolve().name}",
               body_class="run-view")
    page_of = {(bench, t): n for bench, pages in layout.grid_pages.items() for n, tasks in enumerate(pages, 1)
               for t in tasks}
    runs = [(r.benchmark, r.system, r.task_id, r.run_index, r.cls) for r in result.rows]
    write_file(layout.index_file(), index_js(runs, page_of))


def _pictures(root: Path, layout: Layout, final_out: Path) -> list[dict[str, Any]]:
    """Topology pictures grouped by benchmark and system, mermaid sources shown as text.

    A report inside the experiment directory (the default ``<root>/report``) links the pictures where they
    are, as it links the run files; one written elsewhere (``--out``) gets copies under ``graphs/``, so it
    shows them wherever it is moved.
    """
    inside = final_out.resolve().is_relative_to(root.resolve())
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for pic in collect.find_pictures(root):
        key = (pic.benchmark or "", pic.system or "")
        g = groups.setdefault(key, {"caption": " · ".join(x for x in key if x) or "experiment", "images": [],
                                    "sources": []})
        if pic.path.suffix == ".mmd":
            g["sources"].append({"name": pic.path.name, "text": collect.read_text(pic.path) or ""})
            continue
        if inside:
            g["images"].append({"name": pic.path.name, "href": layout.file_rel(pic.path)})
            continue
        dest = layout.out / "graphs" / pic.path.relative_to(root)
        write_file(dest, pic.path.read_bytes())
        g["images"].append({"name": pic.path.name, "href": href(dest, layout.out)})
    return [groups[k] for k in sorted(groups)]


def print_report(index: Path) -> None:
    """The path of a report just written (``report: ...``), then its judges' audit warnings, one ``warning:``
    line each on stderr: what ``report``, ``summarize-experiment`` and ``run`` end with."""
    print(f"report: {index}")
    for warning in audit_warnings(index.parent):
        print(f"warning: {warning} (the report's \"Judges\")", file=sys.stderr)
