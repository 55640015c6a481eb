"""The scripted double plays BrowseComp: it searches as the oracle does and answers what the opened page says.

The runner hands the double the task's reference actions (``ctx.oracle_actions``): on the local backend, a
search for the answer as the corpus writes it, then opening the page that states it
(:meth:`benchmark.browsecomp.adapter.BrowseCompBenchmark.reference_actions`). Per role:

- an agent makes those calls, one per step, through the real tool loop (so ``search`` and ``open_page``
  are traced and attributed to it like any tool call), then answers in BrowseComp's format on one line
  (``Explanation: ... Exact Answer: X Confidence: 90%``): X is the phrase it searched for when the page it
  opened holds it, else ``not found`` (confidence 10%);
- with its own previous answer in view (a discussion turn) it keeps it; with only other agents' answers in
  view (an aggregator, a critic) it takes the most common one, verbatim;
- the planner answers with a plan; the orchestrator's planner gives every worker the whole search and its
  critic accepts every part (:func:`plan_subtasks`, :func:`critique`).

Injection alters one tool call's argument (the searched phrase plus ``" (altered)"``, or a docid that does
not exist), so the page read lacks the phrase and the answer is wrong: a decisive error at a tool call.

The scripted judge (``scripted:judge``) grades ``benchmark.grade`` prompts by normalised exact match, in the
judge's reply format.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter

from langchain_core.messages import AIMessage

from benchmark.browsecomp.grading import QUERY_TEMPLATE, exact_match, normalise, parse_response
from mas.scripted.arith import answer_json, tool_outputs
from mas.scripted.model import ScriptedContext, responder
from mas.scripted.workbench import alter, calls_made, oracle

FORMAT_MARKER = QUERY_TEMPLATE.format(question="").strip()
"""The answer-format instructions every BrowseComp question ends with: how the double knows the benchmark."""
_OWN_RE = re.compile(r"^Your previous answer: (?P<answer>.*)$", re.MULTILINE)
_PACKET_RE = re.compile(r"^\[(?P<sender>[^\]]+)\] answer: (?P<answer>.*?) \(confidence", re.MULTILINE)
_GRADE_RE = re.compile(r"^\[response\]: (?P<response>.*?)\n\nYour judgement.*?^\[correct_answer\]: (?P<gold>.*?)\n\n",
                       re.DOTALL | re.MULTILINE)


def is_browsecomp(ctx: ScriptedContext) -> bool:
    return FORMAT_MARKER in ctx.text()


def _tool_call(ctx: ScriptedContext, name: str, args: dict[str, str]) -> AIMessage:
    if ctx.text_tools:
        return AIMessage(content="```json\n" + json.dumps({"name": name, "arguments": args}) + "\n```")
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:10]}"}])


def _pages(ctx: ScriptedContext) -> list[str]:
    """The pages this conversation opened (tool outputs that start with ``docid:``), oldest first."""
    return [o for o in tool_outputs(ctx) if o.startswith("docid: ")]


def _peers_answer(text: str) -> str | None:
    """The most common BrowseComp answer among the other agents' packets, verbatim (None without one)."""
    answers = [m["answer"].strip() for m in _PACKET_RE.finditer(text) if "Exact Answer:" in m["answer"]]
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


def browsecomp_turn(ctx: ScriptedContext, role: str, tools_allowed: bool) -> str | AIMessage:
    """One step of an agent on a BrowseComp task (see the module docstring)."""
    text = ctx.text()
    if role == "planner":
        return answer_json("Search, read, answer.", "1. Search the collection. 2. Open the best page. 3. Answer from it.", 0.8)
    if (own := _OWN_RE.search(text)) is not None:
        return answer_json("My answer stands after reading the others.", own["answer"].strip(), 0.85)
    made = calls_made(ctx)
    if not made and (agreed := _peers_answer(text)) is not None:
        return answer_json("Most agents found this answer.", agreed, 0.85)
    todo = oracle(ctx)
    if tools_allowed and len(made) < len(todo):
        action = todo[len(made)]
        if ctx.inject and (wrong := alter(action)) is not None:
            action = wrong
        return _tool_call(ctx, *action)
    return _from_page(ctx)


def plan_subtasks(n: int) -> list[str]:
    """The orchestrator's plan: every worker searches for the answer on its own (the tools only read)."""
    return [f"Find the answer in the collection: search, open the best page, answer from it (search {k + 1})."
            for k in range(n)]


def critique(ctx: ScriptedContext) -> str:
    """The orchestrator's critic: accepts every part and gives the parts' most common answer."""
    agreed = _peers_answer(ctx.text()) or "Explanation: no part has an answer. Exact Answer: not found Confidence: 10%"
    return json.dumps({"reasoning": "The parts agree with the pages they read.", "rejected": [],
                       "answer_artifact": agreed, "confidence": 0.85})


@responder("benchmark.grade", judge=True)
def grade(ctx: ScriptedContext) -> str:
    """BrowseComp's judge, played lexically: ``correct: yes`` on a normalised exact match."""
    hit = _GRADE_RE.search(str(ctx.messages[-1].content))
    response, gold = (hit["response"], hit["gold"]) if hit else ("", "")
    parsed = parse_response(response)
    ok = exact_match(parsed.exact_answer, gold)
    return (f"extracted_final_answer: {parsed.exact_answer or 'None'}\n"
            f"reasoning: the answers {'match' if ok else 'differ'} after normalisation.\n"
            f"correct: {'yes' if ok else 'no'}\nconfidence: {round(parsed.confidence * 100)}")
