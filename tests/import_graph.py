"""The project's import graph, read from the source (no module is imported), for the layout tests.

Every import counts, also one inside a function or under `if TYPE_CHECKING:`: an import hidden in a
function still makes a circle, it only moves the crash from import time to the first call.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Optional

ROOT = Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = ("components", "serve", "webui")


@dataclass(frozen=True)
class Import:
    """One import statement's target, where it is written, and whether it sits inside a function."""

    source: str  # the importing module, dotted
    target: str  # the imported module, dotted (a package's submodule when the name is one)
    line: int
    in_function: bool
    commented: bool  # the line, or the one above it, carries a comment (the reason it is late)


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Dotted name -> file, for every module of the packages under root."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            found[module_name(root, path)] = path
    return found


def _targets(node: ast.AST, known: dict[str, Path]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        for alias in node.names:
            submodule = f"{node.module}.{alias.name}"
            yield submodule if submodule in known else node.module


def _explained(lines: list[str], lineno: int) -> bool:
    """The import's line carries a comment, or the run of import lines it belongs to is directly
    under one (a comment that says why a block is imported late covers the block)."""
    if "#" in lines[lineno - 1]:
        return True
    index = lineno - 2
    while index >= 0 and lines[index].strip().startswith(("from ", "import ")):
        if "#" in lines[index]:
            return True
        index -= 1
    return index >= 0 and lines[index].strip().startswith("#")


def _function_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def imports(root: Path, packages: Iterable[str] = PROJECT_PACKAGES) -> list[Import]:
    """Every import statement in the packages, with its dotted target."""
    known = modules(root, packages)
    found: list[Import] = []
    for name, path in known.items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        tree = ast.parse(text, filename=str(path))
        in_functions = _function_lines(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            commented = _explained(lines, node.lineno)
            for target in _targets(node, known):
                found.append(Import(name, target, node.lineno, node.lineno in in_functions, commented))
    return found


def cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted: the circles."""
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
        graph.setdefault(target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def project_edges(found: Iterable[Import], prefixes: tuple[str, ...] = PROJECT_PACKAGES) -> list[tuple[str, str]]:
    """Module -> module edges between the project's own modules. A package's empty `__init__` is
    left out: `from components.config import spec` names the submodule, not a module the package
    imports back."""
    return [(i.source, i.target) for i in found
            if i.target.split(".")[0] in prefixes and i.source != i.target]


def long_functions(path: Path, limit: int) -> Iterator[tuple[str, int, int]]:
    """(name, first line, length) of each function longer than `limit` lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > limit:
                yield node.name, node.lineno, length


def layer_of(module: str) -> Optional[str]:
    """`components.plan.topology` -> 'plan'; a module directly under components/ has none."""
    parts = module.split(".")
    return parts[1] if parts[0] == "components" and len(parts) > 2 else None
