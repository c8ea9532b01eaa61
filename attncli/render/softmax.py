"""`attncli softmax` in every format: each row's stable softmax, its filters and its cross-entropy.

`parts` lays the `SoftmaxSteps` record out once, as row headings, tables of worked numbers
(`tiles.Worked`, which the terminal, Markdown and LaTeX backends write as they write compute's)
and lines of words and a formula; `human`, `markdown` and `latex` only put them into their
syntax. `json_document` and `csv_text` hold every number at full precision.
"""

from __future__ import annotations

import csv
import io
import json
from typing import NamedTuple

import numpy as np

from attncli import __version__
from attncli.i18n import t
from attncli.render.layout import BLANK, Line, line
from attncli.render.long_table import text_cell
from attncli.render.tiles import Worked
from attncli.softmax import SoftmaxSteps
from attncli.written import ENTRY, EXP, Expr, Num


class Heading(NamedTuple):
    """The start of one row's steps, when there are several rows."""

    text: str


class Said(NamedTuple):
    """A line of words, then a formula with its numbers."""

    words: str
    formula: Expr


Part = Heading | Worked | Said


def parts(steps: SoftmaxSteps, p: int) -> list[Part]:
    """Everything a human format shows, in order: per row its softmax and its filters; then the mean cross-entropy."""
    count = steps.scaled.shape[0]
    out: list[Part] = []
    for row in range(count):
        if count > 1:
            out.append(Heading(t("softmax.row", number=row + 1, count=count)))
        out.append(_stable(steps, row, p))
        if steps.filtered is not None:
            out.append(_filters(steps, row, p))
    if steps.cross_entropy is not None and count > 1:  # one row's cross-entropy is its own
        losses = [Num(float(x)).text(p) for x in steps.cross_entropy.per_row]
        mean = Num(steps.cross_entropy.mean).text(p)
        summed = " + ".join(losses)
        out.append(
            Said(
                t("softmax.mean", rows=count),
                Expr(f"CE = ({summed}) / {count} = {mean}", rf"\mathrm{{CE}} = ({summed}) / {count} = {mean}"),
            )
        )
    return out


def _powers(steps: SoftmaxSteps) -> tuple[str, str]:
    """What the softmax is taken of, in text and in LaTeX: s, or s/T with a temperature."""
    return ("s", "s_j") if steps.logits.temperature == 1 else ("s/T", "s_j/T")


def _stable(steps: SoftmaxSteps, row: int, p: int) -> Worked:
    logits, stable, loss = steps.logits, steps.stable, steps.cross_entropy
    power, latex = _powers(steps)
    scaled = logits.temperature != 1
    headers: list[str | Expr] = [t("render.token"), Expr("s", "s_j")]
    headers += [Expr("s/T", "s_j/T")] if scaled else []
    headers += [Expr(f"{power} − m", f"{latex} - m"), Expr(f"e^({power} − m)", f"e^{{{latex} - m}}"), Expr("p", "p_j")]
    headers += [Expr("∂CE/∂s", r"\partial\,\mathrm{CE}/\partial s_j")] if loss is not None else []
    rows = []
    for j, token in enumerate(logits.tokens):
        cells = [token, Num(float(logits.rows[row, j]), ENTRY).text(p)]
        cells += [_text(steps.scaled[row, j], p)] if scaled else []
        cells += [_text(stable.shifted[row, j], p), Num(float(stable.exp[row, j]), EXP).text(p)]
        cells += [_text(stable.probabilities[row, j], p)]
        cells += [_text(loss.gradient[row, j], p)] if loss is not None else []
        rows.append(tuple(cells))
    total, lse, m = (Num(float(x[row]), EXP).text(p) for x in (stable.sum, stable.logsumexp, stable.max))
    footer = [t("render.sum"), "", *([""] if scaled else []), "", total, _text(stable.probabilities[row].sum(), p)]
    footer += [_text(loss.gradient[row].sum(), p)] if loss is not None else []
    exp = "e^s" if power == "s" else f"e^({power})"
    closing = [
        (
            t("render.stable_logsumexp"),
            Expr(
                f"ln Σ {exp} = m + ln Σ e^({power} − m) = {m} + ln {total} = {lse}",
                rf"\ln \sum_j e^{{{latex}}} = m + \ln \sum_j e^{{{latex} - m}} = {m} + \ln {total} = {lse}",
            ),
        )
    ]
    if loss is not None:
        closing += _cross_entropy(steps, row, p, lse)
    words = t("softmax.stable_title")
    if scaled:
        words = t("softmax.stable_title_temperature", temperature=Num(logits.temperature, ENTRY).text(p))
    formula = Expr(f"m = max {power} = {m}", rf"m = \max_j {latex} = {m}")
    return Worked(
        words, formula, tuple(headers), tuple(rows), tuple(footer), tuple(range(1, len(headers))), tuple(closing)
    )


def _cross_entropy(steps: SoftmaxSteps, row: int, p: int, lse: str) -> list[tuple[str, Expr]]:
    """The row's −ln p_t = LSE − s_t, and the gradient of the mean over the rows with respect to the logits."""
    logits, loss = steps.logits, steps.cross_entropy
    target = logits.targets[row]
    power, latex = ("s_t", "s_t") if logits.temperature == 1 else ("s_t/T", "s_t/T")
    s_t, ce = _text(steps.scaled[row, target], p), _text(loss.per_row[row], p)
    s_t = f"({s_t})" if s_t.startswith("-") else s_t  # LSE − (−1.5000), not LSE − -1.5000
    count = steps.scaled.shape[0]
    over = str(count) if logits.temperature == 1 else f"({count}·{Num(logits.temperature, ENTRY).text(p)})"
    latex_over = str(count) if logits.temperature == 1 else rf"({count} \cdot {Num(logits.temperature, ENTRY).text(p)})"
    return [
        (
            t("softmax.cross_entropy", name=logits.tokens[target], position=target + 1),
            Expr(
                f"−ln p_t = LSE − {power} = {lse} − {s_t} = {ce}",
                rf"-\ln p_t = \mathrm{{LSE}} - {latex} = {lse} - {s_t} = {ce}",
            ),
        ),
        (
            t("softmax.gradient", rows=count),
            Expr(
                f"∂CE/∂s = (p − onehot(t)) / {over}",
                rf"\partial\,\mathrm{{CE}}/\partial s_j = (p_j - [j = t]) / {latex_over}",
            ),
        ),
    ]


def _filters(steps: SoftmaxSteps, row: int, p: int) -> Worked:
    """Top-k, then top-p: the tokens from the most likely down, what each filter reads, what is kept, renormalised."""
    logits, kept = steps.logits, steps.filtered
    probabilities = steps.stable.probabilities[row]
    headers: list[str | Expr] = [t("render.token"), "#", Expr("p", "p_j")]
    both = kept.renormalised is not None
    headers += [Expr("p (top-k)", r"p_j^{\text{top-}k}")] if both else []
    headers += [Expr("Σ", r"\Sigma")] if kept.cumulative is not None else []
    headers += [t("softmax.kept"), Expr("p'", "p'_j")]
    rows = []
    for rank, j in enumerate(kept.order[row]):
        cells = [logits.tokens[j], str(rank + 1), _text(probabilities[j], p)]
        if both:
            cells.append(_text(kept.renormalised[row, j], p) if kept.top_k[row, j] else "—")
        if kept.cumulative is not None:
            cells.append(_text(kept.cumulative[row, j], p) if kept.top_k is None or kept.top_k[row, j] else "—")
        cells += [t("softmax.yes") if kept.kept[row, j] else t("softmax.no"), _text(kept.probabilities[row, j], p)]
        rows.append(tuple(cells))
    settings = [f"k = {logits.top_k}"] if logits.top_k is not None else []
    settings += [f"P = {Num(logits.top_p, ENTRY).text(p)}"] if logits.top_p is not None else []
    mass = _text(probabilities[kept.kept[row]].sum(), p)
    said = t("softmax.kept_count", kept=int(kept.kept[row].sum()), count=len(logits.tokens))
    formula = Expr(
        f"{', '.join(settings)}; p' = p / Σ_kept p", rf"{', '.join(settings)};\ p' = p / \sum_{{\text{{kept}}}} p"
    )
    closing = ((said, Expr(f"Σ_kept p = {mass}", rf"\sum_{{\text{{kept}}}} p = {mass}")),)
    right = (*range(1, len(headers) - 2), len(headers) - 1)  # the numbers; not the kept column
    return Worked(t("softmax.filter_title"), formula, tuple(headers), tuple(rows), None, right, closing)


def _text(value: float, p: int) -> str:
    return Num(float(value)).text(p)


# The human formats


def human(steps: SoftmaxSteps, p: int, width: int) -> list[Line]:
    from attncli.render import human as terminal

    out = _title_lines(steps)
    for part in parts(steps, p):
        if isinstance(part, Heading):
            out.append(line((part.text, "bold reverse")))
        elif isinstance(part, Said):
            out += [line(f"{part.words} ", (part.formula.text, "bold")), BLANK]
        else:
            out += terminal.worked(part, width)
    return [*out, line((t("render.rounding_note", precision=p), "dim"))]


def _title_lines(steps: SoftmaxSteps) -> list[Line]:
    logits = steps.logits
    out = [line((logits.title, "bold underline"))] if logits.title else []
    out += [line((logits.notes, "italic"))] if logits.notes else []
    return [*out, BLANK] if out else out


def markdown(steps: SoftmaxSteps, p: int) -> str:
    from attncli.render import markdown as md

    logits = steps.logits
    lines = [f"# {md.escape(logits.title or t('softmax.title'))}", ""]
    lines += [md.escape(logits.notes), ""] if logits.notes else []
    for part in parts(steps, p):
        if isinstance(part, Heading):
            lines += [f"## {part.text}", ""]
        elif isinstance(part, Said):
            lines += [f"{md.escape(part.words)} {part.formula.text}", ""]
        else:
            lines += md.worked(part)
    lines.append(f"_{t('writeup.rounding_note', precision=p)}_")
    return "\n".join(lines) + "\n"


def latex(steps: SoftmaxSteps, p: int) -> str:
    from attncli.render import latex as tex

    logits = steps.logits
    preamble = tex.preamble(tex.MIN_MATRIX_COLUMNS)
    preamble[0] = f"% {tex.text(t('softmax.latex_comment'))}"  # what made it: this command, not compute
    lines = [*preamble, rf"\section*{{{tex.prose(logits.title or t('softmax.title'))}}}"]
    lines += [tex.prose(logits.notes), ""] if logits.notes else []
    for part in parts(steps, p):
        if isinstance(part, Heading):
            lines.append(rf"\subsection*{{{tex.text(part.text)}}}")
        elif isinstance(part, Said):
            lines.append(rf"{tex.text(part.words)} \[\attnfit{{${part.formula.latex}$}}\]")
        else:
            lines += tex.worked(part)
    lines += ["", rf"\emph{{{tex.text(t('writeup.rounding_note', precision=p))}}}", "", r"\end{document}"]
    return "\n".join(lines) + "\n"


# Every number, at full precision


def json_document(steps: SoftmaxSteps) -> str:
    """`{"attncli", "title", "notes", "temperature", "top_k", "top_p", "targets", "rows": [...], "cross_entropy"}`:
    each row's steps by the names `answers:` will use; null where a step was not asked for."""
    logits, stable, kept, loss = steps.logits, steps.stable, steps.filtered, steps.cross_entropy
    rows = [
        {
            "tokens": list(logits.tokens),
            "logits": logits.rows[row].tolist(),
            "max": float(stable.max[row]),
            "shifted": stable.shifted[row].tolist(),
            "exp": stable.exp[row].tolist(),
            "sum": float(stable.sum[row]),
            "logsumexp": float(stable.logsumexp[row]),
            "probabilities": stable.probabilities[row].tolist(),
            "kept": None if kept is None else kept.kept[row].tolist(),
            "filtered": None if kept is None else kept.probabilities[row].tolist(),
            "cross_entropy": None if loss is None else float(loss.per_row[row]),
            "grad_logits": None if loss is None else loss.gradient[row].tolist(),
        }
        for row in range(logits.rows.shape[0])
    ]
    doc = {
        "attncli": __version__,
        "title": logits.title,
        "notes": logits.notes,
        "temperature": logits.temperature,
        "top_k": logits.top_k,
        "top_p": logits.top_p,
        "targets": None if logits.targets is None else [logits.tokens[j] for j in logits.targets],
        "rows": rows,
        "cross_entropy": None if loss is None else loss.mean,
    }
    return json.dumps(doc, ensure_ascii=False, allow_nan=False) + "\n"


HEADER = ("step", "row", "token", "value")


def csv_text(steps: SoftmaxSteps, delimiter: str = ",") -> str:
    """One number a row, `step,row,token,value` (rows from 0): per logit `logits`, `scaled` (s/T), `shifted`, `exp`,
    `probabilities`, then `kept` (1 or 0) and `filtered`, `grad_logits`; per row `max`, `sum`, `logsumexp`,
    `cross_entropy`; the mean `cross_entropy` with an empty row."""
    logits, stable, kept, loss = steps.logits, steps.stable, steps.filtered, steps.cross_entropy
    per_logit = {"logits": logits.rows, "scaled": steps.scaled, "shifted": stable.shifted, "exp": stable.exp}
    per_logit["probabilities"] = stable.probabilities
    if kept is not None:
        per_logit |= {"kept": kept.kept.astype(int), "filtered": kept.probabilities}
    if loss is not None:
        per_logit["grad_logits"] = loss.gradient
    per_row = {"max": stable.max, "sum": stable.sum, "logsumexp": stable.logsumexp}
    if loss is not None:
        per_row["cross_entropy"] = loss.per_row
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n")
    writer.writerow(HEADER)
    names = [text_cell(token) for token in logits.tokens]
    for step, matrix in per_logit.items():
        writer.writerows((step, row, names[j], str(value)) for (row, j), value in np.ndenumerate(matrix))
    for step, values in per_row.items():
        writer.writerows((step, row, "", str(value)) for row, value in enumerate(values))
    if loss is not None:
        writer.writerow(("cross_entropy", "", "", str(loss.mean)))
    return buffer.getvalue()
