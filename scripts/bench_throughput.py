"""Throughput against a fast OpenAI-compatible endpoint: the project's sweep beside a plain asyncio loop and Inspect AI.

A local endpoint (its own process, ``asyncio`` with ``uvloop`` when installed) answers every chat completion after a
fixed delay (``--delay-ms``, default 300: what a vLLM or llama.cpp server on a GPU answers short calls in), with the
runtime's answer contract holding the right answer to the arith question it was asked (every run succeeds, so none
keeps the checkpoints a failed run keeps; debaters agree, so a debate stops after its one discussion round). Against it, each
program in a process of its own, at each concurrency (``--concurrency``, default 1,8,32,64), interleaved over
``--rounds`` rounds (each round runs the programs in a rotated order):

- ``sas`` and ``debate`` (``mas.agents = 3``): the project's sweep (:func:`mas.sweep.experiment.run_experiment`,
  as ``main.py run`` calls it: every run file written, tracing on) of ``waves x concurrency`` arith runs, the route
  ``provider = "openai"`` on the endpoint, ``--workers`` worker processes (default ``auto``);
- ``plain``: ``waves x concurrency`` calls of one ``ChatOpenAI.ainvoke`` in a plain asyncio loop, ``concurrency``
  at a time (what the HTTP stack alone allows);
- ``inspect``: ``inspect_ai.eval`` of ``generate()`` on as many arith samples, ``--max-connections`` set to the
  concurrency (skipped, with a line saying so, when ``inspect-ai`` is not installed).

Figures of each (median over the rounds, the spread in brackets):

- calls/s ÷ ideal: calls over the endpoint's busy window (first request received to last reply sent: the processes'
  start-up and imports are left out, the same for every program), divided by what the concurrency allows with
  every call taking exactly the delay: ``concurrency / delay`` for one call at a time per run (``sas``,
  ``plain``, ``inspect``); for ``debate``, ``concurrency x calls per run / (stages x delay)``, its stages (calls
  that must follow one another) counted from the arrival times of its runs at concurrency 1;
- connections: TCP connections the endpoint accepted in the measurement (one per call in flight at most is the
  most a program needs: a new connection per call is a leak of the pool);
- peak in flight: the most calls the endpoint held at once;
- CPU ms per call: user + system CPU of the program's process and its descendants (worker processes) over the
  busy window, per call (sampled from ``/proc`` every 0.1 s); in brackets, from the start of its measured part
  (after its imports, so with a sweep's worker processes' start-up) to its end; the endpoint's own CPU is in
  neither;
- the load average before each measurement (every figure here moves with what else runs on the machine).

Goals at concurrency 64: ``sas`` and ``debate`` >= 0.85 of ideal, connections <= 2 x 64, calls/s >= 1.5x Inspect
AI's. Run::

    python scripts/bench_throughput.py                       # 1,8,32,64, 3 rounds (about 10 min on 2 cores)
    python scripts/bench_throughput.py --concurrency 64 --rounds 5 --programs sas,debate,inspect
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ("sas", "debate", "plain", "inspect")
_QUESTION = re.compile(r"starts with (\d+)([^?]*)\?")
_STEP = re.compile(r"gains (\d+) more|loses (\d+)|multiplied by (\d+)")
GOAL_IDEAL, GOAL_CONNECTIONS, GOAL_INSPECT = 0.85, 2, 1.5


def load() -> str:
    return f"load avg {' '.join(f'{x:.2f}' for x in os.getloadavg())}"


# --- the endpoint: its own process, one event loop, a fixed delay per completion ---

class EndpointStats:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.calls = self.connections = self.in_flight = self.peak = 0
        self.first: float | None = None
        self.last: float | None = None
        self.arrivals: list[float] = []

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "connections": self.connections, "peak_in_flight": self.peak,
                "first": self.first, "last": self.last,
                "window_s": (self.last - self.first) if self.first is not None and self.last is not None else None,
                "arrivals": [t - (self.first or 0.0) for t in self.arrivals]}


def arith_answer(body: bytes) -> str:
    """The right answer to the arith question in a chat request (so every run succeeds and none keeps the
    checkpoints a failed run keeps); "0" when there is none."""
    match = _QUESTION.search(body.decode("utf-8", "replace"))
    if match is None:
        return "0"
    value = int(match.group(1))
    for gain, loss, times in _STEP.findall(match.group(2)):
        value = value + int(gain) if gain else value - int(loss) if loss else value * int(times)
    return str(value)


def _completion(answer: str) -> bytes:
    content = json.dumps({"reasoning": "step by step", "answer_artifact": answer, "confidence": 0.9})
    body = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "bench",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content}}],
                       "usage": {"prompt_tokens": 60, "completion_tokens": 20, "total_tokens": 80}}).encode()
    return (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)) + body


def _plain(status: str, body: bytes) -> bytes:
    return (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n".encode()
            + body)


def serve(port_file: str, delay_s: float) -> None:
    """The endpoint: POST .../chat/completions answered after ``delay_s``; ``GET /stats``, ``POST /reset``."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    stats = EndpointStats()

    class Conn(asyncio.Protocol):
        def __init__(self) -> None:
            self.buf = b""
            self.counted = False

        def connection_made(self, transport: Any) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            self.buf += data
            while True:
                head_end = self.buf.find(b"\r\n\r\n")
                if head_end < 0:
                    return
                head = self.buf[:head_end].decode("latin-1")
                length = 0
                for line in head.split("\r\n")[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                if len(self.buf) < head_end + 4 + length:
                    return
                body = self.buf[head_end + 4:head_end + 4 + length]
                self.buf = self.buf[head_end + 4 + length:]
                self.request(head.split(" ", 2), body)

        def request(self, line: list[str], body: bytes) -> None:
            method, path = line[0], line[1] if len(line) > 1 else "/"
            loop = asyncio.get_running_loop()
            if path.endswith("/chat/completions"):
                now = time.monotonic()  # the clock the driver samples the programs' CPU time on
                if not self.counted:  # a control connection is no program's
                    self.counted = True
                    stats.connections += 1
                stats.calls += 1
                stats.in_flight += 1
                stats.peak = max(stats.peak, stats.in_flight)
                stats.first = now if stats.first is None else stats.first
                stats.arrivals.append(now)
                loop.call_later(delay_s, self.answer, _completion(arith_answer(body)))
            elif path == "/stats":
                self.transport.write(_plain("200 OK", json.dumps(stats.as_dict()).encode()))
            elif path == "/reset" and method == "POST":
                stats.reset()
                self.transport.write(_plain("200 OK", b"{}"))
            else:
                self.transport.write(_plain("404 Not Found", json.dumps({"error": f"no {method} {path}"}).encode()))

        def answer(self, reply: bytes) -> None:
            stats.in_flight -= 1
            stats.last = time.monotonic()
            if not self.transport.is_closing():
                self.transport.write(reply)

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Conn, "127.0.0.1", 0, backlog=1024)
        port = server.sockets[0].getsockname()[1]
        Path(port_file + ".tmp").write_text(str(port))
        os.replace(port_file + ".tmp", port_file)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        server.close()

    asyncio.run(main())


class Endpoint:
    """The endpoint process, started here and stopped by its PID."""

    def __init__(self, delay_s: float, tmp: Path) -> None:
        port_file = tmp / "port"
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port_file), str(delay_s)])
        deadline = time.monotonic() + 30
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the bench endpoint did not start")
            time.sleep(0.05)
        self.port = int(port_file.read_text())
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def _control(self, method: str, path: str) -> dict[str, Any]:
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=b"" if method == "POST" else None)
            return json.loads(conn.getresponse().read())
        finally:
            conn.close()

    def reset(self) -> None:
        self._control("POST", "/reset")

    def stats(self) -> dict[str, Any]:
        return self._control("GET", "/stats")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --- the programs, each run in a child process: ``--child PROGRAM CONCURRENCY N URL OUT [WORKERS]`` ---

def cpu_s() -> float:
    """User + system CPU (s) of this process and of the children it waited for."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def arith_questions(n: int) -> list[tuple[str, str]]:
    sys.path.insert(0, str(ROOT))
    from benchmark.registry import get_benchmark

    tasks = get_benchmark("arith", {"count": n}).load_tasks(n)
    return [(t.question, str(t.reference)) for t in tasks]


def child_sweep(system: str, concurrency: int, n: int, url: str, out: Path, workers: str) -> tuple[float, int]:
    sys.path.insert(0, str(ROOT))
    from mas.config import ExperimentConfig, MasSettings, ModelRoute
    from mas.sweep.experiment import ExperimentRequest, run_experiment

    cfg = ExperimentConfig(output_root=str(out), concurrency=concurrency, benchmarks={"arith": {"count": n}},
                           mas=MasSettings(agents=3),
                           models={"default": ModelRoute(provider="openai", model="bench", base_url=url,
                                                         api_key="sk-bench-local")})
    req = ExperimentRequest(cfg=cfg, benchmarks=["arith"], systems=[system], task_limit=n, runs_per_task=1,
                            experiment_id=f"{system}_{concurrency}", progress="none",
                            workers=workers if workers == "auto" else int(workers))
    c0 = cpu_s()
    results = asyncio.run(run_experiment(req))
    bad = [r.run_id for r in results if r.status != "finished"]
    if bad:
        raise SystemExit(f"{system}: {len(bad)} runs did not finish ({bad[:3]})")
    return cpu_s() - c0, len(results)


def child_plain(concurrency: int, n: int, url: str) -> tuple[float, int]:
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI

    questions = arith_questions(n)
    model = ChatOpenAI(model="bench", base_url=url, api_key="sk-bench-local", max_retries=0, temperature=0.2)

    async def main() -> int:
        gate = asyncio.Semaphore(concurrency)

        async def one(q: str) -> bool:
            async with gate:
                return bool((await model.ainvoke([HumanMessage(q)])).content)

        return sum(await asyncio.gather(*(one(q) for q, _ in questions)))

    c0 = cpu_s()
    done = asyncio.run(main())
    return cpu_s() - c0, done


def child_inspect(concurrency: int, n: int, url: str, out: Path) -> tuple[float, int]:
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-local")
    samples = [Sample(input=q, target=a) for q, a in arith_questions(n)]
    task = Task(dataset=samples, solver=generate(), scorer=match())
    c0 = cpu_s()
    logs = inspect_eval(task, model="openai/bench", model_base_url=url, model_args={"responses_api": False},
                        max_connections=concurrency, max_samples=concurrency, log_dir=str(out / "inspect_logs"),
                        display="none", max_retries=0)
    done = sum(1 for s in (logs[0].samples or []) if s.error is None)
    return cpu_s() - c0, done


def run_child(args: list[str]) -> int:
    program, concurrency, n, url, out = args[0], int(args[1]), int(args[2]), args[3], Path(args[4])
    if program in ("sas", "debate"):
        cpu, done = child_sweep(program, concurrency, n, url, out, args[5])
    elif program == "plain":
        cpu, done = child_plain(concurrency, n, url)
    else:
        cpu, done = child_inspect(concurrency, n, url, out)
    print(json.dumps({"cpu_s": cpu, "done": done}))
    return 0


def inspect_installed() -> bool:
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        return False
    return True


# --- the driver ---

class TreeCPU(threading.Thread):
    """User + system CPU (s) of a process and its live descendants, sampled every ``every_s`` from ``/proc``
    (Linux), so the CPU of a window inside the program's life (the endpoint's busy window) can be read."""

    def __init__(self, pid: int, every_s: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.pid, self.every_s = pid, every_s
        self.samples: list[tuple[float, float]] = []
        self.done = threading.Event()
        self.tick = os.sysconf("SC_CLK_TCK")

    def tree_cpu(self) -> float:
        parent, cpu = {}, {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            pid = int(entry.name)
            parent[pid], cpu[pid] = int(fields[1]), (int(fields[11]) + int(fields[12])) / self.tick
        total, todo = 0.0, [self.pid]
        children: dict[int, list[int]] = {}
        for pid, ppid in parent.items():
            children.setdefault(ppid, []).append(pid)
        while todo:
            pid = todo.pop()
            total += cpu.get(pid, 0.0)
            todo += children.get(pid, [])
        return total

    def run(self) -> None:
        while not self.done.is_set():
            self.samples.append((time.monotonic(), self.tree_cpu()))
            self.done.wait(self.every_s)

    def at(self, t: float) -> float:
        """The tree's CPU (s) at time ``t`` (monotonic), interpolated between samples."""
        before = [s for s in self.samples if s[0] <= t] or self.samples[:1]
        after = [s for s in self.samples if s[0] >= t] or self.samples[-1:]
        (t0, c0), (t1, c1) = before[-1], after[0]
        return c0 if t1 == t0 else c0 + (c1 - c0) * (t - t0) / (t1 - t0)


def measure(ep: Endpoint, program: str, concurrency: int, n: int, tmp: Path, workers: str) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix=f"{program}_{concurrency}_", dir=tmp))
    before = load()
    ep.reset()
    t0 = time.perf_counter()
    cmd = [sys.executable, __file__, "--child", program, str(concurrency), str(n), ep.base_url, str(out), workers]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
                                str(ROOT), os.environ.get("PYTHONPATH")]))})
    sampler = TreeCPU(proc.pid) if sys.platform.startswith("linux") else None
    if sampler is not None:
        sampler.start()
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - t0
    if sampler is not None:
        sampler.done.set()
        sampler.join()
    shutil.rmtree(out, ignore_errors=True)
    if proc.returncode != 0:
        raise SystemExit(f"{program} at concurrency {concurrency} failed (exit {proc.returncode}):\n{stderr[-3000:]}")
    child = json.loads(stdout.strip().splitlines()[-1])
    stats = ep.stats()
    window_cpu = (sampler.at(stats["last"]) - sampler.at(stats["first"])
                  if sampler is not None and sampler.samples and stats["first"] is not None else None)
    return {**stats, **child, "wall_s": wall, "load": before, "window_cpu_s": window_cpu}


def stages_per_run(arrivals: list[float], runs: int, delay_s: float) -> float:
    """Calls that follow one another, per run, from the arrival times of runs made one at a time: a new stage
    starts where a call arrives more than half a delay after the one before (calls of one stage arrive together)."""
    stages = 1 + sum(1 for a, b in zip(arrivals, arrivals[1:]) if b - a > delay_s / 2)
    return stages / runs


def spread(xs: list[float], fmt: str = ".2f") -> str:
    return f"{statistics.median(xs):{fmt}} [{', '.join(f'{x:{fmt}}' for x in sorted(xs))}]"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", default="1,8,32,64", help="concurrencies to measure (default 1,8,32,64)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds of every measurement (default 3)")
    p.add_argument("--programs", default=",".join(PROGRAMS), help=f"which programs (default {','.join(PROGRAMS)})")
    p.add_argument("--delay-ms", type=float, default=300.0, help="the endpoint's delay per call (ms, default 300)")
    p.add_argument("--waves", type=int, default=10,
                   help="calls (runs) per measurement: waves x concurrency; debate makes 8 calls a run, so it runs "
                        "a quarter of that, at least 2 waves (default 10)")
    p.add_argument("--workers", default="auto", help="the sweep's --workers (default auto)")
    p.add_argument("--serve", nargs=2, metavar=("PORT_FILE", "DELAY_S"), help=argparse.SUPPRESS)
    p.add_argument("--child", nargs=6, metavar=("PROGRAM", "C", "N", "URL", "OUT", "WORKERS"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        serve(args.serve[0], float(args.serve[1]))
        return 0
    if args.child:
        return run_child(args.child)
    levels = [int(c) for c in args.concurrency.split(",")]
    programs = [x for x in args.programs.split(",") if x]
    if unknown := set(programs) - set(PROGRAMS):
        p.error(f"--programs: unknown {', '.join(sorted(unknown))}; known: {', '.join(PROGRAMS)}")
    if "inspect" in programs and not inspect_installed():
        print("inspect: skipped, inspect-ai is not installed (pip install -e '.[bench]')")
        programs.remove("inspect")
    delay = args.delay_ms / 1000
    print(f"machine: {os.cpu_count()} cores, {load()}; endpoint delay {args.delay_ms:g} ms; sweep --workers "
          f"{args.workers}")
    tmp = Path(tempfile.mkdtemp(prefix="bench_throughput_"))
    ep = Endpoint(delay, tmp)
    try:
        # Stages of a debate run (its calls that follow one another), from two runs made one at a time.
        stages = {"sas": 1.0, "plain": 1.0, "inspect": 1.0}
        if "debate" in programs:
            probe = measure(ep, "debate", 1, 2, tmp, "1")
            stages["debate"] = stages_per_run(probe["arrivals"], 2, delay)
            print(f"debate: {probe['calls'] / 2:g} calls a run in {stages['debate']:g} stages")
        rows: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for c in levels:
            for r in range(args.rounds):
                order = programs[r % len(programs):] + programs[:r % len(programs)]
                for program in order:
                    runs = max(2 * c, args.waves * c // 4) if program == "debate" else args.waves * c
                    m = measure(ep, program, c, runs, tmp, args.workers)
                    per_run = m["calls"] / runs
                    ideal = c * per_run / (stages[program] * delay)
                    m["ratio"] = m["calls"] / m["window_s"] / ideal if m["window_s"] else float("nan")
                    m["rate"] = m["calls"] / m["window_s"] if m["window_s"] else float("nan")
                    m["cpu_ms"] = m["cpu_s"] * 1000 / max(1, m["calls"])
                    m["window_cpu_ms"] = (m["window_cpu_s"] * 1000 / max(1, m["calls"])
                                          if m["window_cpu_s"] is not None else float("nan"))
                    rows.setdefault((program, c), []).append(m)
                    print(f"  c={c} round {r + 1} {program}: {m['calls']} calls, {m['rate']:.1f} calls/s, "
                          f"{m['ratio']:.2f} of ideal, {m['connections']} connections, peak {m['peak_in_flight']} "
                          f"in flight, CPU ms/call {m['window_cpu_ms']:.2f} in the busy window ({m['cpu_ms']:.2f} "
                          f"with start-up), wall {m['wall_s']:.1f} s; {m['load']}", flush=True)
        print(f"\nmedians over {args.rounds} interleaved rounds [each round]; {load()}")
        for c in levels:
            for program in programs:
                ms = rows[(program, c)]
                print(f"c={c:>3} {program:>7}: {spread([m['ratio'] for m in ms])} of ideal, "
                      f"{spread([m['rate'] for m in ms], '.1f')} calls/s, connections "
                      f"{spread([float(m['connections']) for m in ms], '.0f')} for {ms[0]['calls']} calls, peak in "
                      f"flight {spread([float(m['peak_in_flight']) for m in ms], '.0f')}, CPU ms/call "
                      f"{spread([m['window_cpu_ms'] for m in ms])} ({spread([m['cpu_ms'] for m in ms])} with start-up)")
        top = max(levels)
        for program in ("sas", "debate"):
            if program not in programs:
                continue
            ms = rows[(program, top)]
            ratio = statistics.median(m["ratio"] for m in ms)
            conns = statistics.median(m["connections"] for m in ms)
            verdict = [f"{ratio:.2f} of ideal [{'ok' if ratio >= GOAL_IDEAL else f'BELOW goal {GOAL_IDEAL}'}]",
                       f"{conns:.0f} connections [{'ok' if conns <= GOAL_CONNECTIONS * top else 'ABOVE goal'} "
                       f"{GOAL_CONNECTIONS} x {top}]"]
            if "inspect" in programs:
                # Each round's own ratio: the two ran back to back in it.
                paired = [a["rate"] / b["rate"] for a, b in zip(ms, rows[("inspect", top)], strict=True)]
                x = statistics.median(paired)
                verdict.append(f"{spread(paired)}x Inspect AI's calls/s [{'ok' if x >= GOAL_INSPECT else 'BELOW goal'}"
                               f" {GOAL_INSPECT}x]")
            print(f"goal at c={top}, {program}: {'; '.join(verdict)}")
    finally:
        ep.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
