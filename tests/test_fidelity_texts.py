"""The methods as their source texts write them (docs/fidelity.md): one test per item, each failing on the code
before it followed the text."""

from __future__ import annotations

import pytest

from mas.llm.confidence import parse_confidence
from mas.topologies.agent import parse_answer

# ---- confidence: the harness README's rule ("Average confidence") ----------------------------------------------


@pytest.mark.parametrize(("raw", "want"), [
    ("1.5", 1.0), ("-0.2", 0.0), ("0.7", 0.7), (0.25, 0.25), (85, 1.0), ("1e-1", 0.1),
    (None, 0.5), ("high", 0.5), ("9/10", 0.5), ("70%", 0.5), ("", 0.5), ("nan", 0.5), (True, 0.5), ([0.3], 0.5),
])
def test_an_answers_confidence_is_clipped_into_0_1_and_half_when_missing_or_unparsable(raw, want):
    answer = parse_answer({"answer_artifact": "42", "confidence": raw}, "")
    assert answer.confidence == pytest.approx(want)
    assert parse_confidence(raw, 0.5, "clip") == pytest.approx(want)


def test_the_percent_reading_is_one_setting_away():
    from mas.config import ExperimentConfig

    assert ExperimentConfig().mas.confidence_scale == "clip"
    assert parse_answer({"answer_artifact": "42", "confidence": "1.5"}, "", "percent").confidence == 0.015
    assert parse_answer({"answer_artifact": "42", "confidence": "high"}, "", "percent").confidence == 0.8
