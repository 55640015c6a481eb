"""A safe arithmetic evaluator over the Python AST, for the agents' calculator tool.

Allowed: int/float literals, ``+ - * / // % **``, unary ``+``/``-``, parentheses,
the constants ``pi`` and ``e``, and the functions ``sqrt abs round min max floor
ceil log`` (``log(x)`` natural, ``log(x, base)``).  Everything else (names,
attributes, strings, comparisons, ``^``, calls to anything else) is rejected
with a :class:`CalculatorError` saying what was found and what is allowed.

Guards: expressions longer than ``MAX_EXPRESSION_CHARS``, nested deeper than
``MAX_DEPTH``, exponents above ``MAX_EXPONENT`` in absolute value, and integer
results over ``MAX_INT_BITS`` bits are refused before they are computed, so
``9**9**9`` fails fast instead of eating the machine.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Union

Number = Union[int, float]

MAX_EXPRESSION_CHARS = 2_000
MAX_DEPTH = 50
MAX_EXPONENT = 10_000
MAX_INT_BITS = 20_000
"""About 6,000 decimal digits: far beyond any word problem, far below a slow bignum."""

ALLOWED_HELP = "numbers, + - * / // % **, parentheses, pi, e, sqrt abs round min max floor ceil log"


class CalculatorError(ValueError):
    """The expression is not allowed or cannot be computed; the message says why."""


def _log(x: Number, base: Number | None = None) -> float:
    return math.log(x) if base is None else math.log(x, base)


_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int]] = {
    # name: (function, min args, max args)
    "sqrt": (math.sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "round": (round, 1, 2),
    "min": (min, 1, 64),
    "max": (max, 1, 64),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "log": (_log, 1, 2),
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}
_BINOPS: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
# Common non-Python spellings models produce; mapped before parsing.
_REPLACEMENTS = {"×": "*", "÷": "/", "−": "-", "–": "-"}


def evaluate(expression: str) -> Number:
    """The value of an arithmetic ``expression``.

    >>> evaluate("(3 + 4) * 2 ** 3 - sqrt(16)")
    52.0
    >>> evaluate("import os")
    Traceback (most recent call last):
    ...
    mas.tools.calculator.CalculatorError: not an arithmetic expression: invalid syntax ...
    """
    if not isinstance(expression, str):
        raise CalculatorError(f"expression must be a string, got {type(expression).__name__}")
    text = expression.strip()
    for old, new in _REPLACEMENTS.items():
        text = text.replace(old, new)
    if not text:
        raise CalculatorError("empty expression")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"expression too long ({len(text)} chars; at most {MAX_EXPRESSION_CHARS})")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"not an arithmetic expression: {exc.msg} in {expression!r}; "
                              f"allowed: {ALLOWED_HELP}") from None
    try:
        return _eval(tree.body, 0)
    except ZeroDivisionError:
        raise CalculatorError(f"division by zero in {expression!r}") from None
    except OverflowError:
        raise CalculatorError(f"result too large in {expression!r}") from None
    except (ValueError, TypeError) as exc:
        if isinstance(exc, CalculatorError):
            raise
        raise CalculatorError(f"math error in {expression!r}: {exc}") from None


def _eval(node: ast.AST, depth: int) -> Number:
    if depth > MAX_DEPTH:
        raise CalculatorError(f"expression nested too deeply (more than {MAX_DEPTH} levels)")
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise CalculatorError(f"only numbers are allowed, got {node.value!r}")
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _eval(node.operand, depth + 1)
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, ast.BinOp):
        return _binop(node, depth)
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise CalculatorError(f"unknown name {node.id!r}; allowed constants: pi, e")
    if isinstance(node, ast.Call):
        return _call(node, depth)
    if isinstance(node, ast.Tuple):
        raise CalculatorError("a comma outside a function call: write 1234 rather than 1,234")
    raise CalculatorError(f"{type(node).__name__} is not allowed; allowed: {ALLOWED_HELP}")


def _binop(node: ast.BinOp, depth: int) -> Number:
    op = _BINOPS.get(type(node.op))
    if op is None:
        hint = " (use ** for powers)" if isinstance(node.op, ast.BitXor) else ""
        raise CalculatorError(f"operator {type(node.op).__name__} is not allowed{hint}; allowed: {ALLOWED_HELP}")
    left, right = _eval(node.left, depth + 1), _eval(node.right, depth + 1)
    if isinstance(node.op, ast.Pow):
        _check_power(left, right)
    if isinstance(node.op, ast.Mult) and isinstance(left, int) and isinstance(right, int):
        if left.bit_length() + right.bit_length() > MAX_INT_BITS:
            raise CalculatorError(f"result too large (over {MAX_INT_BITS} bits)")
    return _check_size(op(left, right))


def _check_power(base: Number, exponent: Number) -> None:
    if abs(exponent) > MAX_EXPONENT:
        raise CalculatorError(f"exponent {exponent} too large (at most {MAX_EXPONENT} in absolute value)")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0:
        if max(base.bit_length() - 1, 0) * exponent > MAX_INT_BITS:
            raise CalculatorError(f"result of {base}**{exponent} too large (over {MAX_INT_BITS} bits)")


def _check_size(value: Number) -> Number:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalculatorError(f"result too large (over {MAX_INT_BITS} bits)")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError("result is not a finite number (overflow)")
    if isinstance(value, complex):
        raise CalculatorError("result is a complex number (e.g. a fractional power of a negative number)")
    return value


def _call(node: ast.Call, depth: int) -> Number:
    if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
        name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
        raise CalculatorError(f"function {name!r} is not allowed; allowed: {', '.join(_FUNCTIONS)}")
    if node.keywords:
        raise CalculatorError(f"{node.func.id}() takes no keyword arguments")
    fn, lo, hi = _FUNCTIONS[node.func.id]
    if not lo <= len(node.args) <= hi:
        raise CalculatorError(f"{node.func.id}() takes {lo}{'' if lo == hi else f' to {hi}'} "
                              f"argument(s), got {len(node.args)}")
    args = [_eval(a, depth + 1) for a in node.args]
    if node.func.id == "round" and len(args) == 2 and not isinstance(args[1], int):
        raise CalculatorError("round(x, n): n must be an integer")
    return _check_size(fn(*args))
