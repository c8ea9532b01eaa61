"""The class report of `check --format markdown` and `--format html`: a row per file (or student of the class list),
a column per step, the points, the total, and the class at a glance (what the class got wrong, step by step).

Both formats write the same rows: Markdown as the table it has always been (the file in a code span, each cell's
pipes made literal, a name's Markdown made literal), HTML as one escaped page (attncli.render.blocks).
"""

from __future__ import annotations

from collections.abc import Sequence

from attncli.gradebook.glance import glance
from attncli.gradebook.points import ROUNDED, step_status
from attncli.gradebook.records import StudentRecord, tally
from attncli.grading import MISSING, NOT_ANSWERED, StepReport
from attncli.i18n import current_language, t
from attncli.render import blocks
from attncli.render import markdown as md
from attncli.render.feedback import ROUNDED_MARK
from attncli.render.gradebook import glance_blocks
from attncli.render.grading import MARKS, label, points_of, total
from attncli.steps import position

Column = tuple[int | None, str, int | None]  # (layer, step, head): stacked layers repeat each step
Row = tuple[str, ...]


def markdown(records: Sequence[StudentRecord]) -> str:
    """The class report in Markdown: the title, the table, the total, then the class at a glance."""
    header, rows, named = _table(records)
    lines = [tuple(map(md.cell, header)), ("---",) * len(header), *(_md_row(row, named) for row in rows)]
    table_text = "".join("| " + " | ".join(line) + " |\n" for line in lines)
    found = glance(record.report for record in records if record.report is not None)
    return (
        f"# {t('check.md.title')}\n\n{table_text}\n{total(tally(records))}\n\n{blocks.markdown(glance_blocks(found))}"
    )


def html(records: Sequence[StudentRecord]) -> str:
    """The class report as one HTML page: the same table, the total and the class at a glance."""
    header, rows, _ = _table(records)
    found = glance(record.report for record in records if record.report is not None)
    page: list[blocks.Block] = [blocks.Heading(1, t("check.md.title")), blocks.Table(header, tuple(rows))]
    page += [blocks.Paragraph(total(tally(records))), *glance_blocks(found)]
    return blocks.html_document(page, t("check.md.title"), current_language())


def _md_row(row: Row, named: bool) -> Row:
    """A row as Markdown writes it: the file in a code span, the student's name with its Markdown made literal,
    every other cell's pipes made literal."""
    file = md.cell(f"`{row[0]}`") if row[0] else ""
    rest = row[2:] if named else row[1:]
    return (file, *((blocks.inline_markdown(row[1]),) if named else ()), *map(md.cell, rest))


def _table(records: Sequence[StudentRecord]) -> tuple[Row, list[Row], bool]:
    """The header and one row per record (file, student when any record names one, status, each step, cells right,
    points, note), and whether the student column is there."""
    columns = _columns(records)
    named = any(record.student or record.student_id for record in records)
    header: Row = (
        t("check.md.file"),
        *((t("check.md.student"),) if named else ()),
        t("check.md.status"),
        *(label(step) for step in columns.values()),
        t("check.md.cells"),
        t("check.md.points"),
        t("check.md.note"),
    )
    rows = []
    for record in records:
        found = {} if record.report is None else {_column(s): s for s in record.report.steps}
        steps = () if record.score is None else record.score.steps
        count = f"{sum(s.right for s in steps)}/{sum(s.cells for s in steps)}" if record.report else ""
        note = record.error or (t("check.problem_changed", fields=", ".join(record.changed)) if record.changed else "")
        who = (_who(record),) if named else ()
        status = t(f"check.status.{record.status}")
        points = points_of(record.score) if record.score is not None else ""
        rows.append((record.file or "", *who, status, *(_step(found.get(key)) for key in columns), count, points, note))
    return header, rows, named


def _who(record: StudentRecord) -> str:
    if record.student and record.student_id:
        return f"{record.student} ({record.student_id})"
    return record.student or record.student_id or ""


def _column(step: StepReport) -> Column:
    return step.layer, step.step, step.head


def _columns(records: Sequence[StudentRecord]) -> dict[Column, StepReport]:
    """Every step any file answered (or misses), in the order of the calculation, with one report naming it."""
    seen: dict[Column, StepReport] = {}
    for record in records:
        for step in record.report.steps if record.report is not None else ():
            seen.setdefault(_column(step), step)
    return {key: seen[key] for key in sorted(seen, key=lambda key: position(key[1], key[2], key[0]))}


def _step(step: StepReport | None) -> str:
    """A step's cell: its mark (≈ wrong only by rounding), its right cells of those answered, its codes."""
    if step is None:
        return ""
    status = step_status(step)
    mark = ROUNDED_MARK if status == ROUNDED else MARKS[status][0]
    if status in (MISSING, NOT_ANSWERED):
        return f"{mark} {t(f'check.status.{status}')}"
    codes = "".join(f" `{code}`" for code in step.diagnosis)
    return (
        f"{mark} {step.correct}/{step.total}{codes}" if step.cells else f"{mark} {t('check.wrong_shape_short')}{codes}"
    )
