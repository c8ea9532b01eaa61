"""A small, safe evaluator for the arithmetic a student writes: `sqrt(2)/2`, `√2`, `2^0.5`, `-e`.

The text is parsed with `ast` and only numbers, + - * / **, unary signs, √,
parentheses, a few functions and the constants pi and e are accepted. Everything
is computed in floats, so `9**9**9` overflows at once instead of building a huge
integer, and any step that leaves the floats' range is an overflow (so
`1/(1e308*10)` is not silently 0). Nothing is ever passed to `eval`.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable

from attncli.errors import fail

MAX_LENGTH = 200
QUOTE_LENGTH = 40  # longer input is shortened when a message repeats it
WHOLE_DIGITS = 18  # a whole number written with more digits is beyond every count, size and seed attncli takes

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

# √ becomes Python's unused prefix operator ~, so `√2`, `√(1+3)` and `√√16` parse as roots.
_SYMBOLS = str.maketrans({"×": "*", "·": "*", "÷": "/", "−": "-", "^": "**", "π": "pi", "√": "~"})


def evaluate(text: str) -> float:
    """The finite float value of `text`, or an AttnError that says what is wrong with it."""
    if len(text) > MAX_LENGTH:
        raise fail("expr.too_long", limit=MAX_LENGTH)
    if "~" in text:
        raise fail("expr.not_allowed", part="~")
    try:
        tree = ast.parse(text.translate(_SYMBOLS).strip(), mode="eval")
    except (SyntaxError, ValueError):
        raise fail("expr.syntax", text=quote(text)) from None
    try:
        return _value(tree.body)
    except OverflowError:
        raise fail("expr.overflow", text=quote(text)) from None
    except ZeroDivisionError:
        raise fail("expr.division_by_zero", text=quote(text)) from None
    except ValueError:
        raise fail("expr.domain", text=quote(text)) from None


def whole_number(text: str) -> int | None:
    """The whole number `text` writes in decimal digits (spaces around allowed), or None if it writes none.

    Every integer attncli reads from text goes through here: str.isdigit() also passes ², which
    int() refuses, and int() refuses more than 4,300 digits. Decimal digits of any script count,
    as they do for int() and for the integer options (٤ is 4); more than WHOLE_DIGITS of them is
    no whole number attncli takes.
    """
    text = text.strip()
    if not text or len(text) > WHOLE_DIGITS or not text.isdecimal():
        return None
    return int(text)


def quote(text: object, length: int = QUOTE_LENGTH) -> str:
    """`text` short enough to repeat in a one-line message: at most `length` characters."""
    text = str(text)
    return text if len(text) <= length else text[: length - 3] + "..."


def _value(node: ast.expr) -> float:
    """The value of `node`; every step is checked, since inf - inf or 1/inf would hide an overflow."""
    value = _step(node)
    if not math.isfinite(value):
        raise OverflowError
    return value


def _step(node: ast.expr) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)):
        operand = _value(node.operand)
        if isinstance(node.op, ast.Invert):  # √, see _SYMBOLS
            return math.sqrt(operand)
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
    raise fail("expr.not_allowed", part=quote(ast.unparse(node).replace("~", "√")))


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
