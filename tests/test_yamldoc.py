"""Reading problem files: where each value sits, and the YAML that must be refused before it costs anything."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from attncli import pipeline, yamldoc
from attncli.errors import AttnError
from attncli.i18n import describe

BANK = """\
title: bank
tokens: [fisherman, net, bank]
query_tokens: [bank]
queries:
  bank: [sqrt(2), 0]
keys:
  - [2, 0]
  - [1, 1]
  - [0, 1]
values: [[2, 0], [0, 2], [1, 1]]
"""


def load_error(text: str) -> AttnError:
    with pytest.raises(AttnError) as caught:
        yamldoc.load(text, "p.yaml")
    assert caught.value.where.source == "p.yaml"
    return caught.value


def parse_error(text: str) -> AttnError:
    with pytest.raises(AttnError) as caught:
        pipeline.load(text=text, name="p.yaml")
    return caught.value


def test_every_value_knows_its_line() -> None:
    document = yamldoc.load(BANK, "bank.yaml")
    assert document.line(("title",)) == 1
    assert document.line(("queries", "bank")) == 5
    assert document.line(("queries", "bank", 1)) == 5
    assert document.line(("keys", 2)) == 9
    assert document.line(("keys", 2, 0)) == 9
    assert document.line(("values", 1)) == 10
    assert document.line(("nowhere", 3)) == 1  # a path the file lacks falls back to the enclosing mapping


def test_a_bad_row_is_reported_at_its_own_line() -> None:
    error = parse_error(BANK.replace("  - [0, 1]", "  - [0, 1, 5]"))
    assert (error.where.source, error.where.line) == ("p.yaml", 9)
    assert error.key == "problem.row_width"
    assert describe(error).startswith("p.yaml:9: keys, row 3 (bank): ")


def test_a_bad_number_is_reported_at_its_line() -> None:
    error = parse_error(BANK.replace("[1, 1]\n  - [0, 1]", "[1, 1]\n  - [0, sqrt(-1)]"))
    assert error.where.line == 9
    assert error.key == "expr.domain"


def test_what_was_found_instead_is_told_briefly() -> None:
    """A message says what it found, shortened like any quoted text: never a 300-digit number."""
    error = parse_error(BANK.replace("tokens: [fisherman, net, bank]", f"tokens: {'9' * 300}"))
    assert error.key == "problem.not_token_list"
    assert "9" * 50 not in str(error.params["got"])


def test_an_unknown_field_is_reported_at_its_line_with_a_suggestion() -> None:
    error = parse_error(BANK + "keyz: 1\n")
    assert error.where.line == 11
    assert error.key == "problem.unknown_field"
    assert describe(error) == "p.yaml:11: keyz: unknown field 'keyz'; did you mean 'keys'?"


def test_syntax_errors_carry_the_line() -> None:
    error = load_error("tokens: [a, b]\nkeys: [[1, 2]\nvalues: [[1]]\n")
    assert error.key == "yaml.syntax"
    assert error.where.line in (2, 3)


@pytest.mark.parametrize(
    "text",
    [
        "a: !!python/object/apply:os.system ['echo pwned']\n",
        "!!python/object/apply:os.system ['echo pwned']\n",
        "a: !!python/name:os.system\n",
        "a: !!python/object/new:builtins.print [pwned]\n",
        "a: [1, !!python/tuple [1, 2]]\n",
        "a: !!binary aGVsbG8=\n",
        "a: !custom 1\n",
        "? !!python/object/apply:builtins.print [pwned]\n: 1\n",
    ],
)
def test_tags_are_refused_before_anything_is_built(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    error = load_error(text)
    assert error.key == "yaml.tag"
    assert error.where.line == 1
    assert "pwned" not in capsys.readouterr().out


def test_the_plain_tags_are_allowed() -> None:
    assert yamldoc.load("a: !!str 1\nb: !!float 2\n", "p.yaml").data == {"a": "1", "b": 2.0}


def test_an_alias_bomb_is_refused_quickly() -> None:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 10):
        name, previous = chr(ord("a") + level), chr(ord("a") + level - 1)
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    start = time.perf_counter()
    error = load_error("\n".join(lines) + "\n")
    assert error.key == "yaml.too_large"
    assert error.where.line is not None
    assert time.perf_counter() - start < 1.0


def test_a_few_aliases_are_fine() -> None:
    document = yamldoc.load("x-row: &row [1, 2]\nkeys: [*row, *row]\n", "p.yaml")
    assert document.data["keys"] == [[1, 2], [1, 2]]


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,
        "{a: " * 5_000 + "1" + "}" * 5_000,
        "a:\n" + "".join("  " * depth + "-\n" for depth in range(1, 200)),
    ],
)
def test_deep_nesting_is_refused_quickly(text: str) -> None:
    start = time.perf_counter()
    error = load_error(text)
    assert error.key == "yaml.too_deep"
    assert error.params == {"limit": yamldoc.MAX_DEPTH}
    assert time.perf_counter() - start < 2.0


def test_nesting_up_to_the_limit_is_fine() -> None:
    depth = yamldoc.MAX_DEPTH
    assert yamldoc.load("[" * depth + "1" + "]" * depth, "p.yaml").data is not None


@pytest.mark.parametrize(
    ("text", "line"), [("a: 1\nb: 2\na: 3\n", 3), ("{a: 1, a: 2}\n", 1), ("m:\n  k: 1\n  k: 2\n", 3)]
)
def test_duplicate_keys_are_errors(text: str, line: int) -> None:
    error = load_error(text)
    assert error.key == "yaml.duplicate_key"
    assert error.where.line == line


def test_merge_keys_fill_in_what_the_mapping_does_not_set() -> None:
    text = "x-base: &base {score: dot, mask: causal}\nproblem:\n  <<: *base\n  mask: none\n"
    assert yamldoc.load(text, "p.yaml").data["problem"] == {"score": "dot", "mask": "none"}


def test_merge_keys_take_a_list_of_mappings_first_one_wins() -> None:
    text = "m:\n  <<: [{a: 1}, {a: 2, b: 3}]\n"
    assert yamldoc.load(text, "p.yaml").data["m"] == {"a": 1, "b": 3}


def test_a_merge_key_must_name_a_mapping() -> None:
    assert load_error("m:\n  <<: 1\n").key == "yaml.bad_merge"


def test_merge_keys_work_in_a_problem() -> None:
    text = "x-shared: &shared\n  tokens: [a, b]\n  values: [[1], [2]]\n<<: *shared\nscores: [[0, 0], [1, 0]]\n"
    parsed = pipeline.load(text=text, name="p.yaml")
    assert parsed.tokens == ("a", "b")
    assert parsed.heads[0].values.tolist() == [[1.0], [2.0]]


def test_on_no_yes_stay_words() -> None:
    """YAML 1.1 would read these tokens as booleans; a sentence needs them as words."""
    data = yamldoc.load("tokens: [on, no, yes, off, y, n, On, NO]\nflag: true\nother: False\n", "p.yaml").data
    assert data["tokens"] == ["on", "no", "yes", "off", "y", "n", "On", "NO"]
    assert data["flag"] is True and data["other"] is False


def test_on_no_yes_work_as_token_names_in_a_problem() -> None:
    text = (
        "tokens: [yes, no, on]\nqueries: {yes: [1], no: [0], on: [1]}\nkeys: [[1], [0], [1]]\nvalues: [[1], [2], [3]]"
    )
    parsed = pipeline.load(text=text, name="p.yaml")
    assert parsed.tokens == ("yes", "no", "on")
    assert parsed.query_tokens == ("yes", "no", "on")


def test_one_document_per_file() -> None:
    error = load_error("a: 1\n---\nb: 2\n")
    assert error.key == "yaml.several_documents"
    assert error.where.line == 2


@pytest.mark.parametrize("text", ["", "# only a comment\n", "null\n"])
def test_an_empty_document_is_an_error(text: str) -> None:
    assert load_error(text).key == "yaml.empty"


def test_an_alias_must_follow_its_anchor() -> None:
    error = load_error("a: *nothing\n")
    assert error.key == "yaml.unknown_alias"


def test_keys_must_be_words() -> None:
    assert load_error("? [1, 2]\n: 3\n").key == "yaml.key_not_text"


def write(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "p.yaml"
    path.write_bytes(data)
    return str(path)


def test_non_utf8_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, b"tokens: [a]\nvalues: [[1]]\ntitle: caf\xe9\n")  # Latin-1 é
    with pytest.raises(AttnError) as caught:
        yamldoc.read(path)
    assert caught.value.key == "input.not_utf8"
    assert (caught.value.where.source, caught.value.where.line) == (path, 3)


def test_utf16_is_not_utf8(tmp_path: Path) -> None:
    path = write(tmp_path, "tokens: [a]\n".encode("utf-16"))
    with pytest.raises(AttnError) as caught:
        yamldoc.read(path)
    assert caught.value.key == "input.not_utf8"


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, "\ufefftokens: [café]\n".encode())
    assert yamldoc.read(path).data == {"tokens": ["café"]}


def test_a_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(AttnError) as caught:
        yamldoc.read(str(tmp_path / "absent.yaml"))
    assert caught.value.key == "input.unreadable"


def test_json_is_read_as_yaml() -> None:
    document = yamldoc.load('{"tokens": ["a", "b"], "scores": [[1, 2]], "values": [[1], [2]]}', "p.json")
    assert document.data["scores"] == [[1, 2]]
