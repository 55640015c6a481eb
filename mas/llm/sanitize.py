"""What a model wrote, made safe to store: the one cleaning of replies as they enter the runtime, fresh from the
endpoint or read back from the response cache, and the one judgement of the token counts a reply reports.

Small models split an emoji into a lone surrogate escape (``"\\ud83d"``), emit
NUL bytes, or nest JSON thousands of levels deep. None of that is an
infrastructure failure, and all of it is deterministic, so a retry cannot help;
left as is it failed the run when the trace, the checkpoint or the answer was
serialized (``PydanticSerializationError``, ``RecursionError``). Cleaned here,
such a reply is an ordinary reply: its answer is judged like any other (wrong
or missing when the model wrote garbage).

>>> clean_text("ok \\ud83d\\x00!")
'ok \\ufffd\\ufffd!'
>>> clean_data({"a": [[[1]]]}, max_depth=2)
{'a': ['[nested deeper than 2 levels]']}
"""

from __future__ import annotations

import re
from typing import Any

MAX_DEPTH = 64
"""The deepest nesting of lists and objects kept from a reply (levels); deeper parts are replaced by a note."""

_UNSAFE = re.compile("[\x00\ud800-\udfff]")
"""NUL and lone surrogates (a valid pair is one character once decoded, so any surrogate left is lone)."""


def clean_text(text: str) -> str:
    """``text`` with lone surrogates and NUL replaced by U+FFFD (what a lenient UTF-8 decoder would show)."""
    return _UNSAFE.sub("\ufffd", text) if _UNSAFE.search(text) else text


def clean_data(value: Any, *, max_depth: int = MAX_DEPTH, _depth: int = 0) -> Any:
    """``value`` (JSON-like data) with every string cleaned (:func:`clean_text`, keys too) and every list or
    object deeper than ``max_depth`` levels replaced by a short note."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict | list | tuple):
        if _depth >= max_depth:
            return f"[nested deeper than {max_depth} levels]"
        if isinstance(value, dict):
            return {clean_text(k) if isinstance(k, str) else k: clean_data(v, max_depth=max_depth, _depth=_depth + 1)
                    for k, v in value.items()}
        return [clean_data(v, max_depth=max_depth, _depth=_depth + 1) for v in value]
    return value


_TOOL_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
MAX_TOOL_NAME = 64
"""OpenAI's limit on a function name (characters); its names are ``[A-Za-z0-9_-]`` only."""


def clean_tool_name(name: str) -> str:
    """A tool name the model wrote, as the endpoint accepts it back in the conversation: characters outside
    ``[A-Za-z0-9_-]`` become ``_``, at most :data:`MAX_TOOL_NAME` of them. Sent back as written, a name like
    ``../../etc/passwd`` made OpenAI refuse the next request (HTTP 400), which ended the run as an
    infrastructure error: the model's bad output counted as no task result. No tool is named so, so the call
    still gets "unknown tool" either way.

    >>> clean_tool_name("../../etc/passwd"), clean_tool_name("calculator")
    ('______etc_passwd', 'calculator')
    """
    return _TOOL_NAME_UNSAFE.sub("_", name)[:MAX_TOOL_NAME] or "_"


def clean_message(msg: Any) -> Any:
    """A LangChain ``AIMessage`` cleaned in place (content, tool calls, raw fields), returned for chaining."""
    msg.content = clean_data(msg.content)
    if getattr(msg, "tool_calls", None):
        msg.tool_calls = [{**c, "name": clean_tool_name(c.get("name") or ""), "args": clean_data(c.get("args") or {})}
                          for c in msg.tool_calls]
    for name in ("invalid_tool_calls", "additional_kwargs", "response_metadata"):
        if getattr(msg, name, None):
            setattr(msg, name, clean_data(getattr(msg, name)))
    if getattr(msg, "invalid_tool_calls", None):  # sent back too, beside the valid ones
        msg.invalid_tool_calls = [{**c, "name": clean_tool_name(c.get("name") or "")} for c in msg.invalid_tool_calls]
    return msg


MAX_CALL_TOKENS = 10_000_000
"""The most tokens one call is counted for, in or out (tokens): ten times the largest context windows."""


def sane_usage(*counts: Any, most: int = MAX_CALL_TOKENS) -> tuple[tuple[int | None, ...], str | None]:
    """The provider's token counts as ints, None for each one not to believe (negative, not a number, above
    ``most``; an input of 0 beside an output, since no prompt is empty), and what was wrong (None: nothing).

    >>> sane_usage(12, 1e300)
    ((12, None), 'output_tokens=1e+300')
    >>> sane_usage(0, 200)
    ((None, 200), 'input_tokens=0')
    """
    out: list[int | None] = []
    bad = []
    for name, value in zip(("input_tokens", "output_tokens"), counts, strict=False):
        try:
            n = float(value or 0)
        except OverflowError:  # an int past any float
            n = float("inf")
        except (TypeError, ValueError):
            n = float("nan")
        if n != n or n < 0 or n > most:
            bad.append(f"{name}={n:g}" if n == n else f"{name}={str(value)[:40]!r}")
            out.append(None)
        else:
            out.append(int(n))
    if out and out[0] == 0 and len(out) > 1 and out[1]:
        bad.append("input_tokens=0")
        out[0] = None
    return tuple(out), ", ".join(bad) or None
