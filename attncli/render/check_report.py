"""The check report: step by step for a student (coloured or plain), JSON lines for scripts, CSV for a gradebook."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence

from attncli.grading import CARRIED, NOT_ANSWERED, RIGHT, TOO_FEW_DECIMALS, WRONG, Cell, Report, StepReport
from attncli.i18n import t
from attncli.render.layout import BLANK, Line, line, table
from attncli.render.numbers import fixed

MARKS = {
    RIGHT: ("✓", "green"),
    CARRIED: ("↷", "yellow"),
    WRONG: ("✗", "bold red"),
    TOO_FEW_DECIMALS: ("✗", "bold red"),
    NOT_ANSWERED: ("?", "dim"),
}
CSV_HEADER = ("file", "step", "head", "correct", "total", "diagnosis")
TOKEN_ROWS = ("keys", "values")  # steps whose rows are the key tokens; the others' rows are the queries
Result = tuple[str, Report | str]  # a file and its report, or the error that kept it from being graded


def human(report: Report, precision: int, width: int) -> list[Line]:
    """Every answered step as a table of marked cells, its diagnosis, and the summary line."""
    out = [line((report.file, "bold underline")), line((t("check.legend"), "dim")), BLANK]
    first = report.first_mistake
    for step in report.steps:
        title = f"{label(step)}: {t('check.count', correct=step.correct, total=step.total)}"
        if step is first:
            title += t("check.first_mistake_mark")
        out += _table(step, title, precision, width)
        if step.status == CARRIED:
            out.append(line((t("check.carried_note"), "yellow")))
        for code in step.diagnosis:
            out.append(line((f"{t(f'check.diagnosis.{code}')} ({code}): ", "bold"), t(f"check.hint.{code}")))
        if step.status == WRONG and not step.diagnosis:
            out.append(line((t("check.no_diagnosis"), "dim")))
        out.append(BLANK)
    out.append(line((summary(report), "bold green" if report.ok else "bold red")))
    return out


def label(step: StepReport) -> str:
    """The step's field name, with its head when the answer belongs to one of several."""
    return step.step if step.head_name is None else t("check.step_of_head", step=step.step, head=step.head_name)


def summary(report: Report) -> str:
    """One line: the count of each step, then the first mistake's diagnosis (or that all is right)."""
    parts = []
    for step in report.steps:
        part = f"{label(step)}: {step.correct}/{step.total}"
        parts.append(part + t("check.carried_mark") if step.status == CARRIED else part)
    first = report.first_mistake  # None exactly when all is right: a carried error always starts at a wrong step
    if first is None:
        verdict = t("check.all_right")
    elif first.diagnosis:
        verdict = "; ".join(t(f"check.diagnosis.{code}") for code in first.diagnosis)
    else:
        verdict = t("check.first_mistake", step=label(first))
    return f"{', '.join(parts)} — {verdict}"


def total(reports: Sequence[Report], broken: int) -> str:
    """The line under several files' summaries: how many are right, wrong or unreadable, and how many cells."""
    return t(
        "check.total",
        files=len(reports) + broken,
        ok=sum(report.ok for report in reports),
        wrong=sum(not report.ok for report in reports),
        broken=broken,
        correct=sum(step.correct for report in reports for step in report.steps),
        cells=sum(step.total for report in reports for step in report.steps),
    )


def summaries(results: Sequence[Result]) -> str:
    """Several files: one summary line per file (or that it could not be graded), then the total.

    Plain lines, never wrapped, so that a script reads one file per line.
    """
    lines = [
        f"{file}: {t('check.not_graded') if isinstance(result, str) else summary(result)}" for file, result in results
    ]
    reports = [result for _, result in results if not isinstance(result, str)]
    lines.append(total(reports, len(results) - len(reports)))
    return "".join(f"{line}\n" for line in lines)


def json_lines(results: Sequence[Result]) -> str:
    """One JSON object per file, one per line, in the order the files were given."""
    return "".join(
        _json_error(file, result) if isinstance(result, str) else json_line(result) for file, result in results
    )


def json_line(report: Report) -> str:
    """One JSON object on one line (numbers at full precision; null for a masked score)."""
    document = {
        "file": report.file,
        "ok": report.ok,
        "steps": [
            {
                "step": step.step,
                "head": step.head,
                "status": step.status,
                "correct": step.correct,
                "total": step.total,
                "cells": [_json_cell(step, cell) for cell in step.cells],
                "diagnosis": list(step.diagnosis),
            }
            for step in report.steps
        ],
    }
    return json.dumps(document, ensure_ascii=False, allow_nan=False) + "\n"


def _json_error(file: str, message: str) -> str:
    """The line for a file that could not be graded, so a script still sees every file."""
    return json.dumps({"file": file, "ok": False, "error": message, "steps": []}, ensure_ascii=False) + "\n"


def csv_text(reports: Sequence[Report]) -> str:
    """A header and one row per file and step: file, step, head, correct, total, diagnosis (codes joined by ';')."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for report in reports:
        for step in report.steps:
            head = "" if step.head is None else step.head
            writer.writerow((report.file, step.step, head, step.correct, step.total, ";".join(step.diagnosis)))
    return buffer.getvalue()


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
    }


def _table(step: StepReport, title: str, precision: int, width: int) -> list[Line]:
    grid: list[list[str | Line]] = [[name, *([""] * len(step.columns))] for name in step.rows]
    for cell in step.cells:
        grid[cell.row][cell.column + 1] = _cell(cell, precision)
    corner = t("render.token") if step.step in TOKEN_ROWS else t("render.query")
    return table(title, [corner, *step.columns], grid, width, right=range(1, len(step.columns) + 1))


def _cell(cell: Cell, precision: int) -> Line:
    """The student's number as written, its mark in colour, and the right value when it is not right."""
    mark, style = MARKS[cell.status]
    if cell.entry is None:
        return line((mark, style))
    if cell.status == RIGHT:
        return line(f"{cell.entry.text} ", (mark, style))
    expected = t("render.masked") if math.isinf(cell.expected) else fixed(cell.expected, precision)
    return line(f"{cell.entry.text} ", (mark, style), (f" ({expected})", style))
