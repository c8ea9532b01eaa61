"""`attncli check`: grade attention computed by hand, against a teacher's key or the file's own problem; a class's
gradebook in the format its course takes (Gradescope, Canvas, Moodle), and feedback to hand back."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, Optional

from attncli.cli.common import (
    Debug,
    Lang,
    NoColor,
    boundary,
    choose,
    command,
    completion,
    epilog,
    format_option,
    located,
    output_option,
)
from attncli.cli.environment import Environment
from attncli.cli.lean import argument, option
from attncli.cli.output import check_targets, output_format
from attncli.errors import ExitCode, fail
from attncli.i18n import describe, t
from attncli.render import formats

if TYPE_CHECKING:
    from attncli.cli.class_outputs import Plan
    from attncli.grading import submissions
    from attncli.grading.submissions import Result

FORMATS = formats.offering(formats.CHECK)
FEEDBACK_FORMATS = ("markdown", "html")
Format = Annotated[Optional[str], format_option(FORMATS)]
Output = Annotated[Optional[Path], output_option(FORMATS)]
EXAMPLES = epilog(
    "  attncli check homework.yaml",
    "  attncli check --key exercise-01-key.yaml class/*.yaml --format csv -o grades.csv",
    "  attncli check --keys ex/ submissions/*.yaml --format markdown",
    "  attncli check --keys ex/ submissions/*.yaml --roster export.csv --format canvas --assignment 'Attention 1'",
    "  attncli check --key key.yaml submission.yaml --format gradescope -o results.json",
    "  attncli check --keys ex/ submissions/*.yaml --feedback feedback/ --feedback-format html",
    "  attncli check homework.yaml --require all --min-decimals 4",
    t("help.check.answers_file"),
    "  student: Ana Ruiz",
    "  answers:",
    "    scores: [2, 1, 0]",
    "    weights: [0.6652, 0.2447, 0.0900]",
    exit_codes=t("help.exit_codes.check"),
)


class Options(NamedTuple):
    """The options of `check`, as the command line gives them (attncli.cli.common.boundary reads them here)."""

    files: Annotated[list[str], argument(metavar=t("help.metavar.file"), help=t("help.check.files"))]
    key: Annotated[Optional[str], option("--key", metavar=t("help.metavar.file"), help=t("help.check.key"))] = None
    keys: Annotated[Optional[Path], option("--keys", metavar=t("help.metavar.dir"), help=t("help.check.keys"))] = None
    tolerance: Annotated[Optional[float], option(min=0, help=t("help.check.tolerance"))] = None
    min_decimals: Annotated[Optional[int], option(min=0, max=17, help=t("help.check.min_decimals"))] = None
    require: Annotated[Optional[str], option(metavar=t("help.metavar.steps"), help=t("help.check.require"))] = None
    carry: Annotated[Optional[int], option(min=0, max=12, help=t("help.check.carry"))] = None
    precision: Annotated[int, option(min=0, max=17, help=t("help.check.precision"))] = 4
    format: Format = None
    output: Output = None
    roster: Annotated[
        Optional[Path], option("--roster", metavar=t("help.metavar.file"), help=t("help.check.roster"))
    ] = None
    match: Annotated[Optional[str], option("--match", metavar=t("help.metavar.column"), help=t("help.check.match"))] = (
        None
    )
    assignment: Annotated[
        Optional[str], option("--assignment", metavar=t("help.metavar.name"), help=t("help.check.assignment"))
    ] = None
    feedback: Annotated[
        Optional[Path], option("--feedback", metavar=t("help.metavar.dir"), help=t("help.check.feedback"))
    ] = None
    feedback_format: Annotated[
        Optional[str],
        option(
            "--feedback-format",
            metavar="markdown|html",
            autocompletion=completion(*FEEDBACK_FORMATS),
            help=t("help.check.feedback_format"),
        ),
    ] = None
    jobs: Annotated[Optional[int], option("--jobs", "-j", min=1, max=256, help=t("help.check.jobs"))] = None
    quiet: Annotated[bool, option("--quiet", "-q", help=t("help.check.quiet"))] = False
    no_color: NoColor = False
    lang: Lang = None
    debug: Debug = False


@command(t("help.check"), EXAMPLES)
@boundary
def check(env: Environment, given: Options) -> ExitCode:
    """Read the options, the class list and the keys; grade every file (on every core) and write the gradebook."""
    from attncli import inputs
    from attncli.cli import class_outputs
    from attncli.grading import pool, submissions
    from attncli.grading.submissions import NOT_GRADED, RIGHT

    format = choose(output_format(given.format, given.output, FORMATS), FORMATS, "--format")
    plan = _plan(given, format)
    options = _options(given)
    source: pool.Keys = submissions.load_key(given.key, options) if given.key is not None else None
    if given.keys is not None:
        source = submissions.load_keys(given.keys, options)
    for file in given.files:  # read as they are graded (maybe by another process): none of them may be an output
        if file != "-" and os.path.isfile(file):
            inputs.note(os.stat(file), file)
    check_targets(("-o", given.output))  # before anything is graded or said (again once the files are read)
    jobs = 1 if "-" in given.files else given.jobs or pool.cores()  # stdin is read in this process

    def graded(then: Callable[[Result], Any]) -> Iterator[Any]:
        return pool.each_graded(given.files, source, options, describe, jobs, then)

    found = class_outputs.write_class(plan, graded, env)
    if found.count(NOT_GRADED):
        return ExitCode.BAD_INPUT
    return ExitCode.OK if found.count(RIGHT) == found.records else ExitCode.WRONG_ANSWERS


def _options(given: Options) -> submissions.Options:
    """The grading settings the command line gives, each checked where it was given."""
    from attncli.grading import submissions
    from attncli.parsing import answers

    if given.key is not None and given.keys is not None:
        raise fail("check.key_and_keys").at(source="--keys")
    if given.tolerance is not None and not answers.is_tolerance(given.tolerance):
        raise fail("check.bad_tolerance", got=repr(given.tolerance)).at(source="--tolerance")
    with located("--require"):
        required = answers.step_list(given.require) if given.require is not None else None
    return submissions.Options(given.tolerance, given.carry, min_decimals=given.min_decimals, require=required)


def _plan(given: Options, format: str) -> Plan:
    """What to write, the options that shape it checked against each other; the class list read."""
    from attncli.cli import class_outputs
    from attncli.gradebook import roster

    _refuse_unused(given, format)
    if format == "gradescope" and len(given.files) != 1:
        raise fail("check.gradescope_one_file", count=len(given.files)).at(source="--format")
    if format == "canvas" and (given.roster is None or given.assignment is None):
        raise fail("check.canvas_needs", missing="--roster" if given.roster is None else "--assignment").at(
            source="--format"
        )
    assignment = _assignment(given.assignment) if given.assignment is not None else None
    if given.feedback is not None and given.feedback.exists() and not given.feedback.is_dir():
        raise fail("check.feedback_not_folder", path=str(given.feedback)).at(source="--feedback")
    kind = choose(given.feedback_format or "markdown", FEEDBACK_FORMATS, "--feedback-format")
    with located("--roster"):
        found = roster.read_roster(str(given.roster), given.match) if given.roster is not None else None
    rule = given.tolerance is None
    return class_outputs.Plan(
        format, given.output, given.precision, rule, given.quiet, len(given.files), found, assignment,
        given.feedback, kind,
    )  # fmt: skip


def _refuse_unused(given: Options, format: str) -> None:
    """An option that would be ignored is an error: --match without a class list, --assignment but for Canvas,
    --feedback-format without --feedback, a class list for Gradescope's one submission."""
    if given.match is not None and given.roster is None:
        raise fail("check.needs_option", option="--match", needs="--roster").at(source="--match")
    if given.assignment is not None and format != "canvas":
        raise fail("check.needs_option", option="--assignment", needs="--format canvas").at(source="--assignment")
    if given.feedback_format is not None and given.feedback is None:
        raise fail("check.needs_option", option="--feedback-format", needs="--feedback").at(source="--feedback-format")
    if given.roster is not None and format == "gradescope":
        raise fail("check.gradescope_no_roster").at(source="--roster")


def _assignment(name: str) -> str:
    """Canvas's column for the points: a name, on one line, at most MAX_NAME characters."""
    from attncli.errors import printable
    from attncli.parsing.fields import MAX_NAME

    if not name.strip() or printable(name) != name or len(name) > MAX_NAME:
        raise fail("check.bad_assignment", limit=MAX_NAME).at(source="--assignment")
    return name.strip()
