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


def test_an_interrupt_stops_the_run_in_progress_and_the_hogs_and_starts_no_other(tmp_path: Path) -> None:
    """SIGTERM (or Ctrl-C) mid-run: before, bash ran the trap only after `make test` had ended,
    stopped the hogs and went on to the next run, with no hogs. A stand-in `make` here records
    each start and then waits, as a long run does."""
    starts = tmp_path / "starts"
    fake_make = tmp_path / "bin" / "make"
    fake_make.parent.mkdir()
    fake_make.write_text(f'#!/bin/sh\necho "$$" >> "{starts}"\nexec sleep 600\n')
    fake_make.chmod(0o755)
    script = subprocess.Popen([str(SCRIPT), "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "HOGS": "1", "PATH": f"{fake_make.parent}:{os.environ['PATH']}"})
    try:
        until(lambda: starts.exists() and starts.read_text().strip(), "the first run to start")
        run = int(starts.read_text().split()[0])
        script.terminate()
        out, err = script.communicate(timeout=PATIENCE_S)
    finally:
        if script.poll() is None:
            script.kill()
    assert script.returncode == 130 and "interrupted" in err
    assert len(starts.read_text().split()) == 1  # no second run
    until(lambda: not any(alive(pid) for pid in [run, *hog_pids(out)]), "the run and the hogs to be stopped")
