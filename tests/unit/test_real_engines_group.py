"""The real engines run in one pytest-xdist worker (tests/conftest.py): spread over two, one worker
waits up to an hour for the other's machine lock (tests/real/machine_lock.py) and the suite blows
its time budget without a single red test. Collected with the engines switched off, so this is cheap."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.unit.cli_support import ROOT


@pytest.mark.slow
def test_every_real_engine_test_goes_to_one_xdist_worker() -> None:
    env = {**os.environ, "RAYPD_SKIP_REAL_VLLM": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
         "-v", "tests/real"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    workers = set(re.findall(r"\[(gw\d+)\]", done.stdout))
    assert len(workers) == 1, f"tests/real ran on {sorted(workers)}:\n{done.stdout[-2000:]}"
