"""Scoring a free-text answer against a target: exact, numeric, includes and multiple-choice, each normalised one way.

The normalisations are the project's own, reused: text is compared after SQuAD's answer normalisation
(:func:`benchmark.browsecomp.grading.normalise`: case, accents, punctuation, the articles a/an/the and runs of
spaces removed), numbers are read by :func:`benchmark.numeric.extract_number` (the last marked answer, else the last
number; commas, currency and units ignored) and compared within a relative 1e-6. A target may be a list: any of
its items is right.

>>> score_exact("The Eiffel Tower.", "eiffel tower"), score_includes("It is Paris, France.", "paris")
(True, True)
>>> score_numeric("So she pays $1,250.50 in total.", "1250.5"), answer_letter("Answer: (c) because...", 4)
(True, 'C')
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from typing import Any

from benchmark.browsecomp.grading import normalise
from benchmark.numeric import extract_number, numbers_equal

LETTERS = string.ascii_uppercase


def targets(target: Any) -> list[str]:
    """The acceptable answers: a list's items, else the one value, as text."""
    return [str(t) for t in target] if isinstance(target, list | tuple) else [str(target)]


def score_exact(answer: str, target: Any) -> bool:
    """The normalised answer equals a normalised target (an empty answer never matches)."""
    got = normalise(answer)
    return bool(got) and any(got == normalise(t) for t in targets(target))


def score_includes(answer: str, target: Any) -> bool:
    """A normalised target occurs in the normalised answer as whole words ("paris" in "it is paris france", not
    "par" in "paris"); an empty target never matches."""
    got = f" {normalise(answer)} "
    return any((t := normalise(g)) and f" {t} " in got for g in targets(target))


def score_numeric(answer: str, target: Any) -> bool:
    """The answer's number (:func:`~benchmark.numeric.extract_number`) equals a target's within a relative 1e-6."""
    got = extract_number(answer)
    return got is not None and any(numbers_equal(got, t) for t in targets(target))


# A capital letter standing alone, or any letter in brackets: "the answer is a dog" names no option A.
_LETTER = r"(?:[\(\[]\s*([A-Za-z])\s*[\)\]]|\b([A-Z])\b(?![\w'-]))"
_LETTER_MARKED = re.compile(r"(?i:\b(?:final\s+answer|answer)\s*(?:is|:|=)?\s*)" + _LETTER)
_LETTER_ALONE = re.compile(r"^\s*" + _LETTER + r"\s*[.:]?\s*$")
_LETTER_PAREN = re.compile(r"\(([A-Z])\)")


def answer_letter(answer: str, n_choices: int) -> str | None:
    """The option letter an answer gives (upper case), or None: the letter after the last ``answer``/``final
    answer`` marker ("ANSWER: B", "the answer is (b)"), else the whole answer when it is one letter ("B", "(B)",
    "B."), else the last parenthesised capital ("... so (B)"); only letters of the first ``n_choices`` options.
    """
    valid = set(LETTERS[:max(0, min(n_choices, len(LETTERS)))])
    text = answer or ""
    for found in (_LETTER_MARKED.findall(text)[-1:], _LETTER_ALONE.findall(text), _LETTER_PAREN.findall(text)[-1:]):
        letter = "".join(found[0]).upper() if found else ""
        if letter in valid:
            return letter
    return None


def target_letter(target: Any, choices: Sequence[str] | None) -> str | None:
    """The right option's letter: a letter target as it is, an integer target as a 0-based index, or a target
    that is one option's text (normalised) as that option's letter; None when it is none of these."""
    n = len(choices) if choices else len(LETTERS)
    if isinstance(target, bool):
        return None
    if isinstance(target, int):
        return LETTERS[target] if 0 <= target < n else None
    text = str(target).strip()
    if len(text) == 1 and text.upper() in LETTERS[:n]:
        return text.upper()
    if choices:
        hits = [i for i, c in enumerate(choices) if normalise(str(c)) == normalise(text)]
        return LETTERS[hits[0]] if len(hits) == 1 else None
    return None


def score_choice(answer: str, target: Any, choices: Sequence[str] | None) -> tuple[bool, str | None]:
    """(right, the letter read from the answer): the answer's letter (:func:`answer_letter`), or with options an
    answer that is exactly one option's text, equals the target's letter."""
    n = len(choices) if choices else len(LETTERS)
    got = answer_letter(answer, n)
    if got is None and choices:
        hits = [i for i, c in enumerate(choices) if normalise(str(c)) == normalise(answer or "")]
        got = LETTERS[hits[0]] if len(hits) == 1 else None
    want = target_letter(target, choices)
    return got is not None and got == want, got


def lettered(question: str, choices: Sequence[str]) -> str:
    """The question followed by its options as ``A) ...`` lines."""
    return question.rstrip() + "\n\n" + "\n".join(f"{LETTERS[i]}) {c}" for i, c in enumerate(choices))
