"""Print what a sweep costs on disk and what summarising it costs, on scripted sweeps of 100, 400 and 1,200 runs.

    python scripts/bench_storage.py                 # 100, 400 and 1,200 runs (about 5 min)
    python scripts/bench_storage.py --big 10000     # and a 10,000-run sweep (about 10 min on 2 cores)
    python scripts/bench_storage.py --inject-rate 0.3 --repeats 3   # issue 33's bar: 30 % of runs fail

Sweeps: ``sas``, ``supervisor``, ``debate`` and ``orchestrator`` on arith with the scripted model,
25 tasks x 1 run (100 runs), 25 tasks x 4 runs (400 runs) and 25 x 12 (1,200 runs); ``--inject-rate`` makes that share of runs
fail (failed runs keep their checkpoints, so they cost more disk). Figures:

- disk per run: the apparent size (as ``du --apparent-size`` counts it) of the whole experiment directory,
  summaries included, divided by its runs; and of the run files alone;
- ``summarize-experiment`` (the CLI, a fresh process, plots and the HTML report included; also without plots,
  and without the report, ``--no-report``) on a cold experiment (no summary
  written yet; the sizes and variants interleaved, the median of ``--repeats``): its start-up is the intercept
  and its cost per run the slope of the least-squares line of the wall time over the three sizes, with each repeat's
  own line for the sampling error; then the same command again after adding runs (incremental: only changed tasks are re-read);
- the same slope when every run is a task of its own (100 and 400 task directories of one run each): the main
  figure adds runs to the same task directories, so it leaves out the per-task files.

Targets (issue 24): <= 40 KB per run, start-up <= 1.5 s, <= 1.0 ms per additional run; issue 33, with
``--inject-rate 0.3``: <= 30 KB per run, start-up <= 1.0 s, <= 1.0 ms per run. The load average is printed before
and after: on a shared machine the wall times follow it, so the same intercept and slope are also given in CPU
time (user + system of the command and the processes it forks and waits for: the plots, the report's workers),
which a neighbour's load moves much less. Then where the bytes are: KB per run by kind of file, and the files
of one successful and one failed run.
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SYSTEMS = "sas,supervisor,debate,orchestrator"
DERIVED = ("descriptor.json", "descriptor.csv", "analysis.json", "task_summary.json", "summary.json", "summary.csv",
           ".summary_cache.json")
RUN_FILE_PREFIX = "run_"
SIZES = ((25, 1), (25, 4), (25, 12))
"""(tasks, runs per task) of the sweeps, four systems each: 100, 400 and 1,200 runs."""


def sweep(out: Path, exp: str, tasks: int, runs: int, inject: float) -> None:
    cmd = [sys.executable, "main.py", "run", "--benchmark", "arith", "--systems", SYSTEMS, "--model", "scripted",
           "--task-limit", str(tasks), "--runs-per-task", str(runs), "--output-root", str(out), "--experiment-id",
           exp, "--progress", "none", "--concurrency", "8", "--set", "benchmarks.arith.count=10000"]
    if inject:
        cmd += ["--inject-errors", str(inject)]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)


def apparent(root: Path, *, runs_only: bool = False) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if not runs_only or f.startswith(RUN_FILE_PREFIX):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


def clear_summaries(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if f in DERIVED or (Path(dirpath) == root and not f.startswith(("manifest", "runs.jsonl"))):
                os.unlink(os.path.join(dirpath, f))
    shutil.rmtree(root / "plots", ignore_errors=True)
    shutil.rmtree(root / "report", ignore_errors=True)


def summarize(root: Path, *, plots: bool = True, report: bool = True) -> tuple[float, float]:
    """Wall time and CPU time (s) of one ``summarize-experiment`` process (CPU: user + system, with its children)."""
    cmd = [sys.executable, "main.py", "summarize-experiment", "--experiment-root", str(root)]
    if not plots:
        cmd.append("--no-plots")
    if not report:
        cmd.append("--no-report")
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def kind(root: Path, path: Path) -> str:
    """A file's kind: ``run_*.<suffix>`` for run files, ``report/<part>``, else its name."""
    rel = path.relative_to(root)
    if path.name.startswith(RUN_FILE_PREFIX):
        return "run_*." + path.name.split(".", 1)[1] if "." in path.name else path.name
    return f"report/{rel.parts[1]}" if rel.parts[0] == "report" and len(rel.parts) > 1 else path.name


def where_the_bytes_are(root: Path, n: int) -> None:
    """KB per run by kind of file (the largest), and one successful and one failed run's files."""
    sizes: collections.Counter[str] = collections.Counter()
    for p in root.rglob("*"):
        if p.is_file():
            sizes[kind(root, p)] += p.lstat().st_size
    print("  KB/run by kind: " + ", ".join(f"{k} {v / n / 1024:.2f}" for k, v in sizes.most_common(14)))
    results = sorted(root.rglob("run_*.result.json"))
    for label, ok in (("a successful", True), ("a failed", False)):
        found = next((p for p in results if ('"success":true' in p.read_text()) == ok), None)
        if found is not None:
            prefix = found.name.removesuffix(".result.json") + "."
            files = sorted(found.parent.glob(prefix + "*"))
            print(f"  {label} run ({found.parent.parent.name}): " + ", ".join(
                f"{f.name.removeprefix(prefix)} {f.stat().st_size / 1024:.1f}" for f in files) + " KB")


def n_runs(root: Path) -> int:
    return sum(1 for _ in root.rglob("run_*.result.json"))


def per_task_slope(out: Path, small: Path, args: argparse.Namespace) -> None:
    """The slope when every added run is a task of its own: the 100-run sweep (25 tasks x 4 systems, 1 run each)
    against 400 runs of 100 tasks x 4 systems, 1 run each.

    The main figure adds runs to the same 100 task directories (1 and 4 runs per task), so it leaves out what
    summarising costs per task directory: its four per-task files and the report's data file for it. A sweep of
    many tasks and one run each (the usual economics study) pays that for every run.
    """
    exp = "t400"
    sweep(out, exp, 100, 1, args.inject_rate)
    roots = {n_runs(small): small, n_runs(out / exp): out / exp}
    times: dict[int, list[tuple[float, float]]] = {}
    for _ in range(args.repeats):
        for n, root in roots.items():
            clear_summaries(root)
            times.setdefault(n, []).append(summarize(root))
    (n1, a), (n2, b) = sorted(times.items())
    for label, i in (("wall", 0), ("CPU", 1)):
        c1, c2 = statistics.median(x[i] for x in a), statistics.median(x[i] for x in b)
        slope = (c2 - c1) / (n2 - n1)
        print(f"summarize-experiment cold, one run per task ({n1} and {n2} task directories), {label} time: "
              f"start-up {c1 - slope * n1:.2f} s, {slope * 1000:.2f} ms per run; load avg {os.getloadavg()[0]:.1f}")
    shutil.rmtree(out / exp)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big", type=int, default=0, help="also a sweep of about this many runs (multiple of 100)")
    ap.add_argument("--inject-rate", type=float, default=0.0, help="share of runs with an injected error")
    ap.add_argument("--repeats", type=int, default=7, help="summaries timed per size and variant (median)")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, load avg {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        roots = {}
        for tasks, runs in SIZES:
            exp = f"s{tasks * runs * 4}"
            sweep(out, exp, tasks, runs, args.inject_rate)
            roots[n_runs(out / exp)] = out / exp
        # The sizes and variants interleaved, repeat by repeat: the machine's drift then moves all of them
        # alike instead of tilting the slope between the sizes.
        times: dict[tuple[int, str], list[float]] = {}
        cpu: dict[tuple[int, str], list[float]] = {}
        variants = {"all": {}, "no plots": {"plots": False}, "no report": {"report": False}}
        for _ in range(args.repeats):
            for n, root in roots.items():
                for name, opts in variants.items():
                    clear_summaries(root)
                    wall, used = summarize(root, **opts)
                    times.setdefault((n, name), []).append(wall)
                    cpu.setdefault((n, name), []).append(used)
        rows, cpu_rows = {}, {}
        for n, root in roots.items():
            summarize(root)
            warm = summarize(root)[0]
            rows[n] = tuple(statistics.median(times[n, name]) for name in variants)
            cpu_rows[n] = tuple(statistics.median(cpu[n, name]) for name in variants)
            print(f"{n} runs: disk {apparent(root) / n / 1024:.1f} KB/run in all, "
                  f"{(apparent(root) - apparent(root / 'report')) / n / 1024:.1f} without the report "
                  f"({apparent(root, runs_only=True) / n / 1024:.1f} KB/run of run files); "
                  f"summarize-experiment cold {rows[n][0]:.2f} s ({rows[n][1]:.2f} s without plots, "
                  f"{rows[n][2]:.2f} s without the report), again unchanged {warm:.2f} s; "
                  f"CPU cold {cpu_rows[n][0]:.2f} s")
            where_the_bytes_are(root, n)
        # Start-up and cost per run: the least-squares line through the three sizes. The widest size is there for
        # the slope's sake: this VM's speed drifts by a third within minutes, which moved a slope over 100 and 400
        # runs alone by as much as its value (the same summaries measured -0.05 to 0.90 ms a run, repeat by repeat).
        ns = sorted(roots)
        lines = {}
        for label, table in (("wall", rows), ("CPU", cpu_rows)):
            lines[label] = [statistics.linear_regression(ns, [table[n][i] for n in ns]) for i in range(len(variants))]
            (s_all, b_all), (s_np, b_np), (s_nr, b_nr) = lines[label]
            print(f"summarize-experiment cold, {label} time, line through {', '.join(map(str, ns))} runs: start-up "
                  f"{b_all:.2f} s, {s_all * 1000:.2f} ms per run (without plots: {b_np:.2f} s, {s_np * 1000:.2f} ms "
                  f"per run; without the report: {b_nr:.2f} s, {s_nr * 1000:.2f} ms per run); load avg "
                  f"{os.getloadavg()[0]:.1f}")
        # The sampling error: each repeat's own line (its sizes ran back to back).
        for label, table in (("wall", times), ("CPU", cpu)):
            each = sorted(statistics.linear_regression(ns, [table[n, "all"][i] for n in ns])
                          for i in range(args.repeats))
            print(f"  each repeat's own line ({label}, with plots and the report): "
                  f"{', '.join(f'{s * 1000:.2f}' for s, _ in each)} ms per run ({sum(s <= 0.001 for s, _ in each)} of "
                  f"{len(each)} <= 1.0); start-up {', '.join(f'{b:.2f}' for b in sorted(b for _, b in each))} s")
        n1, start = ns[0], lines["wall"][0].intercept
        per_task_slope(out, roots[n1], args)
        # incremental: the 100-run experiment grows to 400 runs (runs 1..3 of every task added)
        root = out / "s100"
        summarize(root)
        sweep(out, "s100", 25, 4, args.inject_rate)
        t = summarize(root)[0]
        added = n_runs(root) - n1
        print(f"incremental: {added} runs added to a summarised {n1}-run experiment, summarize-experiment "
              f"{t:.2f} s = start-up + {(t - start) / added * 1000:.2f} ms per added run")
        if args.big:
            tasks = args.big // 4
            sweep(out, "big", tasks, 1, args.inject_rate)
            root = out / "big"
            n = n_runs(root)
            t_cold = summarize(root)[0]
            t_warm = summarize(root)[0]
            print(f"{n} runs: disk {apparent(root) / n / 1024:.1f} KB/run in all; summarize-experiment cold "
                  f"{t_cold:.1f} s ({t_cold / n * 1000:.2f} ms/run), again unchanged {t_warm:.1f} s")
    print(f"load avg at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
