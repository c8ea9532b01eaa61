"""`attncli generate`: new exercises with numbers chosen to be done by hand, and their answer keys."""

from __future__ import annotations

import contextlib
import random
from pathlib import Path
from typing import Annotated, Optional

import typer

from attncli.cli.common import SCORES, Debug, Lang, boundary, choose, command, completion, epilog, located
from attncli.cli.environment import Environment
from attncli.cli.output import EXTENSIONS, all_or_nothing, check_targets, write
from attncli.errors import fail
from attncli.i18n import t
from attncli.launch import say

SEED_LIMIT = 1_000_000  # random seeds stay short enough to copy by hand
SHEETS = {"markdown": ".md", "latex": ".tex"}  # --sheet: the exercise to hand out, and its file's suffix
# The values --norm and --rope complete to (exercises.NORMS and positions.STYLES, which need numpy to import).
NORMS = ("none", "layer", "rms", "layer:post", "rms:post")
ROPES = ("half", "interleaved")
EXERCISE_SUFFIXES = (".yaml", ".yml")  # -o FILE.yaml without --count: one exercise in that file
EXAMPLES = epilog(
    "  attncli generate > exercise.yaml",
    "  attncli generate --tokens 4 --mask causal --seed 7 --answers",
    "  attncli generate --tokens the,cat,sat --dk 3 --dv 2 --heads 2 --projections",
    "  attncli generate --tokens 4 --seed 7 --sheet latex > sheet.tex",
    "  attncli generate --tokens 4 --answers -o exercise.yaml",
    "  attncli generate --rope half --dk 4 --answers",
    "  attncli generate --heads 4 --gqa",
    "  attncli generate --count 20 -o worksheet/",
    "  attncli generate --layers 2 --norm layer --answers",
)


@command(t("help.generate"), EXAMPLES)
@boundary
def generate(
    env: Environment,
    tokens: Annotated[
        Optional[str], typer.Option(metavar=t("help.metavar.tokens"), help=t("help.generate.tokens"))
    ] = None,
    dk: Annotated[int, typer.Option("--dk", min=1, max=8, help=t("help.generate.dk"))] = 2,
    dv: Annotated[Optional[int], typer.Option("--dv", min=1, max=8, help=t("help.generate.dv"))] = None,
    heads: Annotated[int, typer.Option(min=1, max=4, help=t("help.generate.heads"))] = 1,
    mask: Annotated[
        str,
        typer.Option(
            metavar=t("help.metavar.mask"), autocompletion=completion("none", "causal"), help=t("help.generate.mask")
        ),
    ] = "none",
    score: Annotated[
        str, typer.Option(metavar=t("help.metavar.name"), autocompletion=completion(*SCORES), help=t("help.score"))
    ] = "scaled_dot",
    projections: Annotated[bool, typer.Option(help=t("help.generate.projections"))] = False,
    layers: Annotated[int, typer.Option(min=1, max=4, help=t("help.generate.layers"))] = 1,
    norm: Annotated[
        str,
        typer.Option(metavar=t("help.metavar.norm"), autocompletion=completion(*NORMS), help=t("help.generate.norm")),
    ] = "none",
    rope: Annotated[
        Optional[str],
        typer.Option(metavar=t("help.metavar.style"), autocompletion=completion(*ROPES), help=t("help.generate.rope")),
    ] = None,
    gqa: Annotated[bool, typer.Option(help=t("help.generate.gqa"))] = False,
    seed: Annotated[Optional[int], typer.Option(min=0, help=t("help.generate.seed"))] = None,
    answers: Annotated[bool, typer.Option(help=t("help.generate.answers"))] = False,
    count: Annotated[Optional[int], typer.Option(min=1, max=1000, help=t("help.generate.count"))] = None,
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", metavar=t("help.metavar.path"), help=t("help.generate.output"))
    ] = None,
    force: Annotated[bool, typer.Option("--force", help=t("help.generate.force"))] = False,
    sheet: Annotated[
        Optional[str],
        typer.Option(
            "--sheet", metavar="markdown|latex", autocompletion=completion(*SHEETS), help=t("help.generate.sheet")
        ),
    ] = None,
    lang: Lang = None,
    debug: Debug = False,
) -> None:
    from attncli import exercises

    with located("--tokens"):
        parsed = exercises.parse_tokens(tokens) if tokens is not None else None
    options = exercises.Options(
        tokens=parsed,
        d_k=dk,
        d_v=dv,
        heads=2 if gqa and heads == 1 else heads,  # --gqa alone: two query heads sharing one kv head
        mask=mask,
        score=score,
        projections=projections,
        answers=answers,
        layers=layers,
        norm=norm,
        rope=rope,
        gqa=gqa,
    )
    with located():
        exercises.validate(options)
    if sheet is not None:
        choose(sheet, tuple(SHEETS), "--sheet", "generate.bad_sheet")
    if sheet is not None and layers > 1:
        raise fail("generate.sheet_no_layers").at(source="--sheet")
    if seed is None:
        seed = random.SystemRandom().randrange(SEED_LIMIT)
    one_file = EXERCISE_SUFFIXES if sheet is None else (SHEETS[sheet],)  # -o FILE.yaml, or FILE.tex for a sheet
    if output is not None and output.suffix.lower() in set(EXTENSIONS) - set(one_file):
        raise fail("generate.bad_suffix", path=str(output), suffix=output.suffix, one=one_file[0]).at(source="-o")
    if count is None and (output is None or output.suffix.lower() in one_file):
        if output is not None and output.exists() and not force:
            raise fail("generate.exists", path=str(output)).at(source="-o")
        check_targets(("-o", output))
        text = exercises.exercise(options, seed)
        write(text if sheet is None else _sheet(text, sheet), output, env)
        return
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
    made = _folder(output)
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


def _folder(output: Path) -> list[Path]:
    """Make the folder `output` and those above it that are missing: the ones made, the innermost first."""
    made, folder = [], output
    while not folder.exists() and not folder.is_symlink() and folder != folder.parent:
        made.append(folder)
        folder = folder.parent
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise fail("cli.output_failed", path=str(output), reason=error.strerror or str(error)).at(source="-o") from None
    return made


def _sheet(exercise: str, kind: str) -> str:
    """The exercise as a sheet to hand out, in Markdown or LaTeX: the givens and empty grids, no solution."""
    from attncli import pipeline
    from attncli.render import latex, markdown

    steps = pipeline.solve(pipeline.load(text=exercise, name="exercise.yaml"))
    return (markdown if kind == "markdown" else latex).sheet(steps)
