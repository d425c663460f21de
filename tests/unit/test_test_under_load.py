"""scripts/test-under-load: the hogs it starts are always stopped, and a bad run count is refused."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.patience import PATIENCE_S, until

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "test-under-load"


def hog_pids(output: str) -> list[int]:
    line = next(line for line in output.splitlines() if "CPU hog(s) running" in line)
    return [int(pid) for pid in line.split("(pids ", 1)[1].split(")", 1)[0].split()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] if Path(f"/proc/{pid}").exists() else "X"
    return state not in ("Z", "X")


def test_zero_runs_start_and_stop_the_hogs() -> None:
    result = subprocess.run([str(SCRIPT), "0"], env={**os.environ, "HOGS": "2"}, capture_output=True,
                            text=True, timeout=PATIENCE_S)
    assert result.returncode == 0, result.stderr
    pids = hog_pids(result.stdout)
    assert len(pids) == 2 and "0 of 0 green" in result.stdout
    until(lambda: not any(alive(pid) for pid in pids), "the hogs to be stopped")


def test_a_run_count_that_is_not_a_number_is_refused_before_any_hog_starts() -> None:
    result = subprocess.run([str(SCRIPT), "3; rm -rf /"], capture_output=True, text=True, timeout=PATIENCE_S)
    assert result.returncode == 2 and "RUNS must be a whole number" in result.stderr
    assert "CPU hog" not in result.stdout
