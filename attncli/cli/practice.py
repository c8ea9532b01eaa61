"""`attncli practice`: the tutor in a terminal (line editing, colour) or in a pipe (one answer per line, plain text).

The session itself is attncli.practice.session; this module only reads lines, prints the
records as attncli.render.practice words them, writes the `--record` file after every line
that moves the session (atomically: a crash, Ctrl-C or SIGTERM loses nothing), and ends: 0
when every step was eventually right, 1 otherwise, 130 on Ctrl-C, each time after the summary.
"""

from __future__ import annotations

import random
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NamedTuple, Optional

from attncli.cli import exercise_options as shaping
from attncli.cli.common import Debug, Lang, NoColor, boundary, command, completion, epilog
from attncli.cli.ending import say
from attncli.cli.environment import Environment
from attncli.cli.lean import argument, option
from attncli.cli.output import check_targets, write_at_once
from attncli.cli.practice_input import Pipe, Terminal
from attncli.errors import ExitCode, fail
from attncli.i18n import current_language, t

if TYPE_CHECKING:
    from attncli.parsing.answers import Settings
    from attncli.practice.plan import Solved
    from attncli.practice.record import Saved
    from attncli.practice.session import Session
    from attncli.yamldoc import Document

SEED_LIMIT = 1_000_000  # as generate: random seeds stay short enough to copy by hand
EXAMPLES = epilog(
    "  attncli practice samples/bank.yaml",
    "  attncli practice --tokens 4 --mask causal --seed 7 --level 3",
    "  attncli practice --rope half --dk 4 --seed 3",
    "  attncli practice --layers 2 --norm layer --seed 5",
    "  attncli practice --tokens 4 --tiles 2 --seed 1",
    "  attncli practice samples/bank.yaml --lang es --record homework.yaml",
    "  attncli practice --record homework.yaml --resume",
    "  printf '2*sqrt(2)\\n1/sqrt(2)\\n' | attncli practice samples/bank.yaml",
)


DEFAULT_LEVEL = 2  # cell by cell


class Options(NamedTuple):
    """The options of `practice`, as the command line gives them; those that shape an exercise are generate's."""

    file: Annotated[Optional[str], argument(metavar=t("help.metavar.file"), help=t("help.practice.file"))] = None
    tokens: Annotated[Optional[str], shaping.TOKENS] = None
    dk: Annotated[Optional[int], shaping.DK] = None
    dv: Annotated[Optional[int], shaping.DV] = None
    heads: Annotated[Optional[int], shaping.HEADS] = None
    mask: Annotated[Optional[str], shaping.MASK] = None
    score: Annotated[Optional[str], shaping.SCORE] = None
    projections: Annotated[bool, shaping.PROJECTIONS] = False
    layers: Annotated[Optional[int], shaping.LAYERS] = None
    norm: Annotated[Optional[str], shaping.NORM] = None
    rope: Annotated[Optional[str], shaping.ROPE] = None
    gqa: Annotated[bool, shaping.GQA] = False
    tiles: Annotated[Optional[int], shaping.TILES] = None
    backward: Annotated[bool, shaping.BACKWARD] = False
    seed: Annotated[Optional[int], shaping.SEED] = None
    level: Annotated[
        Optional[int],
        option(
            min=1,
            max=3,
            metavar=t("help.metavar.level"),
            autocompletion=completion("1", "2", "3"),
            help=t("help.practice.level"),
        ),
    ] = None  # DEFAULT_LEVEL, or the record's with --resume
    record: Annotated[Optional[Path], option(help=t("help.practice.record"))] = None
    resume: Annotated[bool, option("--resume", help=t("help.practice.resume"))] = False
    force: Annotated[bool, option("--force", help=t("help.practice.force"))] = False
    no_color: NoColor = False
    lang: Lang = None
    debug: Debug = False


class _Exercise(NamedTuple):
    """The problem a session works: as read (for the record), solved, its settings, and what to practise next."""

    document: Document
    base: Path | None  # where its arrays' files are found
    solved: Solved
    settings: Settings | None
    again: str
    harder: str


@command(t("help.practice"), EXAMPLES)
@boundary
def practice(env: Environment, given: Options) -> ExitCode:
    """A session on a problem file, a new exercise, or the one a record holds (`--resume`)."""
    from attncli.practice import plan
    from attncli.practice.session import Session

    saved = _saved(given) if given.resume else None
    level = saved.level if saved is not None else given.level or DEFAULT_LEVEL
    exercise = _from_record(given, level) if saved is not None else _exercise(given, level)
    if plan.count(exercise.solved, level) > plan.MAX_PROMPTS:
        raise fail("practice.too_large", most=plan.MAX_PROMPTS).at(source=given.file or "--tokens")
    check_targets(("--record", given.record))  # before the first prompt, not after the session
    if given.record is not None and saved is None and given.record.is_file() and not given.force:
        raise fail("practice.record_exists", path=str(given.record)).at(source="--record")
    session = Session(exercise.solved, level, exercise.settings)
    if saved is not None:
        session.replay(list(saved.lines), saved.seconds)
    front = Terminal(env) if env.stdin_is_terminal else Pipe(env)
    keep = _keeper(exercise, session, given.record, env)
    interrupted = _run(session, front, keep)
    session.stop()
    keep()
    if interrupted:
        front.show([((t("practice.interrupted"), "bold"),)])
    from attncli.render.practice import summary

    result = session.summary()
    front.show(summary(result, env.width, exercise.again, exercise.harder))
    if interrupted:
        say(t("cli.interrupted"), env.stderr)
        return ExitCode.INTERRUPTED
    return ExitCode.OK if result.ok else ExitCode.WRONG_ANSWERS


def _keeper(exercise: _Exercise, session: Session, record: Path | None, env: Environment) -> Callable[[], None]:
    """What writes the record as it stands (nothing without --record)."""
    from attncli.practice.record import homework

    def keep() -> None:
        if record is not None:
            write_at_once(homework(exercise.document, session, exercise.base), record, env)

    return keep


def _run(session: Session, front: Pipe, keep: Callable[[], None]) -> bool:
    """The loop: a prompt, a line, the feedback, until the prompts, the input or the student's patience end.
    Whether it ended on Ctrl-C."""
    from attncli.render import practice as shown

    front.show(shown.intro(session))
    before = None
    try:
        while (prompt := session.current) is not None:
            front.show(shown.section(session, prompt, before))
            before = prompt
            answer = front.read(shown.question(session, prompt))
            if answer is None:  # the end of the input
                return False
            kept = len(session.lines)
            front.show(shown.feedback(session, session.respond(answer)))
            if len(session.lines) != kept:
                keep()
    except KeyboardInterrupt:
        front.newline()  # the prompt waiting for an answer ends its line
        return True
    return False


def _saved(given: Options) -> Saved:
    """The session `--record` holds, for `--resume`; a problem or an exercise's options beside it are refused."""
    from attncli.practice.record import saved

    if given.record is None:
        raise fail("practice.resume_needs_record").at(source="--resume")
    _no_exercise_options(given, "practice.resume_with_problem")
    record = str(given.record)
    found = saved(_record_text(record), record)
    if given.level is not None and given.level != found.level:  # the steps asked so far were that level's
        raise fail("practice.resume_level", given=given.level, level=found.level).at(source="--level")
    return found


def _record_text(record: str) -> str:
    """The text of the record to resume: read, not noted as an input of the run (it is the file the run writes)."""
    from attncli import inputs
    from attncli.yamldoc import read_text

    with inputs.recorded():
        return read_text(record)


def _from_record(given: Options, level: int) -> _Exercise:
    """The problem a record holds, read from its text (it is the record to write, not an input the run guards)."""
    from attncli import pipeline, yamldoc
    from attncli.parsing import answers

    assert given.record is not None, "--resume reads --record"
    name = str(given.record)
    document = yamldoc.load(_record_text(name), name)
    solved = pipeline.solve(pipeline.load(document))
    again = _command(["attncli practice", shlex.quote(name)], level)
    return _Exercise(document, None, solved, answers.read_settings(document), again, again)


def _exercise(given: Options, level: int) -> _Exercise:
    return _from_file(given.file, given, level) if given.file is not None else _generated(given, level)


def _no_exercise_options(given: Options, key: str) -> None:
    """Refuse an option that makes a new exercise where the problem is given otherwise."""
    made = {flag: getattr(given, field) for field, flag in shaping.SHAPING.items()} | {"--seed": given.seed}
    flag = next((flag for flag, value in made.items() if value not in (None, False)), None)
    if flag is None and key == "practice.resume_with_problem" and given.file is not None:
        flag = given.file
    if flag is not None:
        raise fail(key, flag=flag).at(source=flag)


def _from_file(file: str, given: Options, level: int) -> _Exercise:
    """The exercise in `file` (no option that makes one may come with it), and the commands to practise it again
    or harder."""
    from attncli import pipeline, yamldoc
    from attncli.parsing import answers

    _no_exercise_options(given, "practice.flags_with_file")
    if file == "-":
        raise fail("practice.stdin").at(source="-")
    document = yamldoc.read(file)
    solved = pipeline.solve(pipeline.load(document))
    again = _command(["attncli practice", shlex.quote(file)], level)
    harder = _command(["attncli practice", shlex.quote(file)], level + 1) if level < 3 else _more(solved, level)
    base = Path(file).absolute().parent
    return _Exercise(document, base, solved, answers.read_settings(document), again, harder)


def _more(solved: Solved, level: int) -> str:
    from attncli.practice.own import part_of

    tokens = len(part_of(solved, 0 if hasattr(solved, "layers") else None).problem.tokens)
    return _command([f"attncli practice --tokens {min(tokens + 1, 12)}"], level)


def _generated(given: Options, level: int) -> _Exercise:
    """A new exercise as `generate` makes it from the same options and seed, and the commands to practise it again
    or harder."""
    from dataclasses import replace

    from attncli import exercises, pipeline, yamldoc

    options = shaping.exercise_options(given)
    seed = random.SystemRandom().randrange(SEED_LIMIT) if given.seed is None else given.seed
    text = exercises.exercise(options, seed)
    document = yamldoc.load(text, "practice")
    solved = pipeline.solve(pipeline.load(document))
    again = _practise(exercises.command(options, seed), level)
    count = len(options.tokens) if isinstance(options.tokens, tuple) else (options.tokens or 3)
    if count < exercises.MAX_TOKENS:
        more = replace(options, tokens=count + 1)
    else:
        more = replace(options, heads=min(options.heads + 1, 4))
    harder = _practise(exercises.command(more, (seed + 1) % SEED_LIMIT), level)
    return _Exercise(document, None, solved, None, again, harder)


def _practise(generate: str, level: int) -> str:
    """`attncli generate ...` as the practice command that makes the same exercise."""
    return _command([generate.replace("attncli generate", "attncli practice", 1)], level)


def _command(parts: list[str], level: int) -> str:
    if level != 2:
        parts.append(f"--level {level}")
    if current_language() != "en" and not any("--lang" in part for part in parts):
        parts.append(f"--lang {current_language()}")
    return " ".join(parts)
