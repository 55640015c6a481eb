"""The scripted double plays BrowseComp: it searches as the oracle does and answers what the opened page says.

The runner names the benchmark and hands the double the task's reference actions (its per-run arguments
``benchmark`` and ``oracle_actions``): on the local backend, a
search for the answer as the corpus writes it, then opening the page that states it
(:meth:`benchmark.browsecomp.adapter.BrowseCompBenchmark.reference_actions`). Per role:

- an agent makes those calls, one per step, through the real tool loop (so ``search`` and ``open_page``
  are traced and attributed to it like any tool call), then answers in BrowseComp's format on one line
  (``Explanation: ... Exact Answer: X Confidence: 90%``): X is the phrase it searched for when the page it
  opened holds it, else ``not found`` (confidence 10%);
- with its own previous answer in view (a discussion turn) it keeps it; with only other agents' answers in
  view (an aggregator, a critic) it takes the most common one, verbatim; both come from the call's hints
  (``own``, ``peers``; the orchestrator's ``parts`` and ``critique``), not from the prompt;
- the planner answers with a plan; the orchestrator's planner gives every worker the whole search and its
  critic accepts every part (:meth:`BrowseCompPlayer.subtasks`, :meth:`BrowseCompPlayer.critique`).

Injection alters one tool call's argument (the searched phrase plus ``" (altered)"``, or a docid that does
not exist), so the page read lacks the phrase and the answer is wrong: a decisive error at a tool call.

The scripted judge (``scripted:judge``) grades ``benchmark.grade`` calls by normalised exact match, in the
judge's reply format, from the call's hints ``response`` and ``correct_answer`` (the fields the benchmark built
its grading prompt from, :meth:`benchmark.base.Benchmark.judge_fields`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from langchain_core.messages import AIMessage

from benchmark.browsecomp.grading import exact_match, normalise, parse_response
from mas.scripted.scripting import ScriptedContext, responder
from mas.scripted.replies import Action, answer_json, calls_made, tool_call, tool_outputs
from mas.scripted.workbench import ActingPlayer, alter
from mas.scripted.orchestrator import Critique
from mas.scripted.players import PLAYERS, TaskFields

NOT_FOUND = "Explanation: no part has an answer. Exact Answer: not found Confidence: 10%"


def _pages(ctx: ScriptedContext) -> list[str]:
    """The pages this conversation opened (tool outputs that start with ``docid:``), oldest first."""
    return [o for o in tool_outputs(ctx) if o.startswith("docid: ")]


def _shown_answers(ctx: ScriptedContext) -> list[str]:
    """The other agents' answers this call shows (its hints: peers, or the orchestrator's parts and critique)."""
    hints = ctx.hints
    shown = [*(hints.get("peers") or []), *(hints.get("parts") or []),
             *([hints["critique"]] if hints.get("critique") else [])]
    return [str(p["answer"]).strip() for p in shown]


def _peers_answer(ctx: ScriptedContext) -> str | None:
    """The most common BrowseComp answer among the other agents' answers shown, verbatim (None without one)."""
    answers = [a for a in _shown_answers(ctx) if "Exact Answer:" in a]
    if not answers:
        return None
    votes = Counter(normalise(parse_response(a).exact_answer) for a in answers)
    best = max(votes, key=lambda k: votes[k])
    return next(a for a in answers if normalise(parse_response(a).exact_answer) == best)


def _from_page(ctx: ScriptedContext) -> str:
    """The answer the opened page gives: the searched phrase when the page holds it."""
    made = calls_made(ctx)
    phrase = next((a.get("query", "") for n, a in made if n == "search"), "")
    for page in reversed(_pages(ctx)):
        if phrase and normalise(phrase) in normalise(page):
            docid = page.split("\n", 1)[0].removeprefix("docid: ")
            return answer_json("The opened page states it.", f"Explanation: the page {docid} states it. "
                               f"Exact Answer: {phrase} Confidence: 90%", 0.9)
    return answer_json("No page I opened states an answer.",
                       "Explanation: no page I opened states it. Exact Answer: not found Confidence: 10%", 0.1)


@dataclass(frozen=True, slots=True)
class BrowseCompPlayer:
    """The double's play of one BrowseComp task with a local corpus (see the module docstring)."""

    actions: list[Action]
    """The task's reference actions: the search for the answer, then opening the page that states it."""

    @classmethod
    def of(cls, oracle_actions: list[dict[str, object]]) -> BrowseCompPlayer:
        return cls(ActingPlayer.of(oracle_actions).actions)  # type: ignore[arg-type]

    def turn(self, ctx: ScriptedContext, role: str, allowed: bool) -> str | AIMessage:
        """One step of an agent on this task (see the module docstring)."""
        if role == "planner":
            return answer_json("Search, read, answer.",
                               "1. Search the collection. 2. Open the best page. 3. Answer from it.", 0.8)
        if (own := ctx.hints.get("own")) is not None:
            return answer_json("My answer stands after reading the others.", str(own["answer"]).strip(), 0.85)
        made = calls_made(ctx)
        if not made and (agreed := _peers_answer(ctx)) is not None:
            return answer_json("Most agents found this answer.", agreed, 0.85)
        if allowed and len(made) < len(self.actions):
            action = self.actions[len(made)]
            if ctx.inject and (wrong := alter(action)) is not None:
                action = wrong
            return tool_call(ctx, *action)
        return _from_page(ctx)

    def subtasks(self, ctx: ScriptedContext, workers: int) -> list[str]:
        """The orchestrator's plan: every worker searches for the answer on its own (the tools only read)."""
        return [f"Find the answer in the collection: search, open the best page, answer from it (search {k + 1})."
                for k in range(workers)]

    def critique(self, ctx: ScriptedContext, parts: list[dict[str, str]]) -> Critique:
        """The orchestrator's critic: accepts every part and gives the parts' most common answer."""
        return Critique(rejected=[], answer=_peers_answer(ctx) or NOT_FOUND,
                        reasoning="The parts agree with the pages they read.")


@responder("benchmark.grade", judge=True)
def grade(ctx: ScriptedContext) -> str:
    """BrowseComp's judge, played lexically: ``correct: yes`` on a normalised exact match of the call's hints."""
    parsed = parse_response(str(ctx.hints.get("response") or ""))
    ok = exact_match(parsed.exact_answer, str(ctx.hints.get("correct_answer") or ""))
    return (f"extracted_final_answer: {parsed.exact_answer or 'None'}\n"
            f"reasoning: the answers {'match' if ok else 'differ'} after normalisation.\n"
            f"correct: {'yes' if ok else 'no'}\nconfidence: {round(parsed.confidence * 100)}")


@PLAYERS.register("browsecomp")
def browsecomp_player(fields: TaskFields) -> BrowseCompPlayer:
    return BrowseCompPlayer.of(fields.oracle_actions or [])
