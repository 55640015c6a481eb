"""Per-run harness overhead, printed by one command (issue 33).

1. **Against plain LangGraph, in one process**: scripted ``arith`` sweeps of ``sas`` and ``debate`` (tracing on,
   every artifact of the seed written, the default storage policy) against a plain LangGraph program of the same
   shape (:func:`plain_sweep`: a fake chat model making the same calls, the calculator, an in-memory
   checkpointer, the same concurrency), interleaved over ``--repeats`` rounds; median ms per run and the ratio
   (goal <= 1.5x), in wall time and in CPU time (``time.process_time``: every thread of this process, the
   figure to trust beside other jobs on a shared machine), and the CPU breakdown of what the harness adds
   (the project's graph alone, then its sweep untraced, between the two). Then the files a run leaves and
   what creating one cost on the runs' disk, measured before and after the rounds: on the shared VM this
   was written on, that moved between 0.07 and 1.8 ms of kernel CPU from one minute to the next, and a run
   leaves ~10 files, so the ratio moves with the disk (``TMPDIR`` picks it). The plain program has the same
   shape: the same model calls per run (printed: each side's calls are counted, ~5 a ``sas`` run and ~18 a
   ``debate`` run), the same tool calls, agents, rounds and stopping rule. Each round's own ratio is printed
   too: on a shared VM the same work's CPU time moved by a third between rounds, so their spread is the
   figure's sampling error.
2. **Against plain LangGraph, whole processes**: ``python main.py run`` (start-up, sweep, summaries, report) and
   the plain program in its own process, at two sweep sizes, interleaved; the slope (ms per extra run) and the
   ratio of slopes (goal <= 1.5x), plus each start-up (the intercept).
3. **Against Inspect AI** (skipped with a line saying so when ``inspect-ai`` is not installed): ``inspect eval``
   with ``mockllm/model``, ``generate()`` + ``match()`` on the same ``--inspect-samples`` arithmetic questions,
   against the project's scripted ``sas`` sweep of them, whole processes, interleaved; seconds and ms per sample
   (goal: faster than Inspect) and disk per sample (the project's run files, everything but the HTML report,
   against Inspect's log; goal within 5x).

The machine's load average is printed before and after: on a shared VM every absolute figure moves with it;
the ratios, taken within one interleaved round, much less.

Run: python scripts/bench_overhead.py [--runs 200] [--repeats 3] [--sizes 50,200] [--skip-inspect]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import operator
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Send

ROOT = Path(__file__).resolve().parent.parent
GOAL_RATIO, GOAL_DISK = 1.5, 5.0


# --- the plain LangGraph program: no project import below this line until main() ---

_STEP = re.compile(r"gains (\d+) more|loses (\d+)|multiplied by (\d+)")
PLAIN_CALLS = [0]
"""Calls the plain program's fake model answered (to show both sides made the same calls)."""


class ArithChat(BaseChatModel):
    """A fake chat model solving the arithmetic questions as the project's scripted one does: one calculator
    call per operation, then a JSON answer; after the peers' answers, the answer at once."""

    @property
    def _llm_type(self) -> str:
        return "arith-fake"

    def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        PLAIN_CALLS[0] += 1
        question = next(m.content for m in messages if isinstance(m, HumanMessage))
        value = int(re.search(r"starts with (\d+)", question).group(1))  # type: ignore[union-attr]
        ops = [("+", int(a)) if a else ("-", int(s)) if s else ("*", int(m)) for a, s, m in _STEP.findall(question)]
        done = sum(isinstance(m, ToolMessage) for m in messages)
        for op, n in ops[:done]:
            value = {"+": operator.add, "-": operator.sub, "*": operator.mul}[op](value, n)
        if done < len(ops) and "answers" not in messages[-1].content:
            op, n = ops[done]
            msg = AIMessage("", tool_calls=[{"name": "calculator", "args": {"expression": f"{value} {op} {n}"},
                                             "id": f"call_{uuid.uuid4().hex[:10]}"}])
        else:
            msg = AIMessage(json.dumps({"reasoning": "step by step", "answer_artifact": str(value),
                                        "confidence": 0.9}))
        return ChatResult(generations=[ChatGeneration(message=msg)])


def calculator(expression: str) -> str:
    a, op, b = expression.split()
    return str({"+": operator.add, "-": operator.sub, "*": operator.mul}[op](int(a), int(b)))


class SasState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    answer: str


def plain_sas(model: BaseChatModel) -> Any:
    async def agent(state: SasState) -> dict[str, Any]:
        reply = await model.ainvoke(state["messages"])
        return {"messages": [reply], **({} if reply.tool_calls else {"answer": json.loads(reply.content)["answer_artifact"]})}

    async def tools(state: SasState) -> dict[str, Any]:
        calls = state["messages"][-1].tool_calls
        return {"messages": [ToolMessage(calculator(**c["args"]), tool_call_id=c["id"]) for c in calls]}

    async def route(state: SasState) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    g = StateGraph(SasState)
    g.add_node("agent", agent)
    g.add_node("tools", tools)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=InMemorySaver())


class DebateState(TypedDict, total=False):
    question: str
    round: int
    answers: Annotated[list[dict[str, Any]], operator.add]
    answer: str


def plain_debate(model: BaseChatModel, agents: int = 3, min_rounds: int = 1, max_rounds: int = 3) -> Any:
    async def fan_out(state: DebateState) -> list[Send]:
        r = state.get("round", 0)
        peers = [a["answer"] for a in state.get("answers", []) if a["round"] == r - 1]
        return [Send("debater", {"question": state["question"], "agent": i, "round": r, "peers": peers})
                for i in range(agents)]

    async def debater(task: dict[str, Any]) -> dict[str, Any]:
        msgs: list[Any] = [SystemMessage("You are one of several debaters."), HumanMessage(task["question"])]
        if task["peers"]:
            msgs.append(HumanMessage(f"Other agents' answers: {task['peers']}"))
        while (reply := await model.ainvoke(msgs)).tool_calls:  # the agent's own tool loop
            msgs += [reply, *(ToolMessage(calculator(**c["args"]), tool_call_id=c["id"]) for c in reply.tool_calls)]
        return {"answers": [{"agent": task["agent"], "round": task["round"],
                             "answer": json.loads(reply.content)["answer_artifact"]}]}

    async def controller(state: DebateState) -> dict[str, Any]:
        r = state.get("round", 0)
        now = {a["answer"] for a in state["answers"] if a["round"] == r}
        stop = r >= max_rounds or (r >= min_rounds and len(now) == 1)
        return {"round": r if stop else r + 1, **({"answer": now.pop()} if stop and len(now) == 1 else {})}

    async def after(state: DebateState) -> Any:
        return END if "answer" in state or state["round"] >= max_rounds else await fan_out(state)

    g = StateGraph(DebateState)
    g.add_node("debater", debater)
    g.add_node("controller", controller)
    g.add_conditional_edges(START, fan_out, ["debater"])
    g.add_edge("debater", "controller")
    g.add_conditional_edges("controller", after, ["debater", END])
    return g.compile(checkpointer=InMemorySaver())


async def plain_sweep(system: str, questions: list[str], concurrency: int = 4) -> int:
    """Every question through ``system``'s plain graph, ``concurrency`` at a time; the runs that got an answer."""
    model = ArithChat()
    graph = plain_sas(model) if system == "sas" else plain_debate(model)
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int, q: str) -> bool:
        async with gate:
            inp = {"messages": [SystemMessage("You are a careful problem solver."), HumanMessage(q)]} \
                if system == "sas" else {"question": q}
            state = await graph.ainvoke(inp, {"configurable": {"thread_id": f"run_{i}"}})
            return bool(state.get("answer"))

    return sum(await asyncio.gather(*(one(i, q) for i, q in enumerate(questions))))


# --- the measurements ---

def load() -> str:
    return f"load avg {' '.join(f'{x:.2f}' for x in os.getloadavg())}"


def arith_samples(n: int, path: Path) -> list[str]:
    """The first ``n`` arith questions, also written to ``path`` as an Inspect dataset (input, target)."""
    sys.path.insert(0, str(ROOT))
    from benchmark.registry import get_benchmark

    tasks = get_benchmark("arith").load_tasks(n)
    path.write_text("".join(json.dumps({"input": t.question, "target": str(t.reference)}) + "\n" for t in tasks))
    return [t.question for t in tasks]


def scripted_request(system: str, n: int, root: Path, exp: str, *, tracing: bool) -> Any:
    """The ``ExperimentRequest`` of a scripted sweep of ``n`` arith runs of ``system`` under ``root``."""
    from mas.config import ExperimentConfig, ModelRoute
    from mas.sweep.experiment import ExperimentRequest

    cfg = ExperimentConfig(output_root=str(root), benchmarks={"arith": {"count": n}},
                           models={"default": ModelRoute(provider="scripted", model="scripted")})
    return ExperimentRequest(cfg=cfg, benchmarks=["arith"], systems=[system], task_limit=n, runs_per_task=1,
                             experiment_id=exp, progress="none", tracing=tracing)


def project_sweep(system: str, n: int, root: Path, exp: str, *, tracing: bool = True) -> float:
    """The project's scripted sweep of ``n`` arith runs in this process (as ``run`` makes it); wall seconds."""
    from mas.sweep.experiment import run_experiment

    req = scripted_request(system, n, root, exp, tracing=tracing)
    t0 = time.perf_counter()
    asyncio.run(run_experiment(req))
    return time.perf_counter() - t0


def graph_sweep(system: str, n: int, root: Path, concurrency: int = 4) -> None:
    """The project's graph alone for the same ``n`` runs: each run's graph with its models and an in-memory
    checkpointer, untraced, ``concurrency`` at a time; no run files, records, evaluation or manifest."""
    from mas.sweep.checkpoints import memory_saver
    from mas.sweep.experiment import plan_runs, validate_request
    from mas.sweep.runner import RECURSION_LIMIT, run_context, run_graph
    from mas.tracing import Tracer

    req = scripted_request(system, n, root, "graph_only", tracing=False)
    cfg = req.cfg
    benches = validate_request(req)
    bench = benches["arith"]

    async def sweep() -> None:
        gate = asyncio.Semaphore(concurrency)

        async def one(spec: Any) -> None:
            async with gate:
                rt = run_context(cfg, bench, spec.task, seed=spec.seed, injection=None)
                _, error, _ = await run_graph(system, rt, memory_saver(), Tracer(spec.run_id, [], enabled=False),
                                              config={"configurable": {"thread_id": spec.run_id},
                                                      "recursion_limit": RECURSION_LIMIT})
                assert error is None, f"{spec.run_id}: {error}"

        await asyncio.gather(*(one(spec) for spec in plan_runs(req, benches)))

    asyncio.run(sweep())


def file_cost_ms(root: Path, files: int = 270, per_dir: int = 9) -> float:
    """CPU ms (every thread of this process) to create one small file in a new directory under ``root``, as a
    run creates its files; measured now, since on a shared VM it moved between 0.07 and 1.8 ms within minutes."""
    probe = Path(tempfile.mkdtemp(prefix="probe_", dir=root))
    try:
        c0 = time.process_time()
        for i in range(files // per_dir):
            d = probe / f"t{i}"
            d.mkdir()
            for j in range(per_dir):
                (d / f"f{j}.json").write_bytes(b"x" * 2000)
        return (time.process_time() - c0) * 1000 / files
    finally:
        shutil.rmtree(probe, ignore_errors=True)


def files_per_run(root: Path, n: int) -> float:
    """Files the sweep under ``root`` created per run (its runs' files and the experiment's own)."""
    return sum(1 for p in root.rglob("*") if p.is_file()) / n


def in_process(systems: list[str], n: int, repeats: int, tmp: Path) -> None:
    from mas.cli import freeze_startup_heap
    from mas.llm.meter import METER

    questions = arith_samples(n, tmp / "samples.jsonl")
    warm = min(n, 20)  # two runs left the first measured round ~1.5x slower than the next (lazy caches)
    for system in systems:  # warm-up: imports, lazy caches, the compiled graphs
        project_sweep(system, warm, tmp, f"warm_{system}")
        graph_sweep(system, warm, tmp)
        asyncio.run(plain_sweep(system, questions[:warm]))
    freeze_startup_heap()  # as `main.py run` does
    for system in systems:
        proj, plain, cpu = [], [], {"p": [], "u": [], "g": [], "l": []}
        probes, nfiles, calls = [file_cost_ms(tmp)], 0.0, {}
        for r in range(repeats):
            for side in ("p", "u", "g", "l")[r % 4:] + ("p", "u", "g", "l")[:r % 4]:  # each side first in turn
                c0 = time.process_time()  # CPU of every thread: less at the mercy of other processes than wall time
                if side == "u":  # the breakdown's middle: the project's sweep untraced
                    project_sweep(system, n, tmp, f"{system}_u{r}", tracing=False)
                elif side == "g":  # the project's graph alone
                    before = METER.reading().calls_done
                    graph_sweep(system, n, tmp)
                    calls["project"] = (METER.reading().calls_done - before) / n
                elif side == "p":
                    proj.append(project_sweep(system, n, tmp, f"{system}_{r}") * 1000 / n)
                else:
                    t0, before = time.perf_counter(), PLAIN_CALLS[0]
                    ok = asyncio.run(plain_sweep(system, questions))
                    calls["plain"] = (PLAIN_CALLS[0] - before) / n
                    plain.append((time.perf_counter() - t0) * 1000 / n)
                    assert ok == n, f"plain {system}: {ok}/{n} runs answered"
                cpu[side].append((time.process_time() - c0) * 1000 / n)
        probes.append(file_cost_ms(tmp))
        nfiles = files_per_run(tmp / f"{system}_0", n)
        # The sweeps' files go only now, outside every timed round: deleted inside a round, their deletion was
        # counted in the CPU time of the side that made them (a sweep never deletes its runs), and the
        # deletions of ~2,000 files between rounds left this VM's disk (ext4 with online discard) slower to
        # create files in the next rounds (the probe: 0.10 -> 0.27 and 0.24 -> 0.39 ms a file across the
        # rounds with deletions between them, 0.22 -> 0.05 and 0.03 -> 0.02 without; issue 33).
        for r in range(repeats):
            for exp in (f"{system}_{r}", f"{system}_u{r}"):
                shutil.rmtree(tmp / exp, ignore_errors=True)
        p, q = statistics.median(proj), statistics.median(plain)
        cp, cu, cg, cq = (statistics.median(cpu[k]) for k in ("p", "u", "g", "l"))
        verdict = "ok" if p / q <= GOAL_RATIO else f"ABOVE goal {GOAL_RATIO}x"
        print(f"in process, {system} ({n} scripted arith runs, concurrency 4, {repeats} interleaved rounds): project "
              f"{p:.1f} ms/run [{', '.join(f'{x:.1f}' for x in proj)}], plain LangGraph {q:.1f} ms/run "
              f"[{', '.join(f'{x:.1f}' for x in plain)}], ratio {p / q:.2f}x [{verdict}]; CPU {cp:.1f} vs "
              f"{cq:.1f} ms/run, {cp / cq:.2f}x [{'ok' if cp / cq <= GOAL_RATIO else f'ABOVE goal {GOAL_RATIO}x'}]"
              f"; {load()}")
        # Each round's own ratio (its sides ran back to back): their spread is the figure's sampling error.
        paired = sorted(a / b for a, b in zip(cpu["p"], cpu["l"], strict=True))
        print(f"  CPU ratio of each round: {', '.join(f'{x:.2f}' for x in paired)} (median "
              f"{statistics.median(paired):.2f}x, {sum(x <= GOAL_RATIO for x in paired)} of {len(paired)} rounds <= "
              f"{GOAL_RATIO}x)")
        print(f"  CPU breakdown, {system} (medians, ms/run): plain LangGraph {cq:.1f}; + the project's graph and "
              f"model-call layer (in-memory checkpoints, untraced, no files) {cg - cq:+.1f} (graph alone "
              f"{cg / cq:.2f}x plain); + the run's files and records untraced (metadata, answer, evaluation, "
              f"result, empty trace and trajectory, manifest, index) {cu - cg:+.1f}; + tracing and the files made "
              f"from the trace (trace, trajectory, page data, digest) {cp - cu:+.1f}; = {cp:.1f}")
        print(f"  model calls per run: project {calls['project']:.2f}, plain {calls['plain']:.2f} (the same calls on "
              f"both sides)")
        print(f"  the disk: a traced run leaves {nfiles:.1f} files; creating one here cost "
              f"{' then '.join(f'{x:.2f}' for x in probes)} ms of CPU (before and after these rounds; "
              f"{tmp.parent})")


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
    return time.perf_counter() - t0


def project_cmd(system: str, n: int, out: Path, exp: str) -> list[str]:
    return [sys.executable, str(ROOT / "main.py"), "run", "--benchmark", "arith", "--task-limit", str(n),
            "--systems", system, "--output-root", str(out), "--experiment-id", exp, "--progress", "none",
            "--set", "models.default.provider=scripted", "--set", "models.default.model=scripted"]


def whole_processes(systems: list[str], sizes: tuple[int, int], repeats: int, tmp: Path) -> None:
    arith_samples(max(sizes), tmp / "samples.jsonl")
    for system in systems:
        walls: dict[tuple[str, int], list[float]] = {}
        probes = [file_cost_ms(tmp)]
        for r in range(repeats):
            order = [(side, n) for n in sizes for side in ("p", "l")]
            for side, n in (order if r % 2 == 0 else order[::-1]):
                if side == "p":  # its files are deleted after the rounds (see in_process)
                    exp = f"w_{system}_{n}_{r}"
                    walls.setdefault((side, n), []).append(timed(project_cmd(system, n, tmp, exp), ROOT))
                else:
                    cmd = [sys.executable, __file__, "--plain-child", system, str(n), str(tmp / "samples.jsonl")]
                    walls.setdefault((side, n), []).append(timed(cmd, ROOT))
        (a, b), slopes = sizes, {}
        for side in ("p", "l"):
            lo, hi = statistics.median(walls[(side, a)]), statistics.median(walls[(side, b)])
            slopes[side] = ((hi - lo) * 1000 / (b - a), lo - (hi - lo) / (b - a) * a)
        ratio = slopes["p"][0] / slopes["l"][0] if slopes["l"][0] > 0 else float("nan")
        verdict = ("no verdict: a slope is not positive, the noise is larger than the runs (use larger --sizes)"
                   if slopes["p"][0] <= 0 or slopes["l"][0] <= 0 else
                   "ok" if ratio <= GOAL_RATIO else f"ABOVE goal {GOAL_RATIO}x")
        print(f"whole processes, {system} (sweeps of {a} and {b} runs, median of {repeats} interleaved): project "
              f"slope {slopes['p'][0]:.1f} ms/run, start-up {slopes['p'][1]:.2f} s; plain LangGraph slope "
              f"{slopes['l'][0]:.1f} ms/run, start-up {slopes['l'][1]:.2f} s; ratio of slopes {ratio:.2f}x "
              f"[{verdict}]; {load()}")
        probes.append(file_cost_ms(tmp))
        print(f"  the disk: creating a file here cost {' then '.join(f'{x:.2f}' for x in probes)} ms of CPU (before "
              f"and after these sweeps; {tmp.parent})")
        for r in range(repeats):
            for n in sizes:
                shutil.rmtree(tmp / f"w_{system}_{n}_{r}", ignore_errors=True)


INSPECT_TASK = '''from inspect_ai import Task, task
from inspect_ai.dataset import json_dataset
from inspect_ai.scorer import match
from inspect_ai.solver import generate


@task
def arith():
    return Task(dataset=json_dataset("samples.jsonl"), solver=generate(), scorer=match())
'''


def disk(path: Path, skip: str | None = None) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and (skip is None or skip not in p.parts))


def against_inspect(n: int, repeats: int, tmp: Path) -> None:
    inspect = shutil.which("inspect") or str(Path(sys.executable).parent / "inspect")
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        print("against Inspect AI: skipped, inspect-ai is not installed (pip install -e '.[bench]')")
        return
    arith_samples(n, tmp / "samples.jsonl")
    (tmp / "task.py").write_text(INSPECT_TASK)
    walls: dict[str, list[float]] = {"inspect": [], "project": []}
    disks: dict[str, int] = {}
    for r in range(repeats):
        for side in (("inspect", "project") if r % 2 == 0 else ("project", "inspect")):
            if side == "inspect":
                logs = tmp / f"logs_{r}"
                walls[side].append(timed([inspect, "eval", "task.py", "--model", "mockllm/model", "--log-dir",
                                          str(logs), "--display", "none"], tmp))
                disks[side] = disk(logs)
                shutil.rmtree(logs, ignore_errors=True)
            else:
                exp = f"i_{r}"
                walls[side].append(timed(project_cmd("sas", n, tmp, exp), ROOT))
                disks[side] = disk(tmp / exp, skip="report")
                shutil.rmtree(tmp / exp, ignore_errors=True)
    i, p = statistics.median(walls["inspect"]), statistics.median(walls["project"])
    speed = "ok" if p < i else "SLOWER than Inspect"
    ratio = disks["project"] / disks["inspect"]
    print(f"against Inspect AI ({n} arith samples, whole processes, median of {repeats} interleaved): inspect eval "
          f"mockllm {i:.2f} s ({i * 1000 / n:.1f} ms/sample), project scripted sas run {p:.2f} s "
          f"({p * 1000 / n:.1f} ms/sample), project/Inspect {p / i:.2f}x [{speed}]; disk per sample: Inspect "
          f"{disks['inspect'] / n / 1024:.1f} KB, project run files (no HTML report) {disks['project'] / n / 1024:.1f} KB, "
          f"{ratio:.1f}x [{'ok' if ratio <= GOAL_DISK else f'ABOVE goal {GOAL_DISK:.0f}x'}]; {load()}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=200, help="runs per in-process sweep (default 200)")
    p.add_argument("--repeats", type=int, default=3, help="interleaved rounds of every comparison (default 3)")
    p.add_argument("--sizes", default="50,200", help="the two sweep sizes of the whole-process slope")
    p.add_argument("--systems", default="sas,debate")
    p.add_argument("--inspect-samples", type=int, default=200)
    p.add_argument("--skip-inspect", action="store_true")
    p.add_argument("--only", choices=("in-process", "processes", "inspect"), help="one part only")
    p.add_argument("--plain-child", nargs=3, metavar=("SYSTEM", "N", "SAMPLES"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.plain_child:  # the plain program as its own process
        system, n, samples = args.plain_child
        questions = [json.loads(line)["input"] for line in Path(samples).read_text().splitlines()][:int(n)]
        return 0 if asyncio.run(plain_sweep(system, questions)) == len(questions) else 1
    sizes = tuple(int(x) for x in args.sizes.split(","))
    if len(sizes) != 2 or sizes[0] >= sizes[1]:
        p.error(f"--sizes: expected two increasing sweep sizes such as 50,200, got {args.sizes!r}")
    systems = args.systems.split(",")
    print(f"machine: {os.cpu_count()} cores, {load()}")
    tmp = Path(tempfile.mkdtemp(prefix="bench_overhead_"))
    try:
        if args.only in (None, "in-process"):
            in_process(systems, args.runs, args.repeats, tmp)
        if args.only in (None, "processes"):
            whole_processes(systems, sizes, args.repeats, tmp)
        if args.only in (None, "inspect") and not args.skip_inspect:
            against_inspect(args.inspect_samples, args.repeats, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
