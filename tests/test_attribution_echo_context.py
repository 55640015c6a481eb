"""ECHO's hierarchical context extracts at L2-L4 what the paper's section 3 names (issue 32, item 7): L2 the key
reasoning chain with routine operations filtered, L3 outcome, assumptions and warnings, L4 decision points and
state transitions."""

from __future__ import annotations

from attribution.methods._echo_context import hierarchical_views
from attribution.sources.trajectory import Step, Trajectory

FILLER = "Working on it."


def views_around(texts: dict[int, str], n: int = 20, focus: int = 0) -> dict[int, str]:
    steps = [Step(index=i, agent=("Planner", "Coder")[i % 2], content=texts.get(i, FILLER)) for i in range(n)]
    traj = Trajectory(id="x", subset="test", query="How many rows?", steps=steps)
    return {v.index: v.text for v in hierarchical_views(traj, {focus})}


def test_l2_keeps_the_reasoning_chain_and_filters_routine_operations() -> None:
    step = "Let me run it first.\n```python\nprint(len(rows))\n```\nThe total is 12 because the invoice lists 12 items."
    text = views_around({2: step})[2]  # distance 2: L2
    assert text.startswith("(key ")
    assert "because the invoice lists 12 items" in text
    assert "print(len(rows))" not in text and "```" not in text and "Let me run it" not in text


def test_l3_keeps_the_outcome_the_assumptions_and_the_warnings() -> None:
    step = ("Loading the file now. It has four sheets. I assume the amounts are in dollars. "
            "However, two rows have no date. Result: the total is 42.")
    text = views_around({5: step})[5]  # distance 5: L3
    assert text.startswith("(summary) ")
    for kept in ("I assume the amounts are in dollars", "However, two rows have no date", "Result: the total is 42"):
        assert kept in text, kept
    assert "Loading the file now" not in text and "four sheets" not in text


def test_l4_milestones_are_decision_points_and_state_transitions() -> None:
    decision = "Thanks for the update on the loading of the data for this task. We decide to use the 2019 table."
    final = "I checked the numbers against the sheet once more today. The final answer is 42."
    views = views_around({10: decision, 13: final, 15: "ok, noted"})
    assert views[10] == "(milestone decision) We decide to use the 2019 table."
    assert views[13].endswith("The final answer is 42.")
    assert views[15] == "(milestone general) ok, noted"  # a general step is kept, not dropped
