"""`python -m webui` refuses settings that cannot work, with one readable line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]


def run_webui(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "RAYPD_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", **env}
    return subprocess.run(
        [sys.executable, "-m", "webui", *args], cwd=PROJECT, env=environment,
        capture_output=True, text=True, timeout=60,
    )


@pytest.mark.parametrize("args,env,message", [
    (("--port", "70000"), {}, "is not a TCP port"),
    ((), {"RAYPD_ENGINE": "cloud"}, "RAYPD_ENGINE='cloud' is not one of auto, pulumi, offline"),
    ((), {"RAYPD_TOKEN": "short"}, "RAYPD_TOKEN must be at least 16 characters"),
    ((), {"RAYPD_ENGINE": "pulumi", "HOME": "/nonexistent-home"}, "Pulumi CLI not found on PATH"),
])
def test_unworkable_settings_stop_the_server_with_a_clear_message(tmp_path, args, env, message):
    result = run_webui(tmp_path, *args, **env)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
