"""`attncli cost` for people (a table whose rows are the formulas with their numbers) and for scripts (JSON).

Every value is an exact integer; beside it the human table gives its size rounded (≈ 1.34 G, ≈ 2.00 GiB),
marked as such.
"""

from __future__ import annotations

import json

from attncli import __version__
from attncli.cost import Cost, Section, Term
from attncli.i18n import t
from attncli.problem import Problem
from attncli.render.layout import BLANK, Line, line, table

SI = ("", "k", "M", "G", "T", "P", "E", "Z", "Y")  # counts: parameters, FLOPs
IEC = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB")  # bytes


def about(value: int, binary: bool = False) -> str:
    """`value` to three significant digits in its unit: 1.34 G, 185 T, 2 GiB; nothing below a thousand (1024 B)
    or past what a float holds."""
    base, units = (1024, IEC) if binary else (1000, SI)
    power = 0
    while value >= base ** (power + 1) and power < len(units) - 1:
        power += 1
    if power == 0:
        return ""  # the value itself is as short
    try:
        return f"{value / base**power:.3g} {units[power]}"
    except OverflowError:  # past float's range (10^400 pairs): the exact value stands alone
        return ""


# For people


def human(cost: Cost, compared: list[tuple[str, Cost]], width: int) -> list[Line]:
    """What was counted, then parameters, FLOPs and the KV cache as tables of formulas; then the comparison."""
    out = [line((_subject(cost), "bold")), line(t("cost.flops_note")), line(_mask_words(cost)), BLANK]
    layers = 1 if cost.shape is None else cost.shape.layers
    for title, section, binary in (
        ("cost.parameters", cost.parameters, False),
        ("cost.flops", cost.flops, False),
        ("cost.kv_cache", cost.kv_cache, True),
    ):
        first = [cost.pairs] if section is cost.flops else []
        out += _section(t(title), cost, first, section, layers, binary, width)
    if compared:
        out += _compared(compared, width)
    return out


def _subject(cost: Cost) -> str:
    counted = cost.counted
    if isinstance(counted, Problem):
        queries, keys = counted.mask.shape
        title = counted.title or counted.source
        return t(
            "cost.subject_problem",
            title=title,
            queries=queries,
            keys=keys,
            heads=len(counted.heads),
            dtype=cost.dtype,
            bytes=cost.bytes,
        )
    return t(
        "cost.subject_shape",
        d_model=counted.d_model,
        heads=counted.heads,
        kv_heads=counted.kv_heads,
        d_head=counted.d_head,
        layers=counted.layers,
        tokens=counted.tokens,
        batch=counted.batch,
        dtype=cost.dtype,
        bytes=cost.bytes,
    )


def _mask_words(cost: Cost) -> str:
    counted = cost.counted
    if isinstance(counted, Problem):
        return t("cost.pairs_problem")
    if counted.window is not None:
        return t("cost.pairs_window", window=counted.window)
    return t("cost.pairs_causal") if counted.causal else t("cost.pairs_dense")


def _section(
    title: str, cost: Cost, first: list[Term], section: Section, layers: int, binary: bool, width: int
) -> list[Line]:
    labels = _labels(cost)
    rows = [_row(labels.get(term.owner, "") + _name(term), term, binary) for term in (*first, *section.terms)]
    rows.append([t("cost.per_layer"), "Σ", "", *_row("", section.per_layer, binary)[3:]])  # the sum of the rows above
    if layers > 1:
        rows.append(_row(t("cost.all_layers", layers=layers), section.total, binary))
    headers = [t("cost.term"), t("cost.formula"), t("cost.numbers"), t("cost.value"), "≈"]
    return table(title, headers, rows, width, right=(3, 4))


def _labels(cost: Cost) -> dict[str | None, str]:
    """How a person reads the owner of a problem's term: "head 1: " in the run's language; nothing for a shape's."""
    problem = cost.counted
    if not isinstance(problem, Problem):
        return {}
    owners = {head.name: head.label for head in problem.heads}
    owners |= {name: problem.kv_label(group) for group, name in enumerate(problem.kv_names)}
    return {name: f"{label}: " for name, label in owners.items()}


def _row(name: str, term: Term, binary: bool) -> list[str]:
    return [name, term.formula, term.numbers, str(term.value), about(term.value, binary)]


def _name(term: Term) -> str:
    """A term's name as a person reads it: the symbols as they are, the words in the run's language."""
    return t(WORDS[term.name]) if term.name in WORDS else term.name


WORDS = {"pairs": "cost.pairs", "K cache": "cost.k_cache", "V cache": "cost.v_cache"}


def _compared(compared: list[tuple[str, Cost]], width: int) -> list[Line]:
    """The same counts for MHA, GQA and MQA side by side: each term, its formula, and its value for each."""
    # what each counted: a shape, as every comparison is of one shape's variants (attncli.cost.compare)
    shapes = [(kind, cost.shape) for kind, cost in compared if cost.shape is not None]
    layers = shapes[0][1].layers
    headers = [t("cost.term"), t("cost.formula"), *(f"{kind} (G = {shape.kv_heads})" for kind, shape in shapes)]
    rows = []
    for key, words in (("parameters", "cost.parameters"), ("flops", "cost.flops"), ("kv_cache", "cost.kv_cache")):
        sections = [getattr(cost, key) for _, cost in compared]
        for index, term in enumerate(sections[0].terms):
            rows.append([_name(term), term.formula, *(str(section.terms[index].value) for section in sections)])
        name = t("cost.all_layers", layers=layers) if layers > 1 else t("cost.per_layer")
        totals = [section.total if layers > 1 else section.per_layer for section in sections]
        rows.append([t(words), name, *(str(total.value) for total in totals)])
    return table(t("cost.compare_title"), headers, rows, width, right=range(2, len(headers)))


# For scripts


def json_document(cost: Cost, compared: list[tuple[str, Cost]]) -> str:
    """`{"attncli", "source", "dtype", "bytes_per_number", "shape", "pairs", "parameters", "flops", "kv_cache"}`,
    each section `{"terms": [...], "per_layer", "total"}` of terms `{"name", "head", "formula", "numbers", "value"}`;
    with --compare, "compare": the same for each of MHA, GQA, MQA, with its "kind"."""
    source = cost.counted.source if isinstance(cost.counted, Problem) else "flags"
    doc = {"attncli": __version__, "source": source, **_counts(cost)}
    if compared:
        doc["compare"] = [{"kind": kind, **_counts(each)} for kind, each in compared]
    return json.dumps(doc, ensure_ascii=False) + "\n"


def _counts(cost: Cost) -> dict:
    return {
        "dtype": cost.dtype,
        "bytes_per_number": cost.bytes,
        "shape": None if cost.shape is None else cost.shape._asdict(),
        "pairs": _term(cost.pairs),
        "parameters": _section_record(cost.parameters),
        "flops": _section_record(cost.flops),
        "kv_cache": _section_record(cost.kv_cache),
    }


def _section_record(section: Section) -> dict:
    return {
        "terms": [_term(term) for term in section.terms],
        "per_layer": _term(section.per_layer),
        "total": _term(section.total),
    }


def _term(term: Term) -> dict:
    return {
        "name": term.name,
        "head": term.owner,
        "formula": term.formula,
        "numbers": term.numbers,
        "value": term.value,
    }
