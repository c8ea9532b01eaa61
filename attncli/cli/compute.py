"""`attncli compute`: the whole calculation of a problem, step by step."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from attncli.cli.app import EXIT_CODES_HELP, Debug, Lang, app, boundary
from attncli.cli.output import print_human, write
from attncli.errors import fail

FORMATS = ("rich", "text", "json")
EXAMPLES = (
    "Examples:\n\n"
    "  attncli compute samples/bank.yaml\n\n"
    '  attncli compute --tokens fisherman,net,bank --query-tokens bank --queries "sqrt(2), 0" '
    '--keys "2,0; 1,1; 0,1" --values "2,0; 0,2; 1,1"\n\n'
    "  attncli compute samples/storm_causal.yaml --follow bank --precision 6\n\n"
    "  cat problem.yaml | attncli compute - --format json\n\n"
    f"{EXIT_CODES_HELP}"
)
Rows = "rows separated by ';', numbers by ',' (each may be an expression), or @file.npy"


@app.command(epilog=EXAMPLES)
@boundary
def compute(
    file: Annotated[
        Optional[str], typer.Argument(help="Problem file (YAML or JSON); '-' reads standard input.")
    ] = None,
    tokens: Annotated[Optional[str], typer.Option(help="Key/value tokens, comma-separated.")] = None,
    query_tokens: Annotated[Optional[str], typer.Option(help="Query tokens (default: the tokens).")] = None,
    queries: Annotated[Optional[str], typer.Option(help=f"Query rows: {Rows}.")] = None,
    keys: Annotated[Optional[str], typer.Option(help="Key rows, one per token.")] = None,
    values: Annotated[Optional[str], typer.Option(help="Value rows, one per token.")] = None,
    scores: Annotated[Optional[str], typer.Option(help="Scores given directly (rows: queries).")] = None,
    mask: Annotated[Optional[str], typer.Option(help='none, causal, or 0/1 rows: "1,0; 1,1".')] = None,
    score: Annotated[Optional[str], typer.Option(help="Score function: scaled_dot, dot, cosine.")] = None,
    scale: Annotated[Optional[str], typer.Option(help="Factor applied to the scores (default 1/√d_k).")] = None,
    follow: Annotated[Optional[list[str]], typer.Option(help="Query token to show step by step (repeatable).")] = None,
    precision: Annotated[int, typer.Option(min=0, max=17, help="Decimals shown in human output.")] = 4,
    format: Annotated[str, typer.Option("--format", "-f", help=f"Output: {', '.join(FORMATS)}.")] = "rich",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file, not stdout.")] = None,
    no_color: Annotated[bool, typer.Option("--no-color", help="Plain text without colours.")] = False,
    lang: Lang = None,
    debug: Debug = False,
) -> None:
    """Compute attention step by step: dot products, scaled scores, softmax weights, weighted values."""
    if format not in FORMATS:
        raise fail("cli.bad_format", name=format, known=", ".join(FORMATS)).at(source="--format")
    options = {
        "tokens": tokens,
        "query_tokens": query_tokens,
        "queries": queries,
        "keys": keys,
        "values": values,
        "scores": scores,
        "mask": mask,
        "score": score,
        "scale": scale,
    }
    flags = {name: value for name, value in options.items() if value is not None}
    if file is None and not flags:
        raise fail("cli.no_input")
    from attncli import core, problem, yamldoc

    document = yamldoc.read(file) if file is not None else yamldoc.Document(data={}, name="flags")
    base = Path(file).parent if file not in (None, "-") else Path(".")
    steps = core.compute(problem.parse(document, flags, base))
    if format == "json":
        from attncli.render import json_doc

        write(json_doc.render(steps), output)
        return
    for name in follow or ():
        if name not in steps.problem.query_tokens:
            names = ", ".join(steps.problem.query_tokens)
            raise fail("cli.unknown_follow", name=name, names=names).at(source="--follow")
    from attncli.render import human

    view = human.View(precision=precision, follow=tuple(follow) if follow else None)
    print_human(lambda width: human.render(steps, view, width), output, plain=no_color or format == "text")
