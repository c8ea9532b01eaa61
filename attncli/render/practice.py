"""The tutor's words (attncli.practice.session's records): each prompt, each feedback and the summary.

Both front-ends print these same lines, Rich in colour on a terminal and plain text in a pipe,
so a transcript of one is a transcript of the other; every sentence comes from the catalogue.
What the student typed, when a message repeats it, is shown escaped. The problem itself, before
the first prompt and as each layer or head starts, is attncli.render.practice_intro's.
"""

from __future__ import annotations

from attncli.errors import printable
from attncli.i18n import describe, en, t
from attncli.practice import backward, tiles
from attncli.practice.judge import shape
from attncli.practice.plan import Prompt, scaled
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
    Session,
    Summary,
)
from attncli.render.layout import BLANK, Line, line, table
from attncli.render.practice_intro import intro, section
from attncli.render.walk import FORMULAS
from attncli.steps import TILE_STEPS

__all__ = ["ask", "feedback", "intro", "question", "section", "summary"]
OUTCOMES = (FIRST, SECOND, SHOWN, SKIPPED, "")  # the summary's columns; "" = not reached
KEY_STEPS = ("dot", "scores", "biased_scores", "exp", "weights")  # asked of a query and its keys
TOKEN_STEPS = ("keys", "values", "turned_keys", "positioned", "angles", "mean", "root", "normed", "residual", "stream")
COORDINATE_STEPS = ("queries", "keys", "values", "output", "final")  # asked coordinate by coordinate at some level


def question(session: Session, prompt: Prompt) -> str:
    """The current prompt's line, numbered: `[3/17] q·k for the query 'bank' and the key 'net': `."""
    return f"[{session.index + 1}/{len(session.prompts)}] {ask(session, prompt)}: "


def ask(session: Session, prompt: Prompt) -> str:
    """What the prompt asks for, in words."""
    steps = session.part(prompt)
    problem = steps.problem
    step = prompt.step
    if backward.is_backward(step):
        return _ask_gradient(session, prompt) + _of(session, prompt)
    if step in TILE_STEPS:
        counted = t("practice.numbers_count", count=prompt.size) if prompt.size > 1 else ""
        return _tile(session, prompt) + counted + _of(session, prompt)
    names = problem.tokens if step in TOKEN_STEPS else problem.query_tokens
    token = names[prompt.row] if prompt.row < len(names) else ""
    if step in KEY_STEPS:
        keys = ", ".join(problem.tokens[j] for j in prompt.columns)
        text = t(
            f"practice.ask.{step}" + ("_row" if prompt.size > 1 else ""),
            formula=_compat(session, prompt),
            scores=_score_formula(session, prompt),
            query=token,
            key=keys,
        )
    elif step == "scale":
        text = t("practice.ask.scale", d_k=steps.heads[_h(prompt)].k.shape[1])
    elif step == "product":
        assert prompt.key is not None, "a product names its key"
        text = t("practice.ask.product", query=token, key=problem.tokens[prompt.key])
    elif step in ("positioned", "angles"):
        encoding = problem.positions
        assert encoding is not None, step
        text = t(f"practice.ask.{step}", token=token, position=_position(float(encoding.key_at[prompt.row])))
    elif step == "root":
        norm = _norm(session, prompt)
        text = t(f"practice.ask.root_{norm}", token=token)
    else:
        coordinate = prompt.columns[0] + 1 if len(prompt.columns) == 1 and step in COORDINATE_STEPS else None
        key = f"practice.ask.{step}" + ("_coordinate" if coordinate is not None else "")
        text = t(key, query=token, token=token, coordinate=coordinate, x=_read_x(session, prompt))
    if prompt.size > 1:
        text += t("practice.numbers_count", count=prompt.size)
    return text + _of(session, prompt)


def _tile(session: Session, prompt: Prompt) -> str:
    """A tile step of a query (attncli.practice.tiles): the accumulator's row is the query's tile, not the query."""
    steps = session.part(prompt)
    query, tile = tiles.place(steps.heads[_h(prompt)], prompt.step, prompt.row, prompt.columns)
    return t(f"practice.ask.{prompt.step}", query=steps.problem.query_tokens[query], tile=tile + 1)


def _ask_gradient(session: Session, prompt: Prompt) -> str:
    """A row of a gradient: `dS, the scores' gradient, row 'bank' (dS = P ∘ (dP − D))`."""
    rows, columns = shape(session.solved, (prompt.layer, prompt.step, prompt.head), session.own)
    named = ", ".join(columns[c] for c in prompt.columns) if len(prompt.columns) < len(columns) else ""
    text = t("practice.ask.gradient", name=t(f"check.step.{prompt.step}"), row=rows[prompt.row])
    text += t("practice.ask.gradient_keys", keys=named) if named else ""
    text += f" ({backward.formula(prompt.step)})"
    return text + (t("practice.numbers_count", count=prompt.size) if prompt.size > 1 else "")


def _read_x(session: Session, prompt: Prompt) -> str:
    """What a projection multiplies: x, or x + PE where sinusoidal positions are added to it first."""
    encoding = session.part(prompt).problem.positions
    return "(x + PE)" if encoding is not None and encoding.kind == "sinusoidal" else "x"


def _h(prompt: Prompt) -> int:
    assert prompt.head is not None, prompt.step
    return prompt.head


def _position(value: float) -> str:
    from attncli.practice.working import num

    return num(value)


def _norm(session: Session, prompt: Prompt) -> str:
    from attncli.layers import StackSteps

    solved = session.solved
    assert isinstance(solved, StackSteps) and prompt.layer is not None, "a norm is a stack's layer's"
    norm = solved.layers[prompt.layer].layer.norm
    assert norm is not None, "a root needs a norm"
    return norm.kind


def _of(session: Session, prompt: Prompt) -> str:
    """Which head (of several) and which layer (of a stack) the step belongs to, each named once."""
    from attncli.layers import StackSteps

    text = ""
    steps = session.part(prompt)
    if prompt.head is not None and len(steps.heads) > 1:
        text += t("practice.of_head", name=steps.heads[prompt.head].spec.label)
    solved = session.solved
    if isinstance(solved, StackSteps) and prompt.layer is not None:
        text += t("practice.of_head", name=solved.layers[prompt.layer].layer.label)
    return text


def _compat(session: Session, prompt: Prompt) -> str:
    """The head's compatibility as a formula: q·k, with RoPE q̃·k̃ (the turned vectors), cos(q, k), ..."""
    head = session.part(prompt).heads[_h(prompt)]
    if head.queries is None:
        return ""
    if head.rotation is not None and head.spec.score.kind in ("scaled_dot", "dot"):
        return "q̃·k̃"
    return FORMULAS[head.spec.score.kind].text


def _score_formula(session: Session, prompt: Prompt) -> str:
    head = session.part(prompt).heads[_h(prompt)]
    base = _compat(session, prompt) or "s"
    return f"{base} × 1/√d_k" if head.spec.score.kind == "scaled_dot" and scaled(head) else base


def feedback(session: Session, record: Feedback) -> list[Line]:
    """What the tutor answers to one line."""
    kind = record.kind
    if kind == RIGHT:
        return [line(("✓ ", "bold green"), (t("practice.right"), "green"))]
    if kind == CARRIED:
        return [line(("✓ ", "bold green"), (t("practice.carried", answer=record.answer), "green"))]
    if kind == WRONG:
        out = [line(("✗ ", "bold red"), (_wrong(record), "red"))]
        out += [
            line("  ", t(f"check.hint.{code}"))
            for code, said in zip(record.codes, record.says or ("",) * len(record.codes))
            if not said and f"check.hint.{code}" in en.MESSAGES
        ]
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
        return [line(("💡 ", ""), (_hint(session, record), "yellow"))]
    if kind == HELP:
        return [line(t("practice.help"))]
    if kind == BACK:
        return [line((t("practice.back"), "dim"))]
    if kind == NO_BACK:
        return [line((t("practice.no_back"), "dim"))]
    if kind == INVALID:
        assert record.error is not None, "an invalid line says why"
        said = printable(describe(record.error))
        return [line(("? ", "bold yellow"), (t("practice.invalid", error=said), "yellow"))]
    return []


def _hint(session: Session, record: Feedback) -> str:
    if record.hint < HINTS:
        return _formula(session, record.prompt)
    if record.hint == HINTS:
        return t("practice.combine", working=record.working)
    return t("practice.no_more_hints")


def describe_code(code: str, said: str = "") -> str:
    """A mistake in words: the tutor's own for a slip of its step, else `check`'s."""
    return t(said) if said else t(f"check.diagnosis.{code}")


def _wrong(record: Feedback) -> str:
    which = ""
    if record.prompt.size > 1:
        which = t("practice.which", numbers=", ".join(str(k + 1) for k in record.wrong))
    if record.codes:
        says = record.says or ("",) * len(record.codes)
        why = "; ".join(describe_code(code, said) for code, said in zip(record.codes, says))
        return t("practice.wrong_because", why=why) + which
    return t("practice.wrong") + which


def _worked(record: Feedback) -> str:
    if not record.working or record.prompt.size > 1:
        return f"{record.working} → {record.answer}" if record.working else record.answer
    return f"{record.working} = {record.answer}"


def _formula(session: Session, prompt: Prompt) -> str:
    step = prompt.step
    if backward.is_backward(step):
        return t("practice.formula.gradient", formula=backward.formula(step))
    if step == "dot":
        head = session.part(prompt).heads[_h(prompt)]
        kind = head.spec.score.kind
        if kind in ("scaled_dot", "dot"):
            return t("practice.formula.dot_turned" if head.rotation is not None else "practice.formula.dot")
        return t("practice.formula.compat", formula=FORMULAS[kind].spelled)
    if step in ("queries", "keys", "values"):
        name = {"queries": "q", "keys": "k", "values": "v"}[step]
        return t("practice.formula.projection", name=name, weight=f"W_{name.upper()}")
    if step == "root":
        return t(f"practice.formula.root_{_norm(session, prompt)}")
    formula = _score_formula(session, prompt) if prompt.head is not None else ""
    return t(f"practice.formula.{step}", formula=formula)


def summary(result: Summary, width: int, again: str, harder: str) -> list[Line]:
    """The table of steps, the mistakes by code, the time, and the commands to go on."""
    headers = [t("practice.summary.step"), *(t(f"practice.summary.{outcome or 'not_reached'}") for outcome in OUTCOMES)]
    rows = [[_step_name(step), *(str(counts.get(outcome, 0)) for outcome in OUTCOMES)] for step, counts in result.rows]
    out = [BLANK, *table(t("practice.summary.title"), headers, rows, width, right=range(1, len(headers)))]
    out.append(line((t("practice.summary.right", right=result.right, total=result.prompts), "bold")))
    if result.mistakes or result.unexplained:
        said = dict(result.says)
        out.append(line(t("practice.summary.mistakes")))
        out += [line(f"  {code} ×{count}: {_code_words(code, said)}") for code, count in result.mistakes]
        if result.unexplained:
            out.append(line(f"  {t('practice.summary.unexplained', count=result.unexplained)}"))
    out.append(line(t("practice.summary.time", time=_duration(result.seconds))))
    out += [line(t("practice.summary.again")), line("  ", (again, "bold"))]
    out += [line(t("practice.summary.harder")), line("  ", (harder, "bold"))]
    return out


def _code_words(code: str, said: dict[str, str]) -> str:
    """A code in the summary: the tutor's words for it where it said its own (the score typed at e^s is no_exp,
    "that is the score itself"), else `check`'s."""
    if said.get(code):
        return t(said[code])
    return t(f"check.diagnosis.{code}") if f"check.diagnosis.{code}" in en.MESSAGES else code


def _step_name(step: str) -> str:
    return t(f"check.step.{step}" if backward.is_backward(step) else f"practice.step.{step}")


def _duration(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60:02d} s" if whole >= 60 else f"{whole} s"
