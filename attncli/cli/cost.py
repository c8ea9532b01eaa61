"""`attncli cost`: the parameters, FLOPs and KV-cache bytes of attention, from a model's shape or a problem file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

from attncli.cli.common import (
    Debug,
    Lang,
    NoColor,
    boundary,
    choose,
    command,
    completion,
    epilog,
    format_option,
    located,
    output_option,
)
from attncli.cli.environment import Environment
from attncli.cli.lean import argument, option
from attncli.cli.output import output_format, print_human, write
from attncli.errors import ExitCode, fail
from attncli.i18n import t
from attncli.render import formats

FORMATS = formats.offering(formats.COST)
Format = Annotated[Optional[str], format_option(FORMATS)]
Output = Annotated[Optional[Path], output_option(FORMATS)]
DTYPES = ("fp32", "float32", "fp16", "bf16", "fp8", "float64")  # attncli.cost.BYTES, which needs no numpy either
EXAMPLES = epilog(
    "  attncli cost --d-model 4096 --heads 32 --kv-heads 8 --layers 32 --tokens 16384 --dtype bf16",
    "  attncli cost --d-model 4096 --heads 32 --kv-heads 8 --tokens 32768 --window 4096 --compare",
    "  attncli cost --d-model 768 --heads 12 --layers 12 --tokens 1024 --causal --bias --format json",
    "  attncli cost samples/gqa.yaml",
)


@command(t("help.cost"), EXAMPLES)
@boundary
def cost(
    env: Environment,
    file: Annotated[Optional[str], argument(metavar=t("help.metavar.file"), help=t("help.cost.file"))] = None,
    d_model: Annotated[Optional[int], option("--d-model", min=1, help=t("help.cost.d_model"))] = None,
    heads: Annotated[Optional[int], option(min=1, help=t("help.cost.heads"))] = None,
    kv_heads: Annotated[Optional[int], option("--kv-heads", min=1, help=t("help.cost.kv_heads"))] = None,
    d_head: Annotated[Optional[int], option("--d-head", min=1, help=t("help.cost.d_head"))] = None,
    layers: Annotated[Optional[int], option(min=1, help=t("help.cost.layers"))] = None,
    tokens: Annotated[Optional[int], option(min=1, help=t("help.cost.tokens"))] = None,
    batch: Annotated[Optional[int], option(min=1, help=t("help.cost.batch"))] = None,
    dtype: Annotated[
        Optional[str],
        option(
            metavar=t("help.metavar.type"),
            autocompletion=completion(*DTYPES),
            help=t("help.cost.dtype", dtypes=", ".join(DTYPES)),
        ),
    ] = None,
    window: Annotated[Optional[int], option(metavar="W", min=1, help=t("help.cost.window"))] = None,
    causal: Annotated[bool, option("--causal", help=t("help.cost.causal"))] = False,
    bias: Annotated[bool, option("--bias", help=t("help.cost.bias"))] = False,
    compare: Annotated[bool, option("--compare", help=t("help.cost.compare"))] = False,
    format: Format = None,
    output: Output = None,
    no_color: NoColor = False,
    lang: Lang = None,
    debug: Debug = False,
) -> ExitCode:
    format = choose(output_format(format, output, FORMATS), FORMATS, "--format")
    if dtype is not None:
        choose(dtype, DTYPES, "--dtype", "cli.bad_dtype")
    shaped = {"--d-model": d_model, "--heads": heads, "--kv-heads": kv_heads, "--d-head": d_head, "--layers": layers}
    shaped |= {"--tokens": tokens, "--batch": batch, "--window": window}
    shaped |= {"--causal": causal or None, "--bias": bias or None, "--compare": compare or None}
    from attncli import cost as counted
    from attncli.render import cost as shown

    if file is not None:
        given = next((option for option, value in shaped.items() if value is not None), None)
        if given is not None:
            raise fail("cost.file_and_shape", option=given).at(source=given)
        from attncli import pipeline

        problem = pipeline.single(pipeline.load(file), "cost")
        record, compared = counted.of_problem(problem, dtype or "float64"), []
    else:
        missing = [option for option in ("--d-model", "--heads", "--tokens") if shaped[option] is None]
        if missing or d_model is None or heads is None or tokens is None:  # the same three, for the types
            raise fail("cost.needs_shape", options=", ".join(missing))
        with located():
            shape = counted.shape(
                d_model, heads, tokens, kv_heads, d_head, layers or 1, batch or 1, causal, window, bias
            )
        record = counted.count(shape, dtype or "bf16")
        compared = counted.compare(shape, dtype or "bf16") if compare else []
    if format == "json":
        write(shown.json_document(record, compared), output, env)
    else:
        print_human(lambda width: shown.human(record, compared, width), output, env)
    return ExitCode.OK
