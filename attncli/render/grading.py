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
from attncli.gradebook.points import ROUNDED, Score, step_status
from attncli.gradebook.records import NO_FILE, StudentRecord, Tally, tally
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
from attncli.grading.submissions import INCOMPLETE, NOT_GRADED, PROBLEM_CHANGED
from attncli.i18n import catalogue, current_language, t
from attncli.render.json_doc import dumps
from attncli.render.layout import BLANK, Line, line, table
from attncli.render.long_table import text_cell
from attncli.render.points import number, points_text
from attncli.steps import LOGITS, QUERY_TILES, ROWS, TOKENS, reported
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
    "rounded", "score", "max_score", "percent", "student", "student_id",
)  # fmt: skip
NEAR = 10  # a wrong number within this many times the rule's allowance shows the rule's arithmetic
CORNERS = {
    TOKENS: "render.token",
    QUERY_TILES: "check.query_tile",
    ROWS: "render.row",
}  # what a table's rows are; else the queries


def human(report: Report, precision: int, width: int, rule: bool = True, score: Score | None = None) -> list[Line]:
    """Every answered step as a table of marked cells, its diagnosis, the points (`score`), and the summary line.

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
    if score is not None:
        out.append(line((points_line(score), "bold")))
    out.append(line((summary(report), "bold green" if report.ok else "bold red")))
    return out


def label(step: StepReport) -> str:
    """The step's name in the user's language, with its head when the answer belongs to one of several."""
    softmax = reported(step.step, step.head).place == LOGITS  # a softmax homework's step: its own name if it has one
    own = f"check.softmax_step.{step.step}"
    name = t(own if softmax and own in catalogue(current_language()) else f"check.step.{step.step}")
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


def file_line(record: StudentRecord) -> str:
    """One plain line for one file (or a student of the class list without one): who, its points and its summary,
    or why it was not graded."""
    if record.file is None:
        return f"{printable(_who(record) or '?')}: {t('gradebook.feedback.no_file')}"
    who = _who(record)
    name = printable(record.file) + (f" ({printable(who)})" if who else "")
    if record.report is not None:
        scored = f"{points_line(record.score)}; " if record.score is not None else ""
        return f"{name}: {scored}{summary(record.report)}"
    if record.status == PROBLEM_CHANGED:
        return f"{name}: {t('check.problem_changed', fields=', '.join(record.changed))}"
    return f"{name}: {t('check.not_graded')}"


def _who(record: StudentRecord) -> str:
    """A student as a line names them: their name, their id, or both ("" when the file says neither)."""
    if record.student and record.student_id:
        return f"{record.student}, {record.student_id}"
    return record.student or record.student_id or ""


def points_line(score: Score) -> str:
    """`points: 13/3 ≈ 4.33 of 7 (61.90 %)`."""
    return t("check.points", points=points_of(score))


def points_of(score: Score) -> str:
    """`13/3 ≈ 4.33 of 7 (61.90 %)`: exact points for people, and the percent."""
    shown = {"score": points_text(score.score), "max_score": points_text(score.max_score)}
    if score.percent is None:
        return t("check.points_of_no_percent", **shown)
    return t("check.points_of", **shown, percent=str(score.percent))


def total(found: Tally) -> str:
    """The line under several files' lines: how many are right, wrong, incomplete, changed, unreadable or missing,
    and how many of the keys' cells are right."""
    absent = found.count(NO_FILE)
    return t(
        "check.total",
        files=found.records - absent,
        ok=found.count(RIGHT),
        rounded=found.count(ROUNDED),
        wrong=found.count(WRONG),
        incomplete=found.count(INCOMPLETE),
        changed=found.count(PROBLEM_CHANGED),
        broken=found.count(NOT_GRADED),
        no_file=t("check.total_no_file", students=absent) if absent else "",
        correct=found.right,
        cells=found.cells,
    )


def summary_line(record: StudentRecord, width: int | None = None) -> str:
    """A record's line: unwrapped for a script that reads one per line; for a terminal `width` wide, wrapped
    between words, its continuation indented."""
    return _wrapped(file_line(record), width)


def _wrapped(text: str, width: int | None) -> str:
    if width is None:
        return text + "\n"
    wrapped = textwrap.wrap(text, width, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)
    return "\n".join(wrapped) + "\n"


def total_line(found: Tally, width: int | None = None) -> str:
    """The total's line, wrapped as `summary_line` wraps a file's."""
    return _wrapped(total(found), width)


def summaries(records: Sequence[StudentRecord], width: int | None = None) -> str:
    """Several files: one line per file (`summary_line`), then the total."""
    return "".join(summary_line(record, width) for record in records) + total_line(tally(records), width)


def json_lines(records: Sequence[StudentRecord]) -> str:
    """One JSON object per file, one per line, in the order the files were given (numbers at full precision)."""
    return "".join(map(json_line, records))


def json_line(record: StudentRecord) -> str:
    """A record's JSON object, on one line: the file's verdict, its steps, then its points and who it is from."""
    report = record.report
    first = report.first_mistake if report is not None else None
    score = record.score
    document = {
        "file": record.file,
        "exercise": record.exercise,
        "status": record.status,
        "ok": record.status == RIGHT,
        "changed": list(record.changed),
        "first_mistake": None if first is None else _step_name(first),
        "steps": [] if report is None else [_json_step(step) for step in report.steps],
    }
    if record.error is not None:  # only a file not graded
        document["error"] = record.error
    return dumps(
        {
            **document,
            "score": None if score is None else float(score.score),
            "max_score": None if score is None else float(score.max_score),
            "percent": None if score is None or score.percent is None else float(score.percent),
            "student": record.student,
            "student_id": record.student_id,
        }
    )


def _json_step(step: StepReport) -> dict:
    return {
        "step": step.step,
        "head": step.head,
        **({} if step.layer is None else {"layer": step.layer}),
        "status": step_status(step),
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


def csv_text(records: Sequence[StudentRecord]) -> str:
    """A gradebook: a header, then one row per file (steps counted by status; codes `step:code` joined by ';')."""
    return csv_header() + "".join(map(csv_row, records))


def csv_header() -> str:
    return _csv_line(CSV_HEADER)


def csv_row(record: StudentRecord) -> str:
    """A record's row: its verdict, each step status's count, its codes, the key's cells right of the key's cells,
    the error; then the steps wrong only by rounding, the points and who it is from."""
    report, score = record.report, record.score
    steps = report.steps if report is not None else ()
    first = report.first_mistake if report is not None else None
    statuses = [step_status(step) for step in steps]
    scored = () if score is None else score.steps
    return _csv_line(
        (
            text_cell(record.file or ""),
            text_cell(record.exercise or ""),
            record.status,
            *(statuses.count(status) for status in STEP_STATUSES),
            "" if first is None else _step_name(first),
            ";".join(f"{_step_name(step)}:{code}" for step in steps for code in step.diagnosis),
            sum(step.right for step in scored),
            sum(step.cells for step in scored),
            text_cell(record.error or ", ".join(record.changed)),
            statuses.count(ROUNDED),
            *(("", "", "") if score is None else _points_cells(score)),
            text_cell(record.student or ""),
            text_cell(record.student_id or ""),
        )
    )


def _points_cells(score: Score) -> tuple[str, str, str]:
    """score, max_score (full precision, plain digits) and percent (2 decimals; blank out of 0)."""
    return number(score.score), number(score.max_score), "" if score.percent is None else str(score.percent)


def _csv_line(row: Sequence[object]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(row)
    return buffer.getvalue()


def _shape_slip() -> str:
    """What a step whose shape fits neither way shows instead of its count of right cells."""
    return t("check.wrong_shape_short")


def _arithmetic(step: StepReport) -> list[str]:
    """The rounding rule at work where it decided: a number right only thanks to the rounding its inputs carry in,
    or one wrong by less than ten times what the rule allows (a rounding slip, not a method's). Each line shows
    the number and the bound that decided (the student's own inputs' where they did), its sign the verdict's."""
    out = []
    for cell in step.cells:
        entry = cell.entry
        expected = cell.expected if cell.against is None else cell.against
        if entry is None or entry.value is None or entry.decimals is None or not math.isfinite(expected):
            continue
        difference, allowed = abs(entry.value - expected), cell.own + cell.carried_in
        near = cell.status == WRONG and difference <= NEAR * allowed
        if not (near or (cell.status in (RIGHT, CARRIED) and difference > cell.own)):
            continue
        digits = entry.decimals + 2
        numbers = {name: _plain(value, digits) for name, value in (("expected", expected), ("difference",
            difference), ("own", cell.own), ("carried", cell.carried_in))}  # fmt: skip
        relation = ">" if cell.status == WRONG else "≤"  # the rule's verdict; the bound adds the last bits' margin
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
