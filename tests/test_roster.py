"""Class lists (attncli.gradebook.roster): Canvas's and Moodle's exports as those systems write them, any CSV,
which file belongs to whom, and class lists that are broken or hostile.

tests/rosters/canvas_export.csv is shaped as Canvas's gradebook exporter (lib/gradebook_exporter.rb) writes it
with SIS columns: a row of Manual Posting marks, the "    Points Possible" row (four spaces first), a custom
column with a line break inside quotes, a name Canvas itself escapes (="..." for a name starting with =), the
test student last. tests/rosters/moodle_export.csv is Moodle's plain-text grade export (grade/export/txt) with
its default profile fields, written with the semicolon separator, CRLF and a byte-order mark.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli import pipeline
from attncli.errors import AttnError
from attncli.gradebook import records, roster
from attncli.grading.submissions import Options, Result, grade_files, load_key
from attncli.i18n import LANGUAGE, describe

ROSTERS = Path(__file__).parent / "rosters"
CANVAS = str(ROSTERS / "canvas_export.csv")
MOODLE = str(ROSTERS / "moodle_export.csv")
BANK = "tokens: [fisherman, net, bank]\nquery_tokens: [bank]\nqueries: [[sqrt(2), 0]]\n"
BANK += "keys: [[2, 0], [1, 1], [0, 1]]\nvalues: [[2, 0], [0, 2], [1, 1]]\n"
RIGHT = "answers:\n  weights: [0.6652, 0.2447, 0.0900]\n"


def refused(call: object, *args: object) -> str:
    """The English line of the AttnError `call(*args)` raises, after checking that both languages give one line
    of at most 200 characters."""
    lines = []
    for language in ("es", "en"):
        token = LANGUAGE.set(language)
        try:
            with pytest.raises(AttnError) as caught:
                call(*args)  # type: ignore[operator]
            lines.append(describe(caught.value))
        finally:
            LANGUAGE.reset(token)
    for line in lines:
        assert "\n" not in line and len(line) <= 200, line
    return lines[-1]


# Reading what the systems export


def test_a_canvas_export() -> None:
    found = roster.read_roster(CANVAS)
    assert found.match == "SIS Login ID"
    assert found.columns[:6] == ("Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Notes")
    assert [row.value for row in found.rows] == ["asmith", "jgarcia", "@mallory"]
    assert [row.name(found) for row in found.rows] == ["Smith, Alice", "García, José", '="=HYPERLINK(""http://x"")"']
    assert [row.line for row in found.rows] == [4, 5, 7]  # José's notes hold a line break: his row takes two
    assert found.skipped == (2, 3, 8)  # the Manual Posting marks, Points Possible, the test student
    assert found.rows[1].get(found, "Notes") == "sits at the front,\nleft side"
    assert found.rows[0].get(found, "Section") == "Section 01" and found.rows[0].get(found, "Username") == ""


def test_a_canvas_export_without_sis_columns_matches_by_canvas_id(tmp_path: Path) -> None:
    """A TA's export has no SIS columns (plom issue 2338): the first name in the list that exists is ID."""
    path = tmp_path / "ta.csv"
    path.write_text('Student,ID,Section,HW (1)\n    Points Possible,,,10.00\n"Smith, Alice",4101,S1,9\n')
    found = roster.read_roster(str(path))
    assert found.match == "ID" and [row.value for row in found.rows] == ["4101"]


def test_a_moodle_export() -> None:
    found = roster.read_roster(MOODLE)
    assert found.columns[0] == "First name"  # the byte-order mark is not part of it
    assert found.match == "ID number"
    assert [row.value for row in found.rows] == ["S1001", "S1002", "S1003"]
    assert [row.name(found) for row in found.rows] == ["Alice Smith", "José García", "Mallory -Tables"]
    assert found.skipped == ()
    by_email = roster.read_roster(MOODLE, match="Email address")
    assert by_email.match == "Email address" and by_email.rows[0].value == "Alice.Smith@example.edu"


@pytest.mark.parametrize("delimiter", [",", ";", "\t"])
def test_any_csv_with_a_header(tmp_path: Path, delimiter: str) -> None:
    text = delimiter.join(["Name", "Username", "Group"]) + "\n"
    text += delimiter.join(['"Lovelace, Ada"' if delimiter == "," else "Lovelace, Ada", "ada", "A"]) + "\n"
    text += delimiter.join(["Turing", "alan", "B"]) + "\n"
    path = tmp_path / "list.csv"
    path.write_text(text, encoding="utf-8")
    found = roster.read_roster(str(path))
    assert found.match == "Username"
    assert [(row.name(found), row.value) for row in found.rows] == [("Lovelace, Ada", "ada"), ("Turing", "alan")]


def test_blank_rows_and_short_rows(tmp_path: Path) -> None:
    path = tmp_path / "list.csv"
    path.write_text("Username,Name\nada,Ada\n\n,\nalan\n", encoding="utf-8")
    found = roster.read_roster(str(path))
    assert [(row.value, row.cells) for row in found.rows] == [("ada", ("ada", "Ada")), ("alan", ("alan", ""))]
    assert found.skipped == (3, 4)  # an empty line, a line of empty cells


# Which file belongs to whom


@pytest.fixture
def class_files(tmp_path: Path) -> tuple[str, list[Result]]:
    """A key and five graded files: asmith by its stem, two for jgarcia, nobody's, and one not graded."""
    key = tmp_path / "key.yaml"
    key.write_text(BANK, encoding="utf-8")
    names = {"asmith.yaml": RIGHT, "jose.yaml": RIGHT, "jg2.yaml": RIGHT, "nobody.yaml": RIGHT, "x.yaml": "[\n"}
    for name, text in names.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    files = [str(tmp_path / name) for name in names]
    return str(key), grade_files(files, load_key(str(key)), Options(), describe)


def test_files_are_placed_by_student_id_else_by_stem(class_files: tuple[str, list[Result]]) -> None:
    _, results = class_files
    ids = {"jose.yaml": " JGarcia ", "jg2.yaml": "jgarcia", "x.yaml": "asmith2", "asmith.yaml": "  "}
    made = [records.record(result, student_id=ids.get(Path(result.file).name)) for result in results]
    found = roster.read_roster(CANVAS)
    placement = roster.place(found, made)
    placed = {placed.row.value: [Path(r.file or "").name for r in placed.records] for placed in placement.rows}
    assert placed == {"asmith": ["asmith.yaml"], "jgarcia": ["jose.yaml", "jg2.yaml"], "@mallory": []}
    assert [Path(r.file or "").name for r in placement.unmatched] == ["nobody.yaml", "x.yaml"]
    assert [p.row.value for p in placement.doubled] == ["jgarcia"]
    assert [p.row.value for p in placement.without_file] == ["@mallory"]


def test_a_student_id_that_matches_nobody_is_not_overruled_by_the_stem(class_files: tuple[str, list[Result]]) -> None:
    _, results = class_files
    made = [records.record(results[0], student_id="someone-else")]  # the file is asmith.yaml
    placement = roster.place(roster.read_roster(CANVAS), made)
    assert placement.unmatched == tuple(made) and not any(p.records for p in placement.rows)


def test_everybody_is_in_the_class_records_once(class_files: tuple[str, list[Result]]) -> None:
    _, results = class_files
    made = [records.record(result) for result in results]
    placement = roster.place(roster.read_roster(CANVAS), made)
    everybody = roster.class_records(placement, Fraction(11))
    assert [(r.student, r.student_id, r.status) for r in everybody] == [
        ("Smith, Alice", "asmith", "right"),
        ("García, José", "jgarcia", "no_file"),
        ('="=HYPERLINK(""http://x"")"', "@mallory", "no_file"),
        (None, None, "right"),
        (None, None, "right"),
        (None, None, "right"),
        (None, None, "not_graded"),
    ]
    absent = everybody[1]
    assert absent.file is None and absent.score is not None
    assert (absent.score.score, absent.score.max_score, str(absent.score.percent)) == (0, 11, "0.00")
    files = {r.file for r in everybody if r.file is not None}
    assert files == {result.file for result in results}  # nobody lost


# Broken and hostile class lists


@pytest.mark.parametrize(
    ("text", "english"),
    [
        ("", "list.csv:1: the class list is empty"),
        (" , \n", "list.csv:1: the class list is empty"),
        ("Name,Group\nAda,A\n", "list.csv:1: no column to match students by; name one with --match COLUMN"),
        ("ID,Name,ID\n1,a,2\n", "list.csv:1: the column 'ID' appears twice in the header"),
        ("Username\nada\nbob\nADA \n", "list.csv:4: Username: 'ADA' is also the student of line 2"),
        ('Username,Name\nada,"unterminated\n', "list.csv:2: not a CSV class list: unexpected end of data"),
        ('Username,Name\nada,"a"b\n', "list.csv:2: not a CSV class list: ',' expected after '\"'"),
        ("Username\x1b[2J,Name\nada,Ada\n", "columns: Username\\x1b[2J, Name"),
        ("Name," + "C" * 300 + "\na,b\n", "(columns: Name, CCCCCCCCCCCCCCCCCCCCC...)"),  # within 200
        (
            "Username\n" + "x" * 300 + "\n" + "x" * 300 + "\n",
            "list.csv:3: Username: 'xxxxxxxxxxxxxxxxxxxxxxxxxxx...' is",
        ),
    ],
)
def test_a_broken_class_list_is_one_line(tmp_path: Path, text: str, english: str) -> None:
    path = tmp_path / "list.csv"
    path.write_text(text, encoding="utf-8")
    line = refused(roster.read_roster, str(path))
    assert english in line and line.startswith(str(path)[: -len("list.csv")]), line
    assert "\x1b" not in line


def test_an_unknown_match_column_says_the_closest(tmp_path: Path) -> None:
    line = refused(roster.read_roster, CANVAS, "SIS login ID")
    assert line.endswith(
        "canvas_export.csv:1: --match: 'SIS login ID' is not a column of the class list; did you mean 'SIS Login ID'?"
    )
    line = refused(roster.read_roster, CANVAS, "\x1b]0;owned\x07")
    assert "\x1b" not in line and "\x07" not in line and "\\x1b]0;owned\\x07" in line


def test_not_utf8_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes("Username,Name\nada,Ada\njose,José\n".encode("latin-1"))
    assert refused(roster.read_roster, str(path)).endswith("latin1.csv:3: not UTF-8 text (byte 30)")


def test_sizes_are_bounded(tmp_path: Path) -> None:
    big = tmp_path / "big.csv"
    big.write_bytes(b"Username\n" + b"x" * roster.MAX_BYTES)
    assert refused(roster.read_roster, str(big)).endswith("big.csv: the class list is larger than 16 MiB")
    long = tmp_path / "long.csv"
    long.write_text("Username\n" + "".join(f"s{n}\n" for n in range(roster.MAX_ROWS + 1)), encoding="utf-8")
    assert refused(roster.read_roster, str(long)).endswith(
        f"long.csv:{roster.MAX_ROWS + 2}: more than 100000 rows: too long for a class list"
    )
    wide = tmp_path / "wide.csv"
    wide.write_text("Username," + ",".join(f"c{n}" for n in range(roster.MAX_COLUMNS)) + "\n", encoding="utf-8")
    assert refused(roster.read_roster, str(wide)).endswith(
        "wide.csv:1: more than 5000 columns: too wide for a class list"
    )


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    assert "cannot read the file" in refused(roster.read_roster, str(tmp_path / "absent.csv"))


def test_a_huge_field_is_refused_not_read(tmp_path: Path) -> None:
    """One field past the csv module's limit (131,072 characters) is an error with its line, not a crash."""
    path = tmp_path / "field.csv"
    path.write_text('Username,Notes\nada,"' + "x" * 200_000 + '"\n', encoding="utf-8")
    assert "field.csv:2: not a CSV class list: field larger than field limit" in refused(roster.read_roster, str(path))


def test_control_characters_and_nul_in_cells_are_kept_as_data(tmp_path: Path) -> None:
    """Cells are data: a name with an escape sequence or a NUL is read as it is; whoever shows it escapes it."""
    path = tmp_path / "list.csv"
    path.write_text("Username,Name\nada,Ada\x1b[31m\x00\n", encoding="utf-8")
    found = roster.read_roster(str(path))
    assert found.rows[0].name(found) == "Ada\x1b[31m\x00"


def test_the_key_of_a_problem_is_not_a_class_list() -> None:
    """A YAML key given as --roster by mistake: no match column, one line (its first line is its header)."""
    key = Path(pipeline.__file__).parent.parent / "samples" / "bank.yaml"
    assert "no column to match students by" in refused(roster.read_roster, str(key))


CSV_PIECES = st.sampled_from(
    [",", ";", "\t", "\n", "\r\n", '"', '""', " ", "ID", "Username", "Student", "SIS Login ID", "    Points Possible",
     "Manual Posting", "Student, Test", "ada", "ADA", "=1+1", "\x00", "\x1b[2J", "\ufeff", "é", "\u202e", "0.5"]
)  # fmt: skip


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(CSV_PIECES | st.text(max_size=5), max_size=40).map("".join), st.sampled_from([None, "ID", "x"]))
def test_any_text_is_a_class_list_or_one_line(text: str, match: str | None) -> None:
    """Whatever a class list holds, reading it gives a Roster or an AttnError of one line, nothing else."""
    try:
        found = roster.parse_roster(text, "list.csv", match)
    except AttnError as error:
        line = describe(error)
        assert "\n" not in line and len(line) <= 200 and line.startswith("list.csv"), line
        return
    assert found.match in found.columns
    assert all(len(row.cells) == len(found.columns) for row in found.rows)
