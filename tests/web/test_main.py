"""`python -m webui` refuses settings that cannot work, with one readable line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.patience import PATIENCE_S

PROJECT = Path(__file__).resolve().parents[2]


def run_webui(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "RAYPD_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", **env}
    return subprocess.run(
        [sys.executable, "-m", "webui", *args], cwd=PROJECT, env=environment,
        capture_output=True, text=True, timeout=PATIENCE_S,
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


def test_team_mode_with_a_cli_but_no_shared_backend_or_key_does_not_start(tmp_path):
    from tests.fakes.pulumi_cli import install

    cli = install(tmp_path / "cli")
    result = run_webui(tmp_path, PATH=f"{cli / 'bin'}:/usr/bin:/bin",
                       RAYPD_DATABASE_URL="postgresql://raypd:Sup3rSecret@127.0.0.1:1/raypd")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "PULUMI_BACKEND_URL=s3://" in result.stderr and "PULUMI_CONFIG_PASSPHRASE_FILE" in result.stderr
    assert "Sup3rSecret" not in result.stderr + result.stdout
    assert not (tmp_path / "home" / "passphrase").exists()  # no key made for one server alone


def test_a_damaged_store_stops_the_server_with_the_file_and_what_to_do(tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "raypd.db").write_bytes(b"this is not a database\0" * 400)
    result = run_webui(tmp_path, "--port", "1", RAYPD_ENGINE="offline")
    assert result.returncode == 2
    assert str(home / "raypd.db") in result.stderr and "move it aside" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_empty_passphrase_in_the_environment_is_dropped_at_start(tmp_path, monkeypatch):
    from tests.web.support import settings_for
    from webui import close_app, create_app
    from webui.settings import pulumi_env

    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", "")
    settings = settings_for(tmp_path / "home", PULUMI_CONFIG_PASSPHRASE="", PULUMI_CONFIG_PASSPHRASE_FILE="")
    app = create_app(settings)
    try:
        # The CLI gets os.environ plus pulumi_env: only the passphrase file may speak.
        cli_env = {**os.environ, **pulumi_env(settings)}
        assert "PULUMI_CONFIG_PASSPHRASE" not in cli_env
        assert cli_env["PULUMI_CONFIG_PASSPHRASE_FILE"] == str(settings.default_passphrase_file)
        assert settings.default_passphrase_file.read_text()
    finally:
        close_app(app)


def test_the_app_is_served_by_the_production_server(tmp_path):
    import socket
    import time
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    environment = {**os.environ, "RAYPD_HOME": str(tmp_path / "home"), "RAYPD_ENGINE": "offline"}
    process = subprocess.Popen([sys.executable, "-m", "webui", "--port", str(port)], cwd=PROJECT,
                               env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().startswith(f"raypd web app on http://127.0.0.1:{port}/")
        deadline = time.monotonic() + PATIENCE_S
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                    assert response.headers["Server"] == "raypd"  # waitress, as configured
                    break
            except OSError:
                assert time.monotonic() < deadline, "the server did not answer"
                time.sleep(0.2)
    finally:
        process.terminate()
        assert process.wait(timeout=PATIENCE_S) == 0  # SIGTERM stops it cleanly
