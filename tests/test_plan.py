"""The library side of `attncli compute`: a Request, its plan, and the one registry of output formats.

The command line is a client of `attncli.plan`: what a plan holds is, to the byte, what the command
writes. The registry (attncli.render.formats) is the one place that says which format writes what.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attncli import pipeline, render
from attncli.cli import app
from attncli.cli import compute as command
from attncli.errors import AttnError
from attncli.plan import Analyses, Plan, Request, load, plan
from attncli.render import formats
from attncli.render.formats import FORMATS
from attncli.render.layout import fit, to_text
from tests.paths import SAMPLES

BANK = str(SAMPLES / "bank.yaml")
LAYERS = str(SAMPLES / "layers.yaml")


def made_of(request: Request) -> Plan:
    """The plan of `request`, its problem loaded as the command line loads it."""
    return plan(request, load(request))


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, ["compute", *args], env={"COLUMNS": "100", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("fmt", ["json", "csv", "tsv", "markdown", "latex"])
def test_a_plans_document_is_what_compute_prints(fmt: str) -> None:
    shaped = fmt in ("markdown", "latex")  # the formats that take decimals and the queries to follow
    made = made_of(Request(BANK, {}, fmt, precision=3 if shaped else None, follow=("bank",) if shaped else None))
    args = ("--precision", "3", "--follow", "bank") if shaped else ()
    assert (made.pictures, made.figure) == (None, None)
    assert made.output == cli(BANK, "--format", fmt, *args)


def test_a_plans_human_output_is_styled_lines_for_a_width() -> None:
    made = made_of(Request(BANK, {}, "text", follow=("bank",)))
    assert callable(made.output)
    assert to_text(fit(made.output(100), 100)) == cli(BANK, "--format", "text", "--follow", "bank")


def test_npy_and_a_silent_run_need_the_result_alone() -> None:
    """npy is the output, streamed; with nothing shown the result is still computed (and so checked)."""
    written = made_of(Request(BANK, {}, "npy")).output
    stream = io.BytesIO()
    written(stream)  # type: ignore[operator]
    stream.seek(0)
    expected = pipeline.solve(pipeline.load(BANK)).output
    np.testing.assert_allclose(np.load(stream), expected, rtol=0, atol=1e-15)
    assert made_of(Request(BANK, {}, "json", quiet=True, shown=False)).output is None
    with pytest.raises(AttnError) as overflow:  # an output past float's range is refused even when not shown
        made_of(Request(None, {"queries": "1e200, 1e200", "keys": "1e200, 1e200", "values": "1"}, "npy", shown=False))
    assert overflow.value.key == "core.overflow"


def test_a_stack_plans_one_layer_and_its_rollout() -> None:
    made = made_of(Request(LAYERS, {}, "json", layer=2, rollout=True))
    document = json.loads(made.output)  # type: ignore[arg-type]
    assert document == json.loads(cli(LAYERS, "--format", "json", "--layer", "2", "--rollout"))
    assert "rollout" in document


def test_an_error_names_the_requests_field_and_the_command_line_its_option() -> None:
    """The library says which of its fields is wrong; the command line says which option gave it."""
    with pytest.raises(AttnError) as wrong:
        made_of(Request(BANK, {}, "rich", analyses=Analyses(ablate=("nobody",))))
    assert (wrong.value.where.source, wrong.value.where.field) == (None, "ablate")
    result = CliRunner().invoke(app, ["compute", BANK, "--ablate", "nobody"])
    assert result.exit_code == 2 and result.stderr.startswith("attncli: --ablate: ")


def test_every_format_that_writes_a_record_has_its_writer_and_no_other_does() -> None:
    steps = pipeline.solve(pipeline.load(BANK))
    stack = pipeline.solve(pipeline.load(LAYERS))
    for name, fmt in FORMATS.items():
        if fmt.human:
            continue
        for record, write, solved in (
            (formats.STEPS, render.document, steps),
            (formats.STACK, render.stack_document, stack),
        ):
            if record in fmt.writes:
                assert write(solved, name, render.Shape()), (name, record)  # type: ignore[arg-type]
            else:
                with pytest.raises(KeyError):
                    write(solved, name, render.Shape())  # type: ignore[arg-type]


def test_a_files_suffix_names_one_format() -> None:
    suffixes = [fmt.suffix for fmt in FORMATS.values() if fmt.suffix is not None]
    assert len(suffixes) == len(set(suffixes))
    assert (formats.implied_by(".JSON"), formats.implied_by(".md"), formats.implied_by(".yaml")) == (
        "json",
        "markdown",
        None,
    )
    class_only = ("html", "gradescope", "canvas", "grades")  # check's gradebooks; compute draws its view with --html
    steps_formats = tuple(name for name in FORMATS if name not in class_only)
    assert command.FORMATS == formats.offering(formats.STEPS) == steps_formats
    assert all(FORMATS[name].writes == {formats.CHECK} for name in class_only)


def test_every_shaping_option_is_honoured_by_the_human_formats() -> None:
    """--follow, --precision, --heatmap and --rollout shape the output for a reader: the human formats and the
    write-ups honour them all, a machine format refuses what it would ignore."""
    for name, fmt in FORMATS.items():
        if fmt.human or name in ("markdown", "latex"):
            assert fmt.honours == formats.SHAPED_FOR_READERS, name
    with pytest.raises(AttnError) as ignored:
        formats.refuse_options("json", ["--follow"])
    assert ignored.value.params["formats"] == "rich, text, markdown, latex"
    with pytest.raises(AttnError) as ignored:
        formats.refuse_options("npy", ["--rollout"])
    assert ignored.value.params["formats"] == "rich, text, markdown, latex, json, csv, tsv"


def test_a_stack_is_pictured_as_its_view_is_shown(tmp_path: Path) -> None:
    """--svg and --html of a stack record its step-by-step view, as they did before the view's cell budget was
    checked for pictures (which took a picture for a format that shows no stacked layers: exit 2)."""
    for picture in ("svg", "html"):
        out = tmp_path / f"stack.{picture}"
        result = CliRunner().invoke(app, ["compute", LAYERS, f"--{picture}", str(out), "-q"])
        assert (result.exit_code, result.stderr) == (0, ""), result.stderr
        written = out.read_text(encoding="utf-8").replace("&#160;", " ")
        assert "Layers, each reading" in written  # the stack's facts, the view's first lines
    made = made_of(Request(LAYERS, {}, "rich", pictures=("svg",), quiet=True, shown=False))
    assert made.pictures is not None and made.output is None
