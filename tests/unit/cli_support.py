"""Run raypd's command-line modules as users do: a fresh `python -m` process from the repo root."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path
from typing import Callable, Sequence

ROOT = Path(__file__).resolve().parents[2]


def run_module(module: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`timeout` only bounds a hung process: a plan that takes 7 s idle took over 120 s on a
    2-core machine running two CPU hogs and a second test suite."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
    )


def write_stack(directory: Path, body: str, name: str = "Pulumi.demo.yaml") -> Path:
    path = directory / name
    path.write_text(body, encoding="utf-8")
    return path


def run_main(main: Callable[[Sequence[str]], int], *args: str) -> subprocess.CompletedProcess[str]:
    """A CLI's `main(argv)` in this process, answered as `run_module` answers: the exit code (also
    from SystemExit, as argparse raises it) and what it printed. Where one subprocess test already
    proves the command starts as users start it, the other cases need no interpreter of their own."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(list(args))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return subprocess.CompletedProcess(["main", *args], code, stdout.getvalue(), stderr.getvalue())
