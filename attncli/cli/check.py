"""`attncli check`: grade attention computed by hand, and say which step went wrong first and why."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from attncli.cli.app import Debug, Lang, NoColor, app, boundary, choose, epilog, format_option
from attncli.cli.environment import Environment
from attncli.cli.output import print_human, write
from attncli.errors import AttnError, ExitCode
from attncli.i18n import describe, t
from attncli.launch import say

FORMATS = ("rich", "text", "json", "csv")
Format = format_option(FORMATS)
EXAMPLES = epilog(
    "  attncli check homework.yaml",
    "  attncli check class/*.yaml --format csv > gradebook.csv",
    "  attncli check homework.yaml --tolerance 0.01",
    t("help.check.answers_file"),
    "  answers: {scores: [2, 1, 0], weights: [0.6652, 0.2447, 0.0900]}",
)


@app.command(help=t("help.check"), epilog=EXAMPLES)
@boundary
def check(
    env: Environment,
    files: Annotated[list[str], typer.Argument(help=t("help.check.files"))],
    tolerance: Annotated[Optional[float], typer.Option(min=0, help=t("help.check.tolerance"))] = None,
    precision: Annotated[int, typer.Option(min=0, max=17, help=t("help.check.precision"))] = 4,
    format: Format = "rich",
    no_color: NoColor = False,
    lang: Lang = None,
    debug: Debug = False,
) -> None:
    choose(format, FORMATS, "--format")
    from attncli import grading, pipeline
    from attncli.render import check_report

    results: list[tuple[str, grading.Report | str]] = []
    for file in files:
        try:
            results.append((file, pipeline.grade(file, tolerance=tolerance)))
        except AttnError as error:
            message = describe(error)
            say(message, env.stderr)
            results.append((file, message))
    reports = [result for _, result in results if isinstance(result, grading.Report)]
    if format == "json":
        write(check_report.json_lines(results), None, env)
    elif format == "csv":
        write(check_report.csv_text(reports), None, env)
    elif len(files) == 1:
        if reports:
            print_human(lambda width: check_report.human(reports[0], precision, width), None, env)
    else:
        write(check_report.summaries(results), None, env)
    if len(reports) < len(results):
        raise typer.Exit(ExitCode.BAD_INPUT)
    if not all(report.ok for report in reports):
        raise typer.Exit(ExitCode.WRONG_ANSWERS)
