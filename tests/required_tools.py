"""Tools without which a test means nothing: Debian's promtool and prometheus, chromium (driven
through Playwright) and the PostgreSQL server. A test that needs one and does not find it FAILS,
naming the tool and how to get it: a skipped PromQL or browser test proves nothing, and a run whose
skips nobody reads looks green. `make test` installs them first where it can (scripts/ensure-*).

Skipping on purpose is a different thing, and stays: RAYPD_SKIP_REAL_VLLM=1 skips tests/real
(tests/real/locate.py), which also skip while their own venv has not been built.
"""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn, Optional

import pytest


def tool_missing(tool: str, why: str, how: str) -> NoReturn:
    pytest.fail(f"{tool} is required here and {why}: {how}. Tests that need it fail without it rather "
                "than skip, so a run without it is never green", pytrace=False)


def need_on_path(found: Optional[str], tool: str, ensure: str, package: str) -> str:
    """`found` (a shutil.which answer) when the tool is there; otherwise the test fails."""
    if found is None:
        tool_missing(tool, "is not on PATH", f"run scripts/{ensure} (make test does; as root it installs "
                                             f"Debian's {package} package)")
    return found


def need_chromium(chromium: Path) -> None:
    """Debian's chromium at `chromium` and the playwright package that drives it."""
    if not chromium.exists():
        tool_missing(str(chromium), "is missing", "run scripts/ensure-chromium (make test does; as root "
                                                  "it installs Debian's chromium package)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        tool_missing("the playwright package", f"cannot be imported ({exc})",
                     "install requirements-dev.txt (make test does)")
