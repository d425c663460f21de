"""The rollout check that `pulumi up` waits for: run against a stand-in Serve REST API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from components.render.rollout import check_script

NEW_ARGS = {"llm_config": {"engine_kwargs": {"max_model_len": 8192}}}
OLD_ARGS = {"llm_config": {"engine_kwargs": {"max_model_len": 4096}}}


class ServeApi:
    """Answers GET /api/serve/applications/ with the next scripted body (the last one repeats)."""

    def __init__(self, answers: list[dict]):
        self.answers = answers
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                body = api.answers.pop(0) if len(api.answers) > 1 else api.answers[0]
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/api/serve/applications/"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


DEPLOYMENT = "Decode:qwen3_5-9b"


def app(status: str, args: dict, message: str = "", replicas: int = 1) -> dict:
    """The Serve REST API's answer (`ServeInstanceDetails`): `deployed_app_config` is the
    application config as submitted, its `deployments` overrides included."""
    config = {"name": "llm", "args": args,
              "deployments": [{"name": DEPLOYMENT, "num_replicas": replicas}]}
    return {"applications": {"llm": {"status": status, "message": message,
                                      "deployed_app_config": config}}}


def run_check(api: ServeApi, tmp_path: Path, deadline: float = 20,
              replicas: int = 1) -> tuple[int, str, str]:
    log = tmp_path / "termination-log"
    expected = {"llm": {"args": NEW_ARGS, "replicas": {DEPLOYMENT: replicas}}}
    env = {**os.environ, "SERVE_API": api.url, "EXPECTED_ARGS": json.dumps(expected),
           "DEADLINE_SECONDS": str(deadline), "POLL_SECONDS": "0.05", "TERMINATION_LOG": str(log)}
    done = subprocess.run([sys.executable, "-c", check_script()], env=env, capture_output=True,
                          text=True, timeout=60)
    return done.returncode, done.stdout, log.read_text()


@pytest.fixture
def serve():
    apis: list[ServeApi] = []

    def start(answers: list[dict]) -> ServeApi:
        apis.append(ServeApi(answers))
        return apis[-1]
    yield start
    for api in apis:
        api.close()


def test_the_old_apps_running_is_not_enough_it_waits_for_the_new_config(serve, tmp_path):
    api = serve([app("RUNNING", OLD_ARGS), app("DEPLOYING", NEW_ARGS), app("RUNNING", NEW_ARGS)])
    code, out, log = run_check(api, tmp_path)
    assert code == 0
    assert "not deployed yet" in out and "DEPLOYING" in out
    assert "RUNNING" in log


def test_a_failed_deploy_ends_the_wait_with_serves_message(serve, tmp_path):
    api = serve([app("DEPLOY_FAILED", NEW_ARGS, "CUDA out of memory while loading the model")])
    code, _, log = run_check(api, tmp_path)
    assert code == 1
    assert "CUDA out of memory" in log and "llm" in log


def test_it_gives_up_at_its_deadline_saying_what_it_waited_for(serve, tmp_path):
    api = serve([app("RUNNING", OLD_ARGS)])
    code, _, log = run_check(api, tmp_path, deadline=0.5)
    assert code == 1
    assert log.startswith("timed out") and "not deployed yet" in log


def test_a_scale_waits_for_the_new_replica_count_even_with_the_args_unchanged(serve, tmp_path):
    # Scaling changes only the `deployments` override: the old config's RUNNING, with the same
    # args, must not count until Serve has the new count and is RUNNING with it.
    api = serve([app("RUNNING", NEW_ARGS, replicas=1), app("DEPLOYING", NEW_ARGS, replicas=2),
                 app("RUNNING", NEW_ARGS, replicas=2)])
    code, out, log = run_check(api, tmp_path, replicas=2)
    assert code == 0, out
    assert out.count("not deployed yet") == 1 and "DEPLOYING" in out
    assert "RUNNING" in log
