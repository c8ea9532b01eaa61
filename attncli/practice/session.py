"""A tutor session as a pure state machine: a problem becomes a sequence of prompts, each answer a feedback record.

The prompts come from attncli.practice.plan, a list built per problem. Each answer is judged on the
student's own numbers: once accepted, a number is the one carried into every later step, its
judgement and its worked answer (attncli.practice.own). The steps `attncli check` grades are
judged by the grading wing itself, on the answers as first given (what `--record` writes) with the
prompt's cells as now answered (attncli.practice.judge): a first try gets the verdict and the
diagnosis `check` gives the recorded file, cell by cell; where the student carries a number
`check` cannot see (the scale they wrote, an answer shown to them) off the truth, a step right from
it is carried. The steps `check` does not grade are judged by the same rule: half a unit of the
last decimal written, widened by what the student's own numbers carry in. A wrong answer is named
by `check`'s replays and the tutor's own step-level slips (attncli.practice.slips). No I/O: the
front-ends (attncli.cli.practice) read lines and print the records; every line that moves the
session is kept (`lines`), so that replaying them (`--resume`) rebuilds it.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from attncli.errors import AttnError, fail
from attncli.grading.rule import Rule
from attncli.i18n import current_language
from attncli.parsing.answers import Entry, Settings, decimals
from attncli.practice import backward, judge, plan, tiles
from attncli.practice.judge import Grader, Place, Recorded, field_of
from attncli.practice.own import Own, Ref, cells, part_of
from attncli.practice.plan import LEVEL, LEVELS, STEPS, Prompt, Solved
from attncli.practice.slips import slips
from attncli.practice.working import DECIMALS, working
from attncli.steps import TILE_STEPS
from attncli.written import fixed
from attncli.yamldoc import finite_number

__all__ = ["LEVEL", "LEVELS", "Prompt", "Session"]
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
UNKEPT = (INVALID, HELP, QUIT, NO_BACK)  # lines that leave the session as it was: not kept for --resume
# How each prompt ended, for the summary
FIRST, SECOND = "first", "second"
_DECIMAL_COMMA = re.compile(r"([+-]?\d+),(\d+)")
_SPANISH_SEPARATOR = re.compile(r"(?<!\d),|,(?!\d)")


@dataclass(frozen=True)
class Feedback:
    """What the tutor says to one line the student typed."""

    kind: str  # RIGHT, CARRIED, WRONG, SHOWN, SKIPPED, HINT, HELP, BACK, NO_BACK, QUIT, INVALID
    prompt: Prompt
    codes: tuple[str, ...] = ()  # the classic mistakes that reproduce a wrong answer
    wrong: tuple[int, ...] = ()  # which of the prompt's numbers are wrong
    retry: bool = False  # WRONG: a second try follows
    answer: str = ""  # SHOWN, SKIPPED, and WRONG without a retry: the answer as written; CARRIED: the exact value
    working: str = ""  # the arithmetic written out (SHOWN), the numbers to combine (HINT)
    hint: int = 0  # HINT: 1 the formula, 2 the numbers, 3 no more hints
    error: AttnError | None = None  # INVALID: what is wrong with the line
    says: tuple[str, ...] = ()  # per code: the tutor's words for it (a catalogue key), "" for check's own


@dataclass(frozen=True)
class Summary:
    """The end of a session: how each kind of step went, the mistakes, the time."""

    rows: tuple[tuple[str, dict[str, int]], ...]  # step -> count per outcome (FIRST, SECOND, SHOWN, SKIPPED, "")
    mistakes: tuple[tuple[str, int], ...]  # diagnosis code -> how many wrong tries it explained
    unexplained: int  # wrong tries no classic mistake reproduces
    seconds: float
    prompts: int
    right: int  # prompts right, on the first or the second try
    says: tuple[tuple[str, str], ...] = ()  # code -> the tutor's words for it, where the tutor named it in its own

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
    """A number as shown: whole numbers exact, the rest with DECIMALS decimals (as `generate --answers`)."""
    if math.isfinite(value) and math.isclose(value, round(value), rel_tol=1e-12, abs_tol=1e-13):
        return str(round(value))
    return fixed(value, DECIMALS)


def shown_entry(value: float) -> Entry:
    """A number shown to the student, as they carry it on: written as shown."""
    text = written(value)
    return Entry(text, float(text), decimals(text))


class Session:
    """One student working one problem: `current` is the prompt to answer, `respond` takes each line typed."""

    def __init__(
        self,
        solved: Solved,
        level: int = LEVEL,
        settings: Settings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`settings`: the problem file's own tolerance:, carry: and min_decimals:, which check would use too. The
        caller refuses a problem of more than plan.MAX_PROMPTS prompts first (plan.count)."""
        self.solved = solved
        self.settings = settings or Settings()
        self.rule = Rule.chosen(None, None, None, self.settings)  # check's rule, with the file's settings
        self.level = level
        self.prompts = tuple(plan.prompts(solved, level))
        self.states = [_State() for _ in self.prompts]
        self.own = Own(solved, self.rule)
        self.grader = Grader(solved, self.own, self.settings)
        self.seen: dict[Ref, Entry] = {}  # the numbers `check` reads: each graded step's cells as first given
        self.index = 0
        self.codes: Counter[str] = Counter()
        self.said: dict[str, str] = {}  # code -> the tutor's own words for it, where it said them
        self.unexplained = 0
        self.lines: list[str] = []  # every line that moved the session, in order: replayed, they rebuild it
        self.clock = clock
        self.started = clock()
        self.earlier = 0.0  # seconds spent in the sessions this one resumes
        self.ended: float | None = None

    @property
    def current(self) -> Prompt | None:
        """The prompt waiting for an answer; None once the session is over."""
        return self.prompts[self.index] if self.index < len(self.prompts) and self.ended is None else None

    @property
    def done(self) -> bool:
        return self.current is None

    def part(self, prompt: Prompt) -> plan.Steps:
        """The attention problem a prompt belongs to (a stack's layer's)."""
        return part_of(self.solved, prompt.layer)

    def respond(self, text: str) -> Feedback:
        """The feedback to one line typed at the current prompt: a command, or an answer."""
        prompt = self.current
        if prompt is None:
            raise ValueError("the session is over")
        word = text.strip()
        command = COMMANDS.get(word.lower())
        if command is not None:
            found: Feedback = getattr(self, f"_{command}")(prompt)
        else:
            try:
                given = parse(word, prompt.size)
            except AttnError as error:
                return Feedback(INVALID, prompt, error=error)
            found = self._answer(prompt, given)
        if found.kind not in UNKEPT:
            self.lines.append(word)
        return found

    def replay(self, lines: list[str], seconds: float) -> None:
        """Rebuild a session from the lines that moved it (a record's) and the time it took: `--resume`."""
        for line in lines:
            if self.current is None:
                break
            self.respond(line)
        self.earlier = seconds

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
        refs = cells(prompt, self.solved)
        if state.first is None:
            state.first = given
            if self.grader.grades(prompt.layer, prompt.step, prompt.head):
                self.seen.update(zip(refs, given))
        kind, codes, says, wrong = self.judge(prompt, given)
        if kind in (RIGHT, CARRIED):
            self.own.keep(refs, given)
            state.outcome = state.outcome or (FIRST if state.tries == 0 else SECOND)
            state.tries = 0
            self.index += 1
            exact = ", ".join(written(self.own.truth(ref)) for ref in refs) if kind == CARRIED else ""
            return Feedback(kind, prompt, answer=exact)
        state.tries += 1
        self.codes.update(codes)
        self.said.update((code, said) for code, said in zip(codes, says) if said)
        self.unexplained += not codes
        if state.tries < 2:
            return Feedback(WRONG, prompt, codes, wrong, retry=True, says=says)
        settled = self._settle(prompt, SHOWN)
        return Feedback(WRONG, prompt, codes, wrong, answer=settled.answer, working=settled.working, says=says)

    def _settle(self, prompt: Prompt, outcome: str) -> Feedback:
        """Give the answer worked from the student's own numbers and move on with it: they carry it."""
        refs = cells(prompt, self.solved)
        values = self.values(prompt)
        work = self.working(prompt)
        state = self.states[self.index]
        self.own.keep(refs, tuple(shown_entry(v) for v in values))
        state.outcome = state.outcome or outcome
        state.tries = 0
        self.index += 1
        return Feedback(outcome, prompt, answer=", ".join(written(v) for v in values), working=work)

    def values(self, prompt: Prompt) -> list[float]:
        """The prompt's numbers worked from the student's own (the truth where theirs leave float's range)."""
        refs = cells(prompt, self.solved)
        expected = self.own.expected(refs)
        return [v if math.isfinite(v) else self.own.truth(ref) for (v, _), ref in zip(expected, refs)]

    def truth(self, prompt: Prompt) -> tuple[float, ...]:
        """The right numbers of a prompt."""
        return tuple(self.own.truth(ref) for ref in cells(prompt, self.solved))

    def judge(
        self, prompt: Prompt, given: tuple[Entry, ...]
    ) -> tuple[str, tuple[str, ...], tuple[str, ...], tuple[int, ...]]:
        """RIGHT, CARRIED or WRONG; the codes of the mistakes that reproduce the answer and the tutor's words for
        each ("" for check's); the wrong cells."""
        refs = cells(prompt, self.solved)
        expected = self.own.expected(refs)
        agrees = self.rule.agrees
        own_right = all(agrees(e, v, r) for e, (v, r) in zip(given, expected))
        codes: tuple[str, ...] = ()
        if self.grader.grades(prompt.layer, prompt.step, prompt.head):
            kind, codes, wrong = self.grader.verdict(prompt, self.answers(prompt, given))
            if kind == WRONG and own_right and judge.moved(self.own, refs, self.seen, self.rule.carried):
                kind, codes, wrong = CARRIED, (), ()
        else:
            kind, wrong = self._own_verdict(refs, given, expected)
        if kind != WRONG:
            return kind, (), (), ()
        found = [
            slip
            for slip in slips(self.own, prompt, refs, expected)
            if all(agrees(e, v, r) for e, (v, r) in zip(given, slip.values))
        ]
        says = {slip.code: slip.says for slip in found if slip.says}
        named = tuple(dict.fromkeys([*codes, *(slip.code for slip in found)]))
        return WRONG, named, tuple(says.get(code, "") for code in named), wrong

    def _own_verdict(
        self, refs: list[Ref], given: tuple[Entry, ...], expected: list[tuple[float, float]]
    ) -> tuple[str, tuple[int, ...]]:
        """A step `check` does not grade: right within the rule of the truth, carried when right only from the
        student's own numbers, else wrong (those cells)."""
        agrees = self.rule.agrees
        truth = [self.own.truth(ref) for ref in refs]
        wrong = tuple(
            k
            for k, (e, (v, r), t) in enumerate(zip(given, expected, truth))
            if not agrees(e, v, r) and not agrees(e, t, 0.0)
        )
        if wrong:
            return WRONG, wrong
        carried = any(not agrees(e, t, r) for e, (_, r), t in zip(given, expected, truth))
        return (CARRIED if carried else RIGHT), ()

    def answers(self, prompt: Prompt | None = None, given: tuple[Entry, ...] = ()) -> list[Recorded]:
        """The answers as first given, step by step, as a homework holds them (`prompt`'s step holds `given` alone)."""
        cells_of: dict[Place, dict[tuple[int, int], Entry]] = {}
        held = None if prompt is None else (prompt.layer, field_of(prompt.step), prompt.head)
        for other, state in zip(self.prompts, self.states):
            field = field_of(other.step)
            if field is None or state.first is None or (other.layer, field, other.head) == held:
                continue
            if not self.grader.records(other.layer, other.step, other.head):
                continue
            _fill(cells_of, other, field, state.first)
        if prompt is not None and held is not None and held[1] is not None:
            _fill(cells_of, prompt, held[1], given)
        return [self._recorded(place, found) for place, found in cells_of.items()]

    def _recorded(self, place: Place, found: dict[tuple[int, int], Entry]) -> Recorded:
        rows, columns = judge.shape(self.solved, place, self.own)
        table = tuple(tuple(found.get((i, j)) for j in range(len(columns))) for i in range(len(rows)))
        return Recorded(place[0], place[1], place[2], rows, columns, table)

    def working(self, prompt: Prompt) -> str:
        """The numbers to combine for each of the prompt's cells, from the student's own numbers (the tiles' from the
        record's, attncli.practice.tiles; each gradient's products, attncli.practice.backward)."""
        if prompt.step in TILE_STEPS:
            head = self.part(prompt).heads[prompt.head or 0]
            return tiles.working(head, prompt.step, prompt.row, prompt.columns)
        if backward.is_backward(prompt.step):
            layer = prompt.layer

            def kept(step: str, head: int | None, row: int, column: int) -> float:
                return self.own.value((layer, step, head, row, column))

            key = (prompt.step, prompt.head)
            return "; ".join(backward.working(self.part(prompt), key, prompt.row, c, kept) for c in prompt.columns)
        return working(self.own, prompt, cells(prompt, self.solved))

    def summary(self) -> Summary:
        """How the session went so far."""
        rows: dict[str, Counter[str]] = {}
        for prompt, state in zip(self.prompts, self.states):
            rows.setdefault(prompt.step, Counter())[state.outcome] += 1
        right = sum(state.outcome in (FIRST, SECOND) for state in self.states)
        seconds = (self.ended if self.ended is not None else self.clock()) - self.started + self.earlier
        kinds = [step for step in STEPS if step in rows] + [step for step in rows if step not in STEPS]
        codes = tuple(sorted(self.codes.items(), key=lambda item: (-item[1], backward.rank(item[0]))))
        said = tuple(self.said.items())
        return Summary(
            tuple((step, dict(rows[step])) for step in kinds),
            codes,
            self.unexplained,
            seconds,
            len(self.prompts),
            right,
            said,
        )


def _fill(found: dict[Place, dict[tuple[int, int], Entry]], prompt: Prompt, field: str, given: tuple) -> None:
    place = (prompt.layer, field, prompt.head)
    table = found.setdefault(place, {})
    if prompt.step == "product":
        return
    for column, entry in zip(prompt.columns or (0,), given):
        table[(prompt.row, column)] = entry
