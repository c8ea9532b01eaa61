"""How a command declares its options without Typer, and the lean start: a plain command line read from them.

A command's parameters are annotated with `option(...)` or `argument(...)`, which record what
`typer.Option(...)` or `typer.Argument(...)` would be given (`Declared`); Typer gets the real
ones (`Declared.made`) only when it builds the command. A command line in the plain form
(`attncli compute FILE -f json`: the arguments, and options written `--option VALUE`,
`--option=VALUE`, `-o VALUE` or `--flag`) is read here from the same declarations, exactly
as Typer would read it (tests/test_startup.py holds the two side by side), so that most runs
never import Typer. Anything else is left to Typer, which reads it or says what is wrong.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

if TYPE_CHECKING:
    from types import ModuleType


class Declared(NamedTuple):
    """An option or an argument as a command's annotation declares it, not made into Typer's yet.

    Typer gets the real one (`made`) when it builds the command; until then nothing
    imports Typer, and the lean start reads the declarations.
    """

    kind: str  # Option or Argument: the name of Typer's function that makes it
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def made(self, typer: ModuleType) -> Any:
        return getattr(typer, self.kind)(*self.args, **self.kwargs)


def option(*names: str, **settings: Any) -> Declared:
    """An option, declared as `typer.Option(*names, **settings)` would be: its names (`"--format", "-f"`; by
    default the parameter's name), its help, metavar, completion and range."""
    return Declared("Option", names, settings)


def argument(**settings: Any) -> Declared:
    """An argument, declared as `typer.Argument(**settings)` would be."""
    return Declared("Argument", (), settings)


Read = Callable[[str], Any]  # how an option's value is read from its text, as Typer reads it
Table = tuple[list[inspect.Parameter], dict[str, tuple[inspect.Parameter, Any]]]  # arguments; option name -> how


def read(table: Table, declared: inspect.Signature, arguments: Sequence[str]) -> dict[str, Any] | None:
    """The options Typer would pass for `arguments`, read with `table` (`table` of the `declared` signature): the
    argument's value (or none, where it has a default) and each option once (a list option any number of times),
    every value one Typer reads as it is written. None for a command line not in the plain form."""
    arguments_of, names = table
    options = {p.name: p.default for p in declared.parameters.values()}
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
        parameter, reader = names[name]
        value = _value(reader, attached if equals else None, bool(equals), tokens)
        if value is _REFUSED:
            return None
        if parameter.annotation.__origin__ in _LISTS:
            options[parameter.name] = [*(options[parameter.name] if parameter.name in given else ()), value]
        elif parameter.name in given:
            return None
        else:
            options[parameter.name] = value
        given.add(parameter.name)
    return _placed(arguments_of, positional, options)


def _value(reader: Any, attached: str | None, equals: bool, tokens: Any) -> Any:
    """An option's value: a flag's True (False for --no-x), or the text after it read by `reader`; _REFUSED for
    what only Typer should read (a flag given a value, no value, a value Typer might take for an option)."""
    if reader is bool or reader is _NOT:
        return _REFUSED if equals else reader is bool
    written = attached if equals else next(tokens, None)
    if not written or (written.startswith("-") and written != "-"):
        return _REFUSED
    return reader(written)


def _placed(
    arguments_of: list[inspect.Parameter], positional: list[str], options: dict[str, Any]
) -> dict[str, Any] | None:
    """`options` with the arguments given in `positional`; None when they are not what the command takes."""
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


def table(declared: inspect.Signature) -> Table | None:
    """The arguments, and each option name with its parameter and how its value is read; None for a command
    whose declarations need Typer (a callback, a type the lean start does not read)."""
    parameters = list(declared.parameters.values())
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
        reader = _reader(parameter.annotation.__origin__, extra.kwargs)
        if parameter.default is inspect.Parameter.empty or reader is None:
            return None
        spelt = [name for name in extra.args if isinstance(name, str) and name.startswith("-")]
        long = "--" + parameter.name.replace("_", "-")
        for name in spelt or [long]:
            names[name] = (parameter, reader)
        if reader is bool and not spelt:
            names["--no-" + parameter.name.replace("_", "-")] = (parameter, _NOT)  # Typer's --x/--no-x
    return arguments, names


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
    numbers: dict[object, type[int] | type[float]] = {int: int, Optional[int]: int, Optional[list[int]]: int}
    numbers |= {list[int]: int, float: float, Optional[float]: float}
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
