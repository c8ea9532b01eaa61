"""`attncli generate`: new exercises with numbers chosen to be done by hand, and their answer keys."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Annotated, Optional

import typer

from attncli.cli.app import EXIT_CODES_HELP, Debug, Lang, app, boundary
from attncli.cli.output import write
from attncli.errors import fail
from attncli.i18n import t

SEED_LIMIT = 1_000_000  # random seeds stay short enough to copy by hand
EXAMPLES = (
    "Examples:\n\n"
    "  attncli generate > exercise.yaml\n\n"
    "  attncli generate --tokens 4 --mask causal --seed 7 --answers\n\n"
    "  attncli generate --tokens the,cat,sat --dk 3 --dv 2 --heads 2 --projections\n\n"
    "  attncli generate --count 20 -o worksheet/\n\n"
    f"{EXIT_CODES_HELP}"
)


@app.command(epilog=EXAMPLES)
@boundary
def generate(
    tokens: Annotated[
        Optional[str], typer.Option(help="How many tokens (default 3, words of a short sentence), or names: a,b,c.")
    ] = None,
    dk: Annotated[int, typer.Option("--dk", min=1, max=8, help="Width of queries and keys, d_k.")] = 2,
    dv: Annotated[Optional[int], typer.Option("--dv", min=1, max=8, help="Width of values (default d_k).")] = None,
    heads: Annotated[int, typer.Option(min=1, max=4, help="Number of heads (several add a W_O).")] = 1,
    mask: Annotated[str, typer.Option(help="none or causal.")] = "none",
    score: Annotated[str, typer.Option(help="Score function: scaled_dot, dot, cosine.")] = "scaled_dot",
    projections: Annotated[bool, typer.Option(help="Give inputs x and W_Q, W_K, W_V instead of Q, K, V.")] = False,
    seed: Annotated[Optional[int], typer.Option(min=0, help="Seed of the numbers (default: random, shown).")] = None,
    answers: Annotated[bool, typer.Option(help="Add the answers: section, the key for `attncli check`.")] = False,
    count: Annotated[Optional[int], typer.Option(min=1, max=1000, help="Write this many exercises to -o.")] = None,
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="Directory for the exercises and their keys.")
    ] = None,
    lang: Lang = None,
    debug: Debug = False,
) -> None:
    """Make an attention exercise that can be done by hand: small integers, scores that come out whole."""
    from attncli import generate as maker

    options = maker.Options(
        tokens=maker.parse_tokens(tokens) if tokens is not None else None,
        d_k=dk,
        d_v=dv,
        heads=heads,
        mask=mask,
        score=score,
        projections=projections,
        answers=answers,
    )
    maker.validate(options)
    if seed is None:
        seed = random.SystemRandom().randrange(SEED_LIMIT)
    if count is None and output is None:
        write(maker.exercise(options, seed), None)
        return
    if output is None:
        raise fail("generate.count_needs_output").at(source="--count")
    files = maker.worksheet(options, seed, count or 1)
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise fail("cli.output_failed", path=str(output), reason=error.strerror or str(error)) from None
    for name, text in files:
        write(text, output / name)
    write(t("generate.wrote", count=len(files) // 2, path=str(output)) + "\n", None)
