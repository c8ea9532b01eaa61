"""The options that shape a new exercise, declared once: `generate` makes the exercise, `practice` teaches it.

Each declaration is an `option(...)` both commands annotate their own field with (`generate`
gives its default, `practice` None: a file to practise refuses them). `exercise_options` turns
a command's record of them into the library's `exercises.Options`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attncli.cli.common import SCORES, completion, located
from attncli.cli.lean import option
from attncli.i18n import t

if TYPE_CHECKING:
    from attncli.exercises import Options

# The values --norm and --rope complete to (exercises.NORMS and positions.STYLES, which need numpy to import).
NORMS = ("none", "layer", "rms", "layer:post", "rms:post")
ROPES = ("half", "interleaved")
MASKS = ("none", "causal")

TOKENS = option(metavar=t("help.metavar.tokens"), help=t("help.generate.tokens"))
DK = option("--dk", min=1, max=8, help=t("help.generate.dk"))
DV = option("--dv", min=1, max=8, help=t("help.generate.dv"))
HEADS = option(min=1, max=4, help=t("help.generate.heads"))
MASK = option(metavar=t("help.metavar.mask"), autocompletion=completion(*MASKS), help=t("help.generate.mask"))
SCORE = option(metavar=t("help.metavar.name"), autocompletion=completion(*SCORES), help=t("help.score"))
PROJECTIONS = option(help=t("help.generate.projections"))
LAYERS = option(min=1, max=4, help=t("help.generate.layers"))
NORM = option(metavar=t("help.metavar.norm"), autocompletion=completion(*NORMS), help=t("help.generate.norm"))
ROPE = option(metavar=t("help.metavar.style"), autocompletion=completion(*ROPES), help=t("help.generate.rope"))
GQA = option(help=t("help.generate.gqa"))
TILES = option(min=1, max=12, metavar="B", help=t("help.generate.tiles"))
BACKWARD = option(help=t("help.generate.backward"))
SEED = option(min=0, help=t("help.generate.seed"))

# Each option's field in a command's record, and its name on the command line (for messages).
SHAPING = {
    "tokens": "--tokens",
    "dk": "--dk",
    "dv": "--dv",
    "heads": "--heads",
    "mask": "--mask",
    "score": "--score",
    "projections": "--projections",
    "layers": "--layers",
    "norm": "--norm",
    "rope": "--rope",
    "gqa": "--gqa",
    "tiles": "--tiles",
    "backward": "--backward",
}


def exercise_options(given: Any, answers: bool = False) -> Options:
    """The exercise a command's record of the SHAPING options asks for (a field left None takes the library's
    default), validated; each error placed at its option."""
    from attncli import exercises

    defaults = exercises.Options()
    value = {field: getattr(given, field) for field in SHAPING}
    with located("--tokens"):
        tokens = exercises.parse_tokens(value["tokens"]) if value["tokens"] is not None else None
    heads = value["heads"] or defaults.heads
    options = exercises.Options(
        tokens=tokens,
        d_k=value["dk"] or defaults.d_k,
        d_v=value["dv"],
        heads=2 if value["gqa"] and heads == 1 else heads,  # --gqa alone: two query heads sharing one kv head
        mask=value["mask"] or defaults.mask,
        score=value["score"] or defaults.score,
        projections=bool(value["projections"]),
        answers=answers,
        layers=value["layers"] or defaults.layers,
        norm=value["norm"] or defaults.norm,
        rope=value["rope"],
        gqa=bool(value["gqa"]),
        tiles=value["tiles"],
        backward=bool(value["backward"]),
    )
    with located():
        exercises.validate(options)
    return options
