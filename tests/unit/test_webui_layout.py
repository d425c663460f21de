"""The web app's layering, checked from its source (issue 16 §4): views reach deployments and jobs
through `app.service` (webui/deployments) and `app.reads`, never the store; no import circle hides
behind an import inside a function; webui/service.py and webui/jobstate.py stay split up, and no
module of webui/deployments/, webui/store/ (one module per table's rows), webui/pages/ or webui/api/
(one per part of the site) grows past MAX_LINES. The bottom layers (issue 28 §1): webui/store/ and
webui/engines/ import their own package and the foundation under both (FOUNDATION), never what is
built on them. The size of every module and function of webui/ (with components/ and serve/) is held
in one place, tests/unit/test_components_layout.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WEBUI = Path(__file__).resolve().parents[2] / "webui"
VIEWS = tuple(sorted(str(path.relative_to(WEBUI)) for folder in ("api", "pages")
                     for path in (WEBUI / folder).glob("*.py")))
# Split up in issue 16 §4: the deployments package holds what they held.
GONE = ("service.py", "jobstate.py", "store.py", "pages.py", "api.py")  # the last three: now packages
SPLIT_PACKAGES = ("deployments", "store", "pages", "api")
MAX_LINES = 320  # a module of a split package longer than this is doing two jobs again
# The store and the engines sit at the bottom: the deployments service, the job runner, the views and
# the app are built on them. They may import their own package and these modules, which import only
# each other, so nothing from above comes in through them either.
BOTTOM_PACKAGES = ("store", "engines")
FOUNDATION = ("webui.status", "webui.redact", "webui.db", "webui.settings", "webui.resource_steps")


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        if node.module == "webui":  # `from webui import db` imports the module webui.db
            return [f"webui.{alias.name}" for alias in node.names]
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


def _webui_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [(node.lineno, module) for node in ast.walk(tree) for module in _imported(node)
            if module == "webui" or module.startswith("webui.")]


def upward_imports(root: Path, package: str) -> list[str]:
    """Where a module of a bottom package imports a webui module that is neither its own package's
    nor the foundation's."""
    own = f"webui.{package}"
    return [f"{path.relative_to(root)}:{line} {module}" for path in sorted((root / package).rglob("*.py"))
            for line, module in _webui_imports(path)
            if module != own and not module.startswith(f"{own}.") and module not in FOUNDATION]


def foundation_imports(root: Path) -> list[str]:
    """Where a foundation module imports a webui module from outside the foundation."""
    return [f"{module}:{line} {imported}" for module in FOUNDATION
            for line, imported in _webui_imports(root / f"{module.removeprefix('webui.')}.py")
            if imported not in FOUNDATION]


@pytest.mark.parametrize("package", BOTTOM_PACKAGES)
def test_the_store_and_the_engines_import_nothing_built_on_them(package):
    assert upward_imports(WEBUI, package) == [], (
        "move what both need below (webui/status.py: the status words; webui/store/records.py: rows)")


def test_the_foundation_under_the_store_and_the_engines_imports_only_itself():
    assert foundation_imports(WEBUI) == [], "the store and the engines would import it through them"


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


def test_the_checks_find_a_planted_upward_import(tmp_path):
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "jobs.py").write_text(
        "from webui import db\nfrom webui.store.base import StoreBase\nfrom webui.status import JobStatus\n"
        "from webui.deployments.lifecycle import Standing\nfrom webui import jobs\n")
    for module in FOUNDATION:
        (tmp_path / f"{module.removeprefix('webui.')}.py").write_text("")
    (tmp_path / "status.py").write_text("from webui.redact import redact\nfrom webui.deployments import views\n")
    assert upward_imports(tmp_path, "store") == ["store/jobs.py:4 webui.deployments.lifecycle",
                                                 "store/jobs.py:5 webui.jobs"]
    assert foundation_imports(tmp_path) == ["webui.status:2 webui.deployments"]
