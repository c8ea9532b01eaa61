"""What every command shares, without Typer: its registration, the boundary it runs inside, the common options.

numpy, PyYAML and Rich are imported inside the commands, and Typer only where the
command line is built (attncli.cli.application): a command line in the plain form
(`attncli compute FILE -f json`) runs without any of Typer (attncli.cli.main). The
options are declared as Typer's (`typer.Option`, `typer.Argument`) and read as such when
Typer builds a command; until then `declared` records them, and the lean start reads
them. Help texts come from the catalogue when the commands are imported, in the language
attncli.launch has chosen.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, Optional, TypeVar

from attncli.cli.environment import Environment
from attncli.errors import AttnError, ExitCode, Where, fail
from attncli.i18n import LANGUAGE, LANGUAGES, language_from_environment, t
from attncli.launch import ending

if TYPE_CHECKING:
    from types import ModuleType

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


class Declared(NamedTuple):
    """A `typer.Option(...)` or `typer.Argument(...)` as a command's annotation writes it, not made yet.

    Typer gets the real one (`made`) when it builds the command; until then nothing
    imports Typer, and the lean start reads which parameter is the argument.
    """

    kind: str  # Option or Argument
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def made(self, typer: ModuleType) -> Any:
        return getattr(typer, self.kind)(*self.args, **self.kwargs)


class _Declarations:
    """What `typer` stands for where the commands' annotations are read: its Option and Argument, recorded."""

    @staticmethod
    def Option(*args: Any, **kwargs: Any) -> Declared:  # Typer's names: the annotations read as Typer's
        return Declared("Option", args, kwargs)

    @staticmethod
    def Argument(*args: Any, **kwargs: Any) -> Declared:
        return Declared("Argument", args, kwargs)


declared = _Declarations()


def completion(*values: str) -> Callable[[str], list[str]]:
    """Shell completion of an option's value: those of `values` that start with what is typed so far."""

    def complete(incomplete: str) -> list[str]:
        return [value for value in values if value.startswith(incomplete)]

    return complete


SCORES = ("scaled_dot", "dot", "cosine")  # the score functions a command-line option names
Lang = Annotated[
    Optional[str],
    declared.Option(
        "--lang",
        metavar=t("help.metavar.lang"),
        autocompletion=completion(*LANGUAGES),
        help=t("help.lang", languages=", ".join(LANGUAGES)),
    ),
]
Debug = Annotated[bool, declared.Option("--debug", help=t("help.debug"))]
Precision = Annotated[int, declared.Option(min=0, max=17, help=t("help.precision"))]
NoColor = Annotated[bool, declared.Option("--no-color", help=t("help.no_color"))]


def format_options(formats: Sequence[str]) -> tuple[Any, Any]:
    """The --format and -o options of a command that writes `formats`: the help of -o names only the extensions
    that choose one of them."""
    from attncli.cli.output import EXTENSIONS

    extensions = " ".join(suffix for suffix, name in EXTENSIONS.items() if name in formats)
    chosen = Annotated[
        str,
        declared.Option(
            "--format",
            "-f",
            metavar=t("help.metavar.format"),
            autocompletion=completion(*formats),
            help=t("help.format", formats=", ".join(formats)),
        ),
    ]
    written = Annotated[Optional[Path], declared.Option("--output", "-o", help=t("help.output", extensions=extensions))]
    return chosen, written


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
        """The options without the Environment, each annotation's `typer.Option(...)` a `Declared`."""
        names = {**self._command.__globals__, "typer": declared}
        signature = inspect.signature(self._command, globals=names, eval_str=True)
        return signature.replace(parameters=tuple(signature.parameters.values())[1:])

    @functools.cached_property
    def __signature__(self) -> inspect.Signature:
        """The options as Typer reads them: every `Declared` made."""
        import typer

        def made(annotation: Any) -> Any:
            extras = getattr(annotation, "__metadata__", ())
            if not any(isinstance(extra, Declared) for extra in extras):
                return annotation
            real = [extra.made(typer) if isinstance(extra, Declared) else extra for extra in extras]
            return Annotated[(annotation.__origin__, *real)]

        parameters = [p.replace(annotation=made(p.annotation)) for p in self.declared.parameters.values()]
        return self.declared.replace(parameters=parameters)

    @functools.cached_property
    def __annotations__(self) -> dict[str, Any]:  # what typing.get_type_hints reads, for Typer
        return {name: parameter.annotation for name, parameter in self.__signature__.parameters.items()}

    def lean(self, arguments: Sequence[str]) -> dict[str, Any] | None:
        """The options Typer would pass for `arguments`, read from the declarations without Typer, when the
        command line is in the plain form: the argument's value (or none, where it has a default) and options
        written `--option VALUE`, `--option=VALUE`, `-o VALUE` or `--flag`, each once (a list option any
        number of times), every value one Typer reads as it is written. None for any other command line:
        Typer reads it then, and says what is wrong with it."""
        table = self._lean_table
        if table is None:
            return None
        arguments_of, names = table
        options = {p.name: p.default for p in self.declared.parameters.values()}
        given: set[str] = set()
        positional: list[str] = []
        tokens = iter(arguments)
        for token in tokens:
            if token == "-" or not token.startswith("-"):
                positional.append(token)
                continue
            name, equals, attached = token.partition("=") if token.startswith("--") else (token, "", "")
            if name not in names:
                return None
            parameter, read = names[name]
            if read is bool or read is _NOT:
                if equals:
                    return None
                value: Any = read is bool
            else:
                written = attached if equals else next(tokens, None)
                if not written or (written.startswith("-") and written != "-"):
                    return None  # no value, or one Typer might read as an option
                value = read(written)
                if value is _REFUSED:
                    return None
            if parameter.annotation.__origin__ in _LISTS:
                options[parameter.name] = [*(options[parameter.name] if parameter.name in given else ()), value]
            elif parameter.name in given:
                return None
            else:
                options[parameter.name] = value
            given.add(parameter.name)
        if len(arguments_of) == 1 and arguments_of[0].annotation.__origin__ in _LISTS:  # FILE...
            if not positional and arguments_of[0].default is inspect.Parameter.empty:
                return None
            options[arguments_of[0].name] = positional or arguments_of[0].default
            return options
        if len(positional) > len(arguments_of):
            return None
        for parameter in arguments_of[len(positional) :]:
            if parameter.default is inspect.Parameter.empty:
                return None
        options.update(zip((parameter.name for parameter in arguments_of), positional))
        return options

    @functools.cached_property
    def _lean_table(self) -> tuple[list[inspect.Parameter], dict[str, tuple[inspect.Parameter, Any]]] | None:
        """The arguments, and each option name with its parameter and how its value is read; None for a command
        whose declarations need Typer (a callback, a type the lean start does not read)."""
        parameters = list(self.declared.parameters.values())
        made = [extra for parameter in parameters for extra in _extras(parameter) if isinstance(extra, Declared)]
        if len(made) != len(parameters) or any(set(extra.kwargs) - _PLAIN for extra in made):
            return None
        arguments = [p for p, extra in zip(parameters, made) if extra.kind == "Argument"]
        kinds = [argument.annotation.__origin__ for argument in arguments]
        if not (kinds in ([list[str]], [Optional[list[str]]]) or set(kinds) <= {str, Optional[str]}):
            return None
        names: dict[str, tuple[inspect.Parameter, Any]] = {}
        for parameter, extra in zip(parameters, made):
            if extra.kind == "Argument":
                continue
            if parameter.default is inspect.Parameter.empty:
                return None
            read = _reader(parameter.annotation.__origin__, extra.kwargs)
            if read is None:
                return None
            spelt = [name for name in extra.args if isinstance(name, str) and name.startswith("-")]
            long = "--" + parameter.name.replace("_", "-")
            for name in spelt or [long]:
                names[name] = (parameter, read)
            if read is bool and not spelt:
                names["--no-" + parameter.name.replace("_", "-")] = (parameter, _NOT)  # Typer's --x/--no-x
        return arguments, names

    def run(self, options: dict[str, Any]) -> int:
        """The command with `options`; the exit code: OK, or that of whatever ended it (`ending`)."""
        language = LANGUAGE.set(language_from_environment())  # an unknown --lang is reported in this one
        try:
            plain = options.get("no_color", False) or options.get("format") == "text"
            environment = Environment.of_process(options.get("lang"), plain)
            LANGUAGE.set(environment.language)
            from attncli.cli.output import all_or_nothing

            with all_or_nothing():
                self._command(environment, **options)
            return ExitCode.OK
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


# What a declaration may say for the lean start to stand in for Typer: words for the help and completion,
# and a range its default is in. Anything else (an environment variable, a callback, a prompt) needs Typer.
_PLAIN = frozenset(("help", "metavar", "autocompletion", "min", "max", "show_default", "hidden"))


def _extras(parameter: inspect.Parameter) -> tuple[Any, ...]:
    return getattr(parameter.annotation, "__metadata__", ())


_REFUSED = object()  # a value the lean start leaves to Typer to read, or to refuse
_NOT = object()  # how the lean start reads --no-x: False
_LISTS = (Optional[list[str]], Optional[list[int]], list[str], list[int])


def _reader(kind: Any, kwargs: dict[str, Any]) -> Callable[[str], Any] | type[bool] | None:
    """How Typer reads an option of type `kind` from its text, as the lean start does it: bool for a flag;
    None for a type it leaves to Typer."""
    if kind is bool:
        return bool
    if kind in (str, Optional[str], Optional[list[str]], list[str]):
        return str
    if kind in (Path, Optional[Path]):
        return Path
    numbers = {int: int, Optional[int]: int, Optional[list[int]]: int, list[int]: int}
    numbers |= {float: float, Optional[float]: float}
    if kind not in numbers:
        return None
    low, high, convert = kwargs.get("min"), kwargs.get("max"), numbers[kind]

    def number(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            return _REFUSED
        inside = (low is None or value >= low) and (high is None or value <= high)
        return value if inside else _REFUSED

    return number
