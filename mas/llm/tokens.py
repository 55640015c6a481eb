"""Token counting in one place: the estimate (characters / 4) and the served model's own tokenizer.

Every count the runtime, the scripted double and attribution make goes
through here, so a figure means the same wherever it is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from mas.llm.models import BoundModel

CHARS_PER_TOKEN = 4
"""The estimate's ratio; it undercounts code and numbers (a tokenizer counts those denser)."""


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text``: characters / 4, at least 1 (tokens).

    >>> estimate_tokens("abcdefghi"), estimate_tokens("")
    (2, 1)
    """
    return max(1, len(text) // CHARS_PER_TOKEN)


async def count_tokens(bound: BoundModel, text: str) -> tuple[int, str]:
    """Tokens of ``text`` and how they were counted: ``tokenizer`` (the embedded server's ``/tokenize``)
    or ``estimate`` (:func:`estimate_tokens`, for other routes or when the server does not answer)."""
    if bound.provider == "embedded" and bound.base_url:
        root = bound.base_url.removesuffix("/v1")
        try:
            async with httpx.AsyncClient(timeout=10) as client:
                r = await client.post(f"{root}/tokenize", json={"content": text})
                return len(r.json()["tokens"]), "tokenizer"
        except (httpx.HTTPError, KeyError, ValueError):
            pass
    return estimate_tokens(text), "estimate"
