"""argparse value types whose errors name the option and what was expected (one line, exit 2)."""

from __future__ import annotations

import argparse


def _int_at_least(minimum: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    parse.__name__ = what.replace(" ", "_")
    return parse


positive_int = _int_at_least(1, "an integer >= 1")
"""``type=positive_int``: concurrency, counts, limits."""
nonnegative_int = _int_at_least(0, "an integer >= 0")
"""``type=nonnegative_int``: retries."""

__all__ = ["nonnegative_int", "positive_int"]
