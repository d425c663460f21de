"""The web app's layering, checked from its source (issue 16 §4): views reach deployments and jobs
through the service and `app.reads`, never the store; no import circle hides behind an import
inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WEBUI = Path(__file__).resolve().parents[2] / "webui"
VIEWS = ("pages.py", "api.py")


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return []


def store_uses(root: Path, view: str) -> list[str]:
    """Where a view imports the store (or its tables) or reaches for `.store`."""
    tree = ast.parse((root / view).read_text(encoding="utf-8"), filename=view)
    found = [f"line {node.lineno}: import {module}" for node in ast.walk(tree)
             for module in _imported(node) if module in ("webui.store", "webui.db")]
    return found + [f"line {node.lineno}: .{node.attr}" for node in ast.walk(tree)
                    if isinstance(node, ast.Attribute) and node.attr in ("store", "_store")]


def late_imports(root: Path) -> list[str]:
    """Imports of webui modules inside functions, anywhere under `root`."""
    late = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for function in ast.walk(tree):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                late += [f"{path.relative_to(root)}:{node.lineno} {module}" for node in ast.walk(function)
                         for module in _imported(node) if module.startswith("webui")]
    return late


@pytest.mark.parametrize("view", VIEWS)
def test_a_view_never_imports_or_holds_the_store(view):
    assert store_uses(WEBUI, view) == [], "ask the service or app.reads (webui/deployments/reads.py)"


def test_no_webui_module_imports_another_inside_a_function():
    assert late_imports(WEBUI) == [], "an import inside a function hides a circle; move what both need"


def test_the_checks_find_a_planted_store_call_and_late_import(tmp_path):
    (tmp_path / "pages.py").write_text("def view(app):\n    from webui.store import Store\n"
                                       "    return app.store.get_job(1)\n")
    assert store_uses(tmp_path, "pages.py") == ["line 2: import webui.store", "line 3: .store"]
    assert late_imports(tmp_path) == ["pages.py:2 webui.store"]
