"""Prompt text and output contracts of the runtime's agents.

Small models do better when they reason before they answer, so every answer
schema puts ``reasoning`` first.
"""

from __future__ import annotations

import functools
from typing import Any

@functools.cache  # one dict per bound: callers must not change it
def answer_schema(reasoning_max_chars: int = 800) -> dict[str, Any]:
    """The answer's JSON schema, its ``reasoning`` at most ``reasoning_max_chars`` characters (``mas.reasoning_max_chars``):
    bounded so a constrained small model finishes its JSON before the token limit (it did not, unbounded)."""
    return {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string", "maxLength": reasoning_max_chars},
            "answer_artifact": {"type": "string"},
            "confidence": {"type": "number"},
        },
        "required": ["reasoning", "answer_artifact", "confidence"],
    }


ANSWER_SCHEMA: dict[str, Any] = answer_schema()

GENERIC_BRIEF = "You are a careful problem solver."
"""The brief of an agent made without a declared role (tests, probes); topologies declare their roles' briefs."""

TOOL_PROTOCOL = """Work the problem out step by step in plain words first. Tools are there for a calculation or a
check you cannot do reliably in your head:
- calculator: evaluates one arithmetic expression. Arguments: {"expression": "<the expression>"}
- python: runs a short Python program and shows what it prints. Arguments: {"code": "<the program>"}
To call a tool, end your reply with a JSON block like
```json
{"name": "calculator", "arguments": {"expression": "<the expression>"}}
```
and wait for the result. Put the numbers of THIS task into the expression. Never call a tool again with the same
arguments (you already have its result), and never invent tool results."""

ANSWER_FORMAT = """When you have the final answer, reply with ONLY this JSON (reasoning first):
{"reasoning": "<short step-by-step reasoning, a few sentences>", "answer_artifact": "<the final answer only>", "confidence": <number between 0 and 1>}
confidence is your probability that this answer_artifact, your current answer, is correct."""

CODE_HINT = "The answer_artifact must be the complete Python function (signature and body), as plain code."
ACTIONS_HINT = ("Only the changes your tool calls make are graded, not your answer. When you have made them (or there "
                "is nothing to change), reply with the final JSON; in answer_artifact say in one line what you "
                "changed, or that nothing needed changing.")


def system_prompt(brief: str, *, persona: str | None = None, tool_protocol: str | None = TOOL_PROTOCOL,
                  answer_kind: str = "text") -> str:
    """The system message of an agent whose role's brief is ``brief``; a persona specialises, never overrides, the role.

    ``tool_protocol`` describes the agent's tools (None: it has none); the
    brief, the tools and the answer format always stand whatever the persona says.
    """
    parts = [brief]
    if persona:
        parts.append(f"Your perspective: {persona}. Keep to your role's rules.")
    if tool_protocol:
        parts.append(tool_protocol)
    parts.append(ANSWER_FORMAT)
    if answer_kind == "code":
        parts.append(CODE_HINT)
    elif answer_kind == "actions":
        parts.append(ACTIONS_HINT)
    return "\n\n".join(parts)


def task_message(question: str) -> str:
    return f"Task:\n{question}"


def relay_packet(sender: str, answer: str, confidence: float, reasoning: str = "") -> str:
    """How one agent's output is shown to another (a fixed shape both people and parsers can read)."""
    line = f"[{sender}] answer: {answer} (confidence {confidence:.2f})"
    return f"{line}\n  reasoning: {reasoning[:400]}" if reasoning else line


def force_answer_note() -> str:
    return "You have used all your tool calls. Give your final answer now, as the JSON described."


def tool_result_message(name: str, ok: bool, output: str) -> str:
    status = "result" if ok else "error"
    return f"Tool {name} {status}:\n{output}\nContinue: call another tool or give the final answer JSON."
