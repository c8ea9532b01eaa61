"""Feedback to hand back (attncli.render.feedback), its file names, and the class at a glance (attncli.gradebook.glance
with its renderers), from records the grader makes out of real answers files."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from fractions import Fraction
from html.parser import HTMLParser
from pathlib import Path

import pytest

from attncli.gradebook import glance, records
from attncli.i18n import LANGUAGE, en, es
from attncli.render import feedback, gradebook
from tests.test_gradebook import WORKED
from tests.test_lms_formats import RIGHT_WEIGHTS, scored

F = Fraction


def in_language(language: str, make: object, *args: object) -> str:
    token = LANGUAGE.set(language)
    try:
        return make(*args)  # type: ignore[operator]
    finally:
        LANGUAGE.reset(token)


class Tags(HTMLParser):
    """The tags of an HTML text, to check that every one opened is closed and that no script got in."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.seen: Counter[str] = Counter()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.seen[tag] += 1
        if tag != "meta":
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open.pop() == tag


# The feedback document


SAID = {
    "en": (
        "# Feedback: ana\n",
        "Points: 13/3 ≈ 4.33 of 7 (61.90 %)",
        "a carried cell (↷) earns half of it; a cell wrong only by rounding (≈) earns half of it.",
        "First mistake: dot.",
        "## dot: 2 of 3 points",
        "## scores: 5/6 ≈ 0.83 of 1 point",
        "## weights: 0.5 of 1 point",
        "## output: 1 of 2 points",
        "| bank, fisherman | 2.4142 | ✗ wrong | 2.8284 |",
        "| bank, fisherman | 1.7071 | ↷ carried | 2.0000 |",
        "| bank, net | 0.2935 | ≈ wrong only by rounding | 0.2447 |",
        "| bank, 2 | 0.6957 | ↷ carried | 0.5795 |",
        "| bank, net | 1 | ✓ right |  |",
        en.MESSAGES["check.no_diagnosis"],
        en.MESSAGES["check.carried_note"],
        f"rounded too early (rounded\\_early): {en.MESSAGES['check.hint.rounded_early']}",
    ),
    "es": (
        "# Comentarios: ana\n",
        "Puntos: 13/3 ≈ 4.33 de 7 (61.90 %)",
        f"Primer error: {es.MESSAGES['check.step.dot']}.",
        "## puntuaciones: 5/6 ≈ 0.83 de 1 punto",
        "| bank, net | 0.2935 | ≈ mal solo por redondeo | 0.2447 |",
        es.MESSAGES["check.hint.rounded_early"],
        es.MESSAGES["check.carried_note"],
    ),
}


@pytest.mark.parametrize("language", ["en", "es"])
def test_feedback_says_points_verdicts_first_mistake_and_hints_in_the_language_of_the_run(
    tmp_path: Path, language: str
) -> None:
    (record,) = scored(tmp_path, {"ana.yaml": WORKED})
    text = in_language(language, feedback.feedback, record)
    assert text.startswith(SAID[language][0])
    assert [line for line in SAID[language] if line not in text] == []
    assert ": ana.yaml\n" in text and str(tmp_path) not in text  # the file's name, not the teacher's folders
    if language == "es":
        assert [word for word in ("Feedback", "Points", "carried", "First mistake") if word in text] == []


def test_feedback_in_html_is_one_escaped_page(tmp_path: Path) -> None:
    (record,) = scored(tmp_path, {"ana.yaml": WORKED})
    hostile = replace(record, student="<script>alert(1)</script> & \x1b[2J")
    page = in_language("es", feedback.feedback, hostile, "html")
    assert page.startswith('<!DOCTYPE html>\n<html lang="es">')
    tags = Tags()
    tags.feed(page)
    assert tags.open == [] and tags.seen["script"] == 0
    assert tags.seen["h2"] == 4 and tags.seen["table"] == 4
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; \\x1b[2J" in page


def test_a_name_cannot_change_the_markdown(tmp_path: Path) -> None:
    (record,) = scored(tmp_path, {"ana.yaml": WORKED})
    text = in_language("en", feedback.feedback, replace(record, student="x\n# Grade: 10/10 | <b>"))
    assert text.startswith("# Feedback: x\\\\n# Grade: 10/10 \\| \\<b\\>\n")  # one line: its # starts nothing
    assert "\n# Grade" not in text


def test_feedback_without_points_shows_the_steps_answered(tmp_path: Path) -> None:
    (record,) = scored(tmp_path, {"ana.yaml": WORKED})
    text = in_language("en", feedback.feedback, replace(record, score=None))
    assert "Points" not in text and "## dot\n" in text and "## output\n" in text
    assert "| bank, 2 | 0.6957 | ↷ carried | 0.5795 |" in text


@pytest.mark.parametrize(
    ("record", "says"),
    [
        (
            records.no_file("Alan Turing", "alan", F(7)),
            ["# Feedback: Alan Turing", "No file was handed in.", "Points: 0 of 7 (0.00 %)"],
        ),
        (
            records.StudentRecord("x.yaml", "not_graded", error="x.yaml:2: bad"),
            ["# Feedback: x", "This file could not be graded: x.yaml:2: bad"],
        ),
        (
            records.StudentRecord("x.yaml", "problem_changed", changed=("keys",)),
            ["problem changed: keys differ from the key's problem"],
        ),
    ],
)
def test_feedback_for_what_was_not_graded(record: records.StudentRecord, says: list[str]) -> None:
    text = in_language("en", feedback.feedback, record)
    for line in says:
        assert line in text, text


@pytest.mark.parametrize(
    ("points", "text"),
    [
        (F(2), "2"),
        (F(1, 2), "0.5"),
        (F(1, 8), "0.125"),
        (F(13, 3), "13/3 ≈ 4.33"),
        (F(5, 6), "5/6 ≈ 0.83"),
        (F(1, 10000), "0.0001"),
        (F(1, 3 * 10**4), "1/30000 ≈ 0.00"),
    ],
)
def test_points_for_people(points: Fraction, text: str) -> None:
    assert feedback.points_text(points) == text


# File names


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("Alice Smith", "Alice Smith"),
        ("../../etc/passwd", "_.._etc_passwd"),
        ("..\\..\\boot.ini", "_.._boot.ini"),
        (".bashrc", "bashrc"),
        ("  - dash", "dash"),
        ("CON", "_CON"),
        ("nul.md", "_nul.md"),
        ('a:b*c?d"e<f>g|h', "a_b_c_d_e_f_g_h"),
        ("Eve\x1b[2J\u202e", "Eve_[2J_"),
        ("trailing. ", "trailing"),
        ("", "student"),
        ("...", "student"),
        ("Jose\u0301", "José"),  # NFC
    ],
)
def test_safe_file_names(name: str, safe: str) -> None:
    assert feedback.safe_file_name(name) == safe


def test_a_long_name_is_cut_within_its_bytes() -> None:
    cut = feedback.safe_file_name("é" * 300)
    assert cut == "é" * 60 and len(cut.encode("utf-8")) <= feedback.NAME_BYTES


def test_collisions_are_made_unique_without_case() -> None:
    made = [
        records.StudentRecord(f"{n}.yaml", "right", student=name)
        for n, name in enumerate(["Ada", "ada", "Alice-2", "Alice", "Alice", "ADA"])
    ]
    assert feedback.file_names(made) == ["Ada.md", "ada-2.md", "Alice-2.md", "Alice.md", "Alice-3.md", "ADA-3.md"]
    assert feedback.file_names(made[:1], "html") == ["Ada.html"]


def test_feedback_files_for_a_class_stay_in_their_folder(tmp_path: Path) -> None:
    made = scored(tmp_path, {"ana.yaml": WORKED, "b.yaml": RIGHT_WEIGHTS})
    made = [replace(made[0], student="../../escape"), replace(made[1], student="/etc/passwd")]
    folder = tmp_path / "feedback"
    folder.mkdir()
    for record, name in zip(made, feedback.file_names(made)):
        path = folder / name
        path.write_text(feedback.feedback(record), encoding="utf-8")
        assert path.resolve().parent == folder.resolve()
    assert sorted(p.name for p in folder.iterdir()) == ["_.._escape.md", "_etc_passwd.md"]


# The class at a glance


def test_the_class_at_a_glance_adds_up(tmp_path: Path) -> None:
    made = scored(
        tmp_path,
        {
            "a.yaml": WORKED,
            "b.yaml": RIGHT_WEIGHTS,
            "c.yaml": "answers:\n  scores: [2.8284, 1.4142, 0]\n  weights: [0.7679, 0.1867, 0.0454]\n",
            "d.yaml": "answers:\n  scores: [2.8284, 1.4142, 0]\n",
            "e.yaml": "answers:\n  weights: [0.3333, 0.3333, 0.3333]\n",
        },
    )
    found = glance.glance(r.report for r in made if r.report is not None)
    assert found.students == 5
    rows = {step.step.step: step for step in found.steps}
    assert list(rows) == ["dot", "scores", "weights", "output"]
    counted = {
        name: (s.answered, s.right, s.carried, s.rounded, s.wrong, s.missing, s.not_answered)
        for name, s in rows.items()
    }
    assert counted == {
        "dot": (1, 0, 0, 0, 1, 0, 4),
        "scores": (3, 0, 1, 0, 2, 0, 2),  # a: carried; c, d: missing_scale
        "weights": (4, 1, 1, 1, 1, 0, 1),  # b right; c carried; a rounded_early: rounded; e uniform (no cause): wrong
        "output": (1, 0, 1, 0, 0, 0, 4),
    }
    for step in found.steps:
        assert step.answered + step.missing + step.not_answered == found.students
        assert step.answered == step.right + step.carried + step.rounded + step.wrong
    assert rows["scores"].causes[0] == ("missing_scale", 2)
    text = in_language("en", gradebook.glance_markdown, found)
    assert "| scores | 3 | 0 | 1 | 0 | 2 | 0 | 2 | missing\\_scale ×2 |" in text
    assert text.startswith("## The class at a glance\n\n5 graded files;")
    html = in_language("es", gradebook.glance_html, found)
    assert html.startswith("<h2>La clase de un vistazo</h2>") and "<td>missing_scale ×2</td>" in html


def test_causes_are_the_three_commonest_ties_by_name() -> None:
    from attncli.grading import Report, StepReport

    def step(codes: tuple[str, ...]) -> Report:
        return Report("f", (StepReport("scores", 0, None, (), (), (), "wrong", codes),))

    reports = [
        step(("wrong_scale",)),
        step(("missing_scale", "no_exp")),
        step(("missing_scale",)),
        step(("bias_forgotten", "wrong_axis")),
    ]
    (row,) = glance.glance(reports).steps
    assert row.causes == (("missing_scale", 2), ("bias_forgotten", 1), ("no_exp", 1))
    assert (row.wrong, row.answered) == (4, 4)
