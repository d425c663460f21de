"""Every `python -m` command the README, docs/, the Makefile, CI and the code name still runs.

Modules move (issue 28 moved all of components/); a command in a newcomer's copy-paste must not.
The list is read from those files, so a command added to the docs is checked without editing this
test, and each one must answer `--help` with its usage and exit 0.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.import_graph import ROOT

NAMING_FILES = [ROOT / "README.md", ROOT / "Makefile", *sorted((ROOT / "docs").glob("*.md")),
                *sorted((ROOT / ".ci").iterdir()), *sorted((ROOT / "scripts").iterdir()),
                *sorted(p for package in ("components", "serve", "webui") for p in (ROOT / package).rglob("*.py"))]
# Commands of the tools rather than ours (pytest, venv), and the test-fixture recorders under tests/.
NOT_OURS = ("pytest", "venv", "pip", "tests.")
_COMMAND = re.compile(r"""python3? -m ([a-z_][a-z_.]*)|["']-m["'],\s*["']([a-z_][a-z_.]*)["']""")


def named_commands() -> list[str]:
    found = set()
    for path in NAMING_FILES:
        if path.is_file():
            for match in _COMMAND.finditer(path.read_text(encoding="utf-8", errors="replace")):
                module = match.group(1) or match.group(2)
                if not module.startswith(NOT_OURS):
                    found.add(module.rstrip("."))
    return sorted(found)


def test_the_commands_are_found_where_newcomers_read_them():
    assert {"components.plan", "components.preflight", "serve.verify", "serve.benchmark", "webui"} <= set(
        named_commands())


@pytest.mark.slow
@pytest.mark.parametrize("module", named_commands())
def test_each_named_command_answers_help(module):
    result = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=600)  # a hang guard, not a speed bound
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage" in result.stdout.lower(), result.stdout[:500]
