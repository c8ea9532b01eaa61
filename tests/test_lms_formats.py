"""Grades into Gradescope, Canvas and Moodle (attncli.render.gradebook), checked against each system's own rules.

- Gradescope: every results.json validates against tests/gradescope_results.schema.json, written from its
  specification; `validate` below is a small JSON Schema validator (the keywords that schema uses), tried on
  documents it must refuse too.
- Canvas: `canvas_import` reads a CSV as Canvas's importer does (app/models/gradebook_importer.rb: the header's
  first cells, the student columns up to Section, the Points Possible row, a student found by ID, then SIS User
  ID, then SIS Login ID; its decimal_comma_to_period converter on every plain number).
- Moodle: `moodle_import` reads the grades CSV as grade/import/csv/classes/load_data.php does, the user field
  mapped to student_id: its studentid kept from line to line, a line with a blank user field given to the
  student before, a user not found ending the import.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from attncli import yamldoc
from attncli.errors import AttnError
from attncli.gradebook import points, records, roster
from attncli.gradebook.records import StudentRecord
from attncli.grading.submissions import Options, grade_files, load_key
from attncli.i18n import describe
from attncli.render import gradebook
from tests.test_gradebook import BANK, WORKED, WORKED_POINTS, write

SCHEMA = json.loads((Path(__file__).parent / "gradescope_results.schema.json").read_text(encoding="utf-8"))
CANVAS = str(Path(__file__).parent / "rosters" / "canvas_export.csv")
F = Fraction


# A JSON Schema validator for the keywords the Gradescope schema uses


def validate(value: object, schema: dict, root: dict | None = None, where: str = "$") -> list[str]:
    """The places where `value` breaks `schema` (type, enum, properties, required, additionalProperties, items,
    anyOf, $ref to #/$defs); [] when it holds."""
    root = root or schema
    if "$ref" in schema:
        return validate(value, root["$defs"][schema["$ref"].rsplit("/", 1)[1]], root, where)
    errors = []
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        checks = {
            "object": lambda v: isinstance(v, dict),
            "array": lambda v: isinstance(v, list),
            "string": lambda v: isinstance(v, str),
            "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        }
        if not any(checks[kind](value) for kind in kinds):
            return [f"{where}: not {kinds}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in {schema['enum']}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        errors += [f"{where}: no {name}" for name in schema.get("required", ()) if name not in value]
        for name, item in value.items():
            if name in properties:
                errors += validate(item, properties[name], root, f"{where}.{name}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{where}: {name} is not defined")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            errors += validate(item, schema["items"], root, f"{where}[{index}]")
    if "anyOf" in schema and all(validate(value, option, root, where) for option in schema["anyOf"]):
        errors.append(f"{where}: matches none of anyOf")
    return errors


@pytest.mark.parametrize(
    ("document", "broken"),
    [
        ({"output": "no score anywhere"}, "matches none of anyOf"),
        ({"tests": [{"name": "a", "max_score": 1}]}, "matches none of anyOf"),
        ({"score": "3"}, "$.score: not ['number']"),
        ({"score": True}, "$.score: not ['number']"),
        ({"score": 1, "visibility": "public"}, "'public' not in"),
        ({"score": 1, "stdout_visibility": "always"}, "'always' not in"),
        ({"score": 1, "tests": [{"score": 1, "max_points": 2}]}, "max_points is not defined"),
        ({"score": 1, "tests": [{"score": 1, "status": "partial"}]}, "'partial' not in"),
        ({"score": 1, "output_format": "markdown"}, "'markdown' not in"),
        ({"score": 1, "leaderboard": [{"name": "x"}]}, "$.leaderboard[0]: no value"),
        ({"score": 1, "extra": 1}, "extra is not defined"),
    ],
)
def test_the_validator_refuses_what_the_specification_does_not_define(document: dict, broken: str) -> None:
    assert any(broken in error for error in validate(document, SCHEMA)), validate(document, SCHEMA)


def test_the_specifications_own_example_validates() -> None:
    """The example of docs/specs.md (its comments removed) and its test-status example."""
    example = {
        "score": 44.0, "execution_time": 136, "output": "Text relevant to the entire submission",
        "output_format": "simple_format", "test_output_format": "text", "test_name_format": "text",
        "visibility": "after_due_date", "stdout_visibility": "visible", "extra_data": {},
        "tests": [
            {"score": 2.0, "max_score": 2.0, "status": "passed", "name": "Your name here", "name_format": "text",
             "number": "1.1", "output": "Giant multiline string", "output_format": "text",
             "tags": ["tag1", "tag2", "tag3"], "visibility": "visible", "extra_data": {}},
        ],
        "leaderboard": [
            {"name": "Accuracy", "value": 0.926}, {"name": "Time", "value": 15.1, "order": "asc"},
            {"name": "Stars", "value": "*****"},
        ],
    }  # fmt: skip
    assert validate(example, SCHEMA) == []
    statuses = {"tests": [{"name": "Compilation check", "status": "passed"}, {"score": 5, "max_score": 10}]}
    assert validate(statuses, SCHEMA) != []  # a test without a score and no top-level score
    statuses["score"] = 5
    assert validate(statuses, SCHEMA) == []


# Records made by grading real files


def scored(tmp_path: Path, files: dict[str, str], points_text: str = WORKED_POINTS) -> list[StudentRecord]:
    """Each file graded against the bank key as `check --key` does, scored under `points_text`."""
    key_path = write(tmp_path, "key.yaml", BANK)
    key = load_key(key_path)
    cells = points.key_cells(key.steps)
    spec = points.read_points(yamldoc.load(points_text, "key.yaml"), cells)
    paths = [write(tmp_path, name, text) for name, text in files.items()]
    results = grade_files(paths, key, Options(), describe)
    return [records.record(r, points.score(r.report, spec, cells) if r.report else None) for r in results]


def test_gradescope_for_the_worked_example(tmp_path: Path) -> None:
    (record,) = scored(tmp_path, {"ana.yaml": WORKED})
    document = json.loads(gradebook.gradescope(record))
    assert validate(document, SCHEMA) == []
    assert document["score"] == 13 / 3  # the exact 13/3 as the nearest float, not a sum of rounded tests
    assert [(t["name"], t["score"], t["max_score"], t["status"]) for t in document["tests"]] == [
        ("dot", 2.0, 3.0, "failed"),
        ("scores", 5 / 6, 1.0, "failed"),
        ("weights", 0.5, 1.0, "failed"),
        ("output", 1.0, 2.0, "failed"),
    ]
    assert all(set(test) >= {"name", "score", "max_score", "output", "visibility"} for test in document["tests"])
    assert (document["visibility"], document["stdout_visibility"], document["output_format"]) == (
        "visible", "hidden", "text",
    )  # fmt: skip
    weights = document["tests"][2]["output"]
    assert "bank, fisherman: 0.5978 ≈ wrong only by rounding (0.6652)" in weights
    assert "rounded too early (rounded_early): The method is right" in weights
    assert "dot: 2/3, scores: 2/3 (carried)" in document["output"]  # the check report, in plain text
    assert "Points: 13/3 ≈ 4.33 of 7 (61.90 %)" in document["output"]


def test_gradescope_when_nothing_could_be_graded(tmp_path: Path) -> None:
    (broken,) = scored(tmp_path, {"broken.yaml": "answers:\n  weights: [1, 2\n"})
    document = json.loads(gradebook.gradescope(broken, visibility="after_due_date", stdout_visibility="visible"))
    assert validate(document, SCHEMA) == []
    assert (document["score"], document["tests"]) == (0.0, [])
    assert "This file could not be graded: " in document["output"] and "broken.yaml:" in document["output"]
    assert document["visibility"] == "after_due_date"
    missing = records.no_file("Ada", "ada", F(7))
    document = json.loads(gradebook.gradescope(missing))
    assert validate(document, SCHEMA) == [] and "No file was handed in." in document["output"]


def test_a_right_zero_point_step_passes_and_a_wrong_one_fails(tmp_path: Path) -> None:
    right, wrong = scored(
        tmp_path,
        {"right.yaml": "answers:\n  dot: [2.8284, 1.4142, 0]\n", "wrong.yaml": "answers:\n  dot: [2, 1.4142, 0]\n"},
        "points: {steps: {weights: 1}}",
    )
    status = {name: json.loads(gradebook.gradescope(r))["tests"][0] for name, r in (("right", right), ("wrong", wrong))}
    assert (status["right"]["max_score"], status["right"]["status"]) == (0.0, "passed")
    assert (status["wrong"]["max_score"], status["wrong"]["status"]) == (0.0, "failed")


# Canvas


def canvas_import(text: str) -> tuple[list[str], dict[str, str], list[dict[str, str]]]:
    """(assignment columns, points possible by assignment, students with their scores) as Canvas's importer reads
    `text`: comma or semicolon chosen from the first lines, the header checked, the student columns counted."""
    first = text.splitlines()[:3]
    delimiter = ";" if all(line.count(";") > line.count(",") for line in first) else ","
    read = csv.reader(io.StringIO(text), delimiter=delimiter)
    rows = [[_decimal_comma_to_period(cell) for cell in row] for row in read]
    header = rows[0]
    assert len(header) > 3 and "Student" in header[0] and "ID" in header[1], header
    columns = 3
    if re.search(r"SIS\s+Login\s+ID", header[2]):
        columns += 1
    elif re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
        columns += 2
    assert "Section" in header[columns - 1], "the last student column must be Section"
    assignments = header[columns:]
    possible: dict[str, str] = {}
    students = []
    for row in rows[1:]:
        if "Points Possible" in row[0]:
            possible = dict(zip(assignments, row[columns:]))
        elif not all(re.fullmatch(r"\s*(Muted|Manual Posting.*)?\s*", cell, re.I) for cell in row):
            found = {"ID": row[1], "SIS User ID": row[2], "SIS Login ID": row[3]}
            students.append({**found, **dict(zip(assignments, row[columns:]))})
    return assignments, possible, students


def _decimal_comma_to_period(field: str) -> str:
    """Canvas's CSV converter: a pure number or percentage has its last , or . as the decimal point."""
    if not re.fullmatch(r"-?[0-9.,]+%?", field):
        return field
    parts = re.split(r"[,.]", field)
    last = parts.pop()
    return last if not parts else "".join(parts) + "." + last


ROSTER = """\
Student,ID,SIS User ID,SIS Login ID,Section,Attention (1202)
    Points Possible,,,,,7.00
"Smith, Alice",4101,S1001,asmith,Section 01,
"García, José",4102,S1002,jgarcia,Section 01,
"@evil, Eve",4103,S1003,+eve,Section 02,
"Lovelace, Ada",4104,S1004,ada,Section 02,
"Turing, Alan",4105,S1005,alan,-1,
"Student, Test",4199,,b1946ac92492d2347c6235b4d2611184,Section 01,
"""
RIGHT_WEIGHTS = "answers:\n  weights: [0.6652, 0.2447, 0.0900]\n"


@pytest.fixture
def placement(tmp_path: Path) -> roster.Placement:
    """asmith: the worked example (13/3); jgarcia: two files; +eve: right weights (1); ada: not graded; alan:
    nothing; nobody: a file of no student."""
    made = scored(
        tmp_path,
        {
            "asmith.yaml": WORKED,
            "jgarcia.yaml": RIGHT_WEIGHTS,
            "late.yaml": RIGHT_WEIGHTS,
            "+eve.yaml": RIGHT_WEIGHTS,
            "ada.yaml": "answers: [\n",
            "nobody.yaml": RIGHT_WEIGHTS,
        },
    )
    made = [replace(r, student_id="jgarcia") if r.file.endswith("late.yaml") else r for r in made]
    return roster.place(roster.parse_roster(ROSTER, "class.csv"), made)


def test_canvas_as_its_importer_reads_it(placement: roster.Placement) -> None:
    text = gradebook.canvas(placement, "Attention (1202)")
    assignments, possible, students = canvas_import(text)
    assert assignments == ["Attention (1202)"] and possible == {"Attention (1202)": "7"}
    scores = {student["ID"]: student["Attention (1202)"] for student in students}
    assert scores == {"4101": "4.333333333333333", "4102": "", "4103": "1", "4104": "", "4105": "0"}
    assert float(scores["4101"]) == float(F(13, 3))  # the float nearest 13/3, read back exactly
    assert [student["SIS Login ID"] for student in students] == ["asmith", "jgarcia", "'+eve", "ada", "alan"]
    lines = text.splitlines()
    assert lines[0] == "Student,ID,SIS User ID,SIS Login ID,Section,Attention (1202)"
    assert lines[1] == "    Points Possible,,,,,7"  # as Canvas's exporter writes the row
    assert lines[4] == "\"'@evil, Eve\",4103,S1003,'+eve,Section 02,1"  # formulas neutralised
    assert lines[6] == '"Turing, Alan",4105,S1005,alan,-1,0'  # a number stays a number
    assert len(lines) == 2 + 5  # the test student and the file of nobody are left out


def test_canvas_refuses_files_out_of_different_maximums(placement: roster.Placement) -> None:
    first = placement.rows[0]
    other = replace(first.records[0], score=replace(first.records[0].score, max_score=F(8)))
    mixed = roster.Placement(placement.roster, (*placement.rows, roster.Placed(first.row, (other,))), ())
    with pytest.raises(AttnError) as caught:
        gradebook.canvas(mixed, "A")
    line = describe(caught.value)
    assert line.startswith("the files are marked out of different maximums (7, 8); one gradebook column takes one")
    assert line.endswith("give the keys the same points: steps:") and len(line) <= 200


def test_a_class_list_without_canvas_columns_still_makes_a_canvas_import(tmp_path: Path) -> None:
    made = scored(tmp_path, {"S1001.yaml": RIGHT_WEIGHTS})
    moodle = roster.read_roster(str(Path(__file__).parent / "rosters" / "moodle_export.csv"))
    text = gradebook.canvas(roster.place(moodle, made), "A")
    _, possible, students = canvas_import(text)
    assert possible == {"A": "7"}
    assert [(s["ID"], s["A"]) for s in students] == [("", "1"), ("", "0"), ("", "0")]
    assert text.splitlines()[2].startswith("Alice Smith,,,,,1")


# The grades CSV, for spreadsheets and Moodle


def moodle_import(text: str, users: set[str]) -> dict[str, float | None] | str:
    """The grades CSV imported into Moodle with student_id mapped to the users' ID number and score to the grade
    item, as load_data.php's prepare_import_grade_data does: the grades by user, or why it stopped."""
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    studentid = None  # kept from line to line, as $this->studentid is
    grades: dict[str, float | None] = {}
    for line in rows[1:]:
        if len(line) <= 1:
            continue
        user, value = line[header.index("student_id")].strip(), line[header.index("score")].strip()
        if user:
            if user not in users:
                return "usermappingerror"
            studentid = user
        if studentid is None:
            return "usermappingerrorusernotfound"
        grades[studentid] = None if value in ("", "-") else float(value)
    return grades


def test_grades_as_moodle_imports_them(placement: roster.Placement) -> None:
    everybody = roster.class_records(placement, records.common_maximum(placement.unmatched))
    named = [record for record in everybody if record.student_id]
    text = gradebook.grades(named)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == list(gradebook.GRADES_COLUMNS)
    assert [(r["student_id"], r["status"], r["score"], r["max_score"], r["percent"]) for r in rows] == [
        ("asmith", "wrong", "4.333333333333333", "7", "61.90"),
        ("jgarcia", "right", "1", "7", "14.29"),
        ("jgarcia", "right", "1", "7", "14.29"),
        ("'+eve", "right", "1", "7", "14.29"),
        ("ada", "not_graded", "", "", ""),
        ("alan", "no_file", "0", "7", "0.00"),
    ]
    assert rows[0]["first_mistake"] == "dot" and rows[0]["codes"] == "weights:rounded_early"
    assert rows[3]["student"] == "'@evil, Eve"
    users = {"asmith", "jgarcia", "'+eve", "ada", "alan"}
    assert moodle_import(text, users) == {"asmith": 13 / 3, "jgarcia": 1.0, "'+eve": 1.0, "ada": None, "alan": 0.0}


def test_a_row_without_a_student_id_stops_moodle_instead_of_crediting_the_student_before(
    placement: roster.Placement,
) -> None:
    everybody = roster.class_records(placement, F(7))
    assert [r.student_id for r in everybody][-1] is None  # nobody.yaml, last in the class records
    text = gradebook.grades(everybody)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows[0]["student_id"] == "" and rows[0]["file"].endswith("nobody.yaml")
    users = {"asmith", "jgarcia", "'+eve", "ada", "alan"}
    assert moodle_import(text, users) == "usermappingerrorusernotfound"
    in_order = "\n".join([text.splitlines()[0], *text.splitlines()[2:], text.splitlines()[1]]) + "\n"
    credited = moodle_import(in_order, users)
    assert isinstance(credited, dict) and credited["alan"] == 1.0  # what the order prevents: nobody's 1 to alan


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("=1+1", "'=1+1"),
        ("+34 600 111", "'+34 600 111"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "\\t=1"),  # the tab shown as \t: no longer a formula's start
        ("-2.5", "-2.5"),
        ("+7", "+7"),
        ("0042", "0042"),
        ("Ada", "Ada"),
        ("Ada\x1b[31m", "Ada\\x1b[31m"),
    ],
)
def test_what_a_spreadsheet_would_run_is_neutralised(text: str, cell: str) -> None:
    record = records.StudentRecord("f.yaml", "right", student=text, student_id=text)
    (row,) = csv.DictReader(io.StringIO(gradebook.grades([record])))
    assert (row["student"], row["student_id"]) == (cell, cell)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (F(3), "3"),
        (F(0), "0"),
        (F(1, 2), "0.5"),
        (F(13, 3), "4.333333333333333"),
        (F(1, 300000), "0.0000033333333333333333"),
        (F(10**6, 3), "333333.3333333333"),
    ],
)
def test_scores_are_plain_round_trip_numbers(value: Fraction, text: str) -> None:
    assert gradebook.number(value) == text
    assert "e" not in text and float(Decimal(text)) == float(value)
