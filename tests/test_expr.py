"""The arithmetic a student may write for a number, and everything else it must refuse without running it."""

from __future__ import annotations

import math
import time

import pytest

from attncli import expr
from attncli.errors import AttnError


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("sqrt(2)", math.sqrt(2)),
        ("√2", math.sqrt(2)),
        ("√2/2", math.sqrt(2) / 2),
        ("√(1/2)", math.sqrt(0.5)),
        ("-√2", -math.sqrt(2)),
        ("1/3", 1 / 3),
        ("2^0.5", math.sqrt(2)),
        ("2**0.5", math.sqrt(2)),
        ("2^3^2", 2.0**9),  # right-associative, as in mathematics
        ("-e", -math.e),
        ("e", math.e),
        ("exp(1)", math.e),
        ("log(2)", math.log(2)),
        ("ln(2)", math.log(2)),
        ("pi", math.pi),
        ("π/2", math.pi / 2),
        ("2×3", 6.0),
        ("2·3", 6.0),
        ("6÷4", 1.5),
        ("−1", -1.0),  # the typographic minus sign
        ("abs(-2)", 2.0),
        ("sin(0) + cos(0) + tan(0)", 1.0),
        ("(1 + 2) * 3", 9.0),
        (" 0.5 ", 0.5),
        ("1e-3", 0.001),
        ("2**-2000", 0.0),  # underflow to zero is a number, not an error
    ],
)
def test_arithmetic_is_evaluated_as_floats(text: str, value: float) -> None:
    result = expr.evaluate(text)
    assert isinstance(result, float)
    assert result == pytest.approx(value, rel=1e-15, abs=0)


def error_of(text: str) -> AttnError:
    with pytest.raises(AttnError) as caught:
        expr.evaluate(text)
    return caught.value


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("__import__('os')", "expr.unknown_function"),
        ("__import__('os').system('echo hacked')", "expr.not_allowed"),
        ("().__class__", "expr.not_allowed"),
        ("(1).real", "expr.not_allowed"),
        ("pi.__class__", "expr.not_allowed"),
        ("lambda: 1", "expr.not_allowed"),
        ("[1]", "expr.not_allowed"),
        ("'1'", "expr.not_allowed"),
        ("True", "expr.not_allowed"),
        ("1j", "expr.not_allowed"),
        ("1 if 1 else 2", "expr.not_allowed"),
        ("5 % 2", "expr.not_allowed"),
        ("7 // 2", "expr.not_allowed"),
        ("sqrt(x=2)", "expr.not_allowed"),
        ("foo(1)", "expr.unknown_function"),
        ("eval('1')", "expr.unknown_function"),
        ("sqrt(2, 3)", "expr.arity"),
        ("nan", "expr.unknown_name"),
        ("inf", "expr.unknown_name"),
        ("x", "expr.unknown_name"),
        ("1/0", "expr.division_by_zero"),
        ("0^-1", "expr.division_by_zero"),
        ("sqrt(-1)", "expr.domain"),
        ("log(0)", "expr.domain"),
        ("(-8)^(1/3)", "expr.domain"),
        ("9**9**9", "expr.overflow"),
        ("10^400", "expr.overflow"),
        ("exp(1000)", "expr.overflow"),
        ("", "expr.syntax"),
        ("1 +", "expr.syntax"),
        ("2 3", "expr.syntax"),
        ("x" * 201, "expr.too_long"),
    ],
)
def test_everything_else_is_refused_with_a_reason(text: str, key: str) -> None:
    assert error_of(text).key == key


@pytest.mark.parametrize("text", ["1e999", "1e308 * 10", "-1e308 * 10", "1/(1e308 * 10)", "1e308 * 10 - 1e308 * 10"])
def test_numbers_beyond_the_floats_are_refused(text: str) -> None:
    """A literal or a step past ±1.8e308 is an error, never inf, NaN or a silent 0."""
    assert error_of(text).key in ("expr.overflow", "expr.not_finite")


def test_a_tower_of_powers_fails_fast_instead_of_building_a_huge_integer() -> None:
    start = time.perf_counter()
    assert error_of("9**9**9**9").key == "expr.overflow"
    assert error_of("9^9^9").key == "expr.overflow"
    assert time.perf_counter() - start < 0.5


def test_nothing_is_ever_run(capsys: pytest.CaptureFixture[str]) -> None:
    """A call to a builtin is refused by name before anything is evaluated."""
    error = error_of("print('ran')")
    assert error.key == "expr.unknown_function"
    assert error.params["name"] == "print"
    assert capsys.readouterr().out == ""


def test_the_length_limit_is_exact() -> None:
    at_limit = "1" + "+0" * ((expr.MAX_LENGTH - 1) // 2)
    assert len(at_limit) <= expr.MAX_LENGTH
    assert expr.evaluate(at_limit) == 1.0
    assert error_of("1" * (expr.MAX_LENGTH + 1)).params == {"limit": expr.MAX_LENGTH}


def test_messages_quote_what_was_written() -> None:
    """The user sees their own spelling (^, √), not the Python it was rewritten to."""
    assert error_of("9^9^9").params["text"] == "9^9^9"
    assert error_of("√2 +").params["text"] == "√2 +"


def test_roots_nest() -> None:
    assert expr.evaluate("√√16") == 2.0
    assert expr.evaluate("√(1+3)") == 2.0
