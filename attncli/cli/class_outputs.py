"""What `check` writes for a class: its gradebook in the format asked for, feedback files, and notes on stderr.

Rows of a gradebook that needs nothing but each file's own result (CSV, JSON lines, a line per file; no class
list, no feedback) are written as each file is graded, in the order given, so that memory stays flat whatever
the class's size: on stdout at once, or into -o's temporary file, renamed into place once the last row is
written. Every other output needs the class first: the class list's order (Canvas, `--roster`), the class
report's columns and its glance (Markdown, HTML), Moodle's rows without an id first, one file per student. Those
are written once every file is graded and every output is checked, all of them or none (`-o` and every feedback
file are one set), after the notes on stderr: each file that could not be graded, and each one that belongs to
no student of the class list.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, BinaryIO

from attncli.cli.ending import say
from attncli.cli.environment import Environment
from attncli.cli.output import all_or_nothing, check_targets, make_folder, print_human, to_stdout, write
from attncli.gradebook import roster as rosters
from attncli.gradebook.records import StudentRecord, Tally, counted, record, tally
from attncli.grading.submissions import Result
from attncli.i18n import t

STREAMED = ("csv", "json", "rich", "text")  # formats written row by row (the human ones as a line per file)
Emit = Callable[[str], object]  # where a streamed row goes
FREEZE_EVERY = 25  # records kept between two gc.freeze() calls (see attncli.grading.submissions.grade_files)


@dataclass(frozen=True)
class Plan:
    """What the command line asks a class run to write."""

    format: str
    output: Path | None
    precision: int
    rule: bool  # no --tolerance: a one-file report shows the rounding rule's arithmetic
    quiet: bool
    files: int  # how many files were given
    roster: rosters.Roster | None = None
    assignment: str | None = None  # Canvas's column
    feedback: Path | None = None
    feedback_format: str = "markdown"

    @property
    def streamed(self) -> bool:
        """Whether rows go out as files are graded: a format of rows, no class list, no feedback, several files."""
        return self.format in STREAMED and self.roster is None and self.feedback is None and self.files > 1


Grade = Callable[[Callable[[Result], Any]], Iterator[Any]]  # the class graded: what is made of each result, in order


def write_class(plan: Plan, graded: Grade, env: Environment) -> Tally:
    """Grade the class (`graded(then)` yields `then` of each file's result, in order) and write what `plan` asks
    for; the files' tally (students without a file not counted), from which the run's exit code follows."""
    if plan.streamed:
        return _streamed(plan, graded, env)
    files = _kept(graded(record), env)
    placement = rosters.place(plan.roster, files) if plan.roster is not None else None
    everybody = list(rosters.class_records(placement, _shared_maximum(files))) if placement is not None else files
    if placement is not None:
        _unplaced(placement, plan.format == "canvas", env)
    main = _document(plan, files, everybody, placement, env)
    pages = _feedback(plan, everybody)
    check_targets(("-o", plan.output))
    made = make_folder(plan.feedback, "--feedback") if plan.feedback is not None else []
    try:
        check_targets(*(("--feedback", path) for path, _ in pages))
        with all_or_nothing():  # the gradebook and every feedback file, or none of them
            if main is not None:
                main()
            for path, text in pages:
                write(text, path, env)
    except BaseException:
        for folder in made:  # the folders this run made, empty again
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return tally(files)


def _streamed(plan: Plan, graded: Grade, env: Environment) -> Tally:
    """The rows of CSV, JSON lines or a line per file, each written as its file is graded (the row made where the
    file was graded: a row is small to send back, a report is not)."""
    from attncli.render import grading as check_report

    width = env.width if plan.output is None and env.stdout_is_terminal else None  # a pipe reads a line per file
    head = {"csv": check_report.csv_header()}.get(plan.format, "")
    row = {"csv": check_report.csv_row, "json": check_report.json_line}.get(
        plan.format, lambda each: check_report.summary_line(each, width)
    )

    def made(result: Result) -> tuple[str | None, tuple[str, int, int], str]:
        each = record(result)
        return result.error, counted(each), row(each)

    found = Tally()

    def rows(emit: Emit) -> None:
        nonlocal found
        emit(head)
        for error, count, text in graded(made):
            if error is not None:
                say(error, env.stderr)
            found = found.counted(*count)
            emit(text)
        if plan.format not in ("csv", "json"):
            emit(check_report.total_line(found, width))

    if plan.output is None:
        rows((lambda text: None) if plan.quiet else (lambda text: to_stdout(text, env) if text else None))
    else:

        def stream(handle: BinaryIO) -> None:
            rows(lambda text: handle.write(text.encode("utf-8")))
            check_targets(("-o", plan.output))  # a file a homework's problem read while it was graded

        write(stream, plan.output, env)
    return found


def _kept(graded: Iterable[StudentRecord], env: Environment) -> list[StudentRecord]:
    """Every file's record, in order, kept for outputs that need the whole class (a file that could not be graded
    said on stderr as it comes). What exists is kept out of the garbage collector's scans as the records pile up
    (gc.freeze), and handed back at the end."""
    kept: list[StudentRecord] = []
    try:
        for each in graded:
            if each.error is not None:
                say(each.error, env.stderr)
            if len(kept) % FREEZE_EVERY == 0:
                gc.freeze()
            kept.append(each)
    finally:
        gc.unfreeze()
    return kept


def _shared_maximum(records: Iterable[StudentRecord]) -> Fraction | None:
    """The maximum every scored file shares: what a student without a file scores 0 of; None when they differ."""
    found = {each.score.max_score for each in records if each.score is not None}
    return found.pop() if len(found) == 1 else None


def _unplaced(placement: rosters.Placement, canvas: bool, env: Environment) -> None:
    """On stderr: each file that belongs to no student of the class list (left out of a Canvas import, listed last
    elsewhere), and each student several files belong to (Canvas gets no score for them)."""
    source = placement.roster.file
    for each in placement.unmatched:
        key = "check.unmatched_left_out" if canvas else "check.unmatched_listed"
        say(t(key, file=each.file or "", roster=source, status=t(f"check.status.{each.status}")), env.stderr)
    for placed in placement.doubled if canvas else ():
        files = ", ".join(each.file or "" for each in placed.records)
        say(t("check.several_files", student=placed.row.value, files=files), env.stderr)


def _document(
    plan: Plan,
    files: list[StudentRecord],
    everybody: list[StudentRecord],
    placement: rosters.Placement | None,
    env: Environment,
) -> Callable[[], None] | None:
    """How to write the gradebook (None: nothing to write), made now so that an error (Canvas refusing different
    maximums) comes before any output is written."""
    if plan.quiet and plan.output is None:
        return None
    from attncli.render import class_report, gradebook
    from attncli.render import grading as check_report

    output, kind = plan.output, plan.format
    if kind in ("rich", "text") and plan.roster is None and len(files) == 1:
        return _one_file(plan, files[0], env)
    if kind == "gradescope":
        text = gradebook.gradescope(files[0], plan.precision)
    elif kind == "canvas":
        assert placement is not None and plan.assignment is not None
        text = gradebook.canvas(placement, plan.assignment)
    else:
        width = env.width if output is None and env.stdout_is_terminal else None
        render = {
            "json": check_report.json_lines,
            "csv": check_report.csv_text,
            "markdown": class_report.markdown,
            "html": class_report.html,
            "grades": gradebook.grades,
        }.get(kind, lambda records: check_report.summaries(records, width))
        text = render(everybody)
    return lambda: write(text, output, env)


def _one_file(plan: Plan, only: StudentRecord, env: Environment) -> Callable[[], None] | None:
    """One file's report on a terminal (or as text): every step's cells, its points, its summary."""
    from attncli.render import grading as check_report

    report, score = only.report, only.score
    if report is not None:
        return lambda: print_human(
            lambda width: check_report.human(report, plan.precision, width, plan.rule, score), plan.output, env
        )
    if only.changed:
        return lambda: write(check_report.file_line(only) + "\n", plan.output, env)
    return None


def _feedback(plan: Plan, everybody: list[StudentRecord]) -> list[tuple[Path, str]]:
    """One feedback file per student (or file): its path in the --feedback folder, and its text."""
    if plan.feedback is None:
        return []
    from attncli.render import feedback

    kind = plan.feedback_format
    names = feedback.file_names(everybody, kind)
    return [
        (plan.feedback / name, feedback.feedback(each, kind, plan.precision)) for name, each in zip(names, everybody)
    ]
