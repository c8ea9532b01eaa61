"""The house's size, guarded: a module past 600 lines splits along its sections, a function past 60 lines
along its steps — the catalogues of words and the two kernels' hot loops excepted, each named here with the
reason. Read from the source with `ast`."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import ROOT

PACKAGE = ROOT / "attncli"
MODULE_LINES, FUNCTION_LINES = 600, 60
CATALOGUES = ("i18n",)  # words, one entry a line: long by nature
# One loop over blocks of rows and tiles of keys each, kept whole so the arithmetic reads as the paper's.
KERNELS = {"kernel.py:attention", "kernel_backward.py:attention_backward"}


def modules() -> list[Path]:
    return [path for path in sorted(PACKAGE.rglob("*.py")) if not set(CATALOGUES) & set(path.parts)]


def functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_no_module_past_600_lines() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in modules() if (n := p.read_text().count("\n")) > MODULE_LINES}
    assert long == {}


def test_no_function_past_60_lines_outside_the_kernels() -> None:
    long = {
        f"{path.relative_to(PACKAGE)}:{node.name}": node.end_lineno - node.lineno + 1  # type: ignore[operator]
        for path in modules()
        for node in functions(path)
        if node.end_lineno - node.lineno + 1 > FUNCTION_LINES  # type: ignore[operator]
    }
    assert set(long) - KERNELS == set(), long
