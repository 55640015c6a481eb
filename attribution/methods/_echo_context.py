"""ECHO's hierarchical context: how much of each step an analyst sees, by distance to the focus.

The step pass builds it per candidate step (the focus is that one step); the
agent pass uses it around :func:`hotspots` only when the whole log does not
fit the window.

Levels, by a step's distance ``d`` to the nearest focus step:

- L1 (``d <= 1``): the full content;
- L2 (``d <= 3``): key decisions, i.e. the sentences that match the step's
  context type (below), up to 400 characters;
- L3 (``d <= 6``): a summary, the first sentence plus the sentences carrying
  error cues or numbers, up to 160 characters;
- L4 (farther): every step as a milestone line, 70 characters, marked with
  its context type; a "general" step is kept too (the paper compresses the
  remainder, it does not drop it).

Context types, by regular expressions over the step text: ``error_propagation``
(error cues), ``handoff`` (the speaker changed and the text addresses someone
or passes control), ``decision_quality`` (plans, choices, conclusions) and
``general``. The type decides which sentences L2 keeps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from attribution.llm.prompting import ERROR_CUE_RE, StepView, clip, display_agent
from attribution.sources.trajectory import Trajectory

HANDOFF_RE = re.compile(
    r"(@\w+|->|\b(next,? |over to|hand(?:ing)? (?:over|off)|pass(?:ing)? (?:it )?to|your turn|please (?:verify|check|run|"
    r"review|confirm|proceed|execute)|terminate)\b)",
    re.I,
)
DECISION_RE = re.compile(
    r"\b(i will|i'll|we will|we should|let's|let us|decid\w*|plan\w*|therefore|thus|conclu\w*|final answer|"
    r"the answer is|result is|choos\w*|assum\w*|verified|correct)\b",
    re.I,
)
_NUMBER_RE = re.compile(r"\d")
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")
LEVEL_LIMITS = {2: 400, 3: 160, 4: 70}
"""Characters kept per step at levels L2-L4 (L1 keeps everything)."""
LEVEL_WEIGHTS = {1: 3.0, 2: 1.5, 3: 1.0, 4: 0.6}
"""Share of the prompt budget per level when texts must be cut further."""


def context_type(text: str, changed_speaker: bool) -> str:
    """``error_propagation``, ``handoff``, ``decision_quality`` or ``general``.

    >>> context_type("Traceback: KeyError", False)
    'error_propagation'
    >>> context_type("Next, please verify the table.", True)
    'handoff'
    """
    if ERROR_CUE_RE.search(text):
        return "error_propagation"
    if changed_speaker and HANDOFF_RE.search(text):
        return "handoff"
    if DECISION_RE.search(text):
        return "decision_quality"
    return "general"


SHORT_TYPE = {"error_propagation": "error", "handoff": "handoff", "decision_quality": "decision", "general": "general"}
_TYPE_RE = {"error_propagation": ERROR_CUE_RE, "handoff": HANDOFF_RE, "decision_quality": DECISION_RE}


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_RE.split(text or "") if s.strip()]


def key_decisions(text: str, ctype: str, max_chars: int = LEVEL_LIMITS[2]) -> str:
    """Sentences matching ``ctype`` (general: the ones with numbers), first sentence always kept."""
    sents = sentences(text)
    if not sents:
        return ""
    pattern = _TYPE_RE.get(ctype, _NUMBER_RE)
    picked = [sents[0]] + [s for s in sents[1:] if pattern.search(s)]
    return clip(" ".join(picked), max_chars)


def summary(text: str, max_chars: int = LEVEL_LIMITS[3]) -> str:
    """First sentence plus error-cue sentences, then numeric ones, within ``max_chars``."""
    sents = sentences(text)
    if not sents:
        return ""
    extra = [s for s in sents[1:] if ERROR_CUE_RE.search(s)] + [s for s in sents[1:] if _NUMBER_RE.search(s)]
    out = sents[0]
    for s in extra:
        if len(out) + len(s) + 1 > max_chars:
            break
        if s not in out:
            out += " " + s
    return clip(out, max_chars)


def step_types(traj: Trajectory) -> list[str]:
    """The context type of every step."""
    out, prev = [], None
    for s in traj.steps:
        out.append(context_type(s.content or "", prev is not None and s.agent_key != prev))
        prev = s.agent_key
    return out


def level_of(index: int, focus: Iterable[int]) -> int:
    """Context level (1-4) of step ``index`` given the focus steps (all L1 when no focus)."""
    dists = [abs(index - f) for f in focus]
    if not dists:
        return 1
    d = min(dists)
    return 1 if d <= 1 else 2 if d <= 3 else 3 if d <= 6 else 4


def hierarchical_views(traj: Trajectory, focus: set[int]) -> list[StepView]:
    """Step views at their context level (see the module docstring); every step is shown."""
    types = step_types(traj)
    views = []
    for s, ctype in zip(traj.steps, types, strict=True):
        level = level_of(s.index, focus)
        text = s.content or ""
        if level == 2:
            text = f"(key {SHORT_TYPE[ctype]}) " + key_decisions(text, ctype)
        elif level == 3:
            text = "(summary) " + summary(text)
        elif level == 4:
            text = f"(milestone {SHORT_TYPE[ctype]}) " + clip(" ".join(text.split()), LEVEL_LIMITS[4])
        views.append(StepView(index=s.index, agent=display_agent(s.agent), text=text, weight=LEVEL_WEIGHTS[level]))
    return views


def hotspots(traj: Trajectory, limit: int = 4) -> set[int]:
    """Focus of the agent pass on a log too long to show whole: the first error-propagation steps, the first and the last step."""
    types = step_types(traj)
    errs = [i for i, t in enumerate(types) if t == "error_propagation"][:limit]
    return {0, traj.n_steps - 1, *errs} if traj.n_steps else set()
