"""`attncli template`: the blank answers: section a student fills in for a problem."""

from __future__ import annotations

from typing import Annotated

import typer

from attncli.cli.common import Debug, Lang, Output, boundary, command, epilog
from attncli.cli.environment import Environment
from attncli.cli.output import write
from attncli.i18n import t

EXAMPLES = epilog(
    "  attncli template samples/bank.yaml > answers.yaml",
    "  attncli template exercise-07.yaml -o exercise-07-answers.yaml",
)


@command(t("help.template"), EXAMPLES)
@boundary
def template(
    env: Environment,
    file: Annotated[str, typer.Argument(metavar=t("help.metavar.file"), help=t("help.template.file"))],
    output: Output = None,
    lang: Lang = None,
    debug: Debug = False,
) -> None:
    from attncli import pipeline, yamldoc
    from attncli.grading import submissions, templates

    document = yamldoc.read(file)
    steps = pipeline.solve(pipeline.load(document))
    write(templates.template(steps, submissions.exercise_id(document)), output, env)
