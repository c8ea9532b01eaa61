"""The class list: a CSV a course's system exports, its students, and which graded file belongs to whom.

Read as the systems write them (tests/test_roster.py holds a file of each shape):
- Canvas's gradebook export (lib/gradebook_exporter.rb): `Student, ID, [SIS User ID,] SIS Login ID,
  [Integration ID, Root Account,] Section`, custom columns, one column per assignment `Title (id)`, totals; then
  maybe a row of `Manual Posting` marks, a row `    Points Possible`, and one row per student, the test
  student (`Student, Test`, Canvas's student view) last.
- Moodle's grade export (grade/export/txt): `First name, Last name, ID number, Institution, Department,
  Email address`, one column per grade item, `Last downloaded from this course`.
- Any CSV with a header row. UTF-8 with or without a byte-order mark; the delimiter is `,`, `;` or a tab, the one
  that splits the first rows into the most fields, the same number in each (as Canvas's importer chooses).

Students are matched by one column: `--match COLUMN`, else the first of MATCH_COLUMNS the header has. Rows that
are not students are skipped: blank ones, Canvas's `Points Possible` row, its rows of `Manual Posting`/`Muted`
marks (as its importer skips them) and its test student. A file belongs to the student whose match value is
the file's `student_id:` when it gives one, else its file name's stem; values are compared with surrounding
space removed, Unicode-normalised (NFC) and without case (logins and e-mail addresses ignore case).

A class list comes from outside: it is read within MAX_BYTES, MAX_ROWS and MAX_COLUMNS, and every error is one
line naming the file, the line and the column, any control character in it escaped.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

from attncli.errors import fail, listed, printable
from attncli.expr import quote
from attncli.gradebook.records import StudentRecord, no_file
from attncli.yamldoc import did_you_mean, read_text

MATCH_COLUMNS = ("SIS Login ID", "SIS User ID", "ID", "Username", "ID number", "Email address")
DELIMITERS = (",", ";", "\t")
MAX_BYTES = 16 * 2**20  # a class list of 100,000 students at 160 bytes a row
MAX_ROWS = 100_000
MAX_COLUMNS = 5_000  # Canvas exports a column per assignment, and four per assignment group
SNIFFED_ROWS = 3  # rows that choose the delimiter
POINTS_POSSIBLE = "Points Possible"  # Canvas's second row (its importer looks for these words in the first cell)
MARKS_ROW = re.compile(r"\s*(?:Muted|Manual Posting.*)?\s*", re.IGNORECASE)  # Canvas's row of posting marks
TEST_STUDENTS = ("Student, Test", "Test Student")  # Canvas's student view: its sortable name, and its name
SHOWN = 30  # characters of a value or a column an error repeats
NAME_COLUMNS = (("Student",), ("Name",), ("First name", "Last name"), ("LastName", "FirstName"))


@dataclass(frozen=True)
class RosterRow:
    """One student of the class list, with the line it starts on."""

    line: int
    cells: tuple[str, ...]  # as read, one per column of the header (missing ones empty, extra ones dropped)
    value: str  # the match column's cell, stripped

    def get(self, roster: Roster, column: str) -> str:
        """The cell of `column` ("" when the class list has no such column)."""
        index = roster.index(column)
        return "" if index is None else self.cells[index]

    def name(self, roster: Roster) -> str:
        """The student's name: Canvas's Student, a Name column, or First name and Last name joined ("" if none)."""
        for columns in NAME_COLUMNS:
            if all(roster.index(column) is not None for column in columns):
                parts = (self.get(roster, column).strip() for column in columns)
                return " ".join(part for part in parts if part)
        return ""


@dataclass(frozen=True)
class Roster:
    """A class list: its header, the column students are matched by, its students in order, and what was skipped."""

    file: str
    columns: tuple[str, ...]
    match: str
    rows: tuple[RosterRow, ...]
    skipped: tuple[int, ...]  # the lines of rows that are not students

    def index(self, column: str) -> int | None:
        """The position of `column` in the header (its first one), None when it has none."""
        return self.columns.index(column) if column in self.columns else None


@dataclass(frozen=True)
class Placed:
    """A student of the class list and the files that belong to them: usually one; none, or more than one."""

    row: RosterRow
    records: tuple[StudentRecord, ...]


@dataclass(frozen=True)
class Placement:
    """Every student of the class list in its order with their files, and the files that belong to nobody."""

    roster: Roster
    rows: tuple[Placed, ...]
    unmatched: tuple[StudentRecord, ...]  # in the order given

    @property
    def without_file(self) -> tuple[Placed, ...]:
        return tuple(placed for placed in self.rows if not placed.records)

    @property
    def doubled(self) -> tuple[Placed, ...]:
        """Students more than one file belongs to (a gradebook that takes one score a student leaves theirs out)."""
        return tuple(placed for placed in self.rows if len(placed.records) > 1)


def read_roster(path: str, match: str | None = None) -> Roster:
    """The class list in the CSV file `path`, matched by the column `match` (default: the first of MATCH_COLUMNS)."""
    return parse_roster(read_text(path, MAX_BYTES, "gradebook.roster_too_large"), path, match)


def parse_roster(text: str, name: str, match: str | None = None) -> Roster:
    """The class list in `text` (a CSV, its byte-order mark removed), `name` naming it in errors."""
    records = _records(text, _delimiter(text), name)
    header = next(records, None)
    if header is None or not any(cell.strip() for cell in header[1]):
        raise fail("gradebook.roster_empty").at(source=name, line=1)
    columns = tuple(cell.strip() for cell in header[1])
    column = _match_column(columns, match, name)
    where = columns.index(column)
    if columns.count(column) > 1:
        raise fail("gradebook.duplicate_column", name=_shown(column)).at(source=name, line=1)
    students: list[RosterRow] = []
    skipped: list[int] = []
    seen: dict[str, int] = {}
    for line, cells in records:
        row = RosterRow(line, _fitted(cells, len(columns)), cells[where].strip() if where < len(cells) else "")
        if not _is_student(row, columns):
            skipped.append(line)
            continue
        key = normal(row.value)
        if key and key in seen:
            raise fail("gradebook.duplicate_student", value=_shown(row.value), first=seen[key]).at(
                name, line, _shown(column)
            )
        seen[key] = line
        students.append(row)
    return Roster(name, columns, column, tuple(students), tuple(skipped))


def _delimiter(text: str) -> str:
    """The delimiter that splits the first rows into the most fields, as many in each (an export); else, for rows
    of different lengths (a list typed by hand), the one that splits the header into the most; `,` when none
    splits anything. A delimiter found in no row splits each into one field, evenly: that never wins."""
    best, most = ",", (0, 0)
    for delimiter in DELIMITERS:
        try:
            first = list(itertools.islice(csv.reader(io.StringIO(text), delimiter=delimiter), SNIFFED_ROWS))
        except csv.Error:
            continue
        widths = {len(row) for row in first}
        header = len(first[0]) if first else 0
        even = widths.pop() if len(widths) == 1 else 0
        rank = (even if even > 1 else 0, header)
        if rank > most:
            best, most = delimiter, rank
    return best


def _records(text: str, delimiter: str, name: str) -> Iterator[tuple[int, list[str]]]:
    """(the line a record starts on, its cells) for every record, within MAX_ROWS and MAX_COLUMNS; an error names
    the line its record starts on (where a quote left open was opened)."""
    reader = csv.reader(io.StringIO(text), delimiter=delimiter, strict=True)
    start = 1
    for count in itertools.count():
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise fail("gradebook.roster_not_csv", reason=printable(str(error))).at(name, start) from None
        if count > MAX_ROWS:
            raise fail("gradebook.roster_too_many_rows", limit=MAX_ROWS).at(name, start)
        if len(cells) > MAX_COLUMNS:
            raise fail("gradebook.roster_too_many_columns", limit=MAX_COLUMNS).at(name, start)
        yield start, cells
        start = reader.line_num + 1


def _match_column(columns: tuple[str, ...], match: str | None, name: str) -> str:
    if match is None:
        found = next((column for column in MATCH_COLUMNS if column in columns), None)
        if found is None:
            raise fail("gradebook.no_match_column", columns=_shown(listed(columns))).at(source=name, line=1)
        return found
    if match.strip() not in columns:
        hint = did_you_mean(match.strip(), columns) or ""
        raise fail("gradebook.unknown_column", name=_shown(match), hint=hint).at(name, 1, "--match")
    return match.strip()


def _shown(text: str) -> str:
    """Text from the class list as an error repeats it: control characters escaped, at most SHOWN characters (with
    the file's name, its line and the field, the message stays within a line of 200)."""
    return quote(printable(text), SHOWN)


def _fitted(cells: list[str], width: int) -> tuple[str, ...]:
    return tuple(cells[:width]) + ("",) * (width - len(cells))


def _is_student(row: RosterRow, columns: tuple[str, ...]) -> bool:
    """Not a blank row, Canvas's Points Possible row, a row of its posting marks, or its test student."""
    cells = row.cells
    if not any(cell.strip() for cell in cells) or all(MARKS_ROW.fullmatch(cell) for cell in cells):
        return False
    if POINTS_POSSIBLE in cells[0]:
        return False
    return not ("Student" in columns and cells[columns.index("Student")].strip() in TEST_STUDENTS)


def normal(text: str) -> str:
    """A match value as compared: stripped, NFC, case folded."""
    return unicodedata.normalize("NFC", text.strip()).casefold()


def place(roster: Roster, records: Sequence[StudentRecord]) -> Placement:
    """Which student each record's file belongs to: its `student_id` when it gives one (not blank), else its file
    name's stem, against the roster's match column; records of no file (`file` None) are not placed."""
    rows = {normal(row.value): index for index, row in enumerate(roster.rows) if row.value.strip()}
    found: list[list[StudentRecord]] = [[] for _ in roster.rows]
    unmatched = []
    for record in records:
        if record.file is None:
            continue
        given = (record.student_id or "").strip()  # a template's student_id: left blank says nothing
        claim = given or Path(record.file).stem
        index = rows.get(normal(claim))
        if index is None:
            unmatched.append(record)
        else:
            found[index].append(record)
    placed = tuple(Placed(row, tuple(files)) for row, files in zip(roster.rows, found))
    return Placement(roster, placed, tuple(unmatched))


def class_records(placement: Placement, max_score: Fraction | None) -> tuple[StudentRecord, ...]:
    """Everybody once, for a gradebook of one row a student: the class list's students in its order (each file of
    theirs named from the list; a student without one NO_FILE, 0 points of `max_score`), then the files that
    belong to nobody, with what they say of themselves."""
    roster = placement.roster
    found: list[StudentRecord] = []
    for placed in placement.rows:
        name, value = placed.row.name(roster) or None, placed.row.value or None
        if not placed.records:
            found.append(no_file(name, value, max_score))
        found += [replace(record, student=record.student or name, student_id=value) for record in placed.records]
    return (*found, *placement.unmatched)
