"""The Who&When paper's prompts (appendix G.1-G.3) for the three baselines, and how their replies are read.

The templates are the authors' (``Automated_FA/Lib/utils.py`` of
github.com/mingyin1/Agents_Failure_Attribution), word for word except:

- the log is rendered by :func:`attribution.llm.prompt_fit.render_steps` as
  ``[i] agent: text`` lines, fitted to the context window (upstream:
  ``agent: text`` for all-at-once and binary search, ``Step i - agent: text``
  for step-by-step, never cut);
- the reference answer line is left out when the job runs without ground
  truth (upstream always shows it);
- step-by-step's question names the step (upstream's ``(Step {idx})`` is
  missing its ``f`` and reaches the model as the literal ``{idx}``).

Replies are free text, as upstream asks: all-at-once ``Agent Name: …`` /
``Step Number: …``; step-by-step ``1. Yes/No``; binary search ``upper half`` /
``lower half`` (no reason asked; an answer naming neither picks a half at
random, as upstream does, seeded per case and range).
"""

from __future__ import annotations

import random
import re

from attribution.llm.prompting import ANSWER_CHARS, QUERY_CHARS, clip, one_line
from attribution.sources.trajectory import Trajectory

ALL_AT_ONCE_SYSTEM = "You are a helpful assistant skilled in analyzing conversations."
STEP_SYSTEM = "You are a precise step-by-step conversation evaluator."
HALVE_SYSTEM = "You are an AI assistant specializing in localizing errors in conversation segments."


def _problem(traj: Trajectory) -> str:
    return clip(" ".join(traj.query.split()), QUERY_CHARS)


def _answer_line(traj: Trajectory, with_ground_truth: bool) -> str:
    if with_ground_truth and traj.ground_truth:
        return f"The Answer for the problem is: {clip(one_line(traj.ground_truth), ANSWER_CHARS)}\n"
    return ""


def all_at_once_prompt(traj: Trajectory, with_ground_truth: bool, log: str) -> str:
    """G.1: the whole log; agent name, step number and reason in a fixed text format."""
    return (
        "You are an AI assistant tasked with analyzing a multi-agent conversation history when solving a real world "
        f"problem. The problem is:  {_problem(traj)}\n"
        f"{_answer_line(traj, with_ground_truth)}"
        "Identify which agent made an error, at which step, and explain the reason for the error. "
        "Here's the conversation:\n\n" + log +
        "\n\nBased on this conversation, please predict the following:\n"
        "1. The name of the agent who made a mistake that should be directly responsible for the wrong solution to "
        "the real world problem. If there are no agents that make obvious mistakes, decide one single agent in your "
        "mind. Directly output the name of the Expert.\n"
        "2. In which step the mistake agent first made mistake. For example, in a conversation structured as "
        "follows: \n"
        '            {\n                "agent a": "xx",\n                "agent b": "xxxx",\n'
        '                "agent c": "xxxxx",\n                "agent a": "xxxxxxx"\n            },\n            '
        "each entry represents a 'step' where an agent provides input. The 'x' symbolizes the speech of each agent. "
        "If the mistake is in agent c's speech, the step number is 2. If the second speech by 'agent a' contains the "
        "mistake, the step number is 3, and so on. Please determine the step number where the first mistake "
        "occurred.\n"
        "3. The reason for your prediction."
        "Please answer in the format: Agent Name: (Your prediction)\n Step Number: (Your prediction)\n "
        "Reason for Mistake: \n"
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


def step_prompt(traj: Trajectory, with_ground_truth: bool, log: str, idx: int, agent: str) -> str:
    """G.2: the log up to step ``idx``; does that most recent step hold an error?"""
    return (
        "You are an AI assistant tasked with evaluating the correctness of each step in an ongoing multi-agent "
        f"conversation aimed at solving a real-world problem. The problem being addressed is: {_problem(traj)}. "
        f"{_answer_line(traj, with_ground_truth)}"
        f"Here is the conversation history up to the current step:\n{log}\n"
        f"The most recent step ({idx}) was by '{agent}'.\n"
        f"Your task is to determine whether this most recent agent's action (Step {idx}) contains an error that "
        "could hinder the problem-solving process or lead to an incorrect solution. "
        "Please respond with 'Yes' or 'No' and provide a clear explanation for your judgment. "
        "Note: Please avoid being overly critical in your evaluation. Focus on errors that clearly derail the process."
        "Respond ONLY in the format: 1. Yes/No.\n2. Reason: [Your explanation here]"
    )


def read_step_verdict(reply: str) -> bool | None:
    """True/False for a G.2 reply starting "1. Yes"/"1. No" (upstream's test); else the first yes/no word; else None.

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
    """G.3: only the segment ``[lo, hi]``; is the critical error in its upper (``[lo, mid]``) or lower half?"""
    return (
        "You are an AI assistant tasked with analyzing a segment of a multi-agent conversation. Multiple agents are "
        "collaborating to address a user query, with the goal of resolving the query through their collective "
        "dialogue.\n"
        "Your primary task is to identify the location of the most critical mistake within the provided segment. "
        "Determine which half of the segment contains the single step where this crucial error occurs, ultimately "
        "leading to the failure in resolving the user’s query.\n"
        f"The problem to address is as follows: {_problem(traj)}\n"
        f"{_answer_line(traj, with_ground_truth)}"
        f"Review the following conversation segment from step {lo} to step {hi}:\n\n{segment}\n\n"
        "Based on your analysis, predict whether the most critical error is more likely to be located in the upper "
        f"half (from step {lo} to step {mid}) or the lower half (from step {mid + 1} to step {hi}) of this segment.\n"
        "Please provide your prediction by responding with ONLY 'upper half' or 'lower half'. Remember, your answer "
        "should be based on identifying the mistake that directly contributes to the failure in resolving the user's "
        "query. If no single clear error is evident, consider the step you believe is most responsible for the "
        "failure, allowing for subjective judgment, and base your answer on that."
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
