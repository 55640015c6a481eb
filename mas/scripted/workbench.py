"""The double plays a benchmark solved by acting (WorkBench, and any benchmark with an environment it has no
player of its own for): it replays the task's reference actions.

The runner hands the double the task's reference actions (its per-run argument ``oracle_actions``); an acting
agent makes them one tool call per step through the real tool loop, so scripted sweeps exercise the tools, the
environment's state (checkpointed as action logs, replayed on resume) and the outcome evaluation end to end.
Per role:

- an agent of a parallel stage (solver, debater, worker, group member)
  makes every reference action on its own environment, then answers
  ``Done: <actions>`` (or ``Nothing to do.``);
- in the orchestrator (:class:`mas.scripted.orchestrator.Decomposer`), the planner splits the reference
  actions not yet in the run's environment into contiguous chunks (``Do: <actions>``; workers beyond them
  check a part and change nothing), a worker makes the actions its subtask names (this player's own plan,
  read back), the critic rejects the parts whose changes differ from their subtask, and the aggregator
  answers with the changes the merged parts left in the environment;
- in a discussion turn (it sees its own earlier answer and its peers'), it
  makes the actions the strict majority of its peers made and it did not,
  then keeps its answer.

Injection (``ctx.inject``) alters one action: its last argument (an id one
higher, any other value with ``" (altered)"`` appended), so the run's one
decisive error is a side-effecting tool call. Answer steps ignore it, so it
fires only on an action.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage

from mas.scripted.scripting import ScriptedContext
from mas.scripted.arith import chunks
from mas.scripted.replies import Action, answer_json, calls_made, majority, tool_call
from mas.scripted.orchestrator import Critique
from mas.scripted.players import PLAYERS, TaskFields
from mas.topologies.environment import parse_actions, render_action

ANSWERING_ROLES = ("critic", "planner", "supervisor")


def function_name(name: str) -> str:
    """The tool name models see (WorkBench: ``calendar.delete_event`` -> ``calendar__delete_event``)."""
    return name.replace(".", "__")


def alter(action: Action) -> Action | None:
    """The injected wrong action: its last argument changed (None when it has none)."""
    name, args = action
    if not args:
        return None
    key = list(args)[-1]
    value = str(args[key])
    wrong = str(int(value) + 1).zfill(len(value)) if value.isdigit() else f"{value} (altered)"
    return name, {**args, key: wrong}


def done_text(actions: list[Action]) -> str:
    return "Done: " + "; ".join(render_action(n, a) for n, a in actions) if actions else "Nothing to do."


def missing(wanted: list[Action], have: list[Action]) -> list[Action]:
    """``wanted`` minus ``have`` as multisets, in ``wanted``'s order."""
    left = Counter(render_action(n, a) for n, a in have)
    out = []
    for n, a in wanted:
        key = render_action(n, a)
        if left[key]:
            left[key] -= 1
        else:
            out.append((n, a))
    return out


def _same_actions(a: list[Any], b: list[Any]) -> bool:
    return Counter(render_action(*x) for x in a) == Counter(render_action(*x) for x in b)


@dataclass(frozen=True, slots=True)
class ActingPlayer:
    """The double's play of one task solved by acting (see the module docstring)."""

    actions: list[Action]
    """The task's reference actions, in order."""

    @classmethod
    def of(cls, oracle_actions: list[dict[str, Any]]) -> ActingPlayer:
        return cls([(a["name"], dict(a["args"])) for a in oracle_actions])

    def _todo(self, ctx: ScriptedContext) -> tuple[list[Action], str | None]:
        """The actions this turn is to make, and the answer to keep when it only catches up (else None)."""
        if (sub := ctx.hints.get("subtask")) is not None:  # an orchestrator worker: the actions its subtask names
            return parse_actions(sub.split(": ", 1)[-1]), None
        own = ctx.hints.get("own")  # a discussion turn: its own and its peers' answers and changes are hints
        if own is None:
            return list(self.actions), None
        mine = own.get("changes")
        peers = [p["changes"].strip() for p in ctx.hints.get("peers") or [] if p.get("changes") is not None]
        agreed = majority(peers)
        if mine is None or agreed is None or agreed == mine.strip():
            return [], own["answer"]
        return missing(parse_actions(agreed), parse_actions(mine)), own["answer"]

    def turn(self, ctx: ScriptedContext, role: str, allowed: bool) -> str | AIMessage:
        """One step of an acting agent (see the module docstring)."""
        if role in ANSWERING_ROLES:
            return answer_json("I checked the reports against the request.", "The changes match the request.", 0.8)
        if role == "aggregator":  # the accepted parts are merged already: say what the environment now holds
            now = ctx.hints.get("changes_now")
            return answer_json("The accepted parts are in the environment.",
                               done_text(parse_actions(now) if now is not None else []), 0.9)
        todo, keep = self._todo(ctx)
        made = calls_made(ctx)
        if allowed and len(made) < len(todo):
            action = todo[len(made)]
            if ctx.inject and (wrong := alter(action)) is not None:
                action = wrong
            return tool_call(ctx, function_name(action[0]), action[1])
        if keep is not None:
            return answer_json("I made the changes most of the others made, if I had not.", keep, 0.85)
        return answer_json("I made the changes the request asks for, one tool call each.", done_text(todo), 0.9)

    def subtasks(self, ctx: ScriptedContext, workers: int) -> list[str]:
        """The reference actions not yet in the run's environment (its ``changes_made`` hint), in chunks."""
        made = parse_actions(ctx.hints["changes_made"]) if ctx.hints.get("changes_made") is not None else []
        out = []
        for k, chunk in enumerate(chunks(missing(list(self.actions), made), workers)):
            if chunk:
                out.append("Do: " + "; ".join(render_action(a, b) for a, b in chunk))
            else:
                out.append(f"Check part {k + 1} of the request against the environment; change nothing.")
        return out

    def critique(self, ctx: ScriptedContext, parts: list[dict[str, str]]) -> Critique:
        """Reject the parts whose changes are not the actions their subtask names; the answer: every action."""
        rejected = [p["worker"] for p in parts if not _same_actions(
            parse_actions(p["subtask"].removeprefix("Do: ")) if p["subtask"].startswith("Do: ") else [],
            parse_actions(p["changes"]))]
        return Critique(rejected=rejected, answer=done_text(list(self.actions)))


@PLAYERS.register("workbench")
def acting_player(fields: TaskFields) -> ActingPlayer:
    """WorkBench's player, and that of any benchmark solved by acting without one of its own
    (:data:`mas.scripted.players.ACTING`): the task's reference actions, replayed."""
    return ActingPlayer.of(fields.oracle_actions or [])
