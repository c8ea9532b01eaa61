"""Every output format, once: its name, the suffix of a file that implies it, whether it is binary, what it can
write, and which options shape it. Each command offers the formats that can write its record (`offering`).

A format refuses, before anything is computed, what it cannot show (`refuse`: norms and interventions, stacked
layers, more cells than a text format can print) and an option it would ignore (`refuse_options`), rather than
leave it out in silence. Nothing here imports a renderer: they read this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from attncli.errors import fail

if TYPE_CHECKING:
    from attncli.problem import Problem, Stack

# What a format can write: a problem's steps, a stack of layers, norms and interventions (analyses), and the
# records of the other commands.
STEPS, STACK, ANALYSES = "steps", "stack", "analyses"
CHECK, COMPARE, SCALING, SOFTMAX, COST = "check", "compare", "scaling", "softmax", "cost"
# The options that shape what a format shows for a reader (precision, which queries, the heatmap, the rollout).
SHAPED_FOR_READERS = frozenset(("--follow", "--precision", "--heatmap", "--rollout"))
MAX_DOCUMENT_CELLS = 2_000_000  # (query, key) cells over all heads that text formats print, a few at each
# ... that the step-by-step view (rich, text, --svg, --html) and the write-ups lay out cell by cell: 64 heads of
# 64 queries × 16 keys (the most a head shows before it is condensed) take about 2 s as text and 6 s as SVG
MAX_SHOWN_CELLS = 65_536
MAX_KEYS = 16  # more keys than this, or more queries than MAX_QUERIES, and the view is condensed (`condensed`)
MAX_QUERIES = 64
PICTURES = ("svg", "html")  # --svg and --html: the step-by-step view as a picture (`refuse_picture`)


class Format(NamedTuple):
    """An output format, as the command line offers it and the renderers write it."""

    name: str
    suffix: str | None  # the extension of `-o FILE` that means this format when --format is not given
    writes: frozenset[str]  # the records it can write (STEPS, STACK, ANALYSES, CHECK, ...)
    honours: frozenset[str] = frozenset()  # the options that shape it; it refuses the others of SHAPED_FOR_READERS
    human: bool = False  # styled lines laid out for a width (the terminal's, or a file's)
    binary: bool = False  # never printed on a terminal
    every_cell: bool = False  # every cell of every step as text: at most MAX_DOCUMENT_CELLS of them
    delimiter: str = ""  # the tables' column separator; "" for a format that writes no table


_EVERYTHING = frozenset((STEPS, STACK, ANALYSES, CHECK, COMPARE, SCALING, SOFTMAX, COST))
_TABLES = frozenset((STEPS, STACK, COMPARE, SOFTMAX))
FORMATS = {
    format.name: format
    for format in (
        Format("rich", None, _EVERYTHING, SHAPED_FOR_READERS, human=True),
        Format("text", ".txt", _EVERYTHING, SHAPED_FOR_READERS, human=True),
        Format("json", ".json", _EVERYTHING, frozenset(("--rollout",)), every_cell=True),
        Format("csv", ".csv", _TABLES | {CHECK}, frozenset(("--rollout",)), every_cell=True, delimiter=","),
        Format("tsv", ".tsv", _TABLES, frozenset(("--rollout",)), every_cell=True, delimiter="\t"),
        Format("npy", ".npy", frozenset((STEPS, STACK)), binary=True),
        Format("npz", ".npz", frozenset((STEPS,)), binary=True),
        Format("markdown", ".md", frozenset((STEPS, STACK, CHECK, SOFTMAX)), SHAPED_FOR_READERS),
        Format("latex", ".tex", frozenset((STEPS, STACK, SOFTMAX)), SHAPED_FOR_READERS),
        Format("html", ".html", frozenset((CHECK,))),  # a class report as one page (compute draws its view: --html)
        Format("gradescope", None, frozenset((CHECK,))),  # the autograder's results.json for one submission
        Format("canvas", None, frozenset((CHECK,))),  # a Canvas gradebook import
        Format("grades", None, frozenset((CHECK,))),  # a row per student, for Moodle and any spreadsheet
    )
}  # in the order --help lists them
CSV_LAYOUTS = ("long", "wide")  # --csv-layout: a row per number, or a row per query (csv and tsv)


def offering(record: str) -> tuple[str, ...]:
    """The names of the formats that can write `record`, in FORMATS' order: a command's --format choices."""
    return tuple(name for name, format in FORMATS.items() if record in format.writes)


def implied_by(suffix: str) -> str | None:
    """The format a file's `suffix` (.json, any case) names, if any."""
    return next((name for name, format in FORMATS.items() if format.suffix == suffix.lower()), None)


def refuse(name: str, *, analyses: bool = False, problem: Problem | Stack | None = None) -> None:
    """Raise when format `name` cannot show norms or interventions (`analyses`), a stack, or every cell of
    `problem`: the human output and the write-ups condense a large problem, npy holds the output, npz every step."""
    from attncli.problem import Stack

    format = FORMATS[name]
    if analyses and ANALYSES not in format.writes:
        raise fail("render.no_analyses", format=name)
    if isinstance(problem, Stack) and STACK not in format.writes:
        raise fail("render.no_layers", format=name, formats=", ".join(offering(STACK)))
    if problem is not None and not format.binary:
        _within_cells(name, problem, format.every_cell)


def refuse_picture(name: str, problem: Problem | Stack) -> None:
    """Raise when the picture `name` (one of PICTURES) would lay out more cells than the view holds."""
    _within_cells(name, problem, every_cell=False)


def _within_cells(name: str, problem: Problem | Stack, every_cell: bool) -> None:
    """A format that prints every cell is held to MAX_DOCUMENT_CELLS; one that lays the view out (a large problem
    condensed to a few cells a head) to MAX_SHOWN_CELLS of the cells it shows."""
    shown, limit = (cells(problem), MAX_DOCUMENT_CELLS) if every_cell else (cells(problem, True), MAX_SHOWN_CELLS)
    if shown > limit:
        raise fail("render.too_many_cells", format=name, cells=shown, limit=limit)


def refuse_options(name: str, given: Sequence[str]) -> None:
    """Raise for the first of the options `given` (of SHAPED_FOR_READERS) that format `name` would not honour."""
    for option in given:
        if option not in FORMATS[name].honours:
            honouring = [each for each, format in FORMATS.items() if option in format.honours]
            # the formats written for a reader first, as the message has always listed them
            honouring.sort(key=lambda each: FORMATS[each].honours != SHAPED_FOR_READERS)
            raise fail("render.option_unused", option=option, format=name, formats=", ".join(honouring))


def cells(problem: Problem | Stack, shown_only: bool = False) -> int:
    """The (query, key) cells of every head of every layer: what MAX_DOCUMENT_CELLS counts; with `shown_only`
    those of the layers the step-by-step view lays out cell by cell (not condensed): what MAX_SHOWN_CELLS counts."""
    from attncli.problem import Stack

    layers = [layer.attention for layer in problem.layers] if isinstance(problem, Stack) else [problem]
    return sum(len(layer.heads) * layer.mask.size for layer in layers if not (shown_only and condensed(layer)))


def condensed(problem: Problem) -> bool:
    """Whether a problem is too large to show cell by cell: then every format shows the first and last EDGE rows
    and columns of each matrix (the terminal a summary), and says where every number is."""
    return len(problem.tokens) > MAX_KEYS or len(problem.query_tokens) > MAX_QUERIES


def every_number(problem: Problem | Stack) -> str:
    """Where every number of `problem` is to be had, in words: json (or csv) within their limit, else npz where
    every step fits in memory, else the Python API alone. What a condensed output's note recommends."""
    from attncli import pipeline
    from attncli.i18n import t
    from attncli.problem import Stack

    if cells(problem) <= MAX_DOCUMENT_CELLS:
        return t("render.every_json")
    if not isinstance(problem, Stack) and pipeline.every_step_fits(problem):
        return t("render.every_npz")
    return t("render.every_api")
