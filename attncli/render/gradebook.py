"""Grades straight into the course's system, and the class at a glance.

Each format follows its system's own definition (looked up, not guessed; tests/test_lms_formats.py checks it):

- `gradescope`: the autograder's results.json for one submission, as Gradescope's "Autograder Specifications"
  define it (gradescope-autograders.readthedocs.io/en/latest/specs, the autograder_samples repository's
  docs/specs.md): top level `score` (it overrides the tests' total), `output` (text for the whole submission)
  with `output_format` text (the default there, simple_format, reads it as HTML), `visibility` and
  `stdout_visibility` (each hidden, after_due_date, after_published or visible), `tests`: one per step of the
  key, each `name`, `score`, `max_score`, `status` (passed or failed; without it a test short of its max_score
  fails, and a 0-point step passes whatever its cells), `output` (plain text, lines split by \\n), `visibility`.
- `canvas`: a gradebook import for Canvas (its importer, app/models/gradebook_importer.rb, wants a header whose
  first cell holds "Student" and second "ID", the student columns up to "Section", then one column per
  assignment; a first cell holding "Points Possible" marks the points row; a student is found by ID, then SIS
  User ID, then SIS Login ID, then name; a blank score changes nothing). Columns `Student, ID, SIS User ID,
  SIS Login ID, Section, <assignment>`, the points row as Canvas's own export writes it (`    Points Possible`),
  then the class list's students in its order: a student without a file scores 0; one with several files gets
  no score (blank: the teacher chooses); files matching no student are left out (the caller names them).
- `grades`: one row per student, `student, student_id, file, exercise, status, score, max_score, percent,
  first_mistake, codes`, for any spreadsheet and Moodle's "Import grades from CSV" (map `student_id` to the
  user's ID number, username or email address, and `score` to the grade item). Rows without a student_id come
  first: Moodle's importer (grade/import/csv/classes/load_data.php) gives a row whose user field is blank to
  the student of the row before it, and a blank first row makes it stop ("user not found") instead.

Numbers are full precision: a score is the shortest decimal that reads back as its float, never in exponent
notation (Canvas's importer reads plain digits); whole scores are whole (3, not 3.0); percent has 2 decimals.
Text that students or class lists wrote and that a spreadsheet would run as a formula (= + - @ first) gets a
leading ' (attncli.render.long_table.text_cell), unless it is a plain number.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence

from attncli.errors import printable
from attncli.gradebook.glance import Glance
from attncli.gradebook.points import StepScore
from attncli.gradebook.records import StudentRecord, common_maximum
from attncli.gradebook.roster import Placement
from attncli.i18n import t
from attncli.render import blocks
from attncli.render.feedback import cell_row, in_place_of_cells, notes, summary_blocks
from attncli.render.grading import human, label
from attncli.render.layout import to_text
from attncli.render.long_table import text_cell
from attncli.render.points import number

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_ROW = "    Points Possible"  # as Canvas's exporter writes it
GRADES_COLUMNS = (
    "student", "student_id", "file", "exercise", "status", "score", "max_score", "percent", "first_mistake", "codes",
)  # fmt: skip
PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)")  # text a spreadsheet reads as a number, never a formula
WIDTH = 100  # columns of the plain-text report in Gradescope's output


def gradescope(
    record: StudentRecord, precision: int = 4, visibility: str = "visible", stdout_visibility: str = "hidden"
) -> str:
    """Gradescope's results.json for one submission (one test per step of the key; see the module's docstring).

    `output` is the check report in plain text, then the points. A submission that could not be graded scores 0
    with no tests, its output saying why (Gradescope needs a score).
    """
    if visibility not in VISIBILITIES or stdout_visibility not in VISIBILITIES:
        raise ValueError(f"visibility: one of {', '.join(VISIBILITIES)}")  # the caller chose from VISIBILITIES
    report, score = record.report, record.score
    output = to_text(human(report, precision, WIDTH)) + "\n" if report is not None else ""
    output += blocks.text(summary_blocks(record))
    document = {
        "score": float(score.score) if score is not None else 0.0,
        "output": output,
        "output_format": "text",  # plain text: the default for the top level, simple_format, would read it as HTML
        "visibility": visibility,
        "stdout_visibility": stdout_visibility,
        "tests": [] if score is None else [_test(step, precision, visibility) for step in score.steps],
    }
    return json.dumps(document, ensure_ascii=False, allow_nan=False, indent=2) + "\n"


def _test(scored: StepScore, precision: int, visibility: str) -> dict:
    """One step as a Gradescope test: its points, passed when every cell of the key's step is right."""
    step = scored.answered
    instead = in_place_of_cells(step)
    lines = [instead] if instead is not None else []
    if step is not None and instead is None:
        rows = (cell_row(step, cell, precision) for cell in step.cells)
        lines = [f"{name}: {given} {mark}" + (f" ({right})" if right else "") for name, given, mark, right in rows]
    lines += notes(step)
    return {
        "name": label(scored.key),
        "score": float(scored.score),
        "max_score": float(scored.max_score),
        "status": "passed" if scored.right == scored.cells else "failed",
        "output": "\n".join(lines) + "\n",
        "visibility": visibility,
    }


def canvas(placement: Placement, assignment: str) -> str:
    """A Canvas gradebook import of one assignment column from the class list's students (see the module's
    docstring); its points row holds the maximum every scored file shares."""
    roster = placement.roster
    every = [record for placed in placement.rows for record in placed.records]
    maximum = common_maximum(every)
    rows: list[Sequence[str]] = [(*CANVAS_COLUMNS, _text(assignment))]
    rows.append((CANVAS_POINTS_ROW, "", "", "", "", "" if maximum is None else number(maximum)))
    for placed in placement.rows:
        row = placed.row
        student = row.get(roster, "Student") or row.name(roster)
        cells = [_text(student), *(_text(row.get(roster, column)) for column in CANVAS_COLUMNS[1:])]
        records = placed.records
        if not records:
            points = "0"
        elif len(records) == 1 and records[0].score is not None:
            points = number(records[0].score.score)
        else:
            points = ""
        rows.append((*cells, points))
    return _csv(rows)


def grades(records: Sequence[StudentRecord]) -> str:
    """One row per record (`GRADES_COLUMNS`): those without a student_id first, then the others, each in order."""
    ordered = sorted(records, key=lambda record: bool(record.student_id))
    rows: list[Sequence[str]] = [GRADES_COLUMNS]
    for record in ordered:
        score = record.score
        rows.append(
            (
                _text(record.student or ""),
                _text(record.student_id or ""),
                _text(record.file or ""),
                _text(record.exercise or ""),
                record.status,
                "" if score is None else number(score.score),
                "" if score is None else number(score.max_score),
                "" if score is None or score.percent is None else str(score.percent),
                record.first_mistake or "",
                ";".join(record.codes),
            )
        )
    return _csv(rows)


def _text(text: str) -> str:
    """A cell someone else wrote: control characters escaped; a formula's first character neutralised, unless the
    cell is a plain number (-2.5 stays a number)."""
    shown = printable(text)
    return shown if PLAIN_NUMBER.fullmatch(shown.strip()) else text_cell(shown)


def _csv(rows: Sequence[Sequence[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def glance_blocks(found: Glance) -> list[blocks.Block]:
    """The class at a glance as blocks: a heading, how many students, and a row per step."""
    header = tuple(t(f"gradebook.glance.{name}") for name in GLANCE_COLUMNS)
    rows = tuple(
        (
            label(step.step),
            str(step.answered),
            str(step.right),
            str(step.carried),
            str(step.rounded),
            str(step.wrong),
            str(step.missing),
            str(step.not_answered),
            ", ".join(f"{code} ×{count}" for code, count in step.causes),
        )
        for step in found.steps
    )
    students = blocks.Paragraph(t("gradebook.glance.students", students=found.students))
    return [blocks.Heading(2, t("gradebook.glance.title")), students, blocks.Table(header, rows)]


GLANCE_COLUMNS = ("step", "answered", "right", "carried", "rounded", "wrong", "missing", "not_answered", "causes")


def glance_markdown(found: Glance) -> str:
    """The class at a glance in Markdown, to end a class report with."""
    return blocks.markdown(glance_blocks(found))


def glance_html(found: Glance) -> str:
    """The class at a glance as an HTML fragment (h2, p, table), to end an HTML class report with."""
    return blocks.html_blocks(glance_blocks(found))
