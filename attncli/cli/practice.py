"""`attncli practice`: the tutor in a terminal (Rich, colour) or in a pipe (one answer per line, plain text).

The session itself is attncli.practice.session; this module only reads lines, prints the
records as attncli.render.practice words them, and ends: 0 when every step was eventually
right, 1 otherwise, 130 on Ctrl-C, each time after the summary (and the --record file).
"""

from __future__ import annotations

import random
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

from attncli.cli import exercise_options as shaping
from attncli.cli.common import SCORES, Debug, Lang, NoColor, boundary, command, completion, epilog, located
from attncli.cli.ending import say
from attncli.cli.environment import Environment
from attncli.cli.lean import argument, option
from attncli.cli.output import check_targets, to_stdout, write
from attncli.errors import ExitCode, fail
from attncli.i18n import current_language, t
from attncli.render.layout import Line, fit, to_text

if TYPE_CHECKING:
    from attncli.core import Steps
    from attncli.parsing.answers import Settings
    from attncli.practice.session import Session

SEED_LIMIT = 1_000_000  # as generate: random seeds stay short enough to copy by hand
EXAMPLES = epilog(
    "  attncli practice samples/bank.yaml",
    "  attncli practice --tokens 4 --mask causal --seed 7 --level 3",
    "  attncli practice samples/bank.yaml --lang es --record homework.yaml",
    "  printf '2*sqrt(2)\\n1/sqrt(2)\\n' | attncli practice samples/bank.yaml",
)


@command(t("help.practice"), EXAMPLES)
@boundary
def practice(
    env: Environment,
    file: Annotated[Optional[str], argument(metavar=t("help.metavar.file"), help=t("help.practice.file"))] = None,
    seed: Annotated[Optional[int], option(min=0, help=t("help.generate.seed"))] = None,
    tokens: Annotated[Optional[str], option(metavar=t("help.metavar.tokens"), help=t("help.generate.tokens"))] = None,
    dk: Annotated[Optional[int], option("--dk", min=1, max=8, help=t("help.generate.dk"))] = None,
    heads: Annotated[Optional[int], option(min=1, max=4, help=t("help.generate.heads"))] = None,
    mask: Annotated[
        Optional[str],
        option(
            metavar=t("help.metavar.mask"), autocompletion=completion("none", "causal"), help=t("help.generate.mask")
        ),
    ] = None,
    score: Annotated[
        Optional[str],
        option(metavar=t("help.metavar.name"), autocompletion=completion(*SCORES), help=t("help.score")),
    ] = None,
    level: Annotated[
        int,
        option(
            min=1,
            max=3,
            metavar=t("help.metavar.level"),
            autocompletion=completion("1", "2", "3"),
            help=t("help.practice.level"),
        ),
    ] = 2,
    tiles: Annotated[Optional[int], shaping.TILES] = None,
    record: Annotated[Optional[Path], option(help=t("help.practice.record"))] = None,
    no_color: NoColor = False,
    lang: Lang = None,
    debug: Debug = False,
) -> ExitCode:
    from attncli.practice.session import Session

    made = {"--seed": seed, "--tokens": tokens, "--dk": dk, "--heads": heads, "--mask": mask, "--score": score}
    made["--tiles"] = tiles
    if file is not None:
        steps, text, settings, again, harder = _from_file(file, made, level)
    else:
        steps, text, again, harder = _generated(seed, tokens, dk, heads, mask, score, level, tiles)
        settings = None
    check_targets(("--record", record))  # before the session, not after it
    session = Session(steps, level, settings)
    front = _Terminal(env) if env.stdin_is_terminal else _Pipe(env)
    interrupted = False
    try:
        _run(session, front)
    except KeyboardInterrupt:
        interrupted = True
        front.newline()  # the prompt waiting for an answer ends its line
    session.stop()
    if interrupted:
        front.show([((t("practice.interrupted"), "bold"),)])
    from attncli.render.practice import summary

    result = session.summary()
    front.show(summary(result, env.width, again, harder))
    if record is not None:
        from attncli.practice.record import homework

        write(homework(text, session), record, env)
    if interrupted:
        say(t("cli.interrupted"), env.stderr)
        return ExitCode.INTERRUPTED
    return ExitCode.OK if result.ok else ExitCode.WRONG_ANSWERS


def _run(session: Session, front: _Pipe) -> None:
    """The loop: a prompt, a line, the feedback, until the prompts, the input or the student's patience end."""
    from attncli.render import practice as shown

    front.show(shown.intro(session))
    while (prompt := session.current) is not None:
        answer = front.read(shown.question(session, prompt))
        if answer is None:  # the end of the input
            return
        front.show(shown.feedback(session, session.respond(answer)))


def _from_file(file: str, made: Mapping[str, object], level: int) -> tuple[Steps, str, Settings, str, str]:
    """The exercise in `file` (no option that makes one may come with it), its text and settings, and the
    commands to practise it again or harder."""
    from attncli import pipeline, yamldoc
    from attncli.parsing import answers

    given = next((flag for flag, value in made.items() if value is not None), None)
    if given is not None:
        raise fail("practice.flags_with_file", flag=given).at(source=given)
    if file == "-":
        raise fail("practice.stdin").at(source="-")
    document = yamldoc.read(file)
    steps = pipeline.solve(pipeline.single(pipeline.load(document), "practice"))
    try:
        text = Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:  # yamldoc read it a moment ago
        raise fail("cli.output_failed", path=file, reason=str(error)) from None
    again = _command(["attncli practice", shlex.quote(file)], level)
    harder = (
        _command(["attncli practice", shlex.quote(file)], level + 1)
        if level < 3
        else _command([f"attncli practice --tokens {min(len(steps.problem.tokens) + 1, 12)}"], level)
    )
    return steps, text, answers.read_settings(document), again, harder


def _generated(
    seed: int | None,
    tokens: str | None,
    dk: int | None,
    heads: int | None,
    mask: str | None,
    score: str | None,
    level: int,
    tiles: int | None = None,
) -> tuple[Steps, str, str, str]:
    """A new exercise as `generate` makes it, the same seed rules, and the commands to practise it again or harder."""
    from attncli import exercises, pipeline

    with located("--tokens"):
        parsed = exercises.parse_tokens(tokens) if tokens is not None else None
    defaults = exercises.Options()
    options = exercises.Options(
        tokens=parsed,
        d_k=dk or defaults.d_k,
        heads=heads or defaults.heads,
        mask=mask or defaults.mask,
        score=score or defaults.score,
        tiles=tiles,
    )
    with located():
        exercises.validate(options)
    if seed is None:
        seed = random.SystemRandom().randrange(SEED_LIMIT)
    text = exercises.exercise(options, seed)
    steps = pipeline.solve(pipeline.single(pipeline.load(text=text, name="practice"), "practice"))
    again = _practise(exercises.command(options, seed), level)
    count = len(steps.problem.tokens)
    more = exercises.Options(
        tokens=min(count + 1, exercises.MAX_TOKENS),
        d_k=options.d_k,
        heads=options.heads if count < exercises.MAX_TOKENS else min(options.heads + 1, 4),
        mask=options.mask,
        score=options.score,
        tiles=options.tiles,
    )
    harder = _practise(exercises.command(more, (seed + 1) % SEED_LIMIT), level)
    return steps, text, again, harder


def _practise(generate: str, level: int) -> str:
    """`attncli generate ...` as the practice command that makes the same exercise."""
    return _command([generate.replace("attncli generate", "attncli practice", 1)], level)


def _command(parts: list[str], level: int) -> str:
    if level != 2:
        parts.append(f"--level {level}")
    if current_language() != "en" and not any("--lang" in part for part in parts):
        parts.append(f"--lang {current_language()}")
    return " ".join(parts)


class _Pipe:
    """Without a terminal: the prompt, then the line read (echoed, so that the output reads as a transcript)."""

    def __init__(self, env: Environment) -> None:
        self.env = env

    def show(self, lines: list[Line]) -> None:
        to_stdout(to_text(fit(lines, self.env.width)), self.env)

    def read(self, prompt: str) -> str | None:
        to_stdout(prompt, self.env)
        stdin = self.env.stdin
        answer = stdin.readline() if stdin is not None else ""
        if not answer:
            self.newline()
            return None
        answer = answer.rstrip("\r\n")
        to_stdout(f"{answer}\n", self.env)
        return answer

    def newline(self) -> None:
        to_stdout("\n", self.env)


class _Terminal(_Pipe):
    """On a terminal: Rich, in colour unless NO_COLOR or --no-color; an empty line asks again."""

    def __init__(self, env: Environment) -> None:
        super().__init__(env)
        from rich.console import Console

        self.console = Console(file=env.stdout, highlight=False, no_color=not env.colour, force_terminal=env.colour)

    def show(self, lines: list[Line]) -> None:
        from attncli.cli.output import print_lines

        print_lines(self.console, fit(lines, self.console.width))

    def read(self, prompt: str) -> str | None:
        from rich.text import Text

        try:
            while not (answer := self.console.input(Text(prompt, style="bold cyan"))).strip():
                pass  # an Enter pressed by accident skips nothing here: `skip` does
            return answer
        except EOFError:  # Ctrl-D
            self.newline()
            return None

    def newline(self) -> None:
        self.console.print()
