"""The check report: step by step for a student, one line per file, and a gradebook (JSON lines, CSV, Markdown).

A gradebook has exactly one row (or object) per file given, whatever happened to
it: right, wrong, problem_changed (its problem differs from the key's) or
not_graded (with the error). Statuses and codes stay English in JSON and CSV, for
scripts; the human and Markdown reports speak the user's language.
"""

from __future__ import annotations

import csv
import io
import math
import textwrap
from collections.abc import Sequence

from attncli.errors import printable
from attncli.grading import (
    CARRIED,
    MISSING,
    NOT_ANSWERED,
    RIGHT,
    TOO_FEW_DECIMALS,
    WRONG,
    Cell,
    Report,
    StepReport,
)
from attncli.grading.submissions import NOT_GRADED, PROBLEM_CHANGED, Result
from attncli.i18n import t
from attncli.render import markdown as md
from attncli.render.json_doc import dumps
from attncli.render.layout import BLANK, Line, line, table
from attncli.render.long_table import text_cell
from attncli.steps import QUERY_TILES, ROWS, TOKENS, position, reported
from attncli.written import fixed

MARKS = {
    RIGHT: ("✓", "green"),
    CARRIED: ("↷", "yellow"),
    WRONG: ("✗", "bold red"),
    TOO_FEW_DECIMALS: ("✗", "bold red"),
    NOT_ANSWERED: ("?", "dim"),
    MISSING: ("—", "bold red"),
}
STEP_STATUSES = (RIGHT, CARRIED, WRONG, NOT_ANSWERED, MISSING)
CSV_HEADER = (
    "file", "exercise", "status", *STEP_STATUSES, "first_mistake", "codes", "cells_right", "cells", "error",
)  # fmt: skip
NEAR = 10  # a wrong number within this many times the rule's allowance shows the rule's arithmetic
CORNERS = {
    TOKENS: "render.token",
    QUERY_TILES: "check.query_tile",
    ROWS: "render.row",
}  # what a table's rows are; else the queries


def human(report: Report, precision: int, width: int, rule: bool = True) -> list[Line]:
    """Every answered step as a table of marked cells, its diagnosis, and the summary line.

    With `rule` (no --tolerance), a cell that the rounding rule decided shows its arithmetic.
    """
    out = [line((printable(report.file), "bold underline")), line((t("check.legend"), "dim")), BLANK]
    first = report.first_mistake
    for step in report.steps:
        count = t("check.count", correct=step.correct, total=step.total) if step.cells else _shape_slip()
        title = f"{label(step)}: {count}"
        if step is first:
            title += t("check.first_mistake_mark")
        if step.status == MISSING:
            out += [line((f"{label(step)}: {t('check.missing_step')}", "bold red")), BLANK]
            continue
        if step.cells:
            out += _table(step, title, precision, width)
        else:
            out.append(line((title, "bold")))
            out.append(line((t("check.wrong_shape", rows=len(step.rows), columns=len(step.columns)), "bold red")))
        if step.status == CARRIED:
            out.append(line((t("check.carried_note"), "yellow")))
        out += [line((text, "dim")) for text in _arithmetic(step)] if rule else []
        for code in step.diagnosis:
            out.append(line((f"{t(f'check.diagnosis.{code}')} ({code}): ", "bold"), t(f"check.hint.{code}")))
        if step.status == WRONG and not step.diagnosis:
            out.append(line((t("check.no_diagnosis"), "dim")))
        out.append(BLANK)
    out.append(line((summary(report), "bold green" if report.ok else "bold red")))
    return out


def label(step: StepReport) -> str:
    """The step's name in the user's language, with its head when the answer belongs to one of several."""
    name = t(f"check.step.{step.step}")
    return name if step.head_name is None else t("check.step_of_head", step=name, head=step.head_name)


def summary(report: Report) -> str:
    """One line: the count of each step, then every wrong or missing step with its diagnosis (or that all is right)."""
    parts = []
    for step in report.steps:
        if step.status == MISSING:
            parts.append(f"{label(step)}: {t('check.missing_step')}")
            continue
        part = f"{label(step)}: {step.correct}/{step.total}" if step.cells else f"{label(step)}: {_shape_slip()}"
        parts.append(part + t("check.carried_mark") if step.status == CARRIED else part)
    mistakes = [step for step in report.steps if step.status in (WRONG, MISSING)]
    if report.ok:
        verdict = t("check.all_right")
    elif not mistakes:
        verdict = t("check.nothing_answered_yet")
    else:
        verdict = "; ".join(f"{label(step)}: {_verdict(step)}" for step in mistakes)
    return f"{', '.join(parts)} — {verdict}"


def _verdict(step: StepReport) -> str:
    if step.status == MISSING:
        return t("check.missing_step")
    if step.diagnosis:
        return ", ".join(t(f"check.diagnosis.{code}") for code in step.diagnosis)
    return t("check.status.wrong")


def file_line(result: Result) -> str:
    """One plain line for one file: its summary, or why it was not graded."""
    if result.report is not None:
        return f"{printable(result.file)}: {summary(result.report)}"
    if result.status == PROBLEM_CHANGED:
        return f"{printable(result.file)}: {t('check.problem_changed', fields=', '.join(result.changed))}"
    return f"{printable(result.file)}: {t('check.not_graded')}"


def total(results: Sequence[Result]) -> str:
    """The line under several files' summaries: how many are right, wrong, changed or unreadable, and how many cells."""
    reports = [result.report for result in results if result.report is not None]
    return t(
        "check.total",
        files=len(results),
        ok=sum(result.status == RIGHT for result in results),
        wrong=sum(result.status == WRONG for result in results),
        changed=sum(result.status == PROBLEM_CHANGED for result in results),
        broken=sum(result.status == NOT_GRADED for result in results),
        correct=sum(step.correct for report in reports for step in report.steps),
        cells=sum(step.total for report in reports for step in report.steps),
    )


def summaries(results: Sequence[Result], width: int | None = None) -> str:
    """Several files: one line per file, then the total. Plain lines, unwrapped for a script that reads one per
    line; for a terminal `width` wide, each wrapped between words, its continuation indented."""
    lines = (*map(file_line, results), total(results))
    if width is not None:
        lines = tuple(
            "\n".join(
                textwrap.wrap(line, width, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)
            )
            for line in lines
        )
    return "".join(f"{text}\n" for text in lines)


def json_lines(results: Sequence[Result]) -> str:
    """One JSON object per file, one per line, in the order the files were given (numbers at full precision)."""
    return "".join(dumps(_json(result)) for result in results)


def _json(result: Result) -> dict:
    report = result.report
    first = report.first_mistake if report is not None else None
    document = {
        "file": result.file,
        "exercise": result.exercise,
        "status": result.status,
        "ok": result.status == RIGHT,
        "changed": list(result.changed),
        "first_mistake": None if first is None else _step_name(first),
        "steps": [] if report is None else [_json_step(step) for step in report.steps],
    }
    return document if result.error is None else {**document, "error": result.error}  # only a file not graded


def _json_step(step: StepReport) -> dict:
    return {
        "step": step.step,
        "head": step.head,
        **({} if step.layer is None else {"layer": step.layer}),
        "status": step.status,
        "correct": step.correct,
        "total": step.total,
        "cells": [_json_cell(step, cell) for cell in step.cells],
        "diagnosis": list(step.diagnosis),
    }


def _json_cell(step: StepReport, cell: Cell) -> dict:
    return {
        "row": cell.row,
        "column": cell.column,
        "row_name": step.rows[cell.row],
        "column_name": step.columns[cell.column],
        "given": None if cell.entry is None else cell.entry.text,
        "expected": cell.expected if math.isfinite(cell.expected) else None,
        "masked": cell.masked,
        "status": cell.status,
        "own": cell.own,
        "carried_in": cell.carried_in,
    }


def _step_name(step: StepReport) -> str:
    """A step as scripts name it: `weights`, or `weights[2]` for the second head's."""
    return step.step if step.head is None or step.head_name is None else f"{step.step}[{step.head + 1}]"


def csv_text(results: Sequence[Result]) -> str:
    """A gradebook: a header, then one row per file (steps counted by status; codes `step:code` joined by ';')."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for result in results:
        report = result.report
        steps = report.steps if report is not None else ()
        first = report.first_mistake if report is not None else None
        error = result.error or ", ".join(result.changed)
        writer.writerow(
            (
                text_cell(result.file),
                text_cell(result.exercise or ""),
                result.status,
                *(sum(step.status == status for step in steps) for status in STEP_STATUSES),
                "" if first is None else _step_name(first),
                ";".join(f"{_step_name(step)}:{code}" for step in steps for code in step.diagnosis),
                sum(step.correct for step in steps),
                sum(step.total for step in steps),
                text_cell(error),
            )
        )
    return buffer.getvalue()


def markdown(results: Sequence[Result]) -> str:
    """A class report: one row per student file, one column per step, then the total."""
    columns = _columns(results)
    header = [t("check.md.file"), t("check.md.status"), *(label(step) for step in columns.values())]
    header += [t("check.md.cells"), t("check.md.note")]
    rows = [header, ["---"] * len(header)]
    for result in results:
        found = {} if result.report is None else {_column(s): s for s in result.report.steps}
        cells = [_md_step(found.get(key)) for key in columns]
        steps = list(found.values())
        count = f"{sum(s.correct for s in steps)}/{sum(s.total for s in steps)}" if result.report else ""
        note = result.error or (t("check.problem_changed", fields=", ".join(result.changed)) if result.changed else "")
        rows.append([f"`{result.file}`", t(f"check.status.{result.status}"), *cells, count, note])
    table_text = "".join("| " + " | ".join(md.cell(text) for text in row) + " |\n" for row in rows)
    return f"# {t('check.md.title')}\n\n{table_text}\n{total(results)}\n"


Column = tuple[int | None, str, int | None]  # (layer, step, head): stacked layers repeat each step


def _column(step: StepReport) -> Column:
    return step.layer, step.step, step.head


def _columns(results: Sequence[Result]) -> dict[Column, StepReport]:
    """Every step any file answered (or misses), in the order of the calculation, with one report naming it."""
    seen: dict[Column, StepReport] = {}
    for result in results:
        for step in result.report.steps if result.report is not None else ():
            seen.setdefault(_column(step), step)

    return {key: seen[key] for key in sorted(seen, key=lambda key: position(key[1], key[2], key[0]))}


def _md_step(step: StepReport | None) -> str:
    if step is None:
        return ""
    mark = MARKS[step.status][0]
    if step.status in (MISSING, NOT_ANSWERED):
        return f"{mark} {t(f'check.status.{step.status}')}"
    codes = "".join(f" `{code}`" for code in step.diagnosis)
    return f"{mark} {step.correct}/{step.total}{codes}" if step.cells else f"{mark} {_shape_slip()}{codes}"


def _shape_slip() -> str:
    """What a step whose shape fits neither way shows instead of its count of right cells."""
    return t("check.wrong_shape_short")


def _arithmetic(step: StepReport) -> list[str]:
    """The rounding rule at work where it decided: a number right only thanks to the rounding its inputs carry in,
    or one wrong by less than ten times what the rule allows (a rounding slip, not a method's)."""
    out = []
    for cell in step.cells:
        entry = cell.entry
        if entry is None or entry.value is None or entry.decimals is None or not math.isfinite(cell.expected):
            continue
        difference, allowed = abs(entry.value - cell.expected), cell.own + cell.carried_in
        near = cell.status == WRONG and difference <= NEAR * allowed
        if not (near or (cell.status == RIGHT and difference > cell.own)):
            continue
        digits = entry.decimals + 2
        numbers = {name: _plain(value, digits) for name, value in (("expected", cell.expected), ("difference",
            difference), ("own", cell.own), ("carried", cell.carried_in))}  # fmt: skip
        relation = "≤" if difference <= allowed else ">"
        cell_name = f"{step.rows[cell.row]}, {step.columns[cell.column]}"
        out.append(t("check.arithmetic", cell=cell_name, given=printable(entry.text), relation=relation, **numbers))
    return [t("check.arithmetic_rule"), *out] if out else []


def _plain(value: float, decimals: int) -> str:
    """`value` with at most `decimals` decimals and no trailing zeros: 0.00005, 0.6652."""
    return f"{value:.{decimals}f}".rstrip("0").rstrip(".") or "0"


def _table(step: StepReport, title: str, precision: int, width: int) -> list[Line]:
    grid: list[list[str | Line]] = [[name, *([""] * len(step.columns))] for name in step.rows]
    for cell in step.cells:
        grid[cell.row][cell.column + 1] = _cell(cell, precision)
    corner = t(CORNERS.get(reported(step.step, step.head).rows, "render.query"))
    return table(title, [corner, *step.columns], grid, width, right=range(1, len(step.columns) + 1))


def _cell(cell: Cell, precision: int) -> Line:
    """The student's number as written, its mark in colour, and the right value when it is not right."""
    mark, style = MARKS[cell.status]
    if cell.entry is None:
        return line((mark, style))
    written = printable(cell.entry.text)  # the student's text: "0.6652\r" shown as 0.6652\r
    if cell.status == RIGHT:
        return line(f"{written} ", (mark, style))
    expected = t("render.masked") if math.isinf(cell.expected) else fixed(cell.expected, precision)
    return line(f"{written} ", (mark, style), (f" ({expected})", style))
