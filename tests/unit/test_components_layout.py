"""components/ in the layers the README draws (issue 28 §1), held from the source.

config -> plan -> render -> {changes, stack} -> preflight: a module imports only its own layer and
the ones its layer may (LAYERS); only components/stack/ imports pulumi (the web app's engines use the
Automation API, which is theirs); nothing in components/, serve/ or webui/ imports in a circle, also
not through an import inside a function; an import of the project's own modules inside a function
says why in a comment; no module passes MAX_MODULE_LINES and no function MAX_FUNCTION_LINES.

Each rule also runs against a small planted tree (tmp_path) that breaks it, so a checker that stopped
seeing a violation would turn red too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.import_graph import ROOT, Import, cycles, imports, layer_of, long_functions, modules, project_edges

# What each layer may import of components/ (its own layer included).
LAYERS: dict[str, frozenset[str]] = {
    "config": frozenset({"config"}),
    "plan": frozenset({"config", "plan"}),
    "render": frozenset({"config", "plan", "render"}),
    "changes": frozenset({"config", "plan", "render", "changes"}),
    "stack": frozenset({"config", "plan", "render", "stack"}),
    "preflight": frozenset({"config", "plan", "render", "changes", "preflight"}),
}
# Only these may import pulumi or a provider package (pulumi_aws, pulumi_eks, ...).
PULUMI_HOMES = ("components.stack", "webui.engines")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80
CHECKED = ("components", "serve", "webui")


def is_entry_point(module: str) -> bool:
    """`python -m components.plan` and friends: a command sits above every layer it runs."""
    return module.endswith(".__main__")


def upward_imports(found: list[Import]) -> list[str]:
    wrong = []
    for imp in found:
        source, target = layer_of(imp.source), layer_of(imp.target)
        if imp.source.startswith("components.") and not is_entry_point(imp.source) and (
                source is None or target is None and imp.target.startswith("components")
                or target is not None and target not in LAYERS.get(source, frozenset())):
            wrong.append(f"{imp.source}:{imp.line} imports {imp.target}")
    return wrong


def pulumi_outside_stack(found: list[Import]) -> list[str]:
    return [f"{imp.source}:{imp.line} imports {imp.target}" for imp in found
            if imp.target.split(".")[0].startswith("pulumi")
            and not any(imp.source == home or imp.source.startswith(home + ".") for home in PULUMI_HOMES)]


def unexplained_late_imports(found: list[Import]) -> list[str]:
    return [f"{imp.source}:{imp.line} imports {imp.target}" for imp in found
            if imp.in_function and not imp.commented and imp.target.split(".")[0] in CHECKED]


def oversized(root: Path) -> list[str]:
    found = []
    for name, path in modules(root, CHECKED).items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            found.append(f"{name}: {lines} lines")
        found += [f"{name}:{line} {function}(): {length} lines"
                  for function, line, length in long_functions(path, MAX_FUNCTION_LINES)]
    return found


@pytest.fixture(scope="module")
def project_imports() -> list[Import]:
    return imports(ROOT, CHECKED)


def test_every_module_of_components_sits_in_a_layer():
    loose = sorted(name for name in modules(ROOT, ["components"])
                   if name != "components" and layer_of(name) is None and name.count(".") == 1
                   and name.split(".")[1] not in LAYERS)
    assert loose == [], "put it in the layer whose job it does (components/<layer>/__init__.py says)"


def test_each_layer_says_what_lives_there_and_what_it_may_import():
    for layer in LAYERS:
        docstring = (ROOT / "components" / layer / "__init__.py").read_text(encoding="utf-8")
        assert docstring.startswith('"""') and "import" in docstring, f"components/{layer}/__init__.py"


def test_no_layer_imports_a_layer_above_it(project_imports):
    assert upward_imports(project_imports) == []


def test_only_the_stack_imports_pulumi(project_imports):
    assert pulumi_outside_stack(project_imports) == []


def test_no_import_circle_in_components_serve_or_webui(project_imports):
    assert cycles(project_edges(project_imports)) == []


def test_an_import_inside_a_function_says_why(project_imports):
    assert unexplained_late_imports(project_imports) == [], (
        "move it to the top, or say in a comment why it cannot be there (a heavy optional dependency)")


def test_no_module_or_function_is_doing_several_jobs():
    assert oversized(ROOT) == []


# The planted trees: each rule must see its violation.

def _tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for package in {p.parent for p in root.rglob("*.py")}:
        if package != root and not (package / "__init__.py").exists():
            (package / "__init__.py").write_text('"""planted"""\n', encoding="utf-8")
    return root


def test_a_planted_upward_import_is_seen(tmp_path):
    root = _tree(tmp_path, {
        "components/plan/topology.py": "from components.render.rayservice import render\n",
        "components/render/rayservice.py": "def render(): ...\n",
        "components/plan/__main__.py": "from components.stack.program import main\n",  # entry point: fine
        "components/stack/program.py": "def main(): ...\n",
    })
    assert upward_imports(imports(root, ["components"])) == [
        "components.plan.topology:1 imports components.render.rayservice"]


def test_a_planted_pulumi_import_outside_the_stack_is_seen(tmp_path):
    root = _tree(tmp_path, {
        "components/render/model_access.py": "import pulumi\n",
        "components/stack/cluster.py": "import pulumi_eks as eks\n",
        "serve/verify.py": "def f():\n    from pulumi import automation  # why: planted\n",
    })
    assert pulumi_outside_stack(imports(root, CHECKED)) == [
        "components.render.model_access:1 imports pulumi", "serve.verify:2 imports pulumi"]


def test_a_planted_circle_behind_a_function_level_import_is_seen(tmp_path):
    root = _tree(tmp_path, {
        "components/changes/assess.py": "from components.changes.effects import Effect\n",
        "components/changes/effects.py": (
            "def f():\n    from components.changes.assess import assess\n    return assess\n"),
    })
    found = imports(root, ["components"])
    assert cycles(project_edges(found)) == [["components.changes.assess", "components.changes.effects"]]
    assert unexplained_late_imports(found) == [
        "components.changes.effects:2 imports components.changes.assess"]


def test_planted_long_module_and_function_are_seen(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    root = _tree(tmp_path, {
        "webui/big.py": "def long():\n" + body + "\n" * (MAX_MODULE_LINES - MAX_FUNCTION_LINES),
    })
    assert oversized(root) == [
        f"webui.big: {MAX_MODULE_LINES + 1} lines", f"webui.big:1 long(): {MAX_FUNCTION_LINES + 1} lines"]
