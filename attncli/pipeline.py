"""The library's front door: load a problem, solve it, grade answers to it, or run the blocked kernels.

The command line is one client of these four, a script another:

    from attncli import load, solve
    steps = solve(load("samples/bank.yaml"))

A source is a file path (str or os.PathLike), "-" for standard input, or a `yamldoc.Document`
already read; YAML text goes by keyword: `load(text="tokens: [a, b] ...")`. Every function
raises only AttnError (attncli.errors), the one error a user can cause, carrying file, line
and field.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from attncli import core, kernel, kernel_backward, kernel_threads, parsing, yamldoc
from attncli.core import Steps
from attncli.errors import fail
from attncli.parsing import budget
from attncli.problem import Head, Problem, Projection, Stack, width
from attncli.yamldoc import Document

if TYPE_CHECKING:
    from typing_extensions import TypedDict, Unpack

    from attncli.grading import Report
    from attncli.layers import StackSteps
    from attncli.softmax import Logits

    class GradeOptions(TypedDict, total=False):
        """What `grade` passes on to the grader: each given wins over the key's (or the file's) own."""

        tolerance: float | None
        carry: int | None
        min_decimals: int | None
        require: Sequence[str] | None


Source = str | os.PathLike | Document
DTYPES = ("float64", "float32")


def load(
    source: Source | None = None,
    flags: Mapping[str, object] | None = None,
    *,
    text: str | None = None,
    name: str = "<text>",
    dtype: str = "float64",
    confined: bool = False,
    results_only: bool = False,
) -> Problem | Stack:
    """The validated problem in `source`, or in the YAML `text` (called `name` in errors); a Stack with `layers:`.

    `flags` (field -> value, spelled as on the command line: `{"keys": "2,0; 1,1"}`) are laid
    over the file, or make the whole problem without one. Array files a problem names are
    found beside its file, else in the working directory; with `confined` (a graded file, which
    comes from someone else), they must resolve inside that folder. Every matrix is of `dtype`.
    `results_only` promises that only `result` or `overview` will be asked of it: the memory budget
    is then the blocked kernel's, O(L + S) for dot-product heads, so 32,768 tokens load; `solve` on
    such a problem may be refused (and `result` or `overview`, where they must fall back on `solve`'s path).
    """
    if dtype not in DTYPES:
        raise fail("cli.bad_dtype", name=dtype, known=", ".join(DTYPES)).at(source="dtype")
    document = yamldoc.load(text, name) if text is not None else _document(source)
    options = {"confined": confined, "results_only": results_only}
    return parsing.parse(document, flags, _base(source), dtype=getattr(np, dtype), **options)


def logits(
    source: Source | None = None,
    flags: Mapping[str, object] | None = None,
    *,
    text: str | None = None,
    name: str = "<text>",
) -> Logits:
    """The validated rows of logits `attncli softmax` reads (attncli.parsing.logits), from a source as `load`'s,
    the YAML `text`, or `flags` alone (`{"logits": "2, 1, 0.1"}`); `attncli.softmax.compute` works them out."""
    from attncli.parsing import logits as read

    document = yamldoc.load(text, name) if text is not None else _document(source)
    return read.parse(document, flags, _base(source))


def single(problem: Problem | Stack, command: str) -> Problem:
    """`problem`, for a `command` that takes one layer (check, template, compare); a stack is an AttnError."""
    if isinstance(problem, Stack):
        raise fail("layers.single", command=command).at(source=problem.source, field="layers")
    return problem


@overload
def solve(problem: Problem) -> Steps: ...
@overload
def solve(problem: Stack) -> StackSteps: ...
@overload
def solve(problem: Problem | Stack) -> Steps | StackSteps: ...
def solve(problem: Problem | Stack) -> Steps | StackSteps:
    """Every step of the calculation: each head's scores, weights and output, then the heads combined.

    A stack gives each layer's steps in turn (attncli.layers.StackSteps). When the problem asks for
    gradients (`backward:`), the record's `backward` holds every one of them (attncli.backward).
    """
    steps: Steps | StackSteps
    if isinstance(problem, Stack):
        from attncli import layers

        steps = layers.compute(problem)
    else:
        steps = core.compute(problem)
    if problem.backward is None:
        return steps
    from attncli import backward

    if isinstance(steps, core.Steps):
        return steps._replace(backward=backward.compute(steps, problem.backward))
    return dataclasses.replace(steps, backward=backward.compute_stack(steps, problem.backward))


def result(problem: Problem | Stack) -> np.ndarray:
    """The final output alone (L, d_out), for outputs that show nothing else (`-f npy`, `-q`).

    Dot-product heads without a bias or RoPE go through the blocked kernel, O(L + S) memory past the problem itself,
    when their scores provably stay finite; every other problem (other scores, given scores, a
    chance of overflow, which `solve` names) takes `solve`'s every-step path, refused as too large
    where its (L, S) matrices would pass the memory budget. Both give the same numbers within
    float64 rounding.
    """
    if isinstance(problem, Stack):  # the kernel has no layers
        return solve(problem).output
    found = _on_kernel(problem)
    return _every_step(problem) if found is None else found[0]


def overview(
    problem: Problem, rows: Sequence[int], shape: tuple[int, int], fine: tuple[int, int] | None = None
) -> core.Overview:
    """The numbers the summary of a large problem shows: queries `rows` in full, maps of at most `shape` blocks,
    and with `fine` a second map of at most that many blocks (a figure's).

    Where `result` would take the blocked kernel, the maps come out of the same pass (its
    `key_bins`), and only the kept rows take every step: no (L, S) matrix is built, and those
    rows' numbers are the ones `solve` gives, but for the last bits a BLAS may round otherwise
    in a product of fewer rows. Otherwise, from `solve`, within the memory budget that
    `load(results_only=True)` left out.
    """
    edges = core.map_edges_of(problem, shape)
    fine_edges = None if fine is None else core.map_edges_of(problem, fine)
    bins = core.key_bins(edges, fine_edges)
    found = _on_kernel(problem, bins)
    if found is None:
        within_budget(problem)
        return core.overview(solve(problem), rows, shape, fine)
    kept = list(rows)
    mask, heads, outputs = problem.mask[kept], [], []
    for head, bin_sums in zip(problem.heads, found[1]):
        with kernel_threads.one_blas_thread():
            part = core.attend(_rows_of(head, kept), mask)  # (R, S) every step of the kept rows
        maps = core.block_maps(bin_sums, bins, edges, fine_edges)
        heads.append(core.HeadOverview(head.name, part.scores, part.weights, *maps))
        outputs.append(part.output)
    output = core.combine(outputs, problem.w_o)[1]  # (R, d_out)
    return core.Overview(problem, tuple(rows), tuple(heads), output, width(problem.heads[0].values), fine_edges)


def _rows_of(head: Head, rows: list[int]) -> Head:
    """`head` with queries `rows` only, projected: `core.attend` then works out just those rows (given scores,
    which the kernel never takes, cut to those rows alike)."""
    if head.queries is None:
        return head._replace(scores=None if head.scores is None else head.scores[rows])
    return head._replace(queries=core.project(head.queries)[rows])


def _on_kernel(problem: Problem, key_bins: np.ndarray | None = None) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """The final output (L, d_out) through the blocked kernel, and each head's weights summed over `key_bins`.

    None when the kernel cannot take the problem: a bias or RoPE, a head that is not a dot product
    or whose scores might overflow (`_kernel_arrays`), or a W_O that overflows.
    """
    if problem.bias is not None or problem.rope is not None:  # the kernel adds no bias and turns no queries
        return None
    arrays = [found for found in map(_kernel_arrays, problem.heads) if found is not None]
    if len(arrays) < len(problem.heads):
        return None
    mask, causal = _kernel_mask(problem)
    results = [
        _output_and_sums(kernel.attention(*found, scale=head.score.scale, mask=mask, causal=causal, key_bins=key_bins))
        for head, found in zip(problem.heads, arrays)
    ]
    outputs, sums = [output for output, _ in results], [summed for _, summed in results if summed is not None]
    output = core.combine(outputs, problem.w_o)[1]  # (L, d_out)
    return (output, sums) if np.isfinite(output).all() else None  # W_O can still overflow


def _output_and_sums(found: np.ndarray | tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray | None]:
    """The kernel's output, and its weights summed over the key bins when it was given some (None when not)."""
    return (found[0], found[1]) if isinstance(found, tuple) else (found, None)


def _every_step(problem: Problem) -> np.ndarray:
    """`solve`'s output, after the budget check that `load(results_only=True)` left out."""
    within_budget(problem)
    return solve(problem).output


def every_step_fits(problem: Problem) -> bool:
    """Whether `solve` (and so npz) stays within the memory budget on `problem`."""
    return _every_step_bytes(problem) <= budget.MEMORY_BUDGET


def within_budget(problem: Problem) -> None:
    """An AttnError when `solve` would pass the memory budget, which `load(results_only=True)` does not check."""
    queries, keys = len(problem.query_tokens), len(problem.tokens)
    budget.within_budget(_every_step_bytes(problem), len(problem.heads), queries, keys, problem.source)


def _every_step_bytes(problem: Problem) -> int:
    values = problem.heads[0].values
    dtype = (values.w if isinstance(values, Projection) else values).dtype
    queries, keys = len(problem.query_tokens), len(problem.tokens)
    return core.bytes_needed([head.score for head in problem.heads], queries, keys, dtype, problem.bias is not None)


def _kernel_mask(problem: Problem) -> tuple[np.ndarray | None, bool | str]:
    """The mask as the kernel takes it: None when the rule masks nothing, a causal rule alone as `causal=`.

    The kernel's causal masks are SDPA's: query i sees keys 0..i ("upper_left", as `mask: causal`
    when the queries are the tokens or another sequence) or 0..i + S − L ("lower_right", as
    `mask: causal_lower_right`); it then computes only the blocks a query can see.
    """
    rule = problem.mask_rule
    if rule.window is None and not rule.padding:
        if rule.kind == "none":
            return None, False
        if rule.kind == "causal_lower_right":
            return None, "lower_right"
        if rule.kind == "causal" and (problem.cross or problem.query_tokens == problem.tokens):
            return None, True
    return problem.mask, False


def _kernel_arrays(head: Head) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """q, k and v of a dot-product head, projected, or None when `core.attend` must do it.

    By Cauchy–Schwarz |s| ≤ max‖q‖·max‖k‖·|scale|; below a quarter of the dtype's largest
    number no score overflows, and a weighted mean of finite values stays finite. The problem's
    own matrices are finite; a projection X·W may not be.
    """
    if head.queries is None or head.keys is None or head.score.kind not in core.KERNEL_SCORES:  # given scores
        return None
    operands = (head.queries, head.keys, head.values)
    queries, keys, values = arrays = tuple(core.project(operand) for operand in operands)
    projected = [array for operand, array in zip(operands, arrays) if isinstance(operand, Projection)]
    if not all(np.isfinite(array).all() for array in projected):
        return None
    bound = _largest_norm(queries) * _largest_norm(keys) * abs(head.score.scale)
    return (queries, keys, values) if bound < np.finfo(queries.dtype).max / 4 else None


def _largest_norm(rows: np.ndarray) -> float:
    """max ‖row‖ (NaN if any is), a chunk of rows at a time: `row_norms` makes copies of what it is given,
    and of 32,768 rows they were the peak of a results-only run."""
    step = max(1, kernel.BLOCK_CELLS // max(rows.shape[-1], 1))
    return float(np.max([core.row_norms(rows[start : start + step]).max() for start in range(0, len(rows), step)]))


def grade(
    key_or_problem: Problem | Stack | Steps | StackSteps | Source,
    answers: Source | None = None,
    *,
    text: str | None = None,
    name: str = "<text>",
    **options: Unpack[GradeOptions],
) -> Report:
    """The report on the `answers:` section of the source `answers`, or of the YAML `text`, to `key_or_problem`.

    A homework file holds both, so the answers default to the problem's own source; an answer
    key (`attncli generate --answers`), a problem or its solution serves as the problem for a
    student's answers; a key's `tolerance:`, `carry:`, ... then count, not the student's.
    `options` are attncli.grading.grade's (`tolerance=`, ...), which win over both. A homework's
    own problem may name array files only inside its folder, as in `attncli check`; a key's may be anywhere.
    Stacked layers are graded layer by layer (attncli.grading.layers), their answers under `layers:`.
    The grader is imported here, not with the module: `attncli compute` never needs it.
    """
    import attncli.parsing.answers as parsed
    from attncli import grading
    from attncli.grading import layers as layer_grading
    from attncli.layers import StackSteps

    if text is not None:
        answers = yamldoc.load(text, name)
    source = key_or_problem if answers is None else answers
    if isinstance(source, (Problem, Stack, Steps, StackSteps)):
        raise fail("check.no_answers").at(source=_problem(source).source, field="answers")
    document = _document(source)
    settings = None  # the answers' own tolerance:, carry:, ... unless a key says otherwise
    if isinstance(key_or_problem, (Steps, StackSteps)):
        steps = key_or_problem
    elif isinstance(key_or_problem, (Problem, Stack)):
        steps = solve(key_or_problem)
    elif answers is None:  # a homework file is read once, for the problem and for the answers
        steps = solve(load(document, confined=True))
    else:
        key = _document(key_or_problem)
        steps, settings = solve(load(key)), parsed.read_settings(key)
    file = document.name if isinstance(source, Document) else os.fspath(source)
    if isinstance(steps, StackSteps):
        layered, counted = parsed.parse_stack(document, steps, settings)
        return layer_grading.grade(steps, layered, counted, file=file, **options)
    return grading.grade(steps, parsed.parse(document, steps, settings), file=file, **options)


@functools.wraps(kernel.attention)
def attention(*arrays: object, **options: Any) -> np.ndarray | tuple[np.ndarray, ...]:
    """attncli.kernel.attention, its signature and semantics, for anyone's arrays: an AttnError for what does not fit.

    q, k, v and `scale` must be real and finite, as in a problem file, and a mask bool or float with no NaN
    or +∞ (−∞ masks): checked here, at the edge, so the kernel never meets NaN, which it would report as
    'every key is masked' in q and pass through in v, nor an integer mask, which it would add as +0 and +1.
    """
    try:
        return kernel.attention(*_checked(arrays, ("q", "k", "v"), options), **options)
    except ValueError as error:  # shapes that do not line up, a ragged list, block sizes below 1
        raise fail("api.attention", reason=str(error)) from None


@functools.wraps(kernel_backward.attention_backward)
def attention_backward(*arrays: object, **options: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """attncli.kernel_backward.attention_backward, its signature and semantics, its inputs checked as `attention`'s."""
    try:
        checked = _checked(arrays, ("q", "k", "v", "grad_output"), options)
        return kernel_backward.attention_backward(*checked, **options)
    except ValueError as error:
        raise fail("api.attention_backward", reason=str(error)) from None


def _checked(arrays: tuple[object, ...], names: tuple[str, ...], options: dict[str, Any]) -> list[Any]:
    """The arrays named `names` real and finite (the rest as given); `options`' scale and mask checked in place.

    Any: what is not checked here reaches the kernel as the caller gave it, for the kernel (or Python, for an
    argument it does not take) to refuse; the kernel's signature, not this one, says what each may be."""
    checked = [_real(names[index], array) if index < len(names) else array for index, array in enumerate(arrays)]
    if options.get("scale") is not None:
        options["scale"] = _real("scale", options["scale"])[()]
    if options.get("mask") is not None:
        options["mask"] = _mask(options["mask"])
    return checked


def _real(name: str, given: object) -> np.ndarray:
    """`given` as an array of real numbers (float, int or bool), every one finite."""
    array = np.asarray(given)
    if array.dtype.kind not in "fiub":
        raise fail("api.not_numbers", name=name, dtype=str(array.dtype))
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise fail("api.not_finite", name=name)
    return array


def _mask(given: object) -> np.ndarray:
    """A mask as SDPA takes it: bool (True = may attend), or float added to the scores, −∞ where masked."""
    mask = np.asarray(given)
    if mask.dtype.kind == "f":
        if not (mask < np.inf).all():  # NaN and +∞ are not below +∞
            raise fail("api.mask_not_finite")
    elif mask.dtype.kind != "b":
        raise fail("api.mask_dtype", dtype=str(mask.dtype))
    return mask


def _document(source: Source | None) -> Document:
    if isinstance(source, Document):
        return source
    if source is None:
        return Document(data={}, name="flags")
    return yamldoc.read(os.fspath(source))


def _base(source: Source | None) -> Path:
    """Where array files are found: beside the file a source names; for stdin, text or flags, the working directory."""
    name = source.name if isinstance(source, Document) else source
    return parsing.base_folder(None if name is None or name == "<stdin>" else os.fspath(name))


def _problem(record: Problem | Stack | Steps | StackSteps) -> Problem | Stack:
    if isinstance(record, Steps):
        return record.problem
    return record if isinstance(record, (Problem, Stack)) else record.stack
