"""Who handed a homework in: its `student:` (a name) and `student_id:` (the value of the class list's match column,
such as a login), read once at the edge into a `Student`.

A template carries both, blank, for the student to fill in; a file may also leave them out. A gradebook then knows
a file by whom it belongs to, not by its path (attncli.gradebook.roster matches `student_id` to the class list).
An id is kept as it was written: `student_id: 00123` is 00123, not the number 123 (YAML's reading of it).
"""

from __future__ import annotations

from dataclasses import dataclass

from attncli.parsing.fields import MAX_NAME, FieldReader
from attncli.yamldoc import Document, kind_of

FIELDS = ("student", "student_id")


@dataclass(frozen=True)
class Student:
    """A file's student, as it says; None for a field left out or blank."""

    name: str | None = None
    id: str | None = None


def read_student(document: Document) -> Student:
    """The validated `student:` and `student_id:` of a homework: text (a number's as written), no control
    character, at most MAX_NAME characters; blank or null is None."""
    data = document.data if isinstance(document.data, dict) else {}
    reader = FieldReader(document)
    return Student(*(_field(reader, data, name) for name in FIELDS))


def _field(reader: FieldReader, data: dict, name: str) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, (dict, list, bool)):
        raise reader.error((name,), "check.bad_student", got=kind_of(value))
    text = reader.text_of((name,), value).strip()
    if len(text) > MAX_NAME:
        raise reader.error((name,), "check.student_too_long", length=len(text), limit=MAX_NAME)
    return reader.plain_text((name,), text) or None
