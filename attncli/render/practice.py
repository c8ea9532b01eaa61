"""The tutor's words (attncli.practice.session's records): the problem, each prompt, each feedback and the summary.

Both front-ends print these same lines, Rich in colour on a terminal and plain text in a pipe,
so a transcript of one is a transcript of the other; every sentence comes from the catalogue.
"""

from __future__ import annotations

from attncli.i18n import describe, t
from attncli.practice import backward, tiles
from attncli.practice.session import (
    BACK,
    CARRIED,
    FIRST,
    HELP,
    HINT,
    HINTS,
    INVALID,
    NO_BACK,
    RIGHT,
    SECOND,
    SHOWN,
    SKIPPED,
    WRONG,
    Feedback,
    Prompt,
    Session,
    Summary,
    vector,
)
from attncli.problem import Projection
from attncli.render.layout import BLANK, Line, line, table
from attncli.render.walk import FORMULAS
from attncli.steps import TILE_STEPS

PRECISION = 4
OUTCOMES = (FIRST, SECOND, SHOWN, SKIPPED, "")  # the summary's columns; "" = not reached


def intro(session: Session) -> list[Line]:
    """The problem as the student needs it: the tokens, the score, each vector, the mask."""
    steps = session.steps
    problem = steps.problem
    out = [line((t("practice.title", title=problem.title or t("practice.untitled")), "bold"))]
    out.append(line(t("practice.tokens", tokens=", ".join(problem.tokens))))
    if problem.cross or problem.query_tokens != problem.tokens:
        out.append(line(t("practice.query_tokens", tokens=", ".join(problem.query_tokens))))
    for head in steps.heads:
        spec = head.spec
        if len(steps.heads) > 1:
            unnamed = spec.unnamed is not None  # several heads: numbered from 1
            named = t("practice.head_unnamed", number=spec.unnamed) if unnamed else t("practice.head", name=spec.name)
            out.append(line((named, "bold")))
        widths = f"d_v = {head.values.shape[1]}" if head.keys is None else f"d_k = {head.keys.shape[1]}"
        out.append(line(t("practice.score", name=t(f"writeup.score_{spec.score.kind}"), widths=widths)))
        for name, operand, matrix, tokens in (
            ("q", spec.queries, head.queries, problem.query_tokens),
            ("k", spec.keys, head.keys, problem.tokens),
            ("v", spec.values, head.values, problem.tokens),
        ):
            if matrix is None:
                continue
            if isinstance(operand, Projection):
                out.append(line(t("practice.projected", name=name, weight=f"W_{name.upper()}")))
                out += [line(f"  x({token}) = {vector(row)}") for token, row in zip(tokens, operand.x)]
                out += [line(f"  W_{name.upper()} = {'; '.join(vector(row) for row in operand.w)}")]
            else:
                out += [line(f"  {name}({token}) = {vector(row)}") for token, row in zip(tokens, matrix)]
        if head.queries is None:
            out += [line(f"  s({token}) = {vector(row)}") for token, row in zip(problem.query_tokens, head.scores)]
        if head.bias is not None:
            out += [line(f"  b({token}) = {vector(row)}") for token, row in zip(problem.query_tokens, head.bias)]
    if not problem.mask.all():
        for i, token in enumerate(problem.query_tokens):
            masked = [problem.tokens[j] for j in range(len(problem.tokens)) if not problem.mask[i, j]]
            if masked:
                out.append(line(t("practice.masked", query=token, keys=", ".join(masked))))
    if steps.problem.w_o is not None:
        out.append(line(f"  W_O = {'; '.join(vector(row) for row in steps.problem.w_o)}"))
    return [*out, BLANK, line((t("practice.commands"), "dim")), BLANK]


def question(session: Session, prompt: Prompt) -> str:
    """The current prompt's line, numbered: `[3/17] q·k for the query 'bank' and the key 'net': `."""
    return f"[{session.index + 1}/{len(session.prompts)}] {ask(session, prompt)}: "


def ask(session: Session, prompt: Prompt) -> str:
    """What the prompt asks for, in words."""
    steps = session.steps
    problem = steps.problem
    step = prompt.step
    if backward.is_backward(step):
        return _ask_gradient(session, prompt) + _of_head(session, prompt)
    names = problem.tokens if step in ("keys", "values") else problem.query_tokens
    query = names[prompt.row] if step not in TILE_STEPS else ""  # an accumulator's row is a query's tile
    if step in TILE_STEPS:
        text = _tile(session, prompt)
    elif step in ("dot", "scores", "exp", "weights"):
        keys = ", ".join(problem.tokens[j] for j in prompt.columns)
        head = steps.heads[prompt.head]
        text = t(
            f"practice.ask.{step}" + ("_row" if prompt.size > 1 else ""),
            formula=FORMULAS[head.spec.score.kind].text if head.queries is not None else "",
            scores=_score_formula(session, prompt.head),
            query=query,
            key=keys,
        )
    elif step == "scale":
        text = t("practice.ask.scale", d_k=steps.heads[prompt.head].keys.shape[1])
    elif step == "sum":
        text = t("practice.ask.sum", query=query)
    elif step == "product":
        text = t("practice.ask.product", query=query, key=problem.tokens[prompt.key])
    elif step in ("queries", "keys", "values"):
        text = t(f"practice.ask.{step}", token=query)
    else:
        coordinate = prompt.columns[0] + 1 if len(prompt.columns) == 1 else None
        key = f"practice.ask.{step}" + ("_coordinate" if coordinate is not None and step != "concat" else "")
        text = t(key, query=query, coordinate=coordinate)
    if prompt.size > 1:
        text += t("practice.numbers_count", count=prompt.size)
    return text + _of_head(session, prompt)


def _tile(session: Session, prompt: Prompt) -> str:
    """A tile step of a query (attncli.practice.tiles): the accumulator's row is the query's tile, not the query."""
    assert prompt.head is not None, "a tile belongs to a head"
    query, tile = tiles.place(session.steps.heads[prompt.head], prompt.step, prompt.row, prompt.columns)
    return t(f"practice.ask.{prompt.step}", query=session.steps.problem.query_tokens[query], tile=tile + 1)


def _ask_gradient(session: Session, prompt: Prompt) -> str:
    """A row of a gradient: `dS, the scores' gradient, row 'bank' (dS = P ∘ (dP − D))`."""
    rows, columns = session._labels(prompt.step, prompt.head)
    named = ", ".join(columns[c] for c in prompt.columns) if len(prompt.columns) < len(columns) else ""
    text = t("practice.ask.gradient", name=t(f"check.step.{prompt.step}"), row=rows[prompt.row])
    text += t("practice.ask.gradient_keys", keys=named) if named else ""
    text += f" ({backward.formula(prompt.step)})"
    return text + (t("practice.numbers_count", count=prompt.size) if prompt.size > 1 else "")


def _of_head(session: Session, prompt: Prompt) -> str:
    if prompt.head is None or len(session.steps.heads) == 1:
        return ""
    return t("practice.of_head", name=session.steps.heads[prompt.head].spec.label)


def _score_formula(session: Session, h: int) -> str:
    head = session.steps.heads[h]
    base = FORMULAS[head.spec.score.kind].text if head.queries is not None else "s"
    scaled = f"{base} × 1/√d_k" if head.spec.score.kind == "scaled_dot" else base
    return scaled if head.bias is None else f"{scaled} + b"


def feedback(session: Session, record: Feedback) -> list[Line]:
    """What the tutor answers to one line."""
    kind = record.kind
    if kind == RIGHT:
        return [line(("✓ ", "bold green"), (t("practice.right"), "green"))]
    if kind == CARRIED:
        return [line(("✓ ", "bold green"), (t("practice.carried", answer=record.answer), "green"))]
    if kind == WRONG:
        out = [line(("✗ ", "bold red"), (_wrong(record), "red"))]
        out += [line("  ", t(f"check.hint.{code}")) for code in record.codes]
        if record.retry:
            out.append(line(("  " + t("practice.again"), "yellow")))
        else:
            out.append(line(("  " + t("practice.shown", working=_worked(record)), "bold")))
        return out
    if kind == SHOWN:
        return [line(("→ ", "bold"), (t("practice.shown", working=_worked(record)), "bold"))]
    if kind == SKIPPED:
        return [line(("→ ", "dim"), (t("practice.skipped", answer=record.answer), "dim"))]
    if kind == HINT:
        if record.hint < HINTS:
            return [line(("💡 ", ""), (_formula(session, record.prompt), "yellow"))]
        if record.hint == HINTS:
            return [line(("💡 ", ""), (t("practice.combine", working=record.working), "yellow"))]
        return [line(("💡 ", ""), (t("practice.no_more_hints"), "yellow"))]
    if kind == HELP:
        return [line(t("practice.help"))]
    if kind == BACK:
        return [line((t("practice.back"), "dim"))]
    if kind == NO_BACK:
        return [line((t("practice.no_back"), "dim"))]
    if kind == INVALID:
        return [line(("? ", "bold yellow"), (t("practice.invalid", error=describe(record.error)), "yellow"))]
    return []


def _wrong(record: Feedback) -> str:
    which = ""
    if record.prompt.size > 1:
        which = t("practice.which", numbers=", ".join(str(k + 1) for k in record.wrong))
    if record.codes:
        return t("practice.wrong_because", why="; ".join(t(f"check.diagnosis.{c}") for c in record.codes)) + which
    return t("practice.wrong") + which


def _worked(record: Feedback) -> str:
    if not record.working or record.prompt.size > 1 or record.prompt.step in ("concat",):
        return f"{record.working} → {record.answer}" if record.working else record.answer
    return f"{record.working} = {record.answer}"


def _formula(session: Session, prompt: Prompt) -> str:
    step = prompt.step
    if backward.is_backward(step):
        return t("practice.formula.gradient", formula=backward.formula(step))
    if step == "dot":
        kind = session.steps.heads[prompt.head].spec.score.kind
        if kind in ("scaled_dot", "dot"):
            return t("practice.formula.dot")
        return t("practice.formula.compat", formula=FORMULAS[kind].spelled)
    if step in ("queries", "keys", "values"):
        name = {"queries": "q", "keys": "k", "values": "v"}[step]
        return t("practice.formula.projection", name=name, weight=f"W_{name.upper()}")
    formula = _score_formula(session, prompt.head) if prompt.head is not None else ""
    return t(f"practice.formula.{step}", formula=formula)


def summary(result: Summary, width: int, again: str, harder: str) -> list[Line]:
    """The table of steps, the mistakes by code, the time, and the commands to go on."""
    headers = [t("practice.summary.step"), *(t(f"practice.summary.{outcome or 'not_reached'}") for outcome in OUTCOMES)]
    rows = [[_step_name(step), *(str(counts.get(outcome, 0)) for outcome in OUTCOMES)] for step, counts in result.rows]
    out = [BLANK, *table(t("practice.summary.title"), headers, rows, width, right=range(1, len(headers)))]
    out.append(line((t("practice.summary.right", right=result.right, total=result.prompts), "bold")))
    if result.mistakes or result.unexplained:
        out.append(line(t("practice.summary.mistakes")))
        out += [line(f"  {code} ×{count}: {t(f'check.diagnosis.{code}')}") for code, count in result.mistakes]
        if result.unexplained:
            out.append(line(f"  {t('practice.summary.unexplained', count=result.unexplained)}"))
    out.append(line(t("practice.summary.time", time=_duration(result.seconds))))
    out += [line(t("practice.summary.again")), line("  ", (again, "bold"))]
    out += [line(t("practice.summary.harder")), line("  ", (harder, "bold"))]
    return out


def _step_name(step: str) -> str:
    return t(f"check.step.{step}" if backward.is_backward(step) else f"practice.step.{step}")


def _duration(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60:02d} s" if whole >= 60 else f"{whole} s"
