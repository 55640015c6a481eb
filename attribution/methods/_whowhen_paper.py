"""The Who&When paper's prompts for the three baselines (its appendix G), and how their replies are read.

Written in the project's own words, each carrying what its template in the paper gives the model and asks of it:

- G.1, all-at-once: the role (analysing a multi-agent conversation that tried to solve a real-world problem),
  the problem, the reference answer when the job may show it, the task (which agent made the error, at which
  step, and why), the whole conversation, then three things to predict: the agent directly responsible for the
  wrong solution (one agent even when none is obviously wrong; the name only), the step where that agent first
  went wrong (with the paper's rule for counting steps: every entry is a step, counted from 0), and the reason,
  in the paper's reply format (``Agent Name:``, ``Step Number:``, ``Reason for Mistake:``);
- G.2, binary search: the role (analysing a segment of a conversation in which agents collaborated on a user's
  query), the task (locate the most critical mistake, the step where the error that caused the failure
  occurred), the problem, the reference answer when allowed, the range and the segment's text, the two halves'
  ranges, and a reply of only ``upper half`` or ``lower half``, nothing else;
- G.3, step-by-step: the role (evaluating each step of an ongoing multi-agent conversation that tries to solve
  a real-world problem), the problem, the conversation up to the current step, the reference answer when
  allowed (after the log, as G.3 places it), the question whether the most recent agent's action holds an error
  that could hinder solving the problem, a Yes/No with an explanation, the note not to be overly critical, and
  the reply format ``1. Yes/No. 2. Reason``.

The project's own additions: the log rendered by :func:`attribution.llm.prompt_fit.render_steps` as
``[i] agent: text`` lines fitted to the context window (the paper's templates leave the log's form to the code),
and a one-line system message of ours per method (the paper gives none). A binary-search reply naming neither
half picks a half at random, seeded per case and range (the authors' code does the same, unseeded).
"""

from __future__ import annotations

import random
import re

from attribution.llm.prompting import ANSWER_CHARS, QUERY_CHARS, clip, one_line
from attribution.sources.trajectory import Trajectory

ALL_AT_ONCE_SYSTEM = "You find where a team of AI agents went wrong."
STEP_SYSTEM = "You judge one step of a team of AI agents at a time."
HALVE_SYSTEM = "You narrow down where in a conversation a team of AI agents went wrong."


def _problem(traj: Trajectory) -> str:
    return clip(" ".join(traj.query.split()), QUERY_CHARS)


def _answer_line(traj: Trajectory, with_ground_truth: bool) -> str:
    if with_ground_truth and traj.ground_truth:
        return f"The correct answer to the problem: {clip(one_line(traj.ground_truth), ANSWER_CHARS)}\n"
    return ""


def all_at_once_prompt(traj: Trajectory, with_ground_truth: bool, log: str) -> str:
    """G.1: the whole log; the responsible agent, the step of its first mistake and the reason, in the paper's
    reply format."""
    return (
        "Several AI agents worked together on a real-world problem and their answer was wrong. Read their "
        "conversation and find which agent made the error, at which step, and why.\n"
        f"The problem: {_problem(traj)}\n"
        f"{_answer_line(traj, with_ground_truth)}"
        "The conversation, one entry per step (each entry is one agent's turn; the first entry is step 0, the "
        "next step 1, and so on, so a mistake in the third entry is at step 2):\n\n" + log +
        "\n\nFrom this conversation, give:\n"
        "1. The name of the agent whose mistake is directly responsible for the wrong solution, written as the "
        "conversation writes it. If no agent made an obvious mistake, still choose the one agent you hold "
        "responsible. Give the name only.\n"
        "2. The number of the step where that agent made its first mistake.\n"
        "3. The reason for your answer.\n"
        "Answer in this format:\n"
        "Agent Name: <the agent>\n"
        "Step Number: <the step>\n"
        "Reason for Mistake: <your reason>\n"
    )


_AGENT_RE = re.compile(r"agent\s*name\s*[:：]\s*\**\s*([^\n*]+)", re.I)
_STEP_RE = re.compile(r"step\s*number\s*[:：]\s*\**\s*\(?\s*(\d+)", re.I)
_REASON_RE = re.compile(r"reason\s*for\s*mistake\s*[:：]\s*(.*)", re.I | re.S)


def read_all_at_once(reply: str) -> tuple[str | None, str | None, str]:
    """(agent text, step text, reason) of a G.1 reply; a field it lacks is None.

    >>> read_all_at_once("Agent Name: Coder\\n Step Number: 4\\n Reason for Mistake: wrong column")
    ('Coder', '4', 'wrong column')
    """
    agent = _AGENT_RE.search(reply or "")
    step = _STEP_RE.search(reply or "")
    reason = _REASON_RE.search(reply or "")
    name = agent.group(1).strip().strip("()'\"`.") if agent else None
    return name or None, step.group(1) if step else None, reason.group(1).strip() if reason else ""


def step_prompt(traj: Trajectory, with_ground_truth: bool, log: str) -> str:
    """G.3: the log up to the step under review (its last entry); does the most recent agent's action hold an
    error that could hinder the solution?"""
    return (
        "Several AI agents are working together on a real-world problem, and you check their conversation one "
        "step at a time.\n"
        f"The problem: {_problem(traj)}\n"
        f"The conversation up to the current step:\n{log}\n"
        f"{_answer_line(traj, with_ground_truth)}"
        "Does the most recent agent's action contain an error that could hinder solving the problem? Answer Yes "
        "or No and explain your judgment. Do not be overly critical.\n"
        "Answer in this format:\n"
        "1. Yes/No.\n"
        "2. Reason: <your explanation>"
    )


def read_step_verdict(reply: str) -> bool | None:
    """True/False for a G.3 reply starting "1. Yes"/"1. No"; else its first yes/no word; else None.

    >>> read_step_verdict("1. Yes.\\n2. Reason: wrong"), read_step_verdict("1. No."), read_step_verdict("hmm")
    (True, False, None)
    """
    head = (reply or "").strip().lower()
    if head.startswith("1. yes"):
        return True
    if head.startswith("1. no"):
        return False
    m = re.search(r"\b(yes|no)\b", head)
    return None if m is None else m.group(1) == "yes"


def halve_prompt(traj: Trajectory, with_ground_truth: bool, segment: str, lo: int, mid: int, hi: int) -> str:
    """G.2: only the segment ``[lo, hi]``; is the most critical mistake in its upper (``[lo, mid]``) or lower
    (``[mid + 1, hi]``) half?"""
    return (
        "Several AI agents worked together on a user's query in a conversation and failed to resolve it. Below "
        "is a segment of that conversation. Locate its most critical mistake: the single step where the error "
        "that led to the failure occurred.\n"
        f"The problem: {_problem(traj)}\n"
        f"{_answer_line(traj, with_ground_truth)}"
        f"The conversation from step {lo} to step {hi}:\n\n{segment}\n\n"
        f"Is the error more likely in the upper half (steps {lo} to {mid}) or in the lower half (steps {mid + 1} "
        f"to {hi}) of this segment? Reply with only 'upper half' or 'lower half' and nothing else."
    )


def read_half(reply: str) -> str | None:
    """``"A"`` for "upper half", ``"B"`` for "lower half" (upper checked first, as upstream does), else None."""
    low = (reply or "").lower()
    if "upper half" in low:
        return "A"
    if "lower half" in low:
        return "B"
    return None


def random_half(seed: int, case: str, lo: int, hi: int) -> str:
    """Upstream's coin for a reply naming neither half, seeded so a re-run makes the same choice."""
    return "A" if random.Random(f"{seed}:{case}:{lo}:{hi}").randint(0, 1) == 0 else "B"
