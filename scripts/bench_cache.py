"""Print what the response cache costs per call and what it saves on a re-run.

1. Lookup overhead: the key of a realistic call (a 12-message history of ~600 characters each, two tools) and a
   hit, against a file of ``--entries`` entries; median and p95 ms per call over ``--calls`` calls, with the miss
   path (key + lookup of an absent key) beside it.
2. A cached re-run: the same scripted sweep (``--runs`` arith runs of sas and debate) twice as whole processes,
   first with ``--cache write`` and then under a new experiment id with ``--cache read``; wall times and their
   ratio (interleaved ``--repeats`` times; the median ratio is printed). ``--embedded`` adds the same on the
   embedded model (minutes).

Run: python scripts/bench_cache.py [--calls 2000] [--entries 5000] [--runs 20] [--repeats 3] [--embedded]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage  # noqa: E402

from mas.llm.cache import CachedReply, ResponseCache, request_key  # noqa: E402
from mas.tools.builtin import TOOLS  # noqa: E402


def _history(i: int) -> list:
    msgs = [SystemMessage("You are a careful solver. " * 25)]
    for j in range(11):
        cls = HumanMessage if j % 2 == 0 else AIMessage
        msgs.append(cls(f"turn {j} of call {i}: " + "some reasoning about the task at hand " * 15))
    return msgs


def _key(history: list, tools: list) -> str:
    return request_key(provider="openai", model="m", endpoint="http://127.0.0.1/v1", messages=history,
                       tools=tools, temperature=0.0, max_tokens=512, seed=7, response_format=None,
                       place={"contract": "agent.turn", "mas_actor": "solver", "run_seed": 7})


def lookup_overhead(calls: int, entries: int) -> None:
    tools = list(TOOLS)
    with tempfile.TemporaryDirectory() as tmp:
        cache = ResponseCache(Path(tmp) / "c.sqlite")
        reply = CachedReply(message=AIMessage("x" * 400), token_in=900, token_out=100, usage_source="provider",
                            cost_usd=0.001, latency_ms=800.0)
        histories = [_history(i) for i in range(entries + calls)]  # built before the clock: the caller has them
        for i in range(entries):
            cache.put(_key(histories[i], tools), provider="openai", model="m", reply=reply)
        hit_ms, miss_ms = [], []
        for i in range(calls):
            t = time.perf_counter()
            assert cache.get(_key(histories[i % entries], tools)) is not None
            hit_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            assert cache.get(_key(histories[entries + i], tools)) is None
            miss_ms.append((time.perf_counter() - t) * 1000)
    q = lambda xs, p: statistics.quantiles(xs, n=100)[p - 1]  # noqa: E731
    print(f"lookup (key + SQLite read) over {calls} calls, {entries} entries: hit median {statistics.median(hit_ms):.3f} "
          f"ms (p95 {q(hit_ms, 95):.3f}), miss median {statistics.median(miss_ms):.3f} ms (p95 {q(miss_ms, 95):.3f}); "
          "target <= 0.5 ms median")


def _sweep(out: Path, exp: str, cache: str, cache_path: Path, runs: int, model: str) -> float:
    cmd = [sys.executable, str(ROOT / "main.py"), "run", "--model", model, "--benchmark", "arith", "--task-limit",
           str(runs), "--systems", "sas,debate", "--output-root", str(out), "--experiment-id", exp, "--progress",
           "none", "--cache", cache, "--set", f'cache.path="{cache_path}"']
    t = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - t


def rerun_ratio(runs: int, repeats: int, model: str) -> None:
    ratios = []
    for r in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            out, db = Path(tmp) / "out", Path(tmp) / "c.sqlite"
            first = _sweep(out, f"a{r}", "write", db, runs, model)
            again = _sweep(out, f"b{r}", "read", db, runs, model)
            ratios.append(again / first)
            print(f"  {model} repeat {r}: original {first:.1f} s, cached re-run {again:.1f} s, ratio {again / first:.2f}")
    print(f"{model}: cached re-run / original wall time, median of {repeats}: {statistics.median(ratios):.2f} "
          f"({runs} tasks x sas,debate, whole processes)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--entries", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--embedded", action="store_true", help="also time a cached re-run on the embedded model")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    lookup_overhead(args.calls, args.entries)
    rerun_ratio(args.runs, args.repeats, "scripted")
    if args.embedded:
        rerun_ratio(max(2, args.runs // 10), 1, "embedded")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
