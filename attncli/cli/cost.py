"""`attncli cost`: the parameters, FLOPs and KV-cache bytes of attention, from a model's shape or a problem file."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

from attncli.cli.common import (
    Debug,
    Lang,
    NoColor,
    boundary,
    choose,
    command,
    completion,
    epilog,
    format_options,
    located,
)
from attncli.cli.environment import Environment
from attncli.cli.output import output_format, print_human, write
from attncli.errors import fail
from attncli.i18n import t

if TYPE_CHECKING:
    import typer  # the annotations' typer.Option is read by attncli.cli.common.boundary, Typer only if needed

FORMATS = ("rich", "text", "json")
Format, Output = format_options(FORMATS)
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
    file: Annotated[Optional[str], typer.Argument(metavar=t("help.metavar.file"), help=t("help.cost.file"))] = None,
    d_model: Annotated[Optional[int], typer.Option("--d-model", min=1, help=t("help.cost.d_model"))] = None,
    heads: Annotated[Optional[int], typer.Option(min=1, help=t("help.cost.heads"))] = None,
    kv_heads: Annotated[Optional[int], typer.Option("--kv-heads", min=1, help=t("help.cost.kv_heads"))] = None,
    d_head: Annotated[Optional[int], typer.Option("--d-head", min=1, help=t("help.cost.d_head"))] = None,
    layers: Annotated[Optional[int], typer.Option(min=1, help=t("help.cost.layers"))] = None,
    tokens: Annotated[Optional[int], typer.Option(min=1, help=t("help.cost.tokens"))] = None,
    batch: Annotated[Optional[int], typer.Option(min=1, help=t("help.cost.batch"))] = None,
    dtype: Annotated[
        Optional[str],
        typer.Option(
            metavar=t("help.metavar.type"),
            autocompletion=completion(*DTYPES),
            help=t("help.cost.dtype", dtypes=", ".join(DTYPES)),
        ),
    ] = None,
    window: Annotated[Optional[int], typer.Option(metavar="W", min=1, help=t("help.cost.window"))] = None,
    causal: Annotated[bool, typer.Option("--causal", help=t("help.cost.causal"))] = False,
    bias: Annotated[bool, typer.Option("--bias", help=t("help.cost.bias"))] = False,
    compare: Annotated[bool, typer.Option("--compare", help=t("help.cost.compare"))] = False,
    format: Format = None,
    output: Output = None,
    no_color: NoColor = False,
    lang: Lang = None,
    debug: Debug = False,
) -> None:
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
        if missing:
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
