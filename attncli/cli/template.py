"""`attncli template`: the blank answers: section a student fills in for a problem."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

from attncli.cli.common import Debug, Lang, boundary, command, epilog
from attncli.cli.environment import Environment
from attncli.cli.lean import argument, option
from attncli.cli.output import check_targets, write
from attncli.errors import ExitCode, fail
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
    output: Annotated[
        Optional[Path], option("--output", "-o", metavar=t("help.metavar.file"), help=t("help.template.output"))
    ] = None,
    lang: Lang = None,
    debug: Debug = False,
) -> ExitCode:
    from attncli.render.formats import implied_by

    if output is not None and implied_by(output.suffix) is not None:  # a template is YAML, whatever its name says
        raise fail("template.bad_suffix", path=str(output), suffix=output.suffix).at(source="-o")
    from attncli import pipeline, softmax, yamldoc
    from attncli.grading import submissions, templates
    from attncli.parsing import answers, softmax_answers

    document = yamldoc.read(file)
    exercise = submissions.exercise_id(document)
    if softmax_answers.is_homework(document):  # `logits:`: a softmax homework (issue 29)
        text = templates.softmax_template(softmax.compute(pipeline.logits(file)), exercise)
    else:
        steps = pipeline.solve(pipeline.load(document))
        text = templates.template(steps, exercise, answers.read_settings(document))
    check_targets(("-o", output))
    write(text, output, env)
    return ExitCode.OK
