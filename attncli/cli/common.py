"""What every command shares, without Typer: its registration, the boundary it runs inside, the common options.

numpy, PyYAML and Rich are imported inside the commands, and Typer only where the
command line is built (attncli.cli.application): a command line in the plain form
(`attncli compute FILE -f json`) runs without any of Typer (attncli.cli.main). The
options are declared with attncli.cli.lean's `option` and `argument`, made into Typer's
only when Typer builds a command. A command returns the run's ExitCode. Help texts come
from the catalogue when the commands are imported, in the language attncli.launch has chosen.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Annotated, Any, NamedTuple, Optional, TypeVar

from attncli.cli import lean
from attncli.cli.ending import ending
from attncli.cli.environment import Environment
from attncli.cli.lean import Declared, Table, option
from attncli.errors import AttnError, ExitCode, Where, fail
from attncli.i18n import LANGUAGE, LANGUAGES, language_from_environment, t

COMMANDS = (
    "check",
    "compare",
    "compute",
    "cost",
    "generate",
    "practice",
    "scaling",
    "softmax",
    "template",
)  # command = the name of its module in attncli.cli
EXIT_CODES_HELP = t("help.exit_codes")
Command = TypeVar("Command", bound=Callable[..., Any])


class Registered(NamedTuple):
    """A command as its module declares it: the function inside the boundary, its help and its epilog."""

    callback: _Bounded
    help: str
    epilog: str


REGISTERED: dict[str, Registered] = {}  # by command name; attncli.cli.application registers them on Typer


def command(help: str, examples: str) -> Callable[[Command], Command]:
    """Register a command with its help (one sentence) and the `epilog` of its examples."""

    def register(callback: Command) -> Command:
        REGISTERED[callback.__name__.replace("_", "-")] = Registered(callback, help, examples)  # type: ignore[arg-type]
        return callback

    return register


def completion(*values: str) -> Callable[[str], list[str]]:
    """Shell completion of an option's value: those of `values` that start with what is typed so far."""

    def complete(incomplete: str) -> list[str]:
        return [value for value in values if value.startswith(incomplete)]

    return complete


SCORES = ("scaled_dot", "dot", "cosine")  # the score functions a command-line option names
Lang = Annotated[
    Optional[str],
    option(
        "--lang",
        metavar=t("help.metavar.lang"),
        autocompletion=completion(*LANGUAGES),
        help=t("help.lang", languages=", ".join(LANGUAGES)),
    ),
]
Debug = Annotated[bool, option("--debug", help=t("help.debug"))]
Precision = Annotated[int, option(min=0, max=17, help=t("help.precision"))]
NoColor = Annotated[bool, option("--no-color", help=t("help.no_color"))]


def format_option(formats: Sequence[str]) -> Declared:
    """The --format option of a command that offers `formats`: `Annotated[Optional[str], format_option(FORMATS)]`."""
    return option(
        "--format",
        "-f",
        metavar=t("help.metavar.format"),
        autocompletion=completion(*formats),
        help=t("help.format", formats=", ".join(formats)),
    )


def output_option(formats: Sequence[str]) -> Declared:
    """The -o option of a command that writes `formats`, whose help names only the extensions that choose one of
    them (the plain text's last): `Annotated[Optional[Path], output_option(FORMATS)]`."""
    from attncli.render.formats import FORMATS

    chosen = sorted((FORMATS[name] for name in formats if FORMATS[name].suffix), key=lambda format: format.human)
    extensions = " ".join(str(format.suffix) for format in chosen)
    return option("--output", "-o", help=t("help.output", extensions=extensions))


def epilog(*lines: str, exit_codes: str = EXIT_CODES_HELP) -> str:
    """A command's epilog: its examples (indented command lines, and notes), then its exit codes.

    The help shows the examples before the options and the exit codes last. The example
    command lines stay as they are in every language; only the notes around them come
    from the catalogue.
    """
    return "\n".join(lines) + "\n\n" + exit_codes


def choose(
    value: str,
    known: Sequence[str],
    option: str,
    message: str = "cli.bad_format",
    elsewhere: Mapping[str, tuple[str, str]] = {},
) -> str:
    """`value` when it is one of `known`; otherwise the one-line usage error, in the user's language, with the
    closest of `known` or, for a value another option gives (`-f svg`), that option: `elsewhere[value]` is
    the option and the suffix of its FILE (`("--figure", ".png")`)."""
    if value in known:
        return value
    from attncli.errors import phrase
    from attncli.yamldoc import did_you_mean  # only on this error path

    if value in elsewhere:
        other, suffix = elsewhere[value]
        hint: object = phrase("cli.other_option", option=other, file=t("help.metavar.file") + suffix)
    else:
        hint = did_you_mean(value, known)
    raise fail(message, name=value, known=", ".join(known), hint=hint).at(source=option)


@contextlib.contextmanager
def located(option: str | None = None) -> Iterator[None]:
    """Place an AttnError raised inside at a command-line option: `option`, or the one named like its field.

    The library names its own parameters (`tokens`, `score`) and never a flag; the
    command line knows which flag gave each value.
    """
    try:
        yield
    except AttnError as error:
        where = error.where
        if where.source is None and (option or where.field):
            error.where = Where(option or f"--{where.field}", where.line, where.field if option else None)
        raise


def boundary(command: Command) -> Command:
    """Run `command` with the run's `Environment` as its first argument, and end it through `ending`.

    Typer sees the command's options without that first argument. The command must
    take `lang` and `debug` (the Lang and Debug options); `no_color` and `format`,
    when it has them, decide the colour.
    """
    return _Bounded(command)  # type: ignore[return-value]


class _Bounded:
    """A command inside the boundary. Its annotations are read only when a command line needs them: Typer's
    when Typer builds this very command (evaluating them costs milliseconds per command), the declared ones
    for the lean start."""

    def __init__(self, command: Callable[..., Any]) -> None:
        functools.update_wrapper(self, command, assigned=("__module__", "__name__", "__qualname__", "__doc__"))
        self._command = command

    @functools.cached_property
    def declared(self) -> inspect.Signature:
        """The options without the Environment, each annotation's `option(...)` a `Declared`: the command's own
        parameters, or the fields of the record it takes them in (`_record`)."""
        signature = inspect.signature(self._command, eval_str=True)
        if self._record is None:
            return signature.replace(parameters=tuple(signature.parameters.values())[1:])
        hints = typing.get_type_hints(self._record, include_extras=True)
        defaults = self._record._field_defaults
        empty, kind = inspect.Parameter.empty, inspect.Parameter.POSITIONAL_OR_KEYWORD
        parameters = [
            inspect.Parameter(name, kind, default=defaults.get(name, empty), annotation=hints[name])
            for name in self._record._fields
        ]
        return signature.replace(parameters=parameters)

    @functools.cached_property
    def _record(self) -> Any:
        """The NamedTuple a command with many options takes them in (`def compute(env, given: Options)`), or None
        for a command that takes each as a parameter of its own."""
        parameters = list(inspect.signature(self._command, eval_str=True).parameters.values())[1:]
        kind = parameters[0].annotation if len(parameters) == 1 else None
        return kind if isinstance(kind, type) and issubclass(kind, tuple) and hasattr(kind, "_fields") else None

    @functools.cached_property
    def __signature__(self) -> inspect.Signature:
        """The options as Typer reads them: every `Declared` made."""
        import typer

        def made(annotation: Any) -> Any:
            extras = getattr(annotation, "__metadata__", ())
            if not any(isinstance(extra, Declared) for extra in extras):
                return annotation
            real = [extra.made(typer) if isinstance(extra, Declared) else extra for extra in extras]
            arguments = (annotation.__origin__, *real)
            return Annotated[arguments]

        parameters = [p.replace(annotation=made(p.annotation)) for p in self.declared.parameters.values()]
        return self.declared.replace(parameters=parameters)

    @functools.cached_property
    def __annotations__(self) -> dict[str, Any]:  # type: ignore[override]  # what typing.get_type_hints reads
        return {name: parameter.annotation for name, parameter in self.__signature__.parameters.items()}

    def lean(self, arguments: Sequence[str]) -> dict[str, Any] | None:
        """The options Typer would pass for `arguments` when the command line is in the plain form (attncli.cli.lean);
        None for any other command line: Typer reads it then, and says what is wrong with it."""
        table = self._lean_table
        return None if table is None else lean.read(table, self.declared, arguments)

    @functools.cached_property
    def _lean_table(self) -> Table | None:
        """The arguments, and each option name with its parameter and how its value is read; None for a command
        whose declarations need Typer (attncli.cli.lean)."""
        return lean.table(self.declared)

    def run(self, options: dict[str, Any]) -> int:
        """The command with `options`; the exit code: the one it returns, or that of whatever ended it (`ending`)."""
        language = LANGUAGE.set(language_from_environment())  # an unknown --lang is reported in this one
        try:
            plain = options.get("no_color", False) or options.get("format") == "text"
            environment = Environment.of_process(options.get("lang"), plain)
            LANGUAGE.set(environment.language)
            from attncli.cli.output import all_or_nothing

            with all_or_nothing():
                if self._record is None:
                    code: ExitCode = self._command(environment, **options)
                else:
                    code = self._command(environment, self._record(**options))
            return code
        except BaseException as error:
            return ending(error, debug=options.get("debug", False))
        finally:
            LANGUAGE.reset(language)

    def __call__(self, **options: Any) -> None:
        """The command as Typer calls it, ended by typer.Exit with the code of whatever ended it."""
        code = self.run(options)
        if code != ExitCode.OK:
            import typer

            raise typer.Exit(code)
