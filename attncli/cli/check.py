"""`attncli check`: grade attention computed by hand, against a teacher's key or the file's own problem."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

from attncli.cli.common import (
    Debug,
    Lang,
    NoColor,
    boundary,
    choose,
    command,
    epilog,
    format_option,
    located,
    output_option,
)
from attncli.cli.ending import say
from attncli.cli.environment import Environment
from attncli.cli.lean import argument, option
from attncli.cli.output import check_targets, output_format, print_human, write
from attncli.errors import ExitCode, fail
from attncli.i18n import describe, t
from attncli.render import formats

if TYPE_CHECKING:
    from attncli.grading.submissions import Result

FORMATS = formats.offering(formats.CHECK)
Format = Annotated[Optional[str], format_option(FORMATS)]
Output = Annotated[Optional[Path], output_option(FORMATS)]
EXAMPLES = epilog(
    "  attncli check homework.yaml",
    "  attncli check --key exercise-01-key.yaml class/*.yaml --format csv -o grades.csv",
    "  attncli check --keys ex/ submissions/*.yaml --format markdown",
    "  attncli check homework.yaml --require dot,scores,weights,output --min-decimals 4",
    t("help.check.answers_file"),
    "  answers:",
    "    scores: [2, 1, 0]",
    "    weights: [0.6652, 0.2447, 0.0900]",
    exit_codes=t("help.exit_codes.check"),
)


@command(t("help.check"), EXAMPLES)
@boundary
def check(
    env: Environment,
    files: Annotated[list[str], argument(metavar=t("help.metavar.file"), help=t("help.check.files"))],
    key: Annotated[Optional[str], option("--key", metavar=t("help.metavar.file"), help=t("help.check.key"))] = None,
    keys: Annotated[Optional[Path], option("--keys", metavar=t("help.metavar.dir"), help=t("help.check.keys"))] = None,
    tolerance: Annotated[Optional[float], option(min=0, help=t("help.check.tolerance"))] = None,
    min_decimals: Annotated[Optional[int], option(min=0, max=17, help=t("help.check.min_decimals"))] = None,
    require: Annotated[Optional[str], option(metavar=t("help.metavar.steps"), help=t("help.check.require"))] = None,
    carry: Annotated[Optional[int], option(min=0, max=12, help=t("help.check.carry"))] = None,
    precision: Annotated[int, option(min=0, max=17, help=t("help.check.precision"))] = 4,
    format: Format = None,
    output: Output = None,
    quiet: Annotated[bool, option("--quiet", "-q", help=t("help.check.quiet"))] = False,
    no_color: NoColor = False,
    lang: Lang = None,
    debug: Debug = False,
) -> ExitCode:
    format = choose(output_format(format, output, FORMATS), FORMATS, "--format")
    from attncli.grading import submissions
    from attncli.parsing import answers

    if key is not None and keys is not None:
        raise fail("check.key_and_keys").at(source="--keys")
    if tolerance is not None and not answers.is_tolerance(tolerance):
        raise fail("check.bad_tolerance", got=repr(tolerance)).at(source="--tolerance")
    with located("--require"):
        required = answers.step_list(require) if require is not None else None
    options = submissions.Options(tolerance, carry, min_decimals=min_decimals, require=required)
    source = submissions.load_key(key) if key is not None else submissions.load_keys(keys) if keys else None
    results = submissions.grade_files(files, source, options, describe)
    check_targets(("-o", output))  # every file read: none of them may be the gradebook
    for result in results:
        if result.error is not None:
            say(result.error, env.stderr)
    if not (quiet and output is None):
        _report(results, format, precision, output, env, tolerance is None)
    if any(result.status == submissions.NOT_GRADED for result in results):
        return ExitCode.BAD_INPUT
    if any(result.status != submissions.RIGHT for result in results):
        return ExitCode.WRONG_ANSWERS
    return ExitCode.OK


def _report(
    results: list[Result], format: str, precision: int, output: Path | None, env: Environment, rule: bool
) -> None:
    """The results in `format`: a gradebook, one file's report, or a line per file."""
    from attncli.render import grading as check_report

    if format == "json":
        write(check_report.json_lines(results), output, env)
    elif format == "csv":
        write(check_report.csv_text(results), output, env)
    elif format == "markdown":
        write(check_report.markdown(results), output, env)
    elif len(results) == 1 and results[0].report is not None:
        report = results[0].report
        print_human(lambda width: check_report.human(report, precision, width, rule), output, env)
    elif len(results) > 1:
        width = env.width if output is None and env.stdout_is_terminal else None  # a pipe reads a line per file
        write(check_report.summaries(results, width), output, env)
    elif results[0].changed:
        write(check_report.file_line(results[0]) + "\n", output, env)
