"""New exercises that can be done by hand, with answer keys: pure functions from options and a seed to YAML text.

The numbers are small integers, chosen so that every score comes out as a small
integer or a half: with the scaled dot product a query is √d_k times a small
integer vector (as the article's q = [√2, 0] with d_k = 2), so dividing q·k by
√d_k leaves whole numbers. The same options and seed always give the same bytes.
"""

from __future__ import annotations

import math
import random
import shlex
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from attncli import expr, pipeline, positions
from attncli.errors import fail
from attncli.grading.templates import answer_lines, template
from attncli.i18n import current_language, t
from attncli.parsing.answers import EVERY_STEP, REQUIRE_ALL, Settings
from attncli.parsing.fields import FieldReader
from attncli.written import fixed
from attncli.yamldoc import Document, comment, did_you_mean, flow, scalar

SCORES = ("scaled_dot", "dot", "cosine")
MASKS = ("none", "causal")
BACKWARD_SCORES = ("scaled_dot", "dot")  # the scores whose backward pass is written out (attncli.backward)
NORMS = ("none", "layer", "rms", "layer:post", "rms:post")  # --norm: every layer's, placed pre unless :post
MAX_LAYERS = 4
MAX_TOKENS = 12
MAX_SCORE = 3  # |score| at most this, so that e^s stays easy to look up
ATTEMPTS = 200  # draws tried before settling for one whose scores are all equal or large
ANSWER_DECIMALS = 4
D_MODEL = 3  # width of the inputs x with --projections (at least d_k and d_v)
# --rope: every turn a whole number of quarter turns, so turned integer vectors stay integers. With d_k = 2 the
# one pair turns 1 radian per position (θ_0 = 1), so token k stands at k·π/2; with d_k = 4 and base 4,
# θ = (1, 1/2), so token k stands at k·π and its pairs turn 2k and k quarter turns.
ROPE = {2: (10000, 1, (1,)), 4: (4, 2, (2, 1))}  # d_k: (base, position step in π/2, each pair's quarter turns a step)
SENTENCE_WORDS = 8  # a --tokens count up to this gets a sentence (generate.sentences.N); past it, t1 t2 ...


@dataclass(frozen=True)
class Options:
    tokens: int | tuple[str, ...] | None = None  # a count, the names, or None for a three-word sentence
    d_k: int = 2
    d_v: int | None = None  # None: the same as d_k
    heads: int = 1
    mask: str = "none"
    score: str = "scaled_dot"
    projections: bool = False
    answers: bool = False
    layers: int = 1  # more than one: a stack, each layer reading x + the attention before it
    norm: str = "none"  # one of NORMS, for every layer of a stack
    rope: str | None = None  # half | interleaved: queries and keys turned by RoPE
    gqa: bool = False  # every two query heads share one head of keys and values
    tiles: int | None = None  # B: the softmax written out tile by tile, B keys a tile (`tiles:`, issue 29)
    backward: bool = False  # a small integer dO: the gradients asked for too (short sums)
    min_decimals: int | None = None  # written into the key (`min_decimals:`): numbers with fewer are too_few_decimals


@dataclass(frozen=True)
class _Head:
    """One head's numbers as they will be written: expressions such as sqrt(2)/2, or integers."""

    queries: list[list[str]]  # rows: tokens; or w_q with projections
    keys: list[list[str]]  # or w_k
    values: list[list[str]]  # or w_v
    drawn: tuple[list[list[int]], list[list[int]]] = ([], [])  # keys and values as drawn, for heads sharing them


def parse_tokens(text: str) -> int | tuple[str, ...]:
    """`--tokens`: a count (`4`) or the names (`the,cat,sat`)."""
    text = text.strip()
    count = expr.whole_number(text)
    if count is not None or text.isdigit():  # ² or 5,000 digits: a count, but not one attncli takes
        if count is None or not 1 <= count <= MAX_TOKENS:
            raise fail("generate.bad_tokens", got=text, limit=MAX_TOKENS)
        return count
    as_compute_reads = FieldReader(Document(None, "--tokens"), {"tokens": text})
    names = as_compute_reads.text_list(("tokens",), text)
    if len(names) > MAX_TOKENS:
        raise fail("generate.bad_tokens", got=text, limit=MAX_TOKENS)
    for name in names:
        if names.count(name) > 1:
            raise fail("generate.duplicate_token", name=name)
    return names


def validate(options: Options) -> None:
    """Refuse options the generator cannot make a hand-doable exercise for."""
    if options.score not in SCORES:
        hint = did_you_mean(options.score, SCORES)
        raise fail("generate.bad_score", name=options.score, known=", ".join(SCORES), hint=hint).at(field="score")
    if options.mask not in MASKS:
        hint = did_you_mean(options.mask, ("none", "causal"))
        raise fail("generate.bad_mask", name=options.mask, hint=hint).at(field="mask")
    if not 1 <= options.layers <= MAX_LAYERS:
        raise fail("generate.bad_layers", got=options.layers, limit=MAX_LAYERS).at(field="layers")
    if options.norm not in NORMS:
        hint = did_you_mean(options.norm, NORMS)
        raise fail("generate.bad_norm", name=options.norm, known=", ".join(NORMS), hint=hint).at(field="norm")
    if options.norm != "none" and options.layers == 1:
        raise fail("generate.norm_needs_layers").at(field="norm")
    if options.rope is not None:
        if options.rope not in positions.STYLES:
            hint = did_you_mean(options.rope, positions.STYLES)
            raise fail("generate.bad_rope", name=options.rope, hint=hint).at(field="rope")
        if options.d_k not in ROPE or options.score == "cosine":
            raise fail("generate.rope_shape", d_k=options.d_k, score=options.score).at(field="rope")
    if options.gqa and options.heads % 2:
        raise fail("generate.gqa_heads", heads=options.heads).at(field="gqa")
    if (options.rope is not None or options.gqa) and options.layers > 1:
        raise fail("generate.positions_layers").at(field="layers")
    if options.tiles is not None and options.layers > 1:
        raise fail("generate.tiles_layers").at(field="tiles")
    if options.backward and options.score not in BACKWARD_SCORES:
        raise fail("generate.backward_score", score=options.score).at(field="backward")


def exercise(options: Options, seed: int, within: tuple[str, str] | None = None) -> str:
    """The exercise for `seed` as YAML text in the compute format; with `options.answers`, its answer key too.

    `within` = (exercise id, the command that makes its whole set): an exercise of a worksheet, which
    carries its id and says how to make the set again.
    """
    validate(options)
    rng = random.Random(seed)
    tokens, sentence = _tokens(options.tokens, seed)
    d_v = options.d_v or options.d_k
    mask = [[not (options.mask == "causal" and j > i) for j in range(len(tokens))] for i in range(len(tokens))]
    d_model = max(D_MODEL, options.d_k, d_v)
    stacked = options.layers > 1
    x = _rows(rng, len(tokens), d_model, (0, 1), nonzero=True) if options.projections or stacked else None
    if stacked:  # drawn against x: a later layer reads x plus what the layers before it add
        layers = [_layer(rng, options, tokens, d_v, d_model, mask, x) for _ in range(options.layers)]
    elif options.gqa:
        shared = [_head(rng, options, len(tokens), d_v, mask, x) for _ in range(options.heads // 2)]
        heads = [_head(rng, options, len(tokens), d_v, mask, x, shared[h // 2].drawn) for h in range(options.heads)]
    else:
        heads = [_head(rng, options, len(tokens), d_v, mask, x) for _ in range(options.heads)]
    if within is None:
        lines = [comment(t("generate.comment")), comment(f"  {command(options, seed)}")]
    else:
        lines = [comment(t("generate.set_comment")), comment(f"  {within[1]}"), f"exercise: {scalar(within[0])}"]
    lines += [
        f"title: {scalar(t('generate.title', words=sentence))}",
        f"notes: {scalar(_notes(within, stacked))}",
        f"tokens: {flow(scalar(name) for name in tokens)}",
    ]
    if options.score != "scaled_dot" and not stacked:
        lines.append(f"score: {options.score}")
    if options.mask != "none" and not stacked:
        lines.append(f"mask: {options.mask}")
    if options.tiles is not None:
        lines.append(f"tiles: {options.tiles}")
    if options.rope is not None:
        base, step, _ = ROPE[options.d_k]
        lines.append(f"positions: {{type: rope, base: {base}, style: {options.rope}}}")
        lines.append(f"position_ids: {flow(_quarter_turns(k * step) for k in range(len(tokens)))}")
    if x is not None:
        lines += ["x:", *_mapping(tokens, [[str(v) for v in row] for row in x], 2)]
    if stacked:
        lines.append("layers:")
        for number, fields in enumerate(layers, 1):
            lines += [f"  - name: {scalar(t('generate.layer', number=number))}", *fields]
    else:
        lines += _heads_lines(rng, options, heads, tokens, d_v)
    if options.backward:
        width = d_model if stacked else d_v  # the stream's width, or the final output's
        lines += ["backward:", "  grad_output:", *_mapping(tokens, _grad_output(rng, len(tokens), width), 4)]
    text = "\n".join(lines) + "\n"
    return text + _answers(text, key_settings(options)) if options.answers else text


def _heads_lines(
    rng: random.Random, options: Options, heads: list[_Head], tokens: tuple[str, ...], d_v: int
) -> list[str]:
    """A one-layer exercise's heads as YAML lines: one head's fields at the top; several heads (their kv heads
    first with --gqa) listed, then a W_O drawn after them."""
    if options.heads == 1:
        return _head_lines(heads[0], tokens, options.projections, 0)
    lines = []
    if options.gqa:
        lines.append("kv_heads:")
        for index, head in enumerate(heads[::2]):
            fields = _head_lines(head, tokens, options.projections, 4, ("keys", "values"))
            lines += [f"  - name: {scalar(t('generate.kv_head', number=index + 1))}", *fields]
    lines.append("heads:")
    for index, head in enumerate(heads):
        parts = ("queries",) if options.gqa else ("queries", "keys", "values")
        fields = _head_lines(head, tokens, options.projections, 4, parts)
        lines += [f"  - name: {scalar(t('generate.head', number=index + 1))}", *fields]
    w_o = _rows(rng, options.heads * d_v, d_v, (0, 1), nonzero=True)
    return [*lines, "w_o:", *(f"  - {flow(str(v) for v in row)}" for row in w_o)]


def _grad_output(rng: random.Random, n: int, width: int) -> list[list[str]]:
    """dO: 0 or 1 in each cell, a 1 in every row, so each gradient is a short sum of the forward's numbers."""
    rows = [[rng.choice((0, 0, 1)) for _ in range(width)] for _ in range(n)]  # (n, width)
    for row in rows:
        if not any(row):
            row[rng.randrange(width)] = 1
    return [[str(v) for v in row] for row in rows]


def _notes(within: tuple[str, str] | None, stacked: bool) -> str:
    """What the sheet asks for: every step (of every layer, and the streams between them), where to write it."""
    if within is not None:
        return t("generate.set_notes", name=within[0])
    return t("generate.layers_notes") if stacked else t("generate.notes")


def _layer(
    rng: random.Random,
    options: Options,
    tokens: tuple[str, ...],
    d_v: int,
    d_model: int,
    mask: list[list[bool]],
    x: list[list[int]],
) -> list[str]:
    """One layer of a stack as YAML lines: its score, mask and norm, its heads' projections, and W_O back to d_model
    unless its one head's values are d_model wide already."""
    lines = [f"    score: {options.score}"] if options.score != "scaled_dot" else []
    if options.mask != "none":
        lines.append(f"    mask: {options.mask}")
    if options.norm != "none":
        kind, _, place = options.norm.partition(":")
        lines.append(f"    norm: {{type: {kind}, place: {place or 'pre'}}}")
    heads = [_head(rng, options, len(tokens), d_v, mask, x) for _ in range(options.heads)]
    if options.heads == 1:
        lines += _head_lines(heads[0], tokens, True, 4)
    else:
        lines.append("    heads:")
        for index, head in enumerate(heads):
            fields = _head_lines(head, tokens, True, 8)
            lines += [f"      - name: {scalar(t('generate.head', number=index + 1))}", *fields]
    if options.heads > 1 or d_v != d_model:
        w_o = _rows(rng, options.heads * d_v, d_model, (0, 1), nonzero=True)
        lines += ["    w_o:", *(f"      - {flow(str(v) for v in row)}" for row in w_o)]
    return lines


def worksheet(options: Options, seed: int, count: int, folder: str) -> list[tuple[str, str]]:
    """`count` numbered exercises (seeds seed, seed + 1, ...), each as a sheet, a key and a blank answers template.

    Every file carries its exercise: id, by which `check --keys` finds the key of a student's answers.
    """
    width = max(2, len(str(count)))
    remake = set_command(options, seed, count, folder)
    files = []
    for number in range(1, count + 1):
        name = f"exercise-{number:0{width}d}"
        sheet = exercise(replace(options, answers=False), seed + number - 1, (name, remake))
        steps = pipeline.solve(pipeline.load(text=sheet, name=name))
        files.append((f"{name}.yaml", sheet))
        files.append((f"{name}-key.yaml", exercise(replace(options, answers=True), seed + number - 1, (name, remake))))
        files.append((f"{name}-answers.yaml", template(steps, name, key_settings(options))))
    return files


def set_command(options: Options, seed: int, count: int, folder: str) -> str:
    """The command line that makes a whole worksheet again."""
    return f"{command(replace(options, answers=False), seed)} --count {count} -o {shlex.quote(folder)}"


def command(options: Options, seed: int) -> str:
    """The command line that makes this exercise again, byte for byte."""
    parts = ["attncli generate"]
    if options.tokens is not None:
        tokens = str(options.tokens) if isinstance(options.tokens, int) else ",".join(options.tokens)
        parts.append(f"--tokens {shlex.quote(tokens)}")
    if options.d_k != Options.d_k:
        parts.append(f"--dk {options.d_k}")
    if options.d_v is not None:
        parts.append(f"--dv {options.d_v}")
    if options.heads != Options.heads:
        parts.append(f"--heads {options.heads}")
    if options.mask != Options.mask:
        parts.append(f"--mask {options.mask}")
    if options.score != Options.score:
        parts.append(f"--score {options.score}")
    if options.projections:
        parts.append("--projections")
    if options.layers != Options.layers:
        parts.append(f"--layers {options.layers}")
    if options.norm != Options.norm:
        parts.append(f"--norm {options.norm}")
    if options.rope is not None:
        parts.append(f"--rope {options.rope}")
    if options.gqa:
        parts.append("--gqa")
    if options.tiles is not None:
        parts.append(f"--tiles {options.tiles}")
    if options.backward:
        parts.append("--backward")
    if options.min_decimals is not None:
        parts.append(f"--min-decimals {options.min_decimals}")
    parts.append(f"--seed {seed}")
    if options.answers:
        parts.append("--answers")
    if current_language() != "en":  # the title and notes are in the language of the output
        parts.append(f"--lang {current_language()}")
    return " ".join(parts)


def _tokens(tokens: int | tuple[str, ...] | None, seed: int) -> tuple[tuple[str, ...], str]:
    """The exercise's tokens and its sentence: the seed picks it in turn, so a worksheet (consecutive seeds)
    repeats a sentence only after using every one of that length."""
    if isinstance(tokens, tuple):
        return tokens, " ".join(tokens)
    count = 3 if tokens is None else tokens
    if count <= SENTENCE_WORDS:
        sentences = t(f"generate.sentences.{count}").split(" / ")  # in the language of the exercise
        sentence = sentences[seed % len(sentences)]
        return tuple(sentence.split()), sentence
    names = tuple(f"t{i + 1}" for i in range(count))
    return names, " ".join(names)


def _head(
    rng: random.Random,
    options: Options,
    n: int,
    d_v: int,
    mask: list[list[bool]],
    x: list[list[int]] | None,
    shared: tuple[list[list[int]], list[list[int]]] | None = None,
) -> _Head:
    """Draw a head until the queries differ and each sees scores that are small and not all equal.

    With `shared` (grouped-query heads) the keys and values are those of the kv head; only the queries are drawn.
    """
    d_k = options.d_k
    for _ in range(ATTEMPTS):
        halves = options.score != "cosine" and rng.random() < 0.25
        low = -2 if halves else -1
        if x is None:
            a = _distinct_rows(rng, n, d_k, (low, 1))
            keys = _rows(rng, n, d_k, (-1, 2), nonzero=True)
            values = _rows(rng, n, d_v, (-1, 2))
        else:
            a = _rows(rng, len(x[0]), d_k, (low, 1))
            keys = _rows(rng, len(x[0]), d_k, (-1, 1))
            values = _rows(rng, len(x[0]), d_v, (-1, 1))
        if shared is not None:
            keys, values = shared
        q, k = (a, keys) if x is None else (_product(x, a), _product(x, keys))
        if options.rope is not None:
            q, k = _turned(q, options), _turned(k, options)
        scores = _scores(options.score, q, k) / (2 if halves else 1)
        varied = x is None or len({tuple(row) for row in q}) == n or n > 2**d_k  # queries differ where they easily can
        if varied and _hand_doable(scores, mask):
            break
    queries = [[_query_text(v, options.score, d_k, halves) for v in row] for row in a]
    return _Head(queries, _text(keys), _text(values), (keys, values))


def _turned(rows: list[list[int]], options: Options) -> list[list[int]]:
    """RoPE's turn of integer rows, row k (token k) by whole quarter turns: (a, b) → (−b, a) per quarter."""
    quarters = ROPE[options.d_k][2]
    first, second = positions.pairs(options.d_k, options.rope)
    out = []
    for k, row in enumerate(rows):
        turned = list(row)
        for i, j, per in zip(first, second, quarters):
            a, b = row[i], row[j]
            for _ in range(k * per % 4):
                a, b = -b, a
            turned[i], turned[j] = a, b
        out.append(turned)
    return out


def _quarter_turns(count: int) -> str:
    """count·π/2 as an expression the problem file reads: 0, pi/2, pi, 3*pi/2, 2*pi, ..."""
    if count == 0:
        return "0"
    if count % 2:
        return "pi/2" if count == 1 else f"{count}*pi/2"
    return "pi" if count == 2 else f"{count // 2}*pi"


def _scores(kind: str, q: list[list[int]], k: list[list[int]]) -> np.ndarray:
    """Every query's score against every key with the query's √d_k factor taken out: what the exercise's scores
    come to (integers, exactly; a cosine of zero vectors 0). A draw is scored in numpy: up to 200 draws a head."""
    queries, keys = np.array(q, dtype=np.int64), np.array(k, dtype=np.int64)  # (n, d), (S, d)
    dot = queries @ keys.T  # (n, S)
    if kind != "cosine":
        return dot.astype(np.float64)
    norms = np.sqrt(((queries * queries).sum(axis=1)[:, None] * (keys * keys).sum(axis=1)[None, :]).astype(float))
    return np.divide(dot, norms, out=np.zeros(dot.shape), where=norms != 0)  # (n, S)


def _hand_doable(scores: np.ndarray, mask: list[list[bool]]) -> bool:
    """Every score a query sees small, and not all of a query's scores equal (it would weigh its keys alike)."""
    seen = np.array(mask, dtype=bool)  # (n, S)
    if np.any(np.abs(scores[seen]) > MAX_SCORE):
        return False
    low = np.where(seen, scores, np.inf).min(axis=1)
    high = np.where(seen, scores, -np.inf).max(axis=1)
    return not np.any((seen.sum(axis=1) > 1) & (low == high))


def _query_text(value: int, kind: str, d_k: int, halves: bool) -> str:
    """A drawn integer as the query number: times √d_k for the scaled dot product (sqrt(2)/2, 2), halved for halves."""
    coefficient = Fraction(value, 2 if halves else 1)
    root = math.isqrt(d_k)
    if kind != "scaled_dot" or coefficient == 0:
        return _fraction(coefficient)
    if root * root == d_k:
        return _fraction(coefficient * root)
    size = abs(coefficient)
    sign = "-" if coefficient < 0 else ""
    times = "" if size.numerator == 1 else f"{size.numerator}*"
    over = "" if size.denominator == 1 else f"/{size.denominator}"
    return f"{sign}{times}sqrt({d_k}){over}"


def _fraction(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _rows(
    rng: random.Random, count: int, width: int, bounds: tuple[int, int], nonzero: bool = False
) -> list[list[int]]:
    rows = []
    for _ in range(count):
        row = [rng.randint(*bounds) for _ in range(width)]
        while nonzero and not any(row):
            row = [rng.randint(*bounds) for _ in range(width)]
        rows.append(row)
    return rows


def _distinct_rows(rng: random.Random, count: int, width: int, bounds: tuple[int, int]) -> list[list[int]]:
    """`count` nonzero rows, no two alike when there are that many (query rows that repeat give repeated
    weight rows, which teach nothing); otherwise drawn freely.

    The rows are drawn as `rng.sample` draws from the list of every nonzero row in order (the same draws,
    the same exercise for a seed), each found from its place in that list instead of the list being made:
    4^8 rows for d_k 8, made for every one of up to 200 draws, took seconds.
    """
    low, high = bounds
    base = high - low + 1
    size = base**width - 1  # every row but the zero row
    if count > size:
        return _rows(rng, count, width, bounds, nonzero=True)
    zero = sum(-low * base**power for power in range(width))  # the zero row's place among all rows

    def row(place: int) -> list[int]:
        place += place >= zero  # past the zero row, which the list leaves out
        return [low + place // base**power % base for power in reversed(range(width))]

    return [row(place) for place in rng.sample(range(size), count)]


def _product(x: list[list[int]], w: list[list[int]]) -> list[list[int]]:
    return (np.array(x, dtype=np.int64) @ np.array(w, dtype=np.int64)).tolist()


def _text(rows: list[list[int]]) -> list[list[str]]:
    return [[str(v) for v in row] for row in rows]


def _head_lines(
    head: _Head,
    tokens: tuple[str, ...],
    projections: bool,
    indent: int,
    parts: tuple[str, ...] = ("queries", "keys", "values"),
) -> list[str]:
    """A head's fields (those in `parts`): its rows per token, or its W_Q, W_K, W_V with projections."""
    pad = " " * indent
    given = {"queries": ("w_q", head.queries), "keys": ("w_k", head.keys), "values": ("w_v", head.values)}
    if projections:
        return [
            line
            for part in parts
            for line in (f"{pad}{given[part][0]}:", *(f"{pad}  - {flow(row)}" for row in given[part][1]))
        ]
    return [line for part in parts for line in (f"{pad}{part}:", *_mapping(tokens, given[part][1], indent + 2))]


def _mapping(names: tuple[str, ...], rows: list[list[str]], indent: int) -> list[str]:
    return [f"{' ' * indent}{scalar(name)}: {flow(row)}" for name, row in zip(names, rows)]


def key_settings(options: Options) -> Settings:
    """How a key made with `options` grades: every step required, the decimals asked for, and a quoted decimal comma
    read when the exercise is in Spanish (whatever language grades it)."""
    return Settings(min_decimals=options.min_decimals, require=REQUIRE_ALL, decimal_comma=current_language() == "es")


def _answers(text: str, settings: Settings | None = None) -> str:
    """The answer key: its grading settings (`key_settings`; None: none), then every step as the core computes it,
    rounded to ANSWER_DECIMALS or the decimals the key asks for, whichever is more (whole numbers exact)."""
    settings = settings or Settings()
    steps = pipeline.solve(pipeline.load(text=text, name="generate"))
    decimals = max(ANSWER_DECIMALS, settings.min_decimals or 0)
    lines = answer_lines(steps, lambda value, masked: "masked" if masked else _answer(value, decimals))
    head = [comment(t("generate.answers_note", decimals=decimals)), f"require: {EVERY_STEP}"]
    head += [f"min_decimals: {settings.min_decimals}"] if settings.min_decimals is not None else []
    head += ["decimal_comma: true"] if settings.decimal_comma else []
    return "\n".join([*head, *lines]) + "\n"


def _answer(value: float, decimals: int) -> str:
    """Whole numbers as integers (checked exactly), the rest with `decimals` decimals (checked to that)."""
    if math.isclose(value, round(value), rel_tol=1e-12, abs_tol=1e-13):
        return str(round(value))
    return fixed(value, decimals)
