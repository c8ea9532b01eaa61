"""`attncli softmax`: a row (or rows) of logits, every step of the softmax, its filters and its cross-entropy."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

from attncli.cli.common import Debug, Lang, NoColor, Precision, boundary, choose, command, epilog, format_options
from attncli.cli.environment import Environment
from attncli.cli.output import output_format, print_human, write
from attncli.i18n import t

if TYPE_CHECKING:
    import typer  # the annotations' typer.Option is read by attncli.cli.common.boundary, Typer only if needed

FORMATS = ("rich", "text", "json", "csv", "tsv", "markdown", "latex")
Format, Output = format_options(FORMATS)
FILE_SUFFIXES = (".yaml", ".yml", ".json")  # an argument ending so is a file, even one that does not exist
EXAMPLES = epilog(
    '  attncli softmax "2, 1, 0.1"',
    '  attncli softmax "2, 1, 0.1" --tokens fisherman,net,bank --target net',
    '  attncli softmax "3, 2, 2, 1" --temperature 2 --top-k 3 --top-p 0.9',
    '  attncli softmax "2, 1, 0; 0, 3, 1" --target 1 --target 2 --format json',
    "  attncli softmax logits.yaml --format latex -o softmax.tex",
    t("help.softmax.file"),
    "  logits: [[2, 1, 0.1], [0, 3, 1]]",
    "  tokens: [fisherman, net, bank]",
    "  targets: [net, 2]",
)


@command(t("help.softmax"), EXAMPLES)
@boundary
def softmax(
    env: Environment,
    source: Annotated[str, typer.Argument(metavar=t("help.metavar.logits"), help=t("help.softmax.source"))],
    tokens: Annotated[
        Optional[str], typer.Option(metavar=t("help.metavar.tokens"), help=t("help.softmax.tokens"))
    ] = None,
    target: Annotated[
        Optional[list[str]], typer.Option(metavar=t("help.metavar.token"), help=t("help.softmax.target"))
    ] = None,
    temperature: Annotated[
        Optional[str], typer.Option(metavar=t("help.metavar.x"), help=t("help.softmax.temperature"))
    ] = None,
    top_k: Annotated[Optional[int], typer.Option("--top-k", metavar="K", help=t("help.softmax.top_k"))] = None,
    top_p: Annotated[Optional[str], typer.Option("--top-p", metavar="P", help=t("help.softmax.top_p"))] = None,
    precision: Precision = 4,
    format: Format = None,
    output: Output = None,
    no_color: NoColor = False,
    lang: Lang = None,
    debug: Debug = False,
) -> None:
    format = choose(output_format(format, output, FORMATS), FORMATS, "--format")
    from attncli import pipeline
    from attncli import softmax as core
    from attncli.render import softmax as shown

    given = {"tokens": tokens, "targets": target, "temperature": temperature, "top_k": top_k, "top_p": top_p}
    flags = {name: value for name, value in given.items() if value is not None}
    read = pipeline.logits(source, flags) if _is_file(source) else pipeline.logits(None, {"logits": source, **flags})
    steps = core.compute(read)
    if format == "json":
        write(shown.json_document(steps), output, env)
    elif format in ("csv", "tsv"):
        write(shown.csv_text(steps, "," if format == "csv" else "\t"), output, env)
    elif format == "markdown":
        write(shown.markdown(steps, precision), output, env)
    elif format == "latex":
        write(shown.latex(steps, precision), output, env)
    else:
        print_human(lambda width: shown.human(steps, precision, width), output, env)


def _is_file(source: str) -> bool:
    """Whether the argument names a YAML file ("-" for stdin) rather than the logits themselves ("2, 1, 0.1")."""
    return source == "-" or source.lower().endswith(FILE_SUFFIXES) or Path(source).is_file()
