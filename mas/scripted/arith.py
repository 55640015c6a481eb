"""The double plays ``arith``: it solves the task's chain one calculator call per operation, like a careful agent.

The chain (start value and operations) comes from the benchmark's own task record (``Task.metadata``, handed to
the double by the runner as its per-run argument ``task``), never from the prompt. In a discussion turn it
adopts a strict majority of its peers' answers (:func:`mas.scripted.replies.discussion`); the planner gives a
fixed plan. An injected step computes one wrong value (an off-by-one operand), which then propagates.

In the orchestrator (:class:`mas.scripted.orchestrator.Decomposer`) it splits the chain into contiguous
segments, one per worker: the first worker computes its segment from the start value with the calculator, each
later one writes its segment as a formula in ``x`` (the value before it), workers beyond the operations check
the whole chain; the aggregator composes the parts with the calculator; the critic recomputes every part and
rejects the wrong ones. Workers and critic read their subtask back from the plan's text: that text is this
player's own plan (written by :meth:`ArithPlayer.subtasks`), not a production prompt. Injection alters a
worker's part (an off-by-one operand, a formula's first number).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage

from benchmark import arith
from mas.scripted.scripting import ScriptedContext
from mas.scripted.replies import PLAN, answer_json, as_int, discussion, tool_call, tool_outputs, tools_allowed
from mas.tools.calculator import CalculatorError
from mas.tools.calculator import evaluate as calculate
from mas.scripted.orchestrator import Critique
from mas.scripted.players import PLAYERS, TaskFields

Chain = tuple[int, list[tuple[str, int]]]
"""An ``arith`` chain: start value and operations (``[("+", 3), ("*", 2)]``)."""

# The player's own plan, as ArithPlayer.subtasks writes it.
_START_RE = re.compile(r"^Start from (?P<start>-?\d+) and apply (?P<ops>.*?) in order")
_FORMULA_RE = re.compile(r"^Write (?P<ops>.*?) as a formula in x")
_OP_RE = re.compile(r"([+\-*]) (\d+)")


def solve_arith(ctx: ScriptedContext, allowed: bool, chain: Chain) -> str | AIMessage:
    """Solve ``chain`` one calculator call per operation (the next call, or the answer once all are made)."""
    start, ops = chain
    outs = tool_outputs(ctx)
    value = start if not outs else as_int(outs[-1])
    if value is None:
        value = start
    done = len(outs)
    if allowed and done < len(ops):
        op, n = ops[done]
        if ctx.inject:
            n += 1  # the wrong step: an off-by-one operand
        return tool_call(ctx, "calculator", {"expression": f"{value} {op} {n}"})
    for op, n in ops[done:]:
        value = arith.apply(value, op, n)
    if ctx.inject:
        value += 1
    steps = " then ".join(f"{op}{n}" for op, n in ops)
    return answer_json(f"Start at {start}, apply {steps}.", str(value), 0.9)


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


def chunks(items: list[Any], n: int) -> list[list[Any]]:
    """``items`` in ``n`` contiguous chunks, the first ones one longer (empty chunks at the end)."""
    size, extra = divmod(len(items), n)
    out, i = [], 0
    for k in range(n):
        j = i + size + (k < extra)
        out.append(items[i:j])
        i = j
    return out


def _apply(value: int, ops: list[tuple[str, int]]) -> int:
    for op, n in ops:
        value = arith.apply(value, op, n)
    return value


def _same_formula(got: str, ops: list[tuple[str, int]]) -> bool:
    try:
        return all(calculate(got.replace("x", f"({x})")) == _apply(x, ops) for x in (7, 13))
    except (CalculatorError, TypeError):
        return False


@dataclass(frozen=True, slots=True)
class ArithPlayer:
    """The double's play of one ``arith`` task (see the module docstring)."""

    start: int
    ops: list[tuple[str, int]]

    @classmethod
    def of(cls, task: Mapping[str, Any]) -> ArithPlayer | None:
        """The player of the task whose record is ``task`` (``start``, ``ops``; a resumed run's record has the
        operations as lists); None without a chain."""
        if "start" not in task or not task.get("ops"):
            return None
        return cls(int(task["start"]), [(str(op), int(n)) for op, n in task["ops"]])

    @property
    def chain(self) -> Chain:
        return self.start, list(self.ops)

    def turn(self, ctx: ScriptedContext, role: str, allowed: bool) -> str | AIMessage:
        """One step of an agent on this task (``agent.turn``)."""
        if ctx.hints.get("subtask") is not None or role == "aggregator":  # an orchestrator's decomposed cycle
            if (reply := self._orchestrated(ctx, role, allowed)) is not None:
                return reply
        if (reply := discussion(ctx)) is not None:
            return reply
        if role == "planner":
            return PLAN
        return solve_arith(ctx, allowed, self.chain)

    def subtasks(self, ctx: ScriptedContext, workers: int) -> list[str]:
        """The orchestrator's plan: the chain in contiguous segments, one per worker."""
        out = []
        for k, seg in enumerate(chunks(list(self.ops), workers)):
            if not seg:
                out.append(f"Check the whole chain from {self.start} with the calculator (check {k + 1}); "
                           "report the number.")
            elif k == 0:
                out.append(f"Start from {self.start} and apply {_ops_text(seg)} in order with the calculator; "
                           "report the number.")
            else:
                out.append(f"Write {_ops_text(seg)} as a formula in x, the number before them; report the formula.")
        return out

    def critique(self, ctx: ScriptedContext, parts: list[dict[str, str]]) -> Critique | AIMessage:
        """Recompute the chain with the calculator and every part; reject the wrong parts."""
        step = solve_arith(ctx, tools_allowed(ctx), self.chain)
        if isinstance(step, AIMessage):
            return step
        rejected = [p["worker"] for p in parts if not self._part_is_right(p["subtask"], p["answer"])]
        return Critique(rejected=rejected, answer=json.loads(step)["answer_artifact"])

    def _part_is_right(self, subtask: str, answer: str) -> bool:
        if (m := _START_RE.match(subtask)) is not None:
            return as_int(answer) == _apply(int(m["start"]), _ops(m["ops"]))
        if (m := _FORMULA_RE.match(subtask)) is not None:
            return _same_formula(answer, _ops(m["ops"]))
        if subtask.startswith("Check the whole chain"):
            return as_int(answer) == _apply(*self.chain)
        return True

    def _orchestrated(self, ctx: ScriptedContext, role: str, allowed: bool) -> str | AIMessage | None:
        """A worker on its subtask or the aggregator composing (None: not a subtask of this player's plan)."""
        if role == "aggregator":
            return _compose(ctx, allowed)
        subtask = str(ctx.hints["subtask"])
        if (m := _START_RE.match(subtask)) is not None:
            return solve_arith(ctx, allowed, (int(m["start"]), _ops(m["ops"])))
        if (m := _FORMULA_RE.match(subtask)) is not None:
            ops = _ops(m["ops"])
            if ctx.inject:  # the wrong part: the formula's first number one off
                ops = [(ops[0][0], ops[0][1] + 1), *ops[1:]]
            return answer_json("The segment as a formula.", formula(ops), 0.9)
        if subtask.startswith("Check the whole chain"):
            return solve_arith(ctx, allowed, self.chain)
        return None


def _compose(ctx: ScriptedContext, allowed: bool) -> str | AIMessage | None:
    """The aggregator: the first segment's number through every formula, one calculator call per formula."""
    parts = list(ctx.hints.get("parts") or [])
    first = next((p for p in parts if _START_RE.match(p["subtask"])), None)
    if first is None or as_int(first["answer"]) is None:
        return None
    formulas = [p["answer"] for p in parts if _FORMULA_RE.match(p["subtask"])]
    outs = tool_outputs(ctx)
    value = as_int(outs[-1]) if outs else as_int(first["answer"])
    if allowed and len(outs) < len(formulas):
        return tool_call(ctx, "calculator", {"expression": formulas[len(outs)].replace("x", f"({value})")})
    if ctx.inject and value is not None:
        value += 1
    return answer_json("The first part's number through the later parts' formulas.", str(value), 0.9)


@PLAYERS.register("arith")
def arith_player(fields: TaskFields) -> ArithPlayer | None:
    return ArithPlayer.of(fields.task)
