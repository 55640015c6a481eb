#!/usr/bin/env python3
"""Independent recomputation of every descriptor number from the run files.

Usage: ``python scripts/verify_descriptor.py EXPERIMENT_ROOT [--tol 1e-9] [--lambda L] [--cost-unit tokens|usd] [--baseline sas]``

Deliberately imports nothing from ``descriptor/`` but the run directory's
file names (:mod:`descriptor.layout`; the rest is json, csv, math, re,
datetime): it re-reads ``run_<r>.trace.jsonl``, ``run_<r>.eval.json`` and
``run_<r>.result.json``, recomputes the run-level metrics, the task
descriptor, the roll-ups and the economics point estimates from the
definitions in ``descriptor/README.md``, and compares them with what
``summarize-experiment`` wrote (descriptor.json/.csv, analysis.json,
run_<r>.trace_metrics.json when present, summary.json/.csv,
experiment_summary.json/.csv, economics.json). Numbers must agree within
``--tol`` (absolute or relative) in JSON, and within the 6 significant
digits CSV cells are written with (relative 5e-6); blanks (JSON null, empty
CSV cell) must appear exactly where the rules put them, and every column is
there (a ``pass_at_<k>`` blank in every row too). Prints a report; exit 1 on any
mismatch, 2 on unusable input.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from descriptor.layout import SUFFIXES, RunPaths  # noqa: E402  (file names only)

EVENT_TYPES = {"plan", "act", "tool_call", "tool_result", "verify", "revise", "finalize", "error"}
LOOP_TYPES = {"plan", "act", "tool_call", "verify", "revise", "finalize"}
RUN_FILE = re.compile(r"^run_(\d+)(?:" + "|".join(re.escape(SUFFIXES[k]) for k in ("trace", "result", "eval")) + ")$")
KS = (1, 3, 5, 8)
CSV_REL_TOL = 5e-6
"""CSV floats carry 6 significant digits: half a unit in the sixth digit, relative."""
DEFAULT_LAMBDA = {"tokens": 1e-5, "usd": 1.0}
TASK_FILES = ("descriptor.json", "descriptor.csv", "analysis.json", "task_summary.json")
ROOT_FILES = ("experiment_summary.json", "experiment_summary.csv", "economics.json", "economics.csv", "topology.json")


def is_system(actor):
    return actor == "system" or actor.startswith("system:")


def _num(x, integer=False):
    if isinstance(x, bool):
        return False
    return isinstance(x, int) if integer else isinstance(x, (int, float))


def _send_ok(s):
    return isinstance(s, dict) and isinstance(s.get("from"), str) and isinstance(s.get("to"), str)


def valid_event(obj):
    """Independent reading of the trace line contract; returns an error text or None.

    Types are exact (the schema is strict): ints are ints, never "5", 5.0 or true;
    floats may be ints; ids and actors are strings.
    """
    if not isinstance(obj, dict):
        return "not an object"
    if "version" in obj and not _num(obj["version"], True):
        return "bad version"
    if "seq" in obj and not (_num(obj["seq"], True) and obj["seq"] >= 0):
        return "bad seq"
    if "run_id" in obj and not isinstance(obj["run_id"], str):
        return "bad run_id"
    if obj.get("state_id") is not None and not isinstance(obj["state_id"], str):
        return "bad state_id"
    for key in ("timestamp_start", "timestamp_end"):
        try:
            if datetime.fromisoformat(obj[key]).utcoffset() != timedelta(0):
                return f"bad {key}"
        except (KeyError, TypeError, ValueError):
            return f"bad {key}"
    if not isinstance(obj.get("actor"), str) or obj.get("event_type") not in EVENT_TYPES:
        return "bad actor/event_type"
    p = obj.get("payload", {})
    if not isinstance(p, dict):
        return "bad payload"
    for key in ("token_in", "token_out"):
        if key in obj and not (_num(obj[key], True) and obj[key] >= 0):
            return f"bad {key}"
    for key in ("latency_ms", "cost_usd"):
        if key in obj and not (_num(obj[key]) and obj[key] >= 0):
            return f"bad {key}"
    sends = p.get("sends")
    if sends is not None and not (isinstance(sends, list) and all(_send_ok(s) for s in sends)):
        return "bad sends"
    for key in ("ok", "redo"):
        if key in p and not isinstance(p[key], bool):
            return f"bad payload.{key}"
    return None


def read_events(path):
    """(events, status) with status 'ok', 'prefix' (bad last line only) or 'skip'."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                err = valid_event(obj)
            except json.JSONDecodeError:
                obj, err = None, "json"
            rows.append((obj, err))
    bad = [i for i, (_, err) in enumerate(rows) if err is not None]
    events = [obj for obj, err in rows if err is None]
    if not bad:
        return events, "ok"
    if bad == [len(rows) - 1]:
        return events, "prefix"
    return None, "skip"


def norm(x):
    if x is None:
        return ""
    if not isinstance(x, str):
        x = json.dumps(x, sort_keys=True, ensure_ascii=False)
    return re.sub(r"\s+", " ", x).strip().lower()


def run_metrics(events):
    n = len(events)
    payloads = [e.get("payload", {}) for e in events]
    edges = [(s["from"], s["to"]) for p in payloads for s in (p.get("sends") or [])]
    sys_edges = len([1 for f, _ in edges if is_system(str(f))])
    seen, cand, rep = set(), 0, 0
    for e, p in zip(events, payloads):
        if is_system(e["actor"]) or e["event_type"] not in LOOP_TYPES:
            continue
        if e["event_type"] == "tool_call":
            tool = norm(p.get("tool"))
            text = (tool + " " + json.dumps(p.get("arguments"), sort_keys=True, ensure_ascii=False)).strip() if tool else ""
        else:
            text = norm(p.get("content"))
        if not text:
            continue
        cand += 1
        key = (e["actor"], e["event_type"], text)
        if key in seen:
            rep += 1
        seen.add(key)
    agents = [e["actor"] for e in events if not is_system(e["actor"])]
    revise = len([e for e in events if e["event_type"] == "revise"])
    redo = len([p for p in payloads if p.get("redo") is True])
    return {
        "latency_total": math.fsum(float(e.get("latency_ms", 0.0)) for e in events),
        "tokens_total": sum(int(e.get("token_in", 0)) + int(e.get("token_out", 0)) for e in events),
        "cost_total": math.fsum(float(e.get("cost_usd", 0.0)) for e in events),
        "tool_calls_total": len([e for e in events if e["event_type"] == "tool_call"]),
        "tool_fail_total": len([1 for e, p in zip(events, payloads) if e["event_type"] == "tool_result" and p.get("ok") is False]),
        "steps_total": n,
        "backtrack_rate": (revise + redo) / n if n else 0.0,
        "loop_score": rep / cand if cand else 0.0,
        "verification_density": len([e for e in events if e["event_type"] == "verify"]) / n if n else 0.0,
        "communication_count": len(edges),
        "communication_agent_to_agent_count": len(edges) - sys_edges,
        "communication_system_mediated_count": sys_edges,
        "handoff_count": len([1 for i in range(1, len(agents)) if agents[i] != agents[i - 1]]),
    }


def fmean(xs):
    return math.fsum(xs) / len(xs)


def pvar(xs):
    m = fmean(xs)
    return math.fsum((x - m) ** 2 for x in xs) / len(xs)


def type7(xs, q):
    s = sorted(xs)
    h = (len(s) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (h - lo) * (s[hi] - s[lo])


def load_task(task_dir, identity):
    """(finished runs of a task dir, applying the README's damage rules; number of errored runs)."""
    idx = sorted({int(m.group(1)) for p in task_dir.iterdir() if (m := RUN_FILE.match(p.name))})
    runs, errored = [], 0
    for r in idx:
        try:
            res = json.loads(RunPaths(task_dir, r).result.read_text(encoding="utf-8"))
            ev = json.loads(RunPaths(task_dir, r).eval.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(res, dict) or (res.get("benchmark"), res.get("system"), res.get("task_id")) != identity:
            continue
        if not isinstance(ev, dict) or not isinstance(ev.get("success"), bool) or not _num(ev.get("score")):
            continue
        trace = RunPaths(task_dir, r).trace
        if not trace.exists():
            continue
        events, status = read_events(trace)
        if events is None:
            continue
        if res.get("status") == "error":  # an infrastructure failure: no task result, only counted
            errored += 1
            continue
        comp = ev.get("completion", res["completion"])
        runs.append({"r": r, "success": res["success"], "completion": res["completion"], "eval_success": ev["success"],
                     "eval_score": float(ev["score"]), "eval_completion": comp, "m": run_metrics(events),
                     "damaged": status == "prefix"})
    return runs, errored


def task_descriptor(runs, identity):
    n = len(runs)
    ms = [x["m"] for x in runs]
    succ = [1.0 if x["success"] else 0.0 for x in runs]
    lat = [m["latency_total"] for m in ms]
    tok = [float(m["tokens_total"]) for m in ms]
    calls = sum(m["tool_calls_total"] for m in ms)
    c = sum(1 for x in runs if x["success"])
    d = {"benchmark": identity[0], "system": identity[1], "task_id": identity[2], "n_runs": n, "n_success": c}
    d["Q1_success_rate"] = fmean(succ)
    d["Q2_completion_rate"] = fmean([1.0 if x["completion"] else 0.0 for x in runs])
    d["C1_latency_p95"] = type7(lat, 0.95)
    d["C2_tokens_total"] = fmean(tok)
    d["C3_cost_total"] = fmean([m["cost_total"] for m in ms])
    d["C4_tool_calls_total"] = fmean([m["tool_calls_total"] for m in ms])
    d["D1_tool_error_rate"] = sum(m["tool_fail_total"] for m in ms) / calls if calls > 0 else None
    d["D2_communication_count"] = fmean([m["communication_count"] for m in ms])
    d["D2_agent_to_agent_communication_count"] = fmean([m["communication_agent_to_agent_count"] for m in ms])
    d["D2_system_mediated_communication_count"] = fmean([m["communication_system_mediated_count"] for m in ms])
    d["D3_handoff_count"] = fmean([m["handoff_count"] for m in ms])
    d["R1_success_var"], d["R2_latency_var"], d["R3_tokens_var"] = pvar(succ), pvar(lat), pvar(tok)
    for key, src in (("P1_steps_total", "steps_total"), ("P2_backtrack_rate", "backtrack_rate"),
                     ("P3_loop_score", "loop_score"), ("P4_verification_density", "verification_density")):
        d[key] = fmean([m[src] for m in ms])
    d["eval_avg_score"] = fmean([x["eval_score"] for x in runs])
    d["eval_success_rate"] = fmean([1.0 if x["eval_success"] else 0.0 for x in runs])
    d["eval_completion_rate"] = fmean([1.0 if x["eval_completion"] else 0.0 for x in runs])
    d["success_rate"] = d["Q1_success_rate"]
    for k in KS:
        d[f"pass_at_{k}"] = None if n < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)
    d["stability"] = max(0.0, min(1.0, 1.0 - d["R1_success_var"] / 0.25)) if n >= 2 else None
    d["tokens_total"] = d["C2_tokens_total"]
    d["cost_per_success"] = d["tokens_total"] / d["success_rate"] if d["success_rate"] > 0 else None
    d["tokens_cv"] = math.sqrt(d["R3_tokens_var"]) / d["tokens_total"] if n >= 2 and d["tokens_total"] > 0 else None
    d["tool_calls_total"] = d["C4_tool_calls_total"]
    d["tool_error_rate"] = d["D1_tool_error_rate"]
    d["communication_count"] = d["D2_communication_count"]
    d["handoff_count"] = d["D3_handoff_count"]
    return d, runs


class Report:
    def __init__(self, tol):
        self.tol, self.checked, self.blanks, self.errors = tol, 0, 0, []

    def same(self, where, key, want, got, rel_tol=None):
        self.checked += 1
        if want is None or got is None:
            if want is None:
                self.blanks += 1
            if want is not got and not (want is None and got is None):
                show = lambda v: "blank" if v is None else repr(v)
                self.errors.append(f"{where}: {key}: expected {show(want)}, got {show(got)}")
            return
        if isinstance(want, str):
            if want != got:
                self.errors.append(f"{where}: {key}: expected {want!r}, got {got!r}")
            return
        try:
            got_f = float(got)  # CSV cells are text
        except (TypeError, ValueError):
            self.errors.append(f"{where}: {key}: expected a number {want!r}, got {got!r}")
            return
        if isinstance(got, bool) or not math.isclose(float(want), got_f, rel_tol=rel_tol or self.tol, abs_tol=self.tol):
            self.errors.append(f"{where}: {key}: expected {want!r}, got {got!r}")

    def compare(self, where, want, got, keys=None, csv=False):
        """``csv``: ``got`` is a CSV row (CSV tolerance); every field must be there."""
        if got is None:
            self.errors.append(f"{where}: missing")
            return
        for key in keys or want:
            if key not in got:
                self.errors.append(f"{where}: field {key} missing")
                continue
            self.same(where, key, want[key], got[key], CSV_REL_TOL if csv else None)


def check_verdicts(rep, where, run, row):
    """analysis.json's per-run success and completion are eval.json's verdicts (booleans, exactly)."""
    if row is None:
        return  # reported as missing by compare()
    for key, want in (("success", run["eval_success"]), ("completion", run["eval_completion"])):
        rep.checked += 1
        if row.get(key) is not want:
            rep.errors.append(f"{where}: {key}: expected {want!r} (eval.json), got {row.get(key)!r}")


def csv_rows(path):
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return [{k: (None if v == "" else v) for k, v in row.items()} for row in rows]


def load_json(path):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def rollup(ds, n_errors=0):
    keys = {"success_rate": "Q1_success_rate", "completion_rate": "Q2_completion_rate", "eval_avg_score": "eval_avg_score",
            "tokens_total": "C2_tokens_total", "cost_total": "C3_cost_total", "latency_p95": "C1_latency_p95",
            "tool_calls_total": "C4_tool_calls_total", "communication_count": "D2_communication_count",
            "handoff_count": "D3_handoff_count", "stability": "stability", "tokens_cv": "tokens_cv",
            **{f"pass_at_{k}": f"pass_at_{k}" for k in KS}}
    n = sum(d["n_runs"] for d in ds)
    row = {"n_tasks": len(ds), "n_runs": n, "n_errors": n_errors,
           "error_rate": n_errors / (n + n_errors) if n + n_errors else None}
    for out, src in keys.items():
        vals = [d[src] for d in ds]
        row[out] = None if not vals or any(v is None for v in vals) else fmean(vals)
    ok = row["success_rate"] is not None and row["success_rate"] > 0
    row["cost_per_success"] = row["tokens_total"] / row["success_rate"] if ok else None
    return row


ROLLBACK_KEYS = ("rolled_back", "success_after_rollback", "rollback_tokens", "rollback_cost_usd")
ROLLBACK_RECORD = re.compile(r"^run_(\d+)\.rollback_(\d+)\.json$")


def sweep_rollbacks(task_dir):
    """run index -> its automatic rollback record (origin sweep): the first that finished, else the last errored."""
    found = {}
    for p in sorted(task_dir.iterdir(), key=lambda q: [int(x) for x in re.findall(r"\d+", q.name)]):
        m = ROLLBACK_RECORD.match(p.name)
        rec = load_json(p) if m else None
        if not isinstance(rec, dict) or rec.get("origin") != "sweep":
            continue
        r = int(m.group(1))
        prev = found.get(r)
        if prev is None or prev.get("status") == "error":
            found[r] = rec
    return found


def rollback_fields(task_dir, runs, enabled):
    """The descriptor's rollback fields (descriptor/README.md), from the rollback records alone."""
    recs = sweep_rollbacks(task_dir)
    mine = [recs.get(x["r"]) for x in runs]
    if not runs or (not enabled and not any(mine)):
        return dict.fromkeys(ROLLBACK_KEYS)
    done = [rec is not None and rec.get("status") != "error" for rec in mine]
    after = [bool(rec["success"]) if ok else x["success"] for x, rec, ok in zip(runs, mine, done)]
    n = len(runs)
    return {"rolled_back": sum(done), "success_after_rollback": sum(after) / n,
            "rollback_tokens": sum(rec["tokens"] for rec in mine if rec) / n,
            "rollback_cost_usd": sum(rec.get("cost_usd", 0.0) for rec in mine if rec) / n}


def rollback_rollup(rbs):
    if not rbs or any(v is None for rb in rbs for v in rb.values()):
        return dict.fromkeys(ROLLBACK_KEYS)
    return {"rolled_back": sum(rb["rolled_back"] for rb in rbs),
            **{k: fmean([rb[k] for rb in rbs]) for k in ROLLBACK_KEYS[1:]}}


def economics(ds, lam, unit, baseline):
    cost = "C2_tokens_total" if unit == "tokens" else "C3_cost_total"
    by = {(d["benchmark"], d["system"], d["task_id"]): d for d in ds}
    out = {}
    for bench, system in sorted({(d["benchmark"], d["system"]) for d in ds}):
        if system == baseline:
            continue
        tasks = sorted(t for (b, s, t) in by if b == bench and s == system and (bench, baseline, t) in by)
        if not tasks:
            continue
        m = [by[(bench, system, t)] for t in tasks]
        s = [by[(bench, baseline, t)] for t in tasks]
        g = [a["Q1_success_rate"] - b["Q1_success_rate"] for a, b in zip(m, s)]
        k = [a[cost] - b[cost] for a, b in zip(m, s)]
        du = [gi - lam * ki for gi, ki in zip(g, k)]
        extra = fmean([a["C2_tokens_total"] - b["C2_tokens_total"] for a, b in zip(m, s)])
        n = len(tasks)
        row = {"n_shared_tasks": n, "G": fmean(g), "K": fmean(k), "dU": fmean(du), "extra_tokens": extra,
               "Q_mas": fmean([a["Q1_success_rate"] for a in m]), "Q_sas": fmean([b["Q1_success_rate"] for b in s]),
               "C_mas": fmean([a[cost] for a in m]), "C_sas": fmean([b[cost] for b in s]),
               "win_share": len([x for x in du if x > 1e-12]) / n, "lose_share": len([x for x in du if x < -1e-12]) / n,
               "quality_win_share": len([x for x in g if x > 1e-12]) / n,
               "quality_lose_share": len([x for x in g if x < -1e-12]) / n,
               "tie_share": len([x for x in du if abs(x) <= 1e-12]) / n,
               "quality_tie_share": len([x for x in g if abs(x) <= 1e-12]) / n}
        row["U_mas"] = row["Q_mas"] - lam * row["C_mas"]
        row["U_sas"] = row["Q_sas"] - lam * row["C_sas"]
        row["gain_per_1k_tokens"] = row["G"] / (extra / 1000) if extra > 0 else None
        out[(bench, system)] = row
    return out


def verify(root, tol, lam, unit, baseline):
    rep = Report(tol)
    descs = []
    errors = {}
    rolled = (root / "rollback_sweep.json").is_file()
    rbs = {}
    for task_dir in sorted(p for p in root.glob("*/*/*") if p.is_dir() and any(RUN_FILE.match(q.name) for q in p.iterdir())):
        identity = (task_dir.parent.parent.name, task_dir.parent.name, task_dir.name)
        runs, errored = load_task(task_dir, identity)
        errors[identity[:2]] = errors.get(identity[:2], 0) + errored
        if not runs:
            continue
        d, runs = task_descriptor(runs, identity)
        descs.append(d)
        rel = task_dir.relative_to(root)
        rb = rollback_fields(task_dir, runs, rolled)
        rbs.setdefault(identity[:2], []).append(rb)
        rep.compare(f"{rel}/descriptor.json", rb, load_json(task_dir / "descriptor.json"))
        for name in TASK_FILES:
            if not (task_dir / name).is_file():
                rep.errors.append(f"{rel}/{name}: missing")
        rep.compare(f"{rel}/descriptor.json", d, load_json(task_dir / "descriptor.json"))
        rows = csv_rows(task_dir / "descriptor.csv") if (task_dir / "descriptor.csv").exists() else [None]
        rep.compare(f"{rel}/descriptor.csv", d, rows[0], csv=True)
        analysis = load_json(task_dir / "analysis.json") or {}
        written = {row["run_index"]: row for row in analysis.get("evaluation", {}).get("runs", [])}
        for x in runs:
            rep.compare(f"{rel}/analysis.json run {x['r']}", x["m"], written.get(x["r"]),
                        ["tokens_total", "latency_total", "cost_total", "loop_score"])
            check_verdicts(rep, f"{rel}/analysis.json run {x['r']}", x, written.get(x["r"]))
            tm = RunPaths(task_dir, x["r"]).trace_metrics
            # the runtime wrote trace_metrics from the whole trace; a damaged one no longer matches it
            if tm.exists() and not x["damaged"]:
                got = load_json(tm)
                rep.compare(f"{rel}/{tm.name}", x["m"], got, [k for k in x["m"] if got and k in got])
    if not descs and not any(errors.values()):
        print(f"error: {root}: no finished run found", file=sys.stderr)
        return 2
    groups = {key: [] for key, n in errors.items() if n}
    for d in descs:
        groups.setdefault((d["benchmark"], d["system"]), []).append(d)
    exp = load_json(root / "experiment_summary.json") or {}
    exp_rows = {(r["benchmark"], r["system"]): r for r in exp.get("rollups", [])}
    exp_csv = {(r["benchmark"], r["system"]): r for r in csv_rows(root / "experiment_summary.csv")} if (root / "experiment_summary.csv").exists() else {}
    for (bench, system), ds in sorted(groups.items()):
        summ = load_json(root / bench / system / "summary.json") or {}
        by_task = {t["task_id"]: t for t in summ.get("tasks", [])}
        by_csv = {t["task_id"]: t for t in csv_rows(root / bench / system / "summary.csv")} if (root / bench / system / "summary.csv").exists() else {}
        for d in ds:
            rep.compare(f"{bench}/{system}/summary.json task {d['task_id']}", d, by_task.get(d["task_id"]))
            rep.compare(f"{bench}/{system}/summary.csv task {d['task_id']}", d, by_csv.get(d["task_id"]), csv=True)
        if len(by_task) != len(ds):
            rep.errors.append(f"{bench}/{system}/summary.json: {len(by_task)} task rows, expected {len(ds)}")
        r = rollup(ds, errors.get((bench, system), 0))
        rep.compare(f"experiment_summary.json {bench}/{system}", r, exp_rows.get((bench, system)))
        rb = rollback_rollup(rbs.get((bench, system), []))
        rep.compare(f"experiment_summary.json {bench}/{system}", rb, exp_rows.get((bench, system)))
        if rb["rolled_back"] is not None:  # blank columns are left out of the CSV
            rep.compare(f"experiment_summary.csv {bench}/{system}", rb, exp_csv.get((bench, system)), csv=True)
        rep.compare(f"experiment_summary.csv {bench}/{system}", r, exp_csv.get((bench, system)), csv=True)
    if len(exp_rows) != len(groups):
        rep.errors.append(f"experiment_summary.json: {len(exp_rows)} roll-up rows, expected {len(groups)}")
    for name in ROOT_FILES:
        if not (root / name).is_file():
            rep.errors.append(f"{name}: missing")
    econ = load_json(root / "economics.json") or {}
    econ_rows = {(r["benchmark"], r["system"]): r for r in econ.get("rows", [])}
    written = econ.get("settings", {})
    if (written.get("lam"), written.get("cost_unit"), written.get("baseline")) != (lam, unit, baseline):
        print(f"note: economics.json was written with lambda={written.get('lam')} cost_unit={written.get('cost_unit')} "
              f"baseline={written.get('baseline')}; checking against lambda={lam} cost_unit={unit} baseline={baseline} "
              "(pass --lambda/--cost-unit/--baseline to match)")
    for key, want in economics(descs, lam, unit, baseline).items():
        rep.compare(f"economics.json {key[0]}/{key[1]}", want, econ_rows.get(key))
    n_runs = sum(d["n_runs"] for d in descs)
    print(f"verified {root}: {len(descs)} task descriptors, {n_runs} runs, {rep.checked} values checked "
          f"({rep.blanks} expected blanks), tolerance {tol:g}")
    for e in rep.errors:
        print("MISMATCH " + e)
    print("OK" if not rep.errors else f"FAILED: {len(rep.errors)} mismatches")
    return 0 if not rep.errors else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment_root", type=Path)
    ap.add_argument("--tol", type=float, default=1e-9)
    ap.add_argument("--lambda", dest="lam", type=float, default=None)
    ap.add_argument("--cost-unit", choices=("tokens", "usd"), default="tokens")
    ap.add_argument("--baseline", default="sas")
    a = ap.parse_args(argv)
    if not a.experiment_root.is_dir():
        print(f"error: {a.experiment_root}: not a directory", file=sys.stderr)
        return 2
    lam = DEFAULT_LAMBDA[a.cost_unit] if a.lam is None else a.lam
    return verify(a.experiment_root, a.tol, lam, a.cost_unit, a.baseline)


if __name__ == "__main__":
    sys.exit(main())
