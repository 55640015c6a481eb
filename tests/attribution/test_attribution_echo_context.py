"""ECHO's hierarchical context: A.3's extraction (its patterns, 50 / 20 / 15 words), and the project's earlier one
(``extraction="project"``), written from the paper's section 3: L2 the key reasoning chain with routine operations
filtered, L3 outcome, assumptions and warnings, L4 decision points and state transitions."""

from __future__ import annotations

import pytest

from attribution.methods.echo.context import hierarchical_views
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


# ---- ECHO A.3 as written ----

FIFTY_FIVE = " ".join(f"w{i}" for i in range(55))
TEXTS = {
    0: "Please count the rows of the sheet.",
    2: "Loading the sheet now. Therefore, we should use the 2019 column because it is complete. Then more.",
    3: f"Looking again. I conclude {FIFTY_FIVE}.",
    5: "We ran the query. The result is 42 rows in the table and nothing else was found in it at all today, "
       "as far as we can tell.",
    8: "We finally loaded every file into the main table after the long wait for the server to respond to us.",
}


def a3_traj() -> Trajectory:
    agents = ["human", "Planner", "Coder", "Planner", "Coder", "Verifier", "Coder", "Planner", "Verifier", "Coder"]
    steps = [Step(index=i, agent=a, content=TEXTS.get(i, f"Step {i} by {a}.")) for i, a in enumerate(agents)]
    return Trajectory(id="a3", subset="test", query="How many rows?", ground_truth="40", final_answer="42",
                      steps=steps, mistake_agent="Coder", mistake_step=2)


def test_a3_extracts_by_its_patterns_within_50_20_and_15_words() -> None:
    from attribution.methods.echo.extraction import brief_summary, key_decision, milestone

    assert key_decision(TEXTS[2]) == "we should use the 2019 column because it is complete."
    cut = key_decision(TEXTS[3])
    assert cut.endswith("...") and len(cut[:-3].split()) == 50 and cut.startswith("w0 w1")
    summary = brief_summary(TEXTS[5])
    assert summary.startswith("42 rows in the table") and len(summary[:-3].split()) == 20 and summary.endswith("...")
    mile = milestone(TEXTS[8])
    assert mile == "loaded every file into the main table after the long wait for the server to..."
    assert key_decision("Nothing matches here. Second sentence") == "Nothing matches here."  # the first sentence
    assert (key_decision(""), milestone("  ")) == ("No content available", "No milestones available")
    assert key_decision("I cannot open it. Fine.", context_type="error_propagation") == "open it."
    with pytest.raises(ValueError, match="context_type"):
        key_decision("x", context_type="loud")
    # The project variant's step pass can use A.3's extraction too; its own stays by name.
    views = {v.index: v.text for v in hierarchical_views(a3_traj(), {0}, "paper")}
    assert views[2] == "(key decision) " + key_decision(TEXTS[2]) and views[8] == "(milestone) " + mile
    assert {v.index: v.text for v in hierarchical_views(a3_traj(), {0}, "project")}[8].startswith("(milestone ")
