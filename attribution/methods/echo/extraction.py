"""ECHO's regex extraction of the context levels as its appendix A.3 gives it (ECHO A.1, A.3).

Three extractors, each trying a list of regular expressions per context type
and keeping the capture of the first pattern that matches, cut to a word limit:

- :func:`key_decision` (L2, "nearby", steps at distance 2-3): at most 50
  words; its default context type is ``decision_quality``;
- :func:`brief_summary` (L3, "distant", distance 4-6): at most 20 words,
  default type ``general``;
- :func:`milestone` (L4, "milestones", distance > 6): at most 15 words,
  default type ``general``.

A text cut at the limit ends in ``...``. When no pattern matches, the first
sentence (the text up to the first ". ") stands in, cut the same way
(:func:`key_decision` ends it with a full stop). An empty text reads "No content
available" (L2, L3) or "No milestones available" (L4). L2 searches the text as
written; L3 and L4 search it with its whitespace runs collapsed. Matching
ignores case, and the patterns carry no word boundaries, as A.3 writes them
(``to`` also matches inside "into").

A.3's hierarchical function (:func:`hierarchical_context`) calls every
extractor with its default context type, so the types beyond the defaults
exist here as parameters (``context_type``) but the levels never choose one per
step. L1 (distance 1) keeps the full text. The patterns are A.3's; the
typographic apostrophe of the printed copy ("couldn’t") is matched beside the
plain one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from attribution.llm.prompting import display_agent
from attribution.sources.trajectory import Trajectory

WORD_LIMITS = {"key_decision": 50, "summary": 20, "milestone": 15}
"""A.3's ``max_words`` per extractor (L2, L3, L4)."""
CONTEXT_TYPES = ("handoff", "decision_quality", "error_propagation", "general")
_A = r"['’]"  # an apostrophe, plain or typographic

KEY_DECISION_PATTERNS: dict[str, tuple[str, ...]] = {
    "handoff": (
        r"(?:received|got|obtained|from)\s+([^.!?]*[.!?])",
        r"(?:passing|providing|sending|to)\s+([^.!?]*[.!?])",
        r"(?:based on|using)\s+([^.!?]*[.!?])",
        r"(?:will|need to|should)\s+([^.!?]*(?:next|continue)[^.!?]*[.!?])",
    ),
    "decision_quality": (
        r"(?:I (?:conclude|determine|decide|believe|think))\s+([^.!?]*[.!?])",
        r"(?:Therefore|Thus|So|Hence),?\s+([^.!?]*[.!?])",
        r"(?:The (?:answer|solution|result))\s+(?:is|appears)\s+([^.!?]*[.!?])",
        r"(?:Based on|Given)\s+([^.!?]*[.!?])",
    ),
    "error_propagation": (
        r"(?:error|mistake|wrong|incorrect|failed)\s+([^.!?]*[.!?])",
        rf"(?:cannot|unable|couldn{_A}t|can{_A}t)\s+([^.!?]*[.!?])",
        r"(?:However|But|Unfortunately)\s+([^.!?]*[.!?])",
    ),
    "general": (
        r"(?:I (?:will|should|need to|decided to|conclude that|believe|think|determine)) ([^.!?]*[.!?])",
        r"(?:Therefore|Thus|So|Hence),? ([^.!?]*[.!?])",
        r"(?:The answer|The result|The solution) (?:is|appears to be|seems to be) ([^.!?]*[.!?])",
        r"Let me ([^.!?]*[.!?])",
        r"(?:My approach|My strategy|My plan) (?:is|will be) ([^.!?]*[.!?])",
    ),
}
"""L2 (A.3, ``extract_key_decision``)."""

SUMMARY_PATTERNS: dict[str, tuple[str, ...]] = {
    "handoff": (r"(?:received|got|obtained)\s+([^.!?]*[.!?])", r"(?:providing|sending)\s+([^.!?]*[.!?])"),
    "decision_quality": (r"(?:conclude|determine|decide)\s+([^.!?]*[.!?])", r"(?:Therefore|Thus|So),?\s+([^.!?]*[.!?])"),
    "error_propagation": (r"(?:error|mistake|failed)\s+([^.!?]*[.!?])", r"(?:cannot|unable)\s+([^.!?]*[.!?])"),
    "general": (
        r"(?:In conclusion|To conclude|Therefore|Thus|So|Hence),? ([^.!?]*[.!?])",
        r"(?:The (?:answer|result|solution|output)) (?:is|appears to be|seems to be) ([^.!?]*[.!?])",
        r"(?:I (?:found|determined|concluded|calculated)) ([^.!?]*[.!?])",
    ),
}
"""L3 (A.3, ``summarize_agent``)."""

MILESTONE_PATTERNS: dict[str, tuple[str, ...]] = {
    "handoff": (
        r"(?:received|obtained|got)\s+([^.!?]*(?:from|data|information)[^.!?]*[.!?])",
        r"(?:provided|sent|passed)\s+([^.!?]*(?:to|data|information)[^.!?]*[.!?])",
        r"(?:completed|finished)\s+([^.!?]*(?:handoff|transfer)[^.!?]*[.!?])",
    ),
    "decision_quality": (
        r"(?:decided|determined|concluded)\s+([^.!?]*[.!?])",
        r"(?:evaluated|assessed|analyzed)\s+([^.!?]*[.!?])",
        r"(?:final decision|ultimate choice)\s*[:-]?\s*([^.!?]*[.!?])",
    ),
    "error_propagation": (
        r"(?:error|mistake|failure)\s+(?:occurred|detected)\s+([^.!?]*[.!?])",
        r"(?:identified|found)\s+(?:error|issue|problem)\s+([^.!?]*[.!?])",
        r"(?:corrected|fixed|resolved)\s+([^.!?]*[.!?])",
    ),
    "general": (
        r"(?:completed|finished|achieved|accomplished)\s+([^.!?]*[.!?])",
        r"(?:created|generated|produced|built)\s+([^.!?]*[.!?])",
        r"(?:step\s+\d+|phase\s+\d+|stage\s+\d+)\s*[:-]?\s*([^.!?]*[.!?])",
        r"(?:successfully|finally)\s+([^.!?]*[.!?])",
    ),
}
"""L4 (A.3, ``obtain_milestones``)."""

_COMPILED = {name: {t: tuple(re.compile(p, re.I) for p in ps) for t, ps in table.items()}
             for name, table in (("key_decision", KEY_DECISION_PATTERNS), ("summary", SUMMARY_PATTERNS),
                                 ("milestone", MILESTONE_PATTERNS))}


def _words(text: str, max_words: int) -> str:
    words = text.split()
    return " ".join(words[:max_words]) + ("..." if len(words) > max_words else "")


def _extract(kind: str, text: str, max_words: int, context_type: str, *, collapse: bool, full_stop: bool) -> str:
    if context_type not in CONTEXT_TYPES:
        raise ValueError(f"context_type must be one of {', '.join(CONTEXT_TYPES)}, got {context_type!r}")
    if collapse:
        text = " ".join(text.split())
    for pattern in _COMPILED[kind][context_type]:
        match = pattern.search(text)  # re.findall's first match: the same capture
        if match:
            return _words(match.group(1).strip(), max_words)
    first = text.split(". ")[0].strip()
    if full_stop and not first.endswith("."):
        first += "."
    return _words(first, max_words)


def key_decision(text: str, max_words: int = WORD_LIMITS["key_decision"], context_type: str = "decision_quality") -> str:
    """L2: the key decision or main point (A.3, ``extract_key_decision``).

    >>> key_decision("Loading the sheet. Therefore, we should use the 2019 column. Done.")
    'we should use the 2019 column.'
    >>> key_decision("Nothing matched here")
    'Nothing matched here.'
    """
    if not (text or "").strip():
        return "No content available"
    return _extract("key_decision", text, max_words, context_type, collapse=False, full_stop=True)


def brief_summary(text: str, max_words: int = WORD_LIMITS["summary"], context_type: str = "general") -> str:
    """L3: a brief summary (A.3, ``summarize_agent``).

    >>> brief_summary("We ran the query. The result is 42 rows in the table.")
    '42 rows in the table.'
    """
    if not (text or "").strip():
        return "No content available"
    return _extract("summary", text, max_words, context_type, collapse=True, full_stop=False)


def milestone(text: str, max_words: int = WORD_LIMITS["milestone"], context_type: str = "general") -> str:
    """L4: the milestone of a distant step (A.3, ``obtain_milestones``).

    >>> milestone("We successfully loaded the file and counted every row of the sheet twice over, one by one.")
    'loaded the file and counted every row of the sheet twice over, one by one.'
    >>> milestone("a b c d e f g h i j k l m n o p q")
    'a b c d e f g h i j k l m n o...'
    """
    if not (text or "").strip():
        return "No milestones available"
    return _extract("milestone", text, max_words, context_type, collapse=True, full_stop=False)


LEVELS = ("immediate", "nearby", "distant", "milestones")
"""A.3's level names: distance 1 (full), 2-3 (key decisions), 4-6 (summaries), beyond (milestones)."""


def level_name(distance: int) -> str:
    """A.3's level of a step at ``distance`` (>= 1) from the current one."""
    return "immediate" if distance == 1 else "nearby" if distance <= 3 else "distant" if distance <= 6 else "milestones"


def extract_level(text: str, level: str) -> str:
    """A step's text as ``level`` shows it (A.3's hierarchical function: each extractor with its defaults)."""
    if level == "immediate":
        return text or ""
    return {"nearby": key_decision, "distant": brief_summary, "milestones": milestone}[level](text or "")


@dataclass(kw_only=True, slots=True)
class HierarchicalContext:
    """One step's hierarchical context (A.3, ``extract_agent_contexts_hierarchical``): the step itself and every
    other step at its level, in step order."""

    index: int
    agent: str
    content: str
    levels: dict[str, list[tuple[int, str, str]]] = field(default_factory=lambda: {name: [] for name in LEVELS})
    """Level -> (step, agent, text as the level shows it)."""


def hierarchical_context(traj: Trajectory, index: int) -> HierarchicalContext:
    """The hierarchical context of step ``index`` (every other step at its level, extracted as A.3 does)."""
    cur = traj.steps[index]
    ctx = HierarchicalContext(index=index, agent=display_agent(cur.agent), content=cur.content or "")
    for s in traj.steps:
        if s.index == index:
            continue
        level = level_name(abs(s.index - index))
        ctx.levels[level].append((s.index, display_agent(s.agent), extract_level(s.content or "", level)))
    return ctx


LEVEL_TITLES = {"immediate": "immediate (full detail)", "nearby": "nearby (key decisions)",
                "distant": "distant (brief summaries)", "milestones": "milestones"}


def format_context(ctx: HierarchicalContext, max_chars: int | None = None) -> str:
    """A hierarchical context as text: the step, then each non-empty level with its steps on one line each; cut to
    its first ``max_chars`` characters and ``...`` when longer (as A.5 cuts its example).

    >>> from attribution.sources.trajectory import Step
    >>> t = Trajectory(id="x", query="q", steps=[Step(index=i, agent="A", content=f"Step {i} done. More.") for i in range(3)])
    >>> print(format_context(hierarchical_context(t, 0)))
    Context of step 0 (A): Step 0 done. More.
    immediate (full detail):
      [1] A: Step 1 done. More.
    nearby (key decisions):
      [2] A: Step 2 done.
    """
    lines = [f"Context of step {ctx.index} ({ctx.agent}): {' '.join(ctx.content.split())}"]
    for level in LEVELS:
        if ctx.levels[level]:
            lines.append(f"{LEVEL_TITLES[level]}:")
            lines += [f"  [{i}] {agent}: {' '.join(text.split())}" for i, agent, text in ctx.levels[level]]
    text = "\n".join(lines)
    return text if max_chars is None or len(text) <= max_chars else text[:max_chars] + "..."
