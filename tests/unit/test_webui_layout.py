"""The web app's layering, checked from its source (issue 16 §4): views reach deployments and jobs
through `app.service` (webui/deployments) and `app.reads`, never the store; no import circle hides
behind an import inside a function; webui/service.py and webui/jobstate.py stay split up, and no
module of webui/deployments/, webui/store/ (one module per table's rows) or webui/pages/ (one per part
of the site) grows past MAX_LINES."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WEBUI = Path(__file__).resolve().parents[2] / "webui"
VIEWS = ("api.py", *sorted(str(path.relative_to(WEBUI)) for path in (WEBUI / "pages").glob("*.py")))
# Split up in issue 16 §4: the deployments package holds what they held.
GONE = ("service.py", "jobstate.py", "store.py", "pages.py")  # the last two: now packages
SPLIT_PACKAGES = ("deployments", "store", "pages")
MAX_LINES = 320  # a module of a split package longer than this is doing two jobs again


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


def gone_modules(root: Path) -> list[str]:
    return [name for name in GONE if (root / name).exists()]


def long_modules(package: Path, limit: int = MAX_LINES) -> list[str]:
    """Modules of `package` over `limit` lines."""
    found = []
    for path in sorted(package.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found.append(f"{path.relative_to(package)}: {lines} lines")
    return found


def test_the_old_service_and_jobstate_modules_stay_gone():
    assert gone_modules(WEBUI) == [], "their code lives in packages now (no shim modules)"


@pytest.mark.parametrize("package", SPLIT_PACKAGES)
def test_no_module_of_a_split_package_grows_past_the_limit(package):
    assert long_modules(WEBUI / package) == [], f"split it: no module over {MAX_LINES} lines"


def test_the_checks_find_a_planted_store_call_and_late_import(tmp_path):
    (tmp_path / "pages.py").write_text("def view(app):\n    from webui.store import Store\n"
                                       "    return app.store.get_job(1)\n")
    assert store_uses(tmp_path, "pages.py") == ["line 2: import webui.store", "line 3: .store"]
    assert late_imports(tmp_path) == ["pages.py:2 webui.store"]


def test_the_checks_find_a_planted_old_module_and_a_long_one(tmp_path):
    (tmp_path / "service.py").write_text("")
    (tmp_path / "deployments").mkdir()
    (tmp_path / "deployments" / "big.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert gone_modules(tmp_path) == ["service.py"]
    assert long_modules(tmp_path / "deployments") == [f"big.py: {MAX_LINES + 1} lines"]
