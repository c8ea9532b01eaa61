"""`attncli template`: the blank answers: section a student fills in for a problem."""

from __future__ import annotations

from typing import Annotated

from attncli.cli.common import Debug, Lang, Output, boundary, command, epilog
from attncli.cli.environment import Environment
from attncli.cli.lean import argument
from attncli.cli.output import write
from attncli.errors import ExitCode
from attncli.i18n import t

EXAMPLES = epilog(
    "  attncli template samples/bank.yaml > answers.yaml",
    "  attncli template exercise-07.yaml -o exercise-07-answers.yaml",
)


@command(t("help.template"), EXAMPLES)
@boundary
def template(
    env: Environment,
    file: Annotated[str, argument(metavar=t("help.metavar.file"), help=t("help.template.file"))],
    output: Output = None,
    lang: Lang = None,
    debug: Debug = False,
) -> ExitCode:
    from attncli import pipeline, submissions, templates, yamldoc

    document = yamldoc.read(file)
    steps = pipeline.solve(pipeline.load(document))
    write(templates.template(steps, submissions.exercise_id(document)), output, env)
    return ExitCode.OK
