"""WorkBench's expected answers, read without ``eval``: ``calendar.delete_event.func(event_id="00000256")``.

>>> parse_action('calendar.delete_event.func(event_id="00000256")')
Action(name='calendar.delete_event', args={'event_id': '00000256'})
>>> format_action(parse_action('email.send_email.func(recipient="a@b.c", subject="Hi", body="x")'))
'email.send_email.func(recipient="a@b.c", subject="Hi", body="x")'
"""

from __future__ import annotations

import ast
import json

from benchmark.environment import Action


def parse_action(text: str) -> Action:
    """One expected call: ``<domain>.<function>.func(k="v", ...)`` with string keyword arguments only."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise ValueError(f"not a call: {text[:120]!r}") from None
    if not isinstance(node, ast.Call) or node.args:
        raise ValueError(f"expected a call with keyword arguments only: {text[:120]!r}")
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr == "func" and isinstance(func.value, ast.Attribute)
            and isinstance(func.value.value, ast.Name)):
        raise ValueError(f"expected <domain>.<function>.func(...): {text[:120]!r}")
    args = {}
    for kw in node.keywords:
        if kw.arg is None or not isinstance(kw.value, ast.Constant) or not isinstance(kw.value.value, str):
            raise ValueError(f"expected string keyword arguments: {text[:120]!r}")
        args[kw.arg] = kw.value.value
    return Action(name=f"{func.value.value.id}.{func.value.attr}", args=args)


def format_action(action: Action) -> str:
    """WorkBench's text form of a call (string values JSON-quoted, which equals Python's for plain text)."""
    args = ", ".join(f"{k}={json.dumps(str(v), ensure_ascii=False)}" for k, v in action.args.items())
    return f"{action.name}.func({args})"


def action_key(name: str, args: dict[str, object]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A call's identity for the exact-match score: name, and arguments lower-cased, in any order.

    WorkBench compares the calls' text lower-cased, so argument order counted
    there; arguments left out (``None``) are dropped here.
    """
    return name, tuple(sorted((k, str(v).lower()) for k, v in args.items() if v is not None))
