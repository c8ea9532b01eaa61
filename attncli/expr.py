"""A small, safe evaluator for the arithmetic a student writes: `sqrt(2)/2`, `√2`, `2^0.5`, `-e`.

The text is parsed with `ast` and only numbers, + - * / **, unary signs,
parentheses, a few functions and the constants pi and e are accepted. Everything
is computed in floats, so `9**9**9` overflows at once instead of building a huge
integer. Nothing is ever passed to `eval`.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable

from attncli.errors import fail

MAX_LENGTH = 200

FUNCTIONS: dict[str, Callable[[float], float]] = {
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "ln": math.log,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "abs": abs,
}
CONSTANTS = {"pi": math.pi, "e": math.e}

_SYMBOLS = str.maketrans({"×": "*", "·": "*", "÷": "/", "−": "-", "^": "**", "π": "pi"})
_ROOT = re.compile(r"√\s*([0-9.]+(?:[eE][+-]?[0-9]+)?|[A-Za-z_]\w*)")


def evaluate(text: str) -> float:
    """The finite float value of `text`, or an AttnError that says what is wrong with it."""
    if len(text) > MAX_LENGTH:
        raise fail("expr.too_long", limit=MAX_LENGTH)
    source = _ROOT.sub(r"sqrt(\1)", text.translate(_SYMBOLS)).replace("√", "sqrt")
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except (SyntaxError, ValueError):
        raise fail("expr.syntax", text=text) from None
    try:
        value = _value(tree.body)
    except OverflowError:
        raise fail("expr.overflow", text=text) from None
    except ZeroDivisionError:
        raise fail("expr.division_by_zero", text=text) from None
    except ValueError:
        raise fail("expr.domain", text=text) from None
    if not math.isfinite(value):
        raise fail("expr.not_finite", text=text)
    return value


def _value(node: ast.expr) -> float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _value(node.operand)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_value(node.left), _value(node.right))
    if isinstance(node, ast.Name):
        if node.id not in CONSTANTS:
            raise fail("expr.unknown_name", name=node.id)
        return CONSTANTS[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        name = node.func.id
        if name not in FUNCTIONS:
            raise fail("expr.unknown_function", name=name, known=", ".join(FUNCTIONS))
        if len(node.args) != 1:
            raise fail("expr.arity", name=name)
        return float(FUNCTIONS[name](_value(node.args[0])))
    raise fail("expr.not_allowed", part=ast.unparse(node)[:40])


def _power(base: float, exponent: float) -> float:
    result = base**exponent
    if isinstance(result, complex):
        raise ValueError("negative base with a fractional exponent")
    return result


_OPERATORS: dict[type, Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: _power,
}
