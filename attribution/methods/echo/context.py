"""ECHO's hierarchical context: how much of each step an analyst sees, by distance to the focus.

Two extractions of levels L2-L4 (``extraction``):

- ``paper``: ECHO's appendix A.3 (:mod:`attribution.methods.echo.extraction`): its regular
  expressions, the capture of the first pattern that matches, cut to 50 / 20 /
  15 words (L2 / L3 / L4), the first sentence when nothing matches;
- ``project``: this project's own extraction, written from the paper's
  section 3 alone, kept by name (``echo`` with
  ``variant=project`` or ``context=project``). Its word lists and character
  limits (LEVEL_LIMITS: 400, 160, 70) are the project's, not A.3's.

Levels, by a step's distance ``d`` to the nearest focus step (ECHO A.1, A.3):

- L1 (``d <= 1``, immediate): the full content;
- L2 (``d <= 3``, nearby): key decisions. ``project``: "key reasoning chains",
  "filtering routine operations" (:func:`local_context`): the sentences that
  carry reasoning (because, therefore, I will, the result is ...) or the
  step's context type, with code blocks and tool boilerplate left out;
- L3 (``d <= 6``, distant): summaries. ``project``: the outcome sentence, then
  the assumption and warning sentences, in step order (:func:`distant_context`);
- L4 (the rest): milestones. ``project``: one line per step, its decision or
  transition sentence (a handoff, an error, a final answer), marked with its
  context type; a "general" step keeps its first sentence (:func:`milestone`).

Context types (``project`` only; A.3 calls each extractor with its default
type), by regular expressions over the step text: ``error_propagation``
(error cues), ``handoff`` (the speaker changed and the text addresses someone
or passes control), ``decision_quality`` (plans, choices, conclusions) and
``general``. The type decides which sentences L2 keeps beside the reasoning.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from attribution.llm.prompting import ERROR_CUE_RE, StepView, clip, display_agent
from attribution.methods.echo.extraction import extract_level
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
REASONING_RE = re.compile(
    r"\b(because|since|therefore|thus|hence|so that|which means|this means|as a result|given that|i will|i'll|"
    r"we will|we should|we need|let's|decid\w*|conclu\w*|the answer is|result(?:s)? (?:is|are|shows?)|"
    r"final answer|plan\w*|choos\w*|instead)\b",
    re.I,
)
"""L2: a sentence that carries reasoning (a cause, a consequence, a decision or a conclusion)."""
ROUTINE_RE = re.compile(
    r"^(?:exitcode: 0\b|code output:|let(?:'s| me| us) (?:run|execute|check the output)|(?:please )?run the "
    r"(?:code|script|above)|terminate\.?$|ok(?:ay)?[,.!]?$|thanks?\b|thank you\b|sure[,.!]?$|great[,.!]?$)",
    re.I,
)
"""L2: a routine operation (tool boilerplate, acknowledgements), filtered out."""
ASSUMPTION_RE = re.compile(r"\b(assum\w*|suppos\w*|presum\w*|expect\w*|likely|probably|should be|must be|if we)\b", re.I)
"""L3: a critical assumption."""
WARNING_RE = re.compile(r"\b(warn\w*|however|but|caution|careful|note that|unclear|not sure|uncertain|might|missing)\b",
                        re.I)
"""L3: a warning signal (besides the error cues)."""
OUTCOME_RE = re.compile(
    r"\b(result\w*|answer|output|total|found|returns?|gives?|equals?|is \d|are \d|succeeded|completed|done|verified|"
    r"confirm\w*)\b|=",
    re.I,
)
"""L3: the step's outcome."""
TRANSITION_RE = re.compile(r"\b(final answer|the answer is|terminate|succeeded|resolved|completed|verified|confirm\w*)\b",
                           re.I)
"""L4: a major state transition besides handoffs and errors (a result settled, the run ended)."""
_NUMBER_RE = re.compile(r"\d")
_FENCE_RE = re.compile(r"```.*?(?:```|$)", re.S)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")
LEVEL_LIMITS = {2: 400, 3: 160, 4: 70}
"""Characters kept per step at levels L2-L4 by the ``project`` extraction (L1 keeps everything); A.3's limits are
words (50, 20, 15: :data:`attribution.methods.echo.extraction.WORD_LIMITS`)."""
EXTRACTIONS = ("paper", "project")
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
    """Sentences matching ``ctype`` (general: the ones with numbers), first sentence always kept: CHIEF's regex
    OTAR "thought" (:mod:`attribution.methods.chief.graph`); ECHO's L2 is :func:`local_context`."""
    sents = sentences(text)
    if not sents:
        return ""
    pattern = _TYPE_RE.get(ctype, _NUMBER_RE)
    picked = [sents[0]] + [s for s in sents[1:] if pattern.search(s)]
    return clip(" ".join(picked), max_chars)


def summary(text: str, max_chars: int = LEVEL_LIMITS[3]) -> str:
    """First sentence plus error-cue sentences, then numeric ones, within ``max_chars``: CHIEF's regex OTAR
    observation and result (:mod:`attribution.methods.chief.graph`); ECHO's L3 is :func:`distant_context`."""
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


def prose(text: str) -> str:
    """``text`` without its code blocks (routine operations for L2-L4; L1 shows them)."""
    return _FENCE_RE.sub(" ", text or "")


def local_context(text: str, ctype: str, max_chars: int = LEVEL_LIMITS[2]) -> str:
    """L2: the key reasoning chain, routine operations filtered out (see the module docstring).

    >>> local_context("```python\\nprint(x)\\n``` Let me run it. The total is 12 because the list has 12 rows.", "general")
    'The total is 12 because the list has 12 rows.'
    """
    sents = [s for s in sentences(prose(text)) if not ROUTINE_RE.search(s)]
    if not sents:
        return ""
    pattern = _TYPE_RE.get(ctype)
    picked = [s for s in sents if REASONING_RE.search(s) or (pattern is not None and pattern.search(s))]
    return clip(" ".join(picked or sents[:1]), max_chars)


def distant_context(text: str, max_chars: int = LEVEL_LIMITS[3]) -> str:
    """L3: the outcome, then critical assumptions and warning signals, within ``max_chars``, in step order.

    >>> distant_context("Loading the file now. I assume the column is in dollars. Result: the total is 42.")
    'I assume the column is in dollars. Result: the total is 42.'
    """
    sents = [s for s in sentences(prose(text)) if not ROUTINE_RE.search(s)]
    if not sents:
        return ""
    outcome = [i for i, s in enumerate(sents) if OUTCOME_RE.search(s)]
    ranked = [outcome[-1] if outcome else len(sents) - 1]
    ranked += [i for i, s in enumerate(sents) if ASSUMPTION_RE.search(s)]
    ranked += [i for i, s in enumerate(sents) if ERROR_CUE_RE.search(s) or WARNING_RE.search(s)]
    kept: list[int] = []
    for i in dict.fromkeys(ranked):
        if sum(len(sents[j]) + 1 for j in kept) + len(sents[i]) > max_chars and kept:
            continue
        kept.append(i)
    return clip(" ".join(sents[i] for i in sorted(kept)), max_chars)


def milestone(text: str, ctype: str, max_chars: int = LEVEL_LIMITS[4]) -> str:
    """L4: the step's decision point or state transition (its first sentence for a general step).

    >>> milestone("Thanks for the update on loading the data for this task. We decide to use the 2019 table.", "decision_quality")
    'We decide to use the 2019 table.'
    """
    sents = sentences(prose(text)) or sentences(text)
    if not sents:
        return ""
    pattern = {"error_propagation": ERROR_CUE_RE, "handoff": HANDOFF_RE, "decision_quality": DECISION_RE}.get(ctype)
    hits = [s for s in sents if TRANSITION_RE.search(s)] + ([s for s in sents if pattern.search(s)] if pattern else [])
    return clip(" ".join((hits or sents)[0].split()), max_chars)


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


def hierarchical_views(traj: Trajectory, focus: set[int], extraction: str = "project") -> list[StepView]:
    """Step views at their context level (see the module docstring), extracted by ``extraction`` (``paper``: A.3,
    ``project``); every step is shown."""
    if extraction not in EXTRACTIONS:
        raise ValueError(f"extraction must be one of {', '.join(EXTRACTIONS)}, got {extraction!r}")
    types = step_types(traj)
    views = []
    for s, ctype in zip(traj.steps, types, strict=True):
        level = level_of(s.index, focus)
        text = s.content or ""
        if extraction == "paper" and level > 1:
            name = ("nearby", "distant", "milestones")[level - 2]
            text = f"{PAPER_LABELS[level]} " + extract_level(text, name)
        elif level == 2:
            text = f"(key {SHORT_TYPE[ctype]}) " + local_context(text, ctype)
        elif level == 3:
            text = "(summary) " + distant_context(text)
        elif level == 4:
            text = f"(milestone {SHORT_TYPE[ctype]}) " + milestone(text, ctype)
        views.append(StepView(index=s.index, agent=display_agent(s.agent), text=text, weight=LEVEL_WEIGHTS[level]))
    return views


PAPER_LABELS = {2: "(key decision)", 3: "(summary)", 4: "(milestone)"}
"""How a line of each shortened level is marked under the ``paper`` extraction."""


def hotspots(traj: Trajectory, limit: int = 4) -> set[int]:
    """Focus of the agent pass on a log too long to show whole: the first error-propagation steps, the first and the last step."""
    types = step_types(traj)
    errs = [i for i, t in enumerate(types) if t == "error_propagation"][:limit]
    return {0, traj.n_steps - 1, *errs} if traj.n_steps else set()
