"""Scripted answers to the orchestrator's decomposition: the planner's subtasks, the workers' parts, the critique.

The scripted planner (``orchestrator.plan``) splits the task into one
distinct subtask per worker:

- ``arith``: the chain of operations into contiguous segments; the first
  worker computes its segment from the start value with the calculator, each
  later one writes its segment as a formula in ``x`` (the value before it),
  workers beyond the operations check the whole chain; the aggregator
  composes the parts with the calculator;
- a benchmark solved by acting: the reference actions not yet in the run's
  environment, in contiguous chunks (``Do: <actions>``); workers beyond them
  check a part and change nothing;
- anything else: numbered generic subtasks.

The scripted critic (``orchestrator.critique``) recomputes every part and
rejects the wrong ones. Injection alters a worker's part (an off-by-one
operand, a formula's first number, or an action's argument).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from langchain_core.messages import AIMessage

from benchmark import arith
from mas.scripted import browsecomp
from mas.scripted.arith import answer_json, as_int, solve_arith, tool_call, tool_outputs
from mas.scripted.model import ScriptedContext, responder
from mas.scripted.workbench import done_text, oracle, workbench_turn
from mas.tools.calculator import CalculatorError
from mas.tools.calculator import evaluate as calculate
from mas.topologies.decomposition import CRITIQUE_CONTRACT, PLAN_CONTRACT
from mas.topologies.environment import parse_actions, render_action

_START_RE = re.compile(r"^Start from (?P<start>-?\d+) and apply (?P<ops>.*?) in order")
_FORMULA_RE = re.compile(r"^Write (?P<ops>.*?) as a formula in x")
_OP_RE = re.compile(r"([+\-*]) (\d+)")
GENERIC = ("Work out what the task asks and solve it.", "Check each step of the solution.",
           "Check that the final answer has the form the task asks for.")


def _ops_text(ops: list[tuple[str, int]]) -> str:
    return ", ".join(f"{op} {n}" for op, n in ops)


def _ops(text: str) -> list[tuple[str, int]]:
    return [(op, int(n)) for op, n in _OP_RE.findall(text)]


def formula(ops: list[tuple[str, int]]) -> str:
    """``[("+", 3), ("*", 2)]`` -> ``((x + 3) * 2)``."""
    f = "x"
    for op, n in ops:
        f = f"({f} {op} {n})"
    return f


def _chunks(items: list[Any], n: int) -> list[list[Any]]:
    """``items`` in ``n`` contiguous chunks, the first ones one longer (empty chunks at the end)."""
    size, extra = divmod(len(items), n)
    out, i = [], 0
    for k in range(n):
        j = i + size + (k < extra)
        out.append(items[i:j])
        i = j
    return out


def _arith_subtasks(start: int, ops: list[tuple[str, int]], n: int) -> list[str]:
    out = []
    for k, seg in enumerate(_chunks(ops, n)):
        if not seg:
            out.append(f"Check the whole chain from {start} with the calculator (check {k + 1}); report the number.")
        elif k == 0:
            out.append(f"Start from {start} and apply {_ops_text(seg)} in order with the calculator; report the number.")
        else:
            out.append(f"Write {_ops_text(seg)} as a formula in x, the number before them; report the formula.")
    return out


def _action_subtasks(ctx: ScriptedContext, n: int) -> list[str]:
    made = parse_actions(ctx.hints["changes_made"]) if ctx.hints.get("changes_made") is not None else []
    left = Counter(render_action(a, b) for a, b in made)
    remaining = []
    for name, args in oracle(ctx):
        key = render_action(name, args)
        if left[key]:
            left[key] -= 1
        else:
            remaining.append((name, args))
    out = []
    for k, chunk in enumerate(_chunks(remaining, n)):
        if chunk:
            out.append("Do: " + "; ".join(render_action(a, b) for a, b in chunk))
        else:
            out.append(f"Check part {k + 1} of the request against the environment; change nothing.")
    return out


@responder(PLAN_CONTRACT)
def scripted_plan(ctx: ScriptedContext) -> str:
    text = ctx.text()
    n = int(ctx.hints.get("workers") or 3)  # the planner's call says how many workers there are
    if ctx.oracle_actions is not None and browsecomp.is_browsecomp(ctx):
        subtasks = browsecomp.plan_subtasks(n)
    elif ctx.oracle_actions is not None:
        subtasks = _action_subtasks(ctx, n)
    elif (chain := arith.parse(text)) is not None:
        subtasks = _arith_subtasks(*chain, n)
    else:
        subtasks = [f"Part {k + 1}: {GENERIC[k % len(GENERIC)]}" for k in range(n)]
    return json.dumps({"reasoning": f"{n} parts, one per worker.", "subtasks": subtasks,
                       "answer_artifact": " | ".join(subtasks), "confidence": 0.8})


def _apply(value: int, ops: list[tuple[str, int]]) -> int:
    for op, n in ops:
        value = arith.apply(value, op, n)
    return value


def _same_formula(got: str, ops: list[tuple[str, int]]) -> bool:
    try:
        return all(calculate(got.replace("x", f"({x})")) == _apply(x, ops) for x in (7, 13))
    except (CalculatorError, TypeError):
        return False


def _part_is_right(subtask: str, answer: str, question_chain: tuple[int, list[tuple[str, int]]] | None) -> bool:
    if (m := _START_RE.match(subtask)) is not None:
        return as_int(answer) == _apply(int(m["start"]), _ops(m["ops"]))
    if (m := _FORMULA_RE.match(subtask)) is not None:
        return _same_formula(answer, _ops(m["ops"]))
    if question_chain is not None and subtask.startswith("Check the whole chain"):
        return as_int(answer) == _apply(*question_chain)
    return True


def _parts(ctx: ScriptedContext) -> list[dict[str, str]]:
    """The workers' parts the call shows (its ``parts`` hint): worker, answer, subtask, changes."""
    return list(ctx.hints.get("parts") or [])


def _same_actions(a: list[Any], b: list[Any]) -> bool:
    return Counter(render_action(*x) for x in a) == Counter(render_action(*x) for x in b)


@responder(CRITIQUE_CONTRACT)
def scripted_critique(ctx: ScriptedContext) -> str | AIMessage:
    """Recompute every part (with the calculator on ``arith``), reject the wrong ones, give the right answer."""
    text = ctx.text()
    parts = _parts(ctx)
    tools_allowed = "tools" in ctx.kwargs and "You have used all your tool calls" not in str(ctx.messages[-1].content)
    if ctx.oracle_actions is not None and browsecomp.is_browsecomp(ctx):
        return browsecomp.critique(ctx)
    if ctx.oracle_actions is not None:
        rejected = [p["worker"] for p in parts if not _same_actions(
            parse_actions(p["subtask"].removeprefix("Do: ")) if p["subtask"].startswith("Do: ") else [],
            parse_actions(p["changes"]))]
        answer = done_text(oracle(ctx))
    else:
        chain = arith.parse(text)
        if chain is not None:
            step = solve_arith(ctx, tools_allowed, chain)
            if isinstance(step, AIMessage):
                return step
            answer = json.loads(step)["answer_artifact"]
        else:
            answer = "0"
        rejected = [p["worker"] for p in parts if not _part_is_right(p["subtask"], p["answer"], chain)]
    reasoning = (f"Wrong parts: {', '.join(rejected)}." if rejected else "Every part is right.")
    return json.dumps({"reasoning": reasoning, "rejected": rejected, "answer_artifact": answer, "confidence": 0.85})


def _worker_part(ctx: ScriptedContext, subtask: str, tools_allowed: bool) -> str | AIMessage | None:
    if (m := _START_RE.match(subtask)) is not None:
        return solve_arith(ctx, tools_allowed, (int(m["start"]), _ops(m["ops"])))
    if (m := _FORMULA_RE.match(subtask)) is not None:
        ops = _ops(m["ops"])
        if ctx.inject:  # the wrong part: the formula's first number one off
            ops = [(ops[0][0], ops[0][1] + 1), *ops[1:]]
        return answer_json("The segment as a formula.", formula(ops), 0.9)
    if subtask.startswith("Check the whole chain") and arith.parse(ctx.text()) is not None:
        return solve_arith(ctx, tools_allowed)
    return None


def _compose(ctx: ScriptedContext, tools_allowed: bool) -> str | AIMessage | None:
    """The aggregator: the first segment's number through every formula, one calculator call per formula."""
    parts = _parts(ctx)
    first = next((p for p in parts if _START_RE.match(p["subtask"])), None)
    if first is None or as_int(first["answer"]) is None:
        return None
    formulas = [p["answer"] for p in parts if _FORMULA_RE.match(p["subtask"])]
    outs = tool_outputs(ctx)
    value = as_int(outs[-1]) if outs else as_int(first["answer"])
    if tools_allowed and len(outs) < len(formulas):
        return tool_call(ctx, formulas[len(outs)].replace("x", f"({value})"))
    if ctx.inject and value is not None:
        value += 1
    return answer_json("The first part's number through the later parts' formulas.", str(value), 0.9)


def orchestrated_turn(ctx: ScriptedContext, role: str, tools_allowed: bool) -> str | AIMessage | None:
    """A worker on its subtask or the aggregator composing (None: not a decomposed cycle this double knows)."""
    if ctx.oracle_actions is not None:
        return workbench_turn(ctx, role, tools_allowed)
    if role == "aggregator":
        return _compose(ctx, tools_allowed)
    if (subtask := ctx.hints.get("subtask")) is not None:
        return _worker_part(ctx, subtask, tools_allowed)
    return None
