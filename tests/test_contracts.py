"""The house's shape, guarded: which module may import which, read from the source with `ast`.

Every `import` and `from ... import` counts, at module level and inside functions alike (a lazy
import is still an import); only those under `if TYPE_CHECKING:` do not, since they never run.
No circle of imports; the library below the command line (grading, the tutor, exercises, the
core, the kernels, the gradebook, the backward pass, tiles, softmax, cost) never reaches the
renderers or the command line, not even through another module; nothing imports the program's
entry point; and the rounding rule is written in one file.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from tests.paths import ROOT

PACKAGE = ROOT / "attncli"
# The library the command line and the renderers are clients of: none of it may import them.
LIBRARY = (
    "attncli.grading",
    "attncli.practice",
    "attncli.exercises",
    "attncli.core",
    "attncli.kernel",
    "attncli.kernel_backward",
    "attncli.kernel_threads",
    "attncli.gradebook",
    "attncli.backward",
    "attncli.tiles",
    "attncli.softmax",
    "attncli.cost",
    "attncli.written",
)
CLIENTS = ("attncli.render", "attncli.cli")
RULE = PACKAGE / "grading" / "rule.py"  # part A of issue 24 writes the rounding rule there


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _type_only(tree: ast.Module) -> set[int]:
    """The ids of the nodes inside `if TYPE_CHECKING:` blocks."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


def imported(name: str) -> set[str]:
    """The modules of attncli that module `name` imports, wherever in it (a name imported from a package is the
    package's, unless it is a module of its own)."""
    path = modules()[name]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_only(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found.update(
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules() else base for alias in node.names
            )
    return {module for module in found if module in modules() and module != name}


@cache
def graph() -> dict[str, frozenset[str]]:
    return {name: frozenset(imported(name)) for name in modules()}


def reached(name: str) -> set[str]:
    """Every module `name` imports, directly or through others."""
    seen: set[str] = set()
    waiting = [name]
    while waiting:
        for module in graph()[waiting.pop()]:
            if module not in seen:
                seen.add(module)
                waiting.append(module)
    return seen


def circles() -> Iterator[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each a circle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(module: str) -> Iterator[list[str]]:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in sorted(graph()[module]):
            if other not in index:
                yield from visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == module:
                    break
            if len(component) > 1:
                yield sorted(component)

    for module in sorted(graph()):
        if module not in index:
            yield from visit(module)


def test_the_graph_sees_lazy_imports_and_leaves_type_only_ones_out() -> None:
    """The reader is checked on modules whose imports are known: a function-level import counts (launch imports
    the command line inside main), a TYPE_CHECKING one does not (core names the backward pass's types only)."""
    assert "attncli.cli" in graph()["attncli.launch"]
    assert "attncli.cli.ending" in graph()["attncli.launch"]
    assert "attncli.backward" not in graph()["attncli.core"]
    assert {"attncli.parsing.problem_file", "attncli.parsing.layers"} <= graph()["attncli.parsing"]


def test_no_module_imports_itself_back_through_others() -> None:
    assert list(circles()) == []


@pytest.mark.parametrize("library", LIBRARY)
def test_the_library_never_reaches_the_renderers_or_the_command_line(library: str) -> None:
    members = [name for name in modules() if name == library or name.startswith(f"{library}.")]
    assert members, f"{library} is not a module of attncli"
    for name in members:
        clients = sorted(module for module in reached(name) if module.startswith(CLIENTS))
        assert clients == [], f"{name} reaches {clients}"


def test_nothing_imports_the_programs_entry_point_and_only_it_reaches_up_to_the_command_line() -> None:
    """launch.py is the top: the exit ladder it used to hold lives in cli/ending.py, so no import runs back up."""
    importers = sorted(name for name, imports in graph().items() if "attncli.launch" in imports)
    assert importers == ["attncli.__main__"]
    above = sorted(name for name, imports in graph().items() if any(m.startswith("attncli.cli") for m in imports))
    assert [name for name in above if not name.startswith("attncli.cli")] == ["attncli.launch"]


def _names_decimals(node: ast.expr) -> bool:
    """`x.decimals` or a plain `decimals`: the count of a written number's decimals."""
    return (isinstance(node, ast.Attribute) and node.attr == "decimals") or (
        isinstance(node, ast.Name) and node.id == "decimals"
    )


def _half_units(path: Path) -> list[int]:
    """The lines where `path` writes half a unit of a written number's last decimal: 0.5 * 10.0 ** -x.decimals."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Mult)
            and isinstance(node.right, ast.BinOp)
            and isinstance(node.right.op, ast.Pow)
            and isinstance(node.right.right, ast.UnaryOp)
            and _names_decimals(node.right.right.operand)
        ):
            lines.append(node.lineno)
    return lines


def test_the_half_unit_reader_finds_the_rule_where_it_is_written(tmp_path: Path) -> None:
    written = tmp_path / "rule.py"
    written.write_text(
        "def radius(entry):\n    return 0.5 * 10.0**-entry.decimals\n\nhalf = 0.5 * 10.0**-carry\n"
        "def half_unit(decimals):\n    return 0.5 * 10.0**-decimals\n"
    )
    assert _half_units(written) == [2, 6]  # a written number's half unit; a rounding to `carry` decimals is not one


@pytest.mark.skipif(not RULE.exists(), reason="grading/rule.py comes with part A of issue 24")
def test_the_rounding_rule_is_written_in_one_file() -> None:
    """Half a unit of the last written decimal, widened by carried rounding: grading/rule.py alone says so. The
    tutor and the layers' grading judge through it, and keep no rule of their own."""
    elsewhere = {str(path.relative_to(ROOT)): _half_units(path) for path in modules().values() if path != RULE}
    assert {name: lines for name, lines in elsewhere.items() if lines} == {}
    assert _half_units(RULE)
    rules = [
        f"{module_name(path)}.{node.name}"
        for path in modules().values()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.name in ("Rule", "_Rule")
    ]
    assert rules == ["attncli.grading.rule.Rule"]
    session = ast.parse((PACKAGE / "practice" / "session.py").read_text(encoding="utf-8"))
    own = {node.name for node in ast.walk(session) if isinstance(node, ast.FunctionDef)}
    assert own.isdisjoint({"agrees", "radius", "_order"})


def test_only_the_renderers_the_command_line_and_the_plan_import_them() -> None:
    """The README's layout says so: everything else in attncli is library, below them."""
    clients = (*CLIENTS, "attncli.plan", "attncli.launch")
    importers = sorted(
        name
        for name, imports in graph().items()
        if any(module.startswith(CLIENTS) for module in imports) and not name.startswith(clients)
    )
    assert importers == []
