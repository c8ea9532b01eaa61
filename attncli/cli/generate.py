"""`attncli generate`: new exercises with numbers chosen to be done by hand, and their answer keys."""

from __future__ import annotations

import contextlib
import random
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NamedTuple, Optional

from attncli.cli import exercise_options as shaping
from attncli.cli.common import Debug, Lang, boundary, choose, command, completion, epilog
from attncli.cli.ending import say
from attncli.cli.environment import Environment
from attncli.cli.lean import option
from attncli.cli.output import all_or_nothing, check_targets, make_folder, write
from attncli.errors import ExitCode, fail
from attncli.i18n import t
from attncli.render.formats import implied_by

if TYPE_CHECKING:
    from attncli import exercises

SEED_LIMIT = 1_000_000  # random seeds stay short enough to copy by hand
SHEETS = {"markdown": ".md", "latex": ".tex"}  # --sheet: the exercise to hand out, and its file's suffix
EXERCISE_SUFFIXES = (".yaml", ".yml")  # -o FILE.yaml without --count: one exercise in that file
EXAMPLES = epilog(
    "  attncli generate > exercise.yaml",
    "  attncli generate --tokens 4 --mask causal --seed 7 --answers",
    "  attncli generate --tokens the,cat,sat --dk 3 --dv 2 --heads 2 --projections",
    "  attncli generate --tokens 4 --seed 7 --sheet latex > sheet.tex",
    "  attncli generate --tokens 4 --answers -o exercise.yaml",
    "  attncli generate --rope half --dk 4 --answers",
    "  attncli generate --heads 4 --gqa",
    "  attncli generate --backward --answers",
    "  attncli generate --count 20 -o worksheet/",
    "  attncli generate --layers 2 --norm layer --answers",
    "  attncli generate --tokens 4 --tiles 2 --answers",
)


class Options(NamedTuple):
    """The options of `generate`, as the command line gives them (the exercise's own: attncli.cli.exercise_options)."""

    tokens: Annotated[Optional[str], shaping.TOKENS] = None
    dk: Annotated[int, shaping.DK] = 2
    dv: Annotated[Optional[int], shaping.DV] = None
    heads: Annotated[int, shaping.HEADS] = 1
    mask: Annotated[str, shaping.MASK] = "none"
    score: Annotated[str, shaping.SCORE] = "scaled_dot"
    projections: Annotated[bool, shaping.PROJECTIONS] = False
    layers: Annotated[int, shaping.LAYERS] = 1
    norm: Annotated[str, shaping.NORM] = "none"
    rope: Annotated[Optional[str], shaping.ROPE] = None
    gqa: Annotated[bool, shaping.GQA] = False
    tiles: Annotated[Optional[int], shaping.TILES] = None
    backward: Annotated[bool, shaping.BACKWARD] = False
    seed: Annotated[Optional[int], shaping.SEED] = None
    min_decimals: Annotated[
        Optional[int], option("--min-decimals", min=0, max=17, help=t("help.generate.min_decimals"))
    ] = None
    answers: Annotated[bool, option(help=t("help.generate.answers"))] = False
    how_many: Annotated[Optional[int], option("--count", min=1, max=1000, help=t("help.generate.count"))] = (
        None  # not `count`: tuple.count
    )
    output: Annotated[
        Optional[Path], option("--output", "-o", metavar=t("help.metavar.path"), help=t("help.generate.output"))
    ] = None
    force: Annotated[bool, option("--force", help=t("help.generate.force"))] = False
    sheet: Annotated[
        Optional[str],
        option("--sheet", metavar="markdown|latex", autocompletion=completion(*SHEETS), help=t("help.generate.sheet")),
    ] = None
    lang: Lang = None
    debug: Debug = False


@command(t("help.generate"), EXAMPLES)
@boundary
def generate(env: Environment, given: Options) -> ExitCode:
    """One exercise on stdout or in -o (or its sheet), or `--count` of them with their keys into a folder."""
    from attncli import exercises

    options = replace(shaping.exercise_options(given, answers=given.answers), min_decimals=given.min_decimals)
    sheet, output = given.sheet, given.output
    if sheet is not None:
        choose(sheet, tuple(SHEETS), "--sheet", "generate.bad_sheet")
    if sheet is not None and given.layers > 1:
        raise fail("generate.sheet_no_layers").at(source="--sheet")
    if sheet is not None and given.backward:
        raise fail("generate.sheet_no_backward").at(source="--sheet")
    seed = random.SystemRandom().randrange(SEED_LIMIT) if given.seed is None else given.seed
    one_file = EXERCISE_SUFFIXES if sheet is None else (SHEETS[sheet],)  # -o FILE.yaml, or FILE.tex for a sheet
    if output is not None and implied_by(output.suffix) and output.suffix.lower() not in one_file:  # json, csv...
        raise fail("generate.bad_suffix", path=str(output), suffix=output.suffix, one=one_file[0]).at(source="-o")
    if given.how_many is None and (output is None or output.suffix.lower() in one_file):
        if output is not None and output.exists() and not given.force:
            raise fail("generate.exists", path=str(output)).at(source="-o")
        check_targets(("-o", output))
        text = exercises.exercise(options, seed)
        write(text if sheet is None else _sheet(text, sheet), output, env)
        return ExitCode.OK
    _worksheet(options, seed, given.how_many, output, sheet, given.force, env)
    return ExitCode.OK


def _worksheet(
    options: exercises.Options,
    seed: int,
    count: int | None,
    output: Path | None,
    sheet: str | None,
    force: bool,
    env: Environment,
) -> None:
    """`count` exercises from `seed` on into the folder `output`, each with its key and blank answers (and its sheet
    when one is asked for), and the command that makes the same set again, on stderr."""
    from attncli import exercises

    if output is None:
        raise fail("generate.count_needs_output").at(source="--count")
    count = count or 1
    if output.is_dir() and not force and any(output.iterdir()):
        raise fail("generate.not_empty", path=str(output)).at(source="-o")
    files = exercises.worksheet(options, seed, count, str(output))
    if sheet is not None:  # each exercise's sheet beside its YAML: exercise-01.md or .tex
        names = [name for name, _ in files if not name.endswith(("-key.yaml", "-answers.yaml"))]
        files += [
            (name.removesuffix(".yaml") + SHEETS[sheet], _sheet(text, sheet)) for name, text in files if name in names
        ]
    made = make_folder(output, "-o")
    try:
        with all_or_nothing():  # the set whole, or none of it (a target that is a folder, a full disk): said last
            for name, text in files:
                write(text, output / name, env)
    except BaseException:
        for folder in made:  # the folders this run made, empty again
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    remake = exercises.set_command(options, seed, count, str(output))
    say(
        t("generate.wrote", count=count, path=str(output), first=seed, last=seed + count - 1, command=remake),
        env.stderr,
        whole=True,
    )


def _sheet(exercise: str, kind: str) -> str:
    """The exercise as a sheet to hand out, in Markdown or LaTeX: the givens and empty grids, no solution."""
    from attncli import pipeline
    from attncli.render import latex, markdown

    steps = pipeline.solve(pipeline.load(text=exercise, name="exercise.yaml"))
    return (markdown if kind == "markdown" else latex).sheet(steps)
