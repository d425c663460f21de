"""Run raypd's command-line modules as users do: a fresh `python -m` process from the repo root."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
