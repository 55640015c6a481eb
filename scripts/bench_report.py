"""Report figures at scale, printed by one command.

    python scripts/bench_report.py [--experiment-root DIR] [--runs 10000] [--loads 3]

A real scripted sweep (``main.py run --model scripted``: arith, the four
systems, 3 runs per task, 30 % injected errors, seed 0) of at least ``--runs``
runs is generated once into ``--experiment-root`` (default
``$TMPDIR/mas-bench-report/e<runs>``; reused when it already holds that many
finished runs; ~7 minutes and ~1.3 GB for 10,008 runs on 2 cores). Then:

- the report is written from scratch into a fresh directory (``write_report``,
  in this process and its forked workers: reading every run, a data file per
  task directory, the runs index, the index and grid pages), timed
  wall-clock, with the CPU seconds it used and the machine's load average
  before it (on a shared machine the wall time follows the load);
- the index page, a grid page and the run viewer (showing the first run) are
  opened ``--loads`` times each in real headless Chromium (fresh navigation
  each time) and the time from navigation start to the end of
  DOMContentLoaded is read from the page's Navigation Timing (for the run
  viewer also the time until it has drawn the run from its data file); the
  median is reported, with any console error or network request the page
  made.

Targets (issue 20): report written in <= 30 s; index DOMContentLoaded <= 2 s.
Exit 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from chromium_cdp import Chromium, find_chromium  # noqa: E402  (scripts/ is this file's directory)

from descriptor.report import write_report  # noqa: E402
from descriptor.report.run_data import read_task_js  # noqa: E402
from descriptor.parallel import usable_workers  # noqa: E402
from main import main as cli  # noqa: E402

SYSTEMS = ("sas", "supervisor", "debate", "orchestrator")
RUNS_PER_TASK = 3
TARGET_WRITE_S, TARGET_DCL_MS = 30.0, 2000.0


def _finished(root: Path) -> int:
    return sum(1 for _ in root.glob("*/*/*/run_*.result.json")) if root.is_dir() else 0


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process and its finished children (the report's workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def ensure_experiment(root: Path, runs: int) -> int:
    """Run the scripted sweep into ``root`` unless it already holds ``runs`` finished runs (resumes a partial one)."""
    tasks = math.ceil(runs / (len(SYSTEMS) * RUNS_PER_TASK))
    if _finished(root) < tasks * len(SYSTEMS) * RUNS_PER_TASK:
        print(f"generating {tasks * len(SYSTEMS) * RUNS_PER_TASK} scripted runs into {root} (once) ...", flush=True)
        t0 = time.perf_counter()
        code = cli(["run", "--benchmark", "arith", "--systems", ",".join(SYSTEMS), "--model", "scripted",
                    "--task-limit", str(tasks), "--runs-per-task", str(RUNS_PER_TASK), "--inject-errors", "0.3",
                    "--seed", "0", "--output-root", str(root.parent), "--experiment-id", root.name, "--progress", "log"])
        if code != 0:
            raise SystemExit(f"the sweep failed with exit code {code}")
        print(f"generated in {time.perf_counter() - t0:.0f} s", flush=True)
    return _finished(root)


DRAWN_MS = """new Promise(done => { (function poll() {
    if (document.body.dataset.ready) { done(performance.now()); } else { setTimeout(poll, 5); } })(); })"""
"""Navigation start to the run viewer's run drawn (ms; polled every 5 ms)."""


def page_loads(browser: Chromium, url: str, loads: int, *, drawn: bool = False) -> tuple[float, float, list[str]]:
    """Median DOMContentLoaded (ms) over ``loads`` fresh navigations, with ``drawn`` the median time until the
    run viewer drew its run (ms, else 0), and the problems the page reported."""
    times, drawn_ms = [], []
    browser.events.clear()
    for _ in range(loads):
        browser.open("about:blank")
        browser.open(url)
        times.append(browser.dom_content_loaded_ms())
        if drawn:
            drawn_ms.append(float(browser.evaluate(DRAWN_MS)))
    return statistics.median(times), statistics.median(drawn_ms) if drawn else 0.0, browser.problems()


def first_run_url(out: Path) -> str:
    """The run viewer showing the report's first run (of the first task data file, sorted by path)."""
    names, data = read_task_js(next(iter(sorted((out / "data").rglob("*/*/*.js")))).read_text(encoding="utf-8"))
    name = sorted(data["runs"])[0]
    return f"{(out / 'run.html').as_uri()}#{'/'.join(quote(n, safe='') for n in names)}/{name}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiment-root", type=Path, default=None)
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--loads", type=int, default=3, help="page loads per page in Chromium (median reported)")
    args = ap.parse_args(argv)
    root = args.experiment_root or Path(tempfile.gettempdir()) / "mas-bench-report" / f"e{args.runs}"
    n = ensure_experiment(root, args.runs)

    out = root / "bench-report"
    shutil.rmtree(out, ignore_errors=True)  # our own output from an earlier call: written from scratch
    load = os.getloadavg()[0]
    cpu0 = _cpu_s()
    t0 = time.perf_counter()
    index = write_report(root, out=out)
    write_s = time.perf_counter() - t0
    cpu_s = _cpu_s() - cpu0
    files = [p for p in out.rglob("*") if p.is_file()]
    print(f"report of {n} runs written in {write_s:.1f} s (target <= {TARGET_WRITE_S:.0f} s; {cpu_s:.1f} s of CPU in "
          f"{usable_workers()} process(es) on {os.cpu_count()} cores, 1-minute load average {load:.1f} before): "
          f"{len(files)} files, {sum(p.stat().st_size for p in files) / 1e6:.0f} MB; "
          f"index.html {index.stat().st_size / 1e3:.0f} kB")

    ok = write_s <= TARGET_WRITE_S
    if find_chromium() is None:
        print("no chromium on PATH: page load times not measured (Debian: apt-get install -y chromium)")
        return 1
    grid = next(iter(sorted((out / "grid").glob("*.html"))), index)
    with tempfile.TemporaryDirectory() as profile, Chromium(profile, width=1280, height=900) as browser:
        for name, url in (("index", index.as_uri()), ("grid page", grid.as_uri()), ("run page", first_run_url(out))):
            dcl, drawn_ms, problems = page_loads(browser, url, args.loads, drawn=name == "run page")
            target = f" (target <= {TARGET_DCL_MS:.0f} ms)" if name == "index" else ""
            drawn = f", run drawn from its data at {drawn_ms:.0f} ms" if name == "run page" else ""
            print(f"{name}: DOMContentLoaded {dcl:.0f} ms{drawn}, median of {args.loads}{target}; "
                  f"{len(problems)} console errors or network requests {problems[:3]}")
            if name == "index":
                ok = ok and dcl <= TARGET_DCL_MS
            ok = ok and not problems
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
