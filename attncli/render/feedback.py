"""Feedback to hand back: one document per student, in the language of the run, Markdown or HTML.

It says who and which file, the points (exact, and the percent), then step by step of the key: the step's points,
each cell's verdict (the student's number, ✓ right, ↷ carried, ≈ wrong only by rounding, ✗ wrong, and the right
value where it is not right), the first mistake, and each cause the grader found with its hint (the catalogue's
check.diagnosis.* and check.hint.* texts, as `check` prints them). File names come from `safe_file_name`.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Collection, Iterable
from pathlib import Path

from attncli.errors import CONTROL_CODES
from attncli.gradebook.points import Score, StepScore, only_rounding
from attncli.gradebook.records import NO_FILE, StudentRecord
from attncli.grading import CARRIED, MISSING, RIGHT, TOO_FEW_DECIMALS, WRONG, Cell, StepReport
from attncli.grading.submissions import PROBLEM_CHANGED
from attncli.i18n import current_language, t
from attncli.render.blocks import Block, Heading, Paragraph, Table, html_document, markdown
from attncli.render.grading import MARKS, label
from attncli.render.points import points_text
from attncli.written import fixed

FORMATS = {"markdown": ".md", "html": ".html"}
ROUNDED_MARK = "≈"
NAME_BYTES = 120  # of a file name's stem in UTF-8: room for a suffix and a counter under any file system's 255
UNSAFE = re.compile(r'[\\/:*?"<>|]')  # separators, and what Windows refuses in a name
RESERVED = frozenset({"con", "prn", "aux", "nul", *(f"{port}{n}" for port in ("com", "lpt") for n in range(1, 10))})


def feedback(record: StudentRecord, kind: str = "markdown", precision: int = 4) -> str:
    """The document for one student in `kind` (one of FORMATS)."""
    blocks = feedback_blocks(record, precision)
    if kind == "html":
        return html_document(blocks, _who(record), current_language())
    return markdown(blocks)


def feedback_blocks(record: StudentRecord, precision: int = 4) -> list[Block]:
    """What the feedback says, as blocks: who, which file and the points, the first mistake, then each step."""
    blocks: list[Block] = [Heading(1, t("gradebook.feedback.title", student=_who(record))), *summary_blocks(record)]
    if record.report is None:
        return blocks
    first = record.report.first_mistake
    blocks.append(Paragraph(_first(first) if first is not None else t("check.all_right")))
    steps: list[tuple[StepReport, StepReport | None, StepScore | None]]
    if record.score is not None:
        steps = [(scored.key, scored.answered, scored) for scored in record.score.steps]
    else:
        steps = [(step, step, None) for step in record.report.steps]
    for key, step, scored in steps:
        blocks += step_blocks(key, step, scored, first, precision)
    return blocks


def summary_blocks(record: StudentRecord) -> list[Block]:
    """Which file (its name: the folders it was graded in are the teacher's) and exercise, why it was not graded
    (if it was not), and its points with the credit rules."""
    about = [t("gradebook.feedback.file", file=Path(record.file).name)] if record.file is not None else []
    about += [t("gradebook.feedback.exercise", exercise=record.exercise)] if record.exercise is not None else []
    blocks: list[Block] = [Paragraph(line) for line in about]
    if record.status == NO_FILE:
        blocks.append(Paragraph(t("gradebook.feedback.no_file")))
    elif record.status == PROBLEM_CHANGED:
        blocks.append(Paragraph(t("check.problem_changed", fields=", ".join(record.changed))))
    elif record.report is None:
        blocks.append(Paragraph(t("gradebook.feedback.not_graded", error=record.error or "")))
    return blocks + (_points(record.score) if record.score is not None else [])


def _who(record: StudentRecord) -> str:
    return record.student or record.student_id or (Path(record.file).stem if record.file else "?")


def _points(score: Score) -> list[Block]:
    shown = {"score": points_text(score.score), "max_score": points_text(score.max_score)}
    if score.percent is None:
        line = t("gradebook.feedback.points_no_percent", **shown)
    else:
        line = t("gradebook.feedback.points", **shown, percent=str(score.percent))
    credits = t(
        "gradebook.feedback.credits",
        carried=t(f"gradebook.credit.{score.spec.carried}"),
        rounded=t(f"gradebook.credit.{score.spec.rounded}"),
    )
    return [Paragraph(line), Paragraph(credits)] if score.steps else [Paragraph(line)]


def _first(step: StepReport) -> str:
    causes = ", ".join(t(f"check.diagnosis.{code}") for code in step.diagnosis)
    return t("gradebook.feedback.first_mistake", step=label(step)) + (f" {causes}." if causes else "")


def step_blocks(
    key: StepReport, step: StepReport | None, scored: StepScore | None, first: StepReport | None, precision: int
) -> list[Block]:
    """One step: its title (with its points), its cells' verdicts, and what the grader says of it."""
    title = label(key)
    if scored is not None:
        title = t(
            "gradebook.feedback.step_title",
            step=title,
            score=points_text(scored.score),
            max_score=points_text(scored.max_score),
        )
    blocks: list[Block] = [Heading(2, title)]
    if step is not None and step is first:
        blocks.append(Paragraph(t("check.first_mistake_mark").strip()))
    instead = in_place_of_cells(step)
    if instead is not None:
        blocks.append(Paragraph(instead))
    elif step is not None:
        header = tuple(t(f"gradebook.feedback.{name}") for name in ("cell", "yours", "verdict", "right_value"))
        blocks.append(Table(header, tuple(cell_row(step, cell, precision) for cell in step.cells)))
    return blocks + [Paragraph(text) for text in notes(step)]


def in_place_of_cells(step: StepReport | None) -> str | None:
    """What a step without cells to show says instead: not answered, missing (required), or in a shape that fits
    neither way; None for a step with cells."""
    if step is None:
        return t("check.status.not_answered")
    if step.status == MISSING:
        return t("check.missing_step")
    if not step.cells:
        return t("check.wrong_shape", rows=len(step.rows), columns=len(step.columns))
    return None


def notes(step: StepReport | None) -> list[str]:
    """What the grader says of a step: the carried note, each cause with its hint, or that none reproduces it."""
    if step is None:
        return []
    found = [t("check.carried_note")] if step.status == CARRIED else []
    found += [f"{t(f'check.diagnosis.{code}')} ({code}): {t(f'check.hint.{code}')}" for code in step.diagnosis]
    if step.status == WRONG and not step.diagnosis:
        found.append(t("check.no_diagnosis"))
    return found


def cell_row(step: StepReport, cell: Cell, precision: int) -> tuple[str, str, str, str]:
    """A cell as (its row and column, the student's number, the verdict, the right value where it is not right)."""
    given = "" if cell.entry is None else cell.entry.text
    right = "" if cell.status == RIGHT or cell.entry is None else _value(cell.expected, precision)
    return f"{step.rows[cell.row]}, {step.columns[cell.column]}", given, verdict(cell, step), right


def verdict(cell: Cell, step: StepReport) -> str:
    """A cell's mark and verdict in words: ✓ right, ↷ carried, ≈ only rounding, ✗ wrong or too few decimals."""
    if cell.entry is None:
        return f"{MARKS[cell.status][0]} {t('check.status.not_answered')}"
    if cell.status == RIGHT:
        return f"{MARKS[RIGHT][0]} {t('check.status.right')}"
    if only_rounding(cell, step):
        return f"{ROUNDED_MARK} {t('gradebook.verdict.rounded')}"
    if cell.status == TOO_FEW_DECIMALS:
        return f"{MARKS[TOO_FEW_DECIMALS][0]} {t('check.diagnosis.too_few_decimals')}"
    return f"{MARKS[cell.status][0]} {t(f'check.status.{cell.status}')}"


def _value(value: float, precision: int) -> str:
    return t("render.masked") if math.isinf(value) else fixed(value, precision)


def safe_file_name(name: str, taken: Collection[str] = ()) -> str:
    """`name` (a student's name or a file's stem) as a file name's stem that is safe on every file system: no path
    separator or character Windows refuses, no control character, no leading dot or dash, no trailing dot or
    space, not a Windows device name, at most NAME_BYTES bytes of UTF-8; and not one of `taken` (compared without
    case, as macOS and Windows do): the second Alice is Alice-2."""
    text = "".join("_" if ord(c) in CONTROL_CODES else c for c in unicodedata.normalize("NFC", name))
    text = re.sub(r"\s+", " ", UNSAFE.sub("_", text)).lstrip(" .-").rstrip(" .")
    text = text.encode("utf-8")[:NAME_BYTES].decode("utf-8", "ignore").rstrip(" .") or "student"
    if text.split(".")[0].casefold() in RESERVED:
        text = f"_{text}"
    folded = {other.casefold() for other in taken}
    candidate, count = text, 1
    while candidate.casefold() in folded:
        count += 1
        candidate = f"{text}-{count}"
    return candidate


def file_names(records: Iterable[StudentRecord], kind: str = "markdown") -> list[str]:
    """One safe, distinct file name per record (its student's name, else its id, else its file's stem), in order."""
    stems: list[str] = []
    for record in records:
        stems.append(safe_file_name(_who(record), stems))
    return [stem + FORMATS[kind] for stem in stems]
