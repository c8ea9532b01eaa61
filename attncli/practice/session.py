"""A tutor session as a pure state machine: a problem becomes a sequence of prompts, each answer a feedback record.

The steps `attncli check` grades (q·k, the scores, the weights, the output, ...) are judged
by `grading.grade` itself, on the answers as first given (what `--record` writes) with the
prompt's cells as now answered: a first try gets exactly the verdict and the diagnosis that
`check` gives the recorded file, cell by cell, and a slip costs one step, since `check`
follows the student's own earlier numbers. The steps in between that `check` never sees
(the scale, each e^s, their sum, each weight × value) are judged by the same rule: half a
unit of the last decimal written, widened by what the rounding of the student's own inputs
carries in. No I/O: the front-ends (attncli.cli.practice) read lines and print the records.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from attncli import grading
from attncli.core import HeadSteps, Steps
from attncli.errors import AttnError, fail
from attncli.grading import mistakes
from attncli.grading.rule import Rule
from attncli.i18n import current_language
from attncli.parsing.answers import Answer, Answers, Entry, Settings, decimals
from attncli.practice import backward, tiles
from attncli.steps import ANSWERED, TILE_STEPS, TUTORED, computed, labels, matrix, order
from attncli.written import Terms, arithmetic, arithmetic_text, entry, fixed, sum_of_products
from attncli.yamldoc import finite_number

LEVELS = (1, 2, 3)  # 1: every product of a weight and a value too; 2: cell by cell; 3: whole rows
LEVEL = 2
DECIMALS = 4  # how a shown answer is written, as in `generate --answers`
COMMANDS = {
    "hint": "hint",
    "pista": "hint",
    "show": "show",
    "mostrar": "show",
    "solución": "show",
    "solucion": "show",
    "skip": "skip",
    "saltar": "skip",
    "": "skip",
    "back": "back",
    "atrás": "back",
    "atras": "back",
    "quit": "quit",
    "exit": "quit",
    "salir": "quit",
    "help": "help",
    "ayuda": "help",
    "?": "help",
}
HINTS = 2  # the formula, then the numbers to combine
# What a feedback record says happened
RIGHT, CARRIED, WRONG, SHOWN, SKIPPED = "right", "carried", "wrong", "shown", "skipped"
HINT, HELP, BACK, QUIT, INVALID, NO_BACK = "hint", "help", "back", "quit", "invalid", "no_back"
# How each prompt ended, for the summary
FIRST, SECOND = "first", "second"
_DECIMAL_COMMA = re.compile(r"([+-]?\d+),(\d+)")
_SPANISH_SEPARATOR = re.compile(r"(?<!\d),|,(?!\d)")


@dataclass(frozen=True)
class Prompt:
    """One thing to compute: a step, for one head and one row, over some cells."""

    step: str  # one of attncli.steps.TUTORED
    head: int | None  # None for concat and final
    row: int  # the query; the token for keys and values; 0 for the scale
    columns: tuple[int, ...]  # keys (dot, scores, exp, weights) or coordinates; () for the scale and the sum
    key: int | None = None  # product: the key whose weight × value is asked

    @property
    def size(self) -> int:
        """How many numbers the answer has."""
        return max(len(self.columns), 1)


@dataclass(frozen=True)
class Feedback:
    """What the tutor says to one line the student typed."""

    kind: str  # RIGHT, CARRIED, WRONG, SHOWN, SKIPPED, HINT, HELP, BACK, NO_BACK, QUIT, INVALID
    prompt: Prompt
    codes: tuple[str, ...] = ()  # the classic mistakes that reproduce a wrong answer
    wrong: tuple[int, ...] = ()  # which of the prompt's numbers are wrong
    retry: bool = False  # WRONG: a second try follows
    answer: str = ""  # SHOWN, and WRONG without a retry: the right answer as written; CARRIED: the exact value
    working: str = ""  # the arithmetic written out (SHOWN), the numbers to combine (HINT)
    hint: int = 0  # HINT: 1 the formula, 2 the numbers, 3 no more hints
    error: AttnError | None = None  # INVALID: what is wrong with the line


@dataclass(frozen=True)
class Summary:
    """The end of a session: how each kind of step went, the mistakes, the time."""

    rows: tuple[tuple[str, dict[str, int]], ...]  # step -> count per outcome (FIRST, SECOND, SHOWN, SKIPPED, "")
    mistakes: tuple[tuple[str, int], ...]  # diagnosis code -> how many wrong tries it explained
    unexplained: int  # wrong tries no classic mistake reproduces
    seconds: float
    prompts: int
    right: int  # prompts right, on the first or the second try

    @property
    def ok(self) -> bool:
        """Every step was eventually right."""
        return self.right == self.prompts


@dataclass
class _State:
    """What the session knows of one prompt."""

    first: tuple[Entry, ...] | None = None  # the answer as first given: what --record writes
    outcome: str = ""  # FIRST, SECOND, SHOWN, SKIPPED; "" while not settled
    tries: int = 0  # wrong tries in this visit
    hints: int = 0
    kept: tuple[Entry, ...] | None = None  # the numbers the student carries on with: theirs once right, else shown


def prompts(steps: Steps, level: int = LEVEL) -> tuple[Prompt, ...]:
    """Every prompt of a session at `level`, in the order a student works: each head query by query, then W_O."""
    problem = steps.problem
    found: list[Prompt] = []
    whole = level >= 3
    for h, head in enumerate(steps.heads):
        for name in ("queries", "keys", "values"):  # the projections, when the problem gives x and W
            vectors = matrix(steps, name, h) if computed(steps, name, h) else None
            if vectors is not None:
                found += [Prompt(name, h, i, tuple(range(vectors.shape[1]))) for i in range(vectors.shape[0])]
        for i in range(len(problem.query_tokens)):
            keys = tuple(j for j in range(len(problem.tokens)) if problem.mask[i, j])
            if head.queries is not None:
                found += _each("dot", h, i, keys, whole)
                if i == 0 and _scaled(head):
                    found.append(Prompt("scale", h, 0, ()))
            if _asks_scores(head):
                found += _each("scores", h, i, keys, whole)
            found += [*_each("exp", h, i, keys, whole), Prompt("sum", h, i, ())]
            found += _each("weights", h, i, keys, whole)
            if level == 1:
                found += [Prompt("product", h, i, tuple(range(head.values.shape[1])), j) for j in keys]
            width = tuple(range(head.output.shape[1]))
            found += [Prompt("output", h, i, width)] if whole else [Prompt("output", h, i, (c,)) for c in width]
            found += [Prompt(step, h, row, columns) for step, row, columns in tiles.cells(head, i)]  # `tiles:`
    if steps.concat is not None:
        for i in range(len(problem.query_tokens)):
            if len(steps.heads) > 1:
                found.append(Prompt("concat", None, i, tuple(range(steps.concat.shape[1]))))
            width = tuple(range(steps.output.shape[1]))
            found += [Prompt("final", None, i, width)] if whole else [Prompt("final", None, i, (c,)) for c in width]
    return (*found, *(Prompt(*spec) for spec in backward.prompts(steps)))  # the gradients, after the forward


def _each(step: str, h: int, i: int, keys: tuple[int, ...], whole: bool) -> list[Prompt]:
    """One prompt per key, or one for the whole row."""
    return [Prompt(step, h, i, keys)] if whole else [Prompt(step, h, i, (j,)) for j in keys]


def _scaled(head: HeadSteps) -> bool:
    """Whether the head multiplies q·k by a factor the student must find (1/√d_k)."""
    return head.queries is not None and not math.isclose(head.spec.score.scale, 1.0)


def _asks_scores(head: HeadSteps) -> bool:
    """Whether the scores differ from what came before: scaled, or a bias added."""
    return _scaled(head) or head.bias is not None


def parse(text: str, count: int) -> tuple[Entry, ...]:
    """The `count` numbers of one answer line: plain numbers keep their decimals, expressions are exact.

    Numbers are separated by commas or semicolons. In Spanish a comma between digits is a decimal
    comma (0,6652) unless the line has decimal points or only splitting there gives `count`
    numbers; `;` and `, ` always separate. Without commas, spaces may separate numbers too.
    """
    language = current_language()
    if ";" in text:
        parts = text.split(";")
    elif language != "es" or "." in text:
        parts = text.split(",")
    else:
        parts = _SPANISH_SEPARATOR.split(text)
        if len(parts) != count and len(text.split(",")) == count:
            parts = text.split(",")
    parts = [part.strip() for part in parts]
    if len(parts) == 1 and count > 1 and len(text.split()) == count:
        parts = text.split()
    if len(parts) != count and _DECIMAL_COMMA.fullmatch(text.strip()):
        _entry(text.strip(), language)  # one number written with a decimal comma: say so
    if len(parts) != count or not all(parts):
        raise fail("practice.count", count=count, got=len([p for p in parts if p]))
    return tuple(_entry(part, language) for part in parts)


def _entry(text: str, language: str) -> Entry:
    comma = _DECIMAL_COMMA.fullmatch(text)
    if comma is not None:
        point = f"{comma[1]}.{comma[2]}"
        if language != "es":
            raise fail("check.decimal_comma", text=text, point=point)
        text = point
    return Entry(text, finite_number(text), decimals(text))


def written(value: float) -> str:
    """A right answer as shown: whole numbers exact, the rest with DECIMALS decimals (as `generate --answers`)."""
    if math.isclose(value, round(value), rel_tol=1e-12, abs_tol=1e-13):
        return str(round(value))
    return fixed(value, DECIMALS)


class Session:
    """One student working one problem: `current` is the prompt to answer, `respond` takes each line typed."""

    def __init__(
        self,
        steps: Steps,
        level: int = LEVEL,
        settings: Settings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`settings`: the problem file's own tolerance:, carry: and min_decimals:, which check would use too."""
        self.steps = steps
        self.settings = settings or Settings()
        self.rule = Rule.chosen(None, None, None, self.settings)  # check's rule, with the file's settings
        self.level = level
        self.prompts = prompts(steps, level)
        self.states = [_State() for _ in self.prompts]
        self.index = 0
        self.codes: Counter[str] = Counter()
        self.unexplained = 0
        self.clock = clock
        self.started = clock()
        self.ended: float | None = None

    @property
    def current(self) -> Prompt | None:
        """The prompt waiting for an answer; None once the session is over."""
        return self.prompts[self.index] if self.index < len(self.prompts) and self.ended is None else None

    @property
    def done(self) -> bool:
        return self.current is None

    def respond(self, text: str) -> Feedback:
        """The feedback to one line typed at the current prompt: a command, or an answer."""
        prompt = self.current
        if prompt is None:
            raise ValueError("the session is over")
        word = text.strip()
        command = COMMANDS.get(word.lower())
        if command is not None:
            return getattr(self, f"_{command}")(prompt)
        try:
            given = parse(word, prompt.size)
        except AttnError as error:
            return Feedback(INVALID, prompt, error=error)
        return self._answer(prompt, given)

    def stop(self) -> None:
        """End the session now (quit, Ctrl-C, the end of the input): the summary covers what was done."""
        if self.ended is None:
            self.ended = self.clock()

    # Commands

    def _hint(self, prompt: Prompt) -> Feedback:
        state = self.states[self.index]
        state.hints += 1
        level = min(state.hints, HINTS + 1)
        return Feedback(HINT, prompt, hint=level, working=self.working(prompt) if level == HINTS else "")

    def _show(self, prompt: Prompt) -> Feedback:
        return self._settle(prompt, SHOWN)

    def _skip(self, prompt: Prompt) -> Feedback:
        return self._settle(prompt, SKIPPED)

    def _back(self, prompt: Prompt) -> Feedback:
        if self.index == 0:
            return Feedback(NO_BACK, prompt)
        self.index -= 1
        self.states[self.index].tries = 0
        return Feedback(BACK, self.prompts[self.index])

    def _quit(self, prompt: Prompt) -> Feedback:
        self.stop()
        return Feedback(QUIT, prompt)

    def _help(self, prompt: Prompt) -> Feedback:
        return Feedback(HELP, prompt)

    # Answers

    def _answer(self, prompt: Prompt, given: tuple[Entry, ...]) -> Feedback:
        state = self.states[self.index]
        if state.first is None:
            state.first = given
        kind, codes, wrong = self.judge(prompt, given)
        if kind in (RIGHT, CARRIED):
            state.kept = given
            state.outcome = state.outcome or (FIRST if state.tries == 0 else SECOND)
            state.tries = 0
            self.index += 1
            exact = ", ".join(written(v) for v in self.truth(prompt)) if kind == CARRIED else ""
            return Feedback(kind, prompt, answer=exact)
        state.tries += 1
        self.codes.update(codes)
        self.unexplained += not codes
        if state.tries < 2:
            return Feedback(WRONG, prompt, codes, wrong, retry=True)
        settled = self._settle(prompt, SHOWN)
        return Feedback(WRONG, prompt, codes, wrong, answer=settled.answer, working=settled.working)

    def _settle(self, prompt: Prompt, outcome: str) -> Feedback:
        """Give the right answer and move on with it: the student carries the shown numbers."""
        state = self.states[self.index]
        values = self.truth(prompt)
        state.kept = tuple(Entry(written(v), float(written(v)), decimals(written(v))) for v in values)
        state.outcome = state.outcome or outcome
        state.tries = 0
        self.index += 1
        return Feedback(outcome, prompt, answer=", ".join(written(v) for v in values), working=self.working(prompt))

    def judge(self, prompt: Prompt, given: tuple[Entry, ...]) -> tuple[str, tuple[str, ...], tuple[int, ...]]:
        """RIGHT, CARRIED or WRONG, the codes of the classic mistakes that reproduce the answer, the wrong cells."""
        if prompt.step in ANSWERED or backward.is_backward(prompt.step):
            return self._graded(prompt, given)
        expected = self._expected(prompt)
        truth = self.truth(prompt)
        wrong = tuple(
            k
            for k, (e, (value, radius)) in enumerate(zip(given, expected))
            if not self.rule.agrees(e, value, radius) and not self.rule.agrees(e, truth[k], 0.0)
        )
        if not wrong:
            return RIGHT, (), ()
        codes = tuple(
            code
            for code, values in self._slips(prompt)
            if all(self.rule.agrees(e, v, r) for e, (v, r) in zip(given, values))
        )
        return WRONG, tuple(dict.fromkeys(codes)), wrong

    def _graded(self, prompt: Prompt, given: tuple[Entry, ...]) -> tuple[str, tuple[str, ...], tuple[int, ...]]:
        """The verdict `check` gives these cells, in a file holding every other step as first given."""
        report = grading.grade(self.steps, self.answers(prompt, given), diagnose={(prompt.step, prompt.head)})
        step = next(s for s in report.steps if (s.step, s.head) == (prompt.step, prompt.head))
        cells = {(c.row, c.column): c for c in step.cells}
        statuses = [cells[position].status for position in _positions(prompt)]
        wrong = tuple(k for k, status in enumerate(statuses) if status not in (grading.RIGHT, grading.CARRIED))
        if wrong:
            return WRONG, step.diagnosis, wrong
        if step.status == grading.WRONG:  # right only from inputs rounded too early
            return WRONG, step.diagnosis, tuple(k for k, s in enumerate(statuses) if s == grading.CARRIED)
        return (CARRIED if step.status == grading.CARRIED else RIGHT), (), ()

    def answers(self, prompt: Prompt | None = None, given: tuple[Entry, ...] = ()) -> Answers:
        """The answers as first given, as `check` reads them from the record; `prompt`'s step holds `given` alone."""
        cells: dict[tuple[str, int | None], list[list[Entry | None]]] = {}
        for other, state in zip(self.prompts, self.states):
            if other.step not in ANSWERED and not backward.is_backward(other.step):
                continue
            if prompt is not None and (other.step, other.head) == (prompt.step, prompt.head):
                continue
            if state.first is not None:
                self._fill(cells, other, state.first)
        if prompt is not None:
            self._fill(cells, prompt, given)
        found, gradients = (
            tuple(
                Answer(step, head, *self._labels(step, head), tuple(tuple(row) for row in cells[(step, head)]))
                for step, head in keys
                if (step, head) in cells
            )
            for keys in (order(self.steps), backward.grading_backward.asked(self.steps))
        )
        s = self.settings
        return Answers(found, s.tolerance, s.carry, s.min_decimals, backward=gradients)

    def _fill(self, cells: dict, prompt: Prompt, given: tuple[Entry, ...]) -> None:
        key = (prompt.step, prompt.head)
        if key not in cells:
            rows, columns = self._labels(*key)
            cells[key] = [[None] * len(columns) for _ in rows]
        for (i, j), entry_ in zip(_positions(prompt), given):
            cells[key][i][j] = entry_

    def _labels(self, step: str, head: int | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The rows and columns of a graded step, as attncli.parsing.answers gives them."""
        return labels(self.steps.problem, step, *self._matrix(step, head).shape[::-1])

    def _matrix(self, step: str, head: int | None) -> np.ndarray:
        """The true matrix of a step that has one (each cell a prompt's cell)."""
        found = matrix(self.steps, step, head)
        assert found is not None, step
        return found

    def _head(self, h: int | None) -> HeadSteps:
        """Head `h` of a prompt that belongs to one (every step but concat and final)."""
        assert h is not None, "concat and final belong to no head"
        return self.steps.heads[h]

    def truth(self, prompt: Prompt) -> tuple[float, ...]:
        """The right numbers of a prompt."""
        if prompt.step == "scale":
            return (self._head(prompt.head).spec.score.scale,)
        if prompt.step == "sum":
            return (float(self._head(prompt.head).exp[prompt.row].sum()),)
        if prompt.step == "product":
            head, key = self._head(prompt.head), _key(prompt)
            weight = head.weights[prompt.row, key]
            return tuple(float(weight * head.values[key, c]) for c in prompt.columns)
        matrix = self._matrix(prompt.step, prompt.head)
        return tuple(float(matrix[i, j]) for i, j in _positions(prompt))

    # The student's own numbers, for the steps check does not grade and for the hints

    def kept(self, step: str, head: int | None, row: int, column: int) -> tuple[float, float]:
        """The number the student carries for one cell, and how far it may stand from theirs (as check's rule)."""
        for prompt, state in zip(self.prompts, self.states):
            here = (prompt.step, prompt.head, prompt.row) == (step, head, row) and state.kept is not None
            if here and state.kept is not None and (column in prompt.columns or (not prompt.columns and column == 0)):
                e = state.kept[prompt.columns.index(column) if prompt.columns else 0]
                assert e.value is not None, "the tutor reads numbers only"
                return e.value, self.rule.kept(e)
        if step == "scores" and not _asks_scores(self._head(head)):  # unscaled: the scores are q·k (or given)
            return (
                self.kept("dot", head, row, column)
                if self._head(head).queries is not None
                else (
                    float(self._head(head).scores[row, column]),
                    0.0,
                )
            )
        if step == "scale":
            return self._head(head).spec.score.scale, 0.0
        return float(self._matrix(step, head)[row, column]), 0.0  # not asked (given in the problem)

    def _expected(self, prompt: Prompt) -> list[tuple[float, float]]:
        """What each number of a step check does not grade comes to from the student's own numbers, and its widening."""
        h, i = prompt.head, prompt.row
        head = self._head(h)
        if prompt.step == "scale":
            return [(head.spec.score.scale, 0.0)]
        if prompt.step == "exp":
            return [_exp(*self.kept("scores", h, i, j), float(head.shift[i])) for j in prompt.columns]
        if prompt.step == "sum":
            parts = [self.kept("exp", h, i, j) for j in self._keys(i)]
            return [(sum(v for v, _ in parts), sum(r for _, r in parts))]
        w, rw = self.kept("weights", h, i, _key(prompt))
        values = [self.kept("values", h, _key(prompt), c) for c in prompt.columns]
        return [(w * v, rw * abs(v) + abs(w) * rv + rw * rv) for v, rv in values]

    def _slips(self, prompt: Prompt) -> list[tuple[str, list[tuple[float, float]]]]:
        """The classic mistakes of the steps check does not grade, each with the numbers it gives."""
        h, i = prompt.head, prompt.row
        head = self._head(h)
        if prompt.step == "scale":  # grading's wrong scales: 1/d_k, √d_k, and 1/√d_v, 1/√S where they are not 1/√d_k
            d_k, d_v, tokens = head.k.shape[1], head.values.shape[1], len(self.steps.problem.tokens)
            wrong = mistakes.wrong_scales(head, self.steps.problem)
            factors = [("missing_scale", 1.0), ("wrong_scale", wrong["d_k"]), ("wrong_scale", wrong["times_sqrt_d_k"])]
            factors += [
                ("wrong_scale", wrong[name]) for name, n in (("sqrt_d_v", d_v), ("sqrt_keys", tokens)) if n != d_k
            ]
            return [(code, [(value, 0.0)]) for code, value in factors if not math.isclose(value, head.spec.score.scale)]
        if prompt.step == "exp":
            slips = [("no_exp", [self.kept("scores", h, i, j) for j in prompt.columns])]
            if _scaled(head):
                slips.append(("missing_scale", [_exp(*self.kept("dot", h, i, j), 0.0) for j in prompt.columns]))
            return slips
        if prompt.step == "sum":
            parts = [self.kept("scores", h, i, j) for j in self._keys(i)]
            return [("no_exp", [(sum(v for v, _ in parts), sum(r for _, r in parts))])]
        w, rw = self.kept("weights", h, i, _key(prompt))
        slips = []
        if head.keys is not None and head.keys.shape[1] == head.values.shape[1]:
            keys = [float(head.keys[_key(prompt), c]) for c in prompt.columns]
            slips.append(("keys_as_values", [(w * k, rw * abs(k)) for k in keys]))
        for other in self._keys(i):
            if other != prompt.key:
                values = [self.kept("values", h, other, c) for c in prompt.columns]
                slips.append(("wrong_row", [(w * v, rw * abs(v) + abs(w) * rv + rw * rv) for v, rv in values]))
        return slips

    def _keys(self, row: int) -> list[int]:
        return [j for j in range(len(self.steps.problem.tokens)) if self.steps.problem.mask[row, j]]

    def working(self, prompt: Prompt) -> str:
        """The numbers to combine for each of the prompt's cells, from the student's own numbers, "; " between."""
        if prompt.step in TILE_STEPS:  # the online softmax's, from the record's numbers (attncli.practice.tiles)
            return tiles.working(self._head(prompt.head), prompt.step, prompt.row, prompt.columns)
        return "; ".join(self._working(prompt, column) for column in (prompt.columns or (0,)))

    def _working(self, prompt: Prompt, column: int) -> str:
        h, i, step = prompt.head, prompt.row, prompt.step
        p = DECIMALS
        if backward.is_backward(step):
            return backward.working(self.steps, (step, h), i, column, lambda *cell: self.kept(*cell)[0])

        def num(value: float) -> str:
            return entry(value, p)

        if step == "dot":
            written_out = arithmetic(self._head(h), i, column)
            if isinstance(written_out, Terms):
                return arithmetic_text(written_out, p).rpartition(" = ")[0]
            head = self._head(h)
            return f"q = {vector(head.q[i])}, k = {vector(head.k[column])}"
        if step == "scale":
            return f"1/√{self._head(h).k.shape[1]}"
        if step == "scores":
            dot = num(self.kept("dot", h, i, column)[0])
            head = self._head(h)
            scaled = f"{dot} × {num(self.kept('scale', h, 0, 0)[0])}" if _scaled(head) else dot
            return scaled if head.bias is None else f"{scaled} + ({num(float(head.bias[i, column]))})"
        if step == "exp":
            shift = float(self._head(h).shift[i])
            score = num(self.kept("scores", h, i, column)[0])
            return f"e^{score}" if shift == 0 else f"e^({score} − {num(shift)})"
        if step == "sum":
            return " + ".join(num(self.kept("exp", h, i, j)[0]) for j in self._keys(i))
        if step == "weights":
            total = self.kept("sum", h, i, 0)[0]  # the sum of e^s as the student has it (theirs when they gave it)
            return f"{num(self.kept('exp', h, i, column)[0])} / {num(total)}"
        if step == "product":
            values = [self.kept("values", h, _key(prompt), c)[0] for c in range(self._head(h).values.shape[1])]
            return f"{num(self.kept('weights', h, i, _key(prompt))[0])} × {vector(values)}"
        if step == "output":
            terms = [(self.kept("weights", h, i, j)[0], self.kept("values", h, j, column)[0]) for j in self._keys(i)]
            return sum_of_products((num(w), num(v)) for w, v in terms)
        if step in ("queries", "keys", "values"):
            operand = getattr(self._head(h).spec, step)
            return sum_of_products((num(a), num(b)) for a, b in zip(operand.x[i], operand.w[:, column]))
        if step == "concat":
            parts = [
                vector([self.kept("output", o, i, c)[0] for c in range(head.output.shape[1])])
                for o, head in enumerate(self.steps.heads)
            ]
            return " ‖ ".join(parts)
        concat = self._concat(i)
        w_o = self.steps.problem.w_o
        if w_o is None:  # several heads without W_O: the final output is the concatenation, its numbers copied
            return num(concat[column])
        return sum_of_products((num(a), num(b)) for a, b in zip(concat, w_o[:, column]))

    def _concat(self, i: int) -> list[float]:
        if len(self.steps.heads) > 1:
            return [self.kept("concat", None, i, c)[0] for c in range(self._matrix("concat", None).shape[1])]
        return [self.kept("output", 0, i, c)[0] for c in range(self.steps.heads[0].output.shape[1])]

    def summary(self) -> Summary:
        """How the session went so far."""
        rows: dict[str, dict[str, int]] = {}
        for prompt, state in zip(self.prompts, self.states):
            counts = rows.setdefault(prompt.step, Counter())
            counts[state.outcome] += 1
        right = sum(state.outcome in (FIRST, SECOND) for state in self.states)
        seconds = (self.ended if self.ended is not None else self.clock()) - self.started
        kinds = [step for step in (*TUTORED, *backward.names(self.steps)) if step in rows]
        codes = tuple(sorted(self.codes.items(), key=lambda item: (-item[1], backward.rank(item[0]))))
        return Summary(
            tuple((step, dict(rows[step])) for step in kinds),
            codes,
            self.unexplained,
            seconds,
            len(self.prompts),
            right,
        )


def _key(prompt: Prompt) -> int:
    """The key of a product prompt: whose weight × value it asks."""
    assert prompt.key is not None, "only a product prompt names a key"
    return prompt.key


def _positions(prompt: Prompt) -> list[tuple[int, int]]:
    """The cells of a graded step a prompt asks for: (row, column)."""
    return [(prompt.row, c) for c in prompt.columns]


def _exp(score: float, radius: float, shift: float) -> tuple[float, float]:
    """e^(s − shift) and how far it can move when s moves by `radius` (e^s is convex: the upper end is the farthest)."""
    value = math.exp(score - shift)
    return value, math.exp(score - shift + radius) - value


def vector(values: Iterable[float]) -> str:
    """A row as the tutor writes it: [1.4142, 0]."""
    return "[" + ", ".join(entry(float(v), DECIMALS) for v in values) + "]"
