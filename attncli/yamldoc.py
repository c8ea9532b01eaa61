"""Read a YAML (or JSON) document into plain Python values, remembering the line of every value; and write
the YAML that attncli makes (exercises, keys, templates) so that it reads back as what was meant.

PyYAML's own loaders recurse (deep nesting overflows the stack) and expand
aliases without limit (an alias bomb). Building the document from the flat event
stream avoids both: nesting is counted, and each alias adds the size of what it
repeats to a budget. Both are checked in a first, lean pass over the events
(about 1.2 µs a value), so that a document past them is refused before the far
slower building starts (a short text is parsed once, its events kept). Only the
plain YAML types are accepted; any tag such as `!!python/object` is refused
before anything is constructed.
"""

from __future__ import annotations

import collections
import errno
import functools
import math
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from attncli import inputs
from attncli.errors import AttnError, fail, phrase, printable, quoted_escapes
from attncli.expr import evaluate, quote
from attncli.i18n import Message

if TYPE_CHECKING:
    import yaml
    from yaml.resolver import Resolver

FieldPath = tuple[str | int, ...]  # where a value sits: ("heads", 0, "keys") is heads[1].keys

MAX_DEPTH = 32
MAX_VALUES = 250_000  # counted at about 1.2 µs each, a document past this is refused in well under a second
MAX_BYTES = 64 * 2**20
ONE_PASS_CHARS = 2**18  # a text this short is parsed once, its events kept for building (2 values a character at most)
PLAIN_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
}
_BOOL, _INT, _FLOAT, _NULL = (f"tag:yaml.org,2002:{name}" for name in ("bool", "int", "float", "null"))
FLOAT_DIGITS = 309  # a whole number with more digits is beyond every float (max ≈ 1.8e308)


@functools.cache
def _yaml() -> tuple[type[yaml.SafeLoader], Resolver]:
    """PyYAML's fastest safe parser, and a resolver for the YAML 1.2 core schema: made when a document is
    first read, so that a problem made from flags alone (`--keys @k.npy`) never imports PyYAML.

    The core schema reads booleans and numbers as JSON does. YAML 1.1 (PyYAML's default) would read
    the tokens `on`, `no` and `yes` as booleans, `1:20` as 80 and `010` as 8; here they stay words,
    text and ten.
    """
    import yaml
    from yaml.resolver import Resolver

    class CoreResolver(Resolver):
        yaml_implicit_resolvers: ClassVar[dict] = {
            first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_BOOL, _INT, _FLOAT)]
            for first, resolvers in Resolver.yaml_implicit_resolvers.items()
        }

    CoreResolver.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
    digits = list("-+0123456789")
    CoreResolver.add_implicit_resolver(_INT, re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), digits)
    CoreResolver.add_implicit_resolver(
        _FLOAT,
        re.compile(
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
        ),
        list("-+.0123456789"),
    )
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader), CoreResolver()


@dataclass
class Document:
    """A parsed input: its values, its name for messages, the line of each value and the text of each scalar.

    The text matters where the value alone loses it: `0.0900` promises four decimals.
    """

    data: object
    name: str
    lines: dict[FieldPath, int] = field(default_factory=dict)
    texts: dict[FieldPath, str] = field(default_factory=dict)

    def line(self, path: FieldPath) -> int | None:
        """The line of `path`, or of its nearest enclosing value that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get(())


@dataclass
class _Open:
    """A mapping or sequence whose end event has not come yet."""

    value: dict | list
    path: FieldPath
    anchor: str | None = None
    pending_key: str | None = None
    merging: bool = False  # the pending key is a plain <<, a merge key; a quoted '<<' is a field like any other
    merged: dict = field(default_factory=dict)


def load(text: str, name: str) -> Document:
    """Parse `text`; any problem becomes an AttnError carrying `name` and the line."""
    import yaml

    document = Document(data=None, name=name)
    try:
        _Builder(document).build(_counted_events(text))
    except AttnError as error:
        raise error.at(source=name) from None
    except yaml.reader.ReaderError as error:  # a character YAML does not allow, such as NUL
        line = text.count("\n", 0, error.position) + 1
        raise fail("yaml.syntax", problem=str(error).splitlines()[0]).at(source=name, line=line) from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        marked = mark.line + 1 if mark else None
        problem = (error.problem or error.context or "").strip()
        if "nesting depth" in problem:  # libyaml ≥ 0.2.6 scans ahead and stops very deep nesting before we count it
            raise fail("yaml.too_deep", limit=MAX_DEPTH).at(source=name, line=marked) from None
        raise fail("yaml.syntax", problem=problem).at(source=name, line=marked) from None
    except yaml.YAMLError as error:
        raise fail("yaml.syntax", problem=str(error).splitlines()[0]).at(source=name) from None
    return document


def _counted_events(text: str) -> Iterable[yaml.Event]:
    """The document's events, once they are counted: parsed once and kept when the text is small (a homework
    file), else counted in a lean first pass that keeps nothing, then parsed again as they are built."""
    import yaml

    parser = _yaml()[0]
    if len(text) > ONE_PASS_CHARS:
        collections.deque(_count_values(yaml.parse(text, Loader=parser)), maxlen=0)
        return yaml.parse(text, Loader=parser)
    loader = parser(text)
    try:
        return list(_count_values(iter(loader.get_event, None)))
    finally:
        loader.dispose()


def _count_values(events: Iterable[yaml.Event]) -> Iterator[yaml.Event]:
    """Each event as it comes, refusing a document nested deeper than MAX_DEPTH or of more than MAX_VALUES
    values, an alias counting as many values as it repeats.

    Building costs about 7 µs a value in Python; this pass does the least per event, so a refusal
    costs a fraction of building up to the limit (0.3 s instead of 1.7 s for 250,000 values).
    """
    import yaml

    counted = 0
    starts: list[tuple[str | None, int]] = []  # the anchor and the count at the start of each open collection
    sizes: dict[str, int] = {}  # anchor -> how many values it holds
    for event in events:
        kind = type(event)
        if kind is yaml.ScalarEvent:
            counted += 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            counted += 1
            starts.append((event.anchor, counted))
            if len(starts) > MAX_DEPTH:
                raise fail("yaml.too_deep", limit=MAX_DEPTH).at(line=event.start_mark.line + 1)
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            anchor, start = starts.pop()
            if anchor:
                sizes[anchor] = counted - start + 1
        elif kind is yaml.AliasEvent:
            counted += sizes.get(event.anchor, 0)  # an unknown anchor is the builder's to report
        if counted > MAX_VALUES:
            raise fail("yaml.too_large", limit=MAX_VALUES).at(line=event.start_mark.line + 1)
        yield event


class _Builder:
    """Builds `document` from PyYAML's flat event stream, checking tags and keys as they come.

    The document's depth and size have already been checked (`_count_values`), so no alias can make it
    grow past the budget. One loop with the common cases inline: a homework file is mostly scalars in rows.
    """

    def __init__(self, document: Document) -> None:
        self.document = document
        self.stack: list[_Open] = []
        self.anchors: dict[str, object] = {}
        self.documents = 0

    def build(self, events: Iterable[yaml.Event]) -> None:
        import yaml

        lines, texts, stack = self.document.lines, self.document.texts, self.stack
        scalar_event, alias_event = yaml.ScalarEvent, yaml.AliasEvent
        mapping_start, sequence_start = yaml.MappingStartEvent, yaml.SequenceStartEvent
        ends = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
        for event in events:
            kind = type(event)
            if kind is scalar_event:
                line = event.start_mark.line + 1
                tag = event.tag
                if tag is not None and tag != "!" and tag not in PLAIN_TAGS:
                    raise fail("yaml.tag", tag=tag).at(line=line)
                parent = stack[-1] if stack else None
                items = parent.value if parent is not None and type(parent.value) is list else None  # its list
                if items is None and parent is not None and parent.pending_key is None:
                    self.place(event.value, line)  # a key
                    parent.merging = event.value == "<<" and not event.style  # libyaml says "" for plain
                    continue
                path = (*parent.path, len(items)) if parent is not None and items is not None else self.child_path()
                lines[path] = line
                texts[path] = event.value
                value = _scalar(event, line)
                if event.anchor:
                    self.anchors[event.anchor] = value
                if items is not None:
                    items.append(value)
                else:
                    self.place(value, line)
            elif kind is mapping_start or kind is sequence_start:
                line = event.start_mark.line + 1
                _check_tag(event.tag, line)
                if self.awaiting_key():
                    raise fail("yaml.key_not_text").at(line=line)
                path = self.child_path()
                lines[path] = line
                stack.append(_Open({} if kind is mapping_start else [], path, anchor=event.anchor))
            elif kind in ends:
                self.close(event.start_mark.line + 1)
            elif kind is alias_event:
                self.alias(event, event.start_mark.line + 1)
            elif kind is yaml.DocumentStartEvent:
                self.documents += 1
                if self.documents > 1:
                    raise fail("yaml.several_documents").at(line=event.start_mark.line + 1)
        if self.document.data is None:
            raise fail("yaml.empty")

    def close(self, line: int) -> None:
        closed = self.stack.pop()
        if isinstance(closed.value, dict):
            for key, value in closed.merged.items():
                closed.value.setdefault(key, value)
        if closed.anchor:
            self.anchors[closed.anchor] = closed.value
        self.place(closed.value, line)

    def alias(self, event: yaml.AliasEvent, line: int) -> None:
        """A repeat of an anchored value, shared rather than copied (its values were counted again)."""
        if event.anchor not in self.anchors:
            raise fail("yaml.unknown_alias", name=event.anchor).at(line=line)
        value = self.anchors[event.anchor]
        if self.awaiting_key():
            raise fail("yaml.key_not_text").at(line=line)
        self.document.lines[self.child_path()] = line
        self.place(value, line)

    def awaiting_key(self) -> bool:
        return bool(self.stack) and isinstance(self.stack[-1].value, dict) and self.stack[-1].pending_key is None

    def child_path(self) -> FieldPath:
        """The path of the value that comes next: the next item of a list, or the value of the pending key."""
        if not self.stack:
            return ()
        parent = self.stack[-1]
        if isinstance(parent.value, list):
            return (*parent.path, len(parent.value))
        return (*parent.path, parent.pending_key or "")

    def place(self, value: object, line: int) -> None:
        """Put a finished value where it belongs: the document itself, a list's next item, a key, or its value."""
        if not self.stack:
            self.document.data = value
            return
        parent = self.stack[-1]
        if isinstance(parent.value, list):
            parent.value.append(value)
        elif parent.pending_key is None:
            if value in parent.value:
                raise fail("yaml.duplicate_key", name=value).at(line=line)
            parent.pending_key = str(value)
        else:
            key, parent.pending_key = parent.pending_key, None
            if parent.merging:
                parent.merging = False
                _merge(parent.merged, value, line)
            else:
                parent.value[key] = value


def _check_tag(tag: str | None, line: int) -> None:
    if tag is not None and tag != "!" and tag not in PLAIN_TAGS:
        raise fail("yaml.tag", tag=tag).at(line=line)


def _scalar(event: yaml.ScalarEvent, line: int) -> object:
    """The value of a scalar: text, or what its tag (written or resolved) says it is."""
    text = event.value
    tag = event.tag if event.tag not in (None, "!") else _implicit_tag(text, event.implicit[0])
    try:
        if tag == _INT:
            return _integer(text, line)
        if tag == _FLOAT:
            spelt = text if "n" not in text and "N" not in text else text.lower().replace(".inf", "inf")
            number = float(spelt.replace(".nan", "nan"))
            # 1e400 stays text, so the arithmetic reader reports the overflow with its field and row
            return text if math.isinf(number) and "inf" not in text.lower() else number
        if tag == _BOOL:
            return {"true": True, "false": False}[text.lower()]
    except (KeyError, ValueError):  # an explicit tag on the wrong text, such as `!!int ten`
        raise fail("yaml.bad_scalar", text=quote(text), tag=tag.rsplit(":", 1)[-1]).at(line=line) from None
    return None if tag == _NULL else text


@functools.lru_cache(maxsize=4096)
def _implicit_tag(text: str, plain: bool) -> str:
    """The tag the core schema gives an untagged scalar, kept: a class's files repeat the same numbers."""
    from yaml.nodes import ScalarNode

    return _yaml()[1].resolve(ScalarNode, text, (plain, not plain))


def _integer(text: str, line: int) -> int:
    digits = text.lstrip("+-").lower()
    if len(digits) > FLOAT_DIGITS:
        raise fail("expr.overflow", text=quote(text)).at(line=line)  # also keeps int() from its slow, limited path
    return int(text, {"0o": 8, "0x": 16}.get(digits[:2], 10))


def _merge(target: dict, source: object, line: int) -> None:
    """YAML merge keys (`<<: *defaults`): collect fields the mapping may not set itself."""
    sources = source if isinstance(source, list) else [source]
    for mapping in sources:
        if not isinstance(mapping, dict):
            raise fail("yaml.bad_merge").at(line=line)
        for key, value in mapping.items():
            target.setdefault(key, value)


def read(path: str) -> Document:
    """Read and parse a problem file, or standard input for '-'."""
    name = "<stdin>" if path == "-" else path
    return load(read_text(path), name)


def read_text(path: str, limit: int = MAX_BYTES, too_large: str = "input.too_large") -> str:
    """The UTF-8 text of the file `path` (standard input for '-'), its byte-order mark removed; a file past
    `limit` bytes is refused with the message `too_large` (its `limit` in MiB), one not UTF-8 with the line."""
    name = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            if sys.stdin is None:  # closed by the shell (`<&-`)
                raise OSError(errno.EBADF, os.strerror(errno.EBADF))
            raw = sys.stdin.buffer.read(limit + 1)
        else:
            with open(path, "rb") as handle:
                inputs.note(os.fstat(handle.fileno()), path)
                raw = handle.read(limit + 1)
    except OSError as error:
        raise fail("input.unreadable", reason=error.strerror or str(error)).at(source=name) from None
    if len(raw) > limit:
        raise fail(too_large, limit=limit // 2**20).at(source=name)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise fail("input.not_utf8", offset=error.start).at(source=name, line=line) from None
    return text.removeprefix("\ufeff")


def field_name(path: FieldPath) -> str:
    """A field path as a person reads it: ("heads", 0, "keys") -> heads[1].keys."""
    text = ""
    for part in path:
        text += f"[{part + 1}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def kind_of(value: object) -> Message:
    """What a value is, for messages that say what was found instead of what was expected."""
    if value is None:
        return phrase("kind.nothing")
    if isinstance(value, bool):
        return phrase("kind.boolean", value=str(value).lower())
    if isinstance(value, (int, float)):
        return phrase("kind.number", value=quote(value))
    if isinstance(value, str):
        return phrase("kind.text", value=quote(value, 30))
    if isinstance(value, list):
        return phrase("kind.list", count=len(value))
    return phrase("kind.mapping")


def finite_number(value: object) -> float:
    """A number field's value: a YAML number, or text read by the arithmetic evaluator; never NaN or infinite.

    The error carries no location: each reader adds the file, line and field it knows.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise fail("problem.not_number", got=kind_of(value))
    try:
        number = evaluate(value) if isinstance(value, str) else float(value)
    except OverflowError:  # an int beyond the floats' range
        raise fail("expr.overflow", text=quote(value)) from None
    if not math.isfinite(number):
        raise fail("expr.not_finite", text=quote(value))
    return number


def unknown_field(data: dict, known: Sequence[str]) -> str | None:
    """The first field of `data` that is not in `known`; fields starting with x- are the user's own."""
    return next((name for name in data if name not in known and not name.startswith("x-")), None)


def did_you_mean(name: str, known: Sequence[str]) -> Message | str:
    """A hint naming the closest of `known`, or "" when none is close."""
    import difflib  # only on this error path: it is slow to import

    close = difflib.get_close_matches(name, known, n=1)
    return phrase("hint.did_you_mean", name=close[0]) if close else ""


# Writing. Every text attncli puts into a YAML file goes through `scalar` or `comment`: neither can start a
# line of its own, so no name, title or folder can add a field (`a\nw_o: {file: /etc/passwd}`) or reach the
# terminal as an escape code when the file is shown.

_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_'-]*")
_YAML_WORDS = {"true", "false", "null", "yes", "no", "on", "off", "y", "n"}  # words some YAML reader takes for values


def scalar(text: str) -> str:
    """A YAML scalar that reads back as `text`: a bare word when that is safe, else double-quoted with every
    control character, line break, bidirectional control and surrogate escaped."""
    if _PLAIN.fullmatch(text) and text.lower() not in _YAML_WORDS:
        return text
    import json  # only a run that writes YAML needs it

    return json.dumps(text, ensure_ascii=False).translate(quoted_escapes())


def flow(items: Iterable[str]) -> str:
    """A YAML flow sequence of already written scalars: [a, b, c]."""
    return "[" + ", ".join(items) + "]"


def comment(text: str) -> str:
    """A one-line YAML comment: control characters and line breaks written as escapes (\\x1b, \\n)."""
    return f"# {printable(text)}"
