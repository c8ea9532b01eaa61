"""The formulas inside the catalogue's sentences, found and set as LaTeX math: θ_i = base^(−2i/d) → θ_i = base^{−2i/d}.

The terminal writes its formulas in plain text (θ_i = base^(−2i/d), m·θ_i, |i − j| ≤ 2,
(x − mean)/√(var + ε)); the LaTeX write-up must set the same sentences with those formulas in
math mode, subscripts and powers raised, minus signs real. `split` finds them with a small
grammar of what the catalogue writes: single letters (Latin or Greek, with a subscript, a tilde
or a ²), numbers (2i: a number times a letter), a few named functions, brackets and bars, joined by
= + − · × / ^ ≤ ≥ < > and led by − or √. A run counts as a formula only when it has an operator, a
subscript or a Greek letter; words (a token's name, `a_b_c`) stay text.
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple, overload

GREEK = {
    "α": r"\alpha",
    "β": r"\beta",
    "ε": r"\varepsilon",
    "θ": r"\theta",
    "λ": r"\lambda",
    "μ": r"\mu",
    "σ": r"\sigma",
    "Σ": r"\Sigma",
}
FUNCTIONS = {"sin": r"\sin", "cos": r"\cos", "exp": r"\exp", "tanh": r"\tanh", "softmax": r"\operatorname{softmax}"}
NAMES = ("base", "mean", "var", "PE", "Attn", "LN", "RMS", "concat")  # set upright: \mathrm{base}
BINARY = {"=": "=", "+": "+", "−": "-", "·": r"\cdot", "×": r"\times", "/": "/", "≤": r"\le", "≥": r"\ge"}
BINARY |= {"<": "<", ">": ">"}
SUPERSCRIPTS = {"²": "2", "ᵀ": r"\top"}
TILDE = "\u0303"
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?")
_WORD = re.compile(r"[A-Za-z]+")
_SUBSCRIPT = re.compile(r"_([A-Za-z0-9]+)")


class Piece(NamedTuple):
    """A run of a sentence: plain text, or a formula as LaTeX math (without the $)."""

    math: bool
    text: str


def split(sentence: str) -> list[Piece]:
    """`sentence` as runs of text and of math, in order; a formula is read as far as it goes."""
    pieces: list[Piece] = []
    i = 0
    while i < len(sentence):
        found = _Reader(sentence, i).formula() if _starts_word(sentence, i) else None
        if found is None:
            if pieces and not pieces[-1].math:
                pieces[-1] = Piece(False, pieces[-1].text + sentence[i])
            else:
                pieces.append(Piece(False, sentence[i]))
            i += 1
            continue
        end, tex = found
        pieces.append(Piece(True, tex))
        i = end
    return pieces


def _scientific(number: str) -> str:
    """A number as math: 1e-05 as 10^{-5} (in math, 1e-05 would read 1e minus 5), 2.5e+08 as 2.5 \\cdot 10^{8}."""
    mantissa, _, exponent = number.partition("e")
    if not exponent:
        return number
    power = f"10^{{{int(exponent)}}}"
    return power if float(mantissa) == 1 else rf"{mantissa} \cdot {power}"


def _joined(operator: str) -> str:
    """An operator between two terms: 1/\\sqrt{2} as written, a, b and a + b spaced."""
    return {"/": "/", ",": ", "}.get(operator, f" {operator} ")


def _starts_word(sentence: str, i: int) -> bool:
    return i == 0 or not (sentence[i - 1].isalnum() or sentence[i - 1] in "_\\{")


class _Failed(Exception):
    """What the reader raises where the text stops being a formula; the caller falls back on what it had."""


class _Reader:
    """A recursive-descent reader of one formula from position `at`, giving LaTeX."""

    def __init__(self, text: str, at: int) -> None:
        self.text, self.at = text, at
        self.signs = 0  # operators, subscripts, Greek letters and the like: what makes a run a formula

    def formula(self) -> tuple[int, str] | None:
        """(end, LaTeX) of the longest formula from here, or None when what is here is not one."""
        start = self.at
        try:
            tex = self.expression()
        except _Failed:
            return None
        if self.signs == 0 or self.at == start or self._word_goes_on():
            return None
        return self.at, tex

    def _word_goes_on(self) -> bool:
        return self.at < len(self.text) and (self.text[self.at].isalnum() or self.text[self.at] in "_{")

    def peek(self, skip_spaces: bool = False) -> tuple[int, str]:
        at = self.at
        while skip_spaces and at < len(self.text) and self.text[at] == " ":
            at += 1
        return at, self.text[at] if at < len(self.text) else ""

    def expression(self, inside: bool = False) -> str:
        """Terms joined by binary operators; commas too `inside` brackets."""
        out = self.term()
        while True:
            at, char = self.peek(skip_spaces=True)
            operators = {**BINARY, ",": ","} if inside else BINARY
            if char not in operators:
                return out
            saved = self.at, self.signs
            self.at = at + 1
            self.at = self.peek(skip_spaces=True)[0]
            try:
                right = self.term()
            except _Failed:
                self.at, self.signs = saved
                return out
            self.signs += char != ","
            out += _joined(operators[char]) + right

    def term(self) -> str:
        """A prefix (−, √) or a primary, then its powers: x², base^(…)."""
        _, char = self.peek()
        if char == "−":
            self.at += 1
            self.signs += 1
            return "-" + self.term()
        if char == "√":
            self.at += 1
            self.signs += 1
            inner = self.primary(bare=True)
            return rf"\sqrt{{{inner}}}"
        out = self.primary()
        while True:
            _, char = self.peek()
            if char in SUPERSCRIPTS:
                self.at += 1
                self.signs += 1
                out += f"^{{{SUPERSCRIPTS[char]}}}"
            elif char == "^":
                self.at += 1
                self.signs += 1
                out += f"^{{{self.primary(bare=True, signed=True)}}}"
            else:
                return out

    def primary(self, bare: bool = False, signed: bool = False) -> str:
        """A number, a letter, a named function and its brackets, a bracket, or |…|; `bare`: a bracket's content
        without the brackets (under √ or a power); `signed`: a leading − allowed (a power's)."""
        at, char = self.peek()
        if signed and char == "−":
            self.at += 1
            return "-" + self.primary(bare=bare)
        if char == "(":
            self.at += 1
            inner = self.expression(inside=True)
            if self.peek()[1] != ")":
                raise _Failed
            self.at += 1
            return inner if bare else f"({inner})"
        if char == "|":
            self.at += 1
            inner = self.expression()
            if self.peek()[1] != "|":
                raise _Failed
            self.at += 1
            self.signs += 1
            return rf"\lvert {inner} \rvert"
        number = _NUMBER.match(self.text, at)
        if number:
            self.at = number.end()
            letter = self.letter(optional=True)
            return _scientific(number.group(0)) + (letter or "")
        word = _WORD.match(self.text, at)
        if word and len(word.group(0)) > 1:
            name = word.group(0)
            if name not in FUNCTIONS and name not in NAMES:
                raise _Failed
            self.at = word.end()
            tex = FUNCTIONS.get(name) or rf"\mathrm{{{name}}}"
            if self.peek()[1] == "(":
                return tex + self.primary()
            operator_next = self.peek(skip_spaces=True)[1] in BINARY
            return tex + "{}" if name in FUNCTIONS and operator_next else tex  # cos{} − b: a binary minus
        letter = self.letter()
        if self.peek()[1] == "(":  # R(m·θ): a one-letter function
            letter += self.primary()
        return letter

    @overload
    def letter(self, optional: Literal[False] = False) -> str: ...
    @overload
    def letter(self, optional: Literal[True]) -> str | None: ...
    def letter(self, optional: bool = False) -> str | None:
        """One letter, Latin or Greek, with its tilde and subscript (None, when `optional`, where there is none)."""
        at, char = self.peek()
        if not (char.isalpha() and (char.isascii() or char in GREEK)):
            if optional:
                return None
            raise _Failed
        end = at + 1
        if end < len(self.text) and self.text[end].isalpha():
            if optional:
                return None
            raise _Failed  # a word, not a letter
        tex = GREEK.get(char, char)
        self.signs += char in GREEK
        self.at = end
        if self.peek()[1] == TILDE:
            self.at += 1
            self.signs += 1
            tex = rf"\tilde{{{tex}}}"
        subscript = _SUBSCRIPT.match(self.text, self.at)
        if subscript:
            after = subscript.end()
            if after < len(self.text) and (self.text[after].isalnum() or self.text[after] in "_{"):
                raise _Failed  # a_b_c: a name with underscores, not a subscript
            self.at = after
            self.signs += 1
            tex += f"_{{{subscript.group(1)}}}"
        return tex
