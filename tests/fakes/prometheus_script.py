"""A Prometheus that answers verify's `metrics-flowing` queries from a script of what it holds.

The real server (tests/prometheus_server.py) decides by itself when a scrape lands and when a rule
group is evaluated, so it cannot show one moment on demand: an engine's raw series stored by a
scrape while its phased copy (`engine:<metric>:phase`) waits for the next rule evaluation. This
stand-in answers each look of the check from the next entry of a script, so that moment is exact.

It speaks Prometheus's HTTP API v1 as serve/prometheus_api.py documents it
(prometheus/web/api/v1/api.go): `GET /api/v1/query?query=EXPR` -> `{"status": "success", "data":
{"resultType": "vector", "result": [{"metric": {...}, "value": [<unix time>, "<value>"]}]}}`, and
an expression it was not scripted for -> HTTP 400 `bad_data`. Put it behind the Kubernetes
stand-in's Prometheus Service (`FakeKubeApi.prometheus_upstream = script.url`).
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Sequence

from components.render import metric_names as m
from components.render.observability_rules import ENGINE_PRESENCE, PHASE_INFO, phased
from tests.fakes import LoopbackServer
from tests.fakes.http_answers import send_json


@dataclass(frozen=True)
class Look:
    """What Prometheus holds at one look: ReplicaId -> phase of the Serve replicas with their
    `replica:raypd_phase:info`, the engines with raw series, the engines with the phased copy."""

    info: dict[str, str]
    raw: frozenset[str]
    phased: frozenset[str]

    @classmethod
    def of(cls, info: dict[str, str], raw: Sequence[str], phased: Sequence[str] = ()) -> "Look":
        return cls(dict(info), frozenset(raw), frozenset(phased))


@dataclass
class ScriptedPrometheus(LoopbackServer):
    """The n-th ask of each of the check's three queries answers from looks[n] (the last look
    for ever after), so the order in which one look asks them does not matter."""

    looks: Sequence[Look]
    asked: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        assert self.looks, "a script needs at least one look"
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def readings(self) -> int:
        """How many looks the check took (its asks of the phase info)."""
        with self.lock:
            return self.asked["info"]

    def answer(self, expr: str) -> list[dict[str, Any]]:
        kind = _kind(expr)
        with self.lock:
            look = self.looks[min(self.asked[kind], len(self.looks) - 1)]
            self.asked[kind] += 1
        if kind == "info":
            return [_sample({m.REPLICA_ID_LABEL: rid, m.PHASE_LABEL: phase})
                    for rid, phase in sorted(look.info.items())]
        if kind == "phased":
            return [_sample({m.REPLICA_ID_LABEL: rid, m.PHASE_LABEL: look.info.get(rid, "")})
                    for rid in sorted(look.phased)]
        return [_sample({m.REPLICA_ID_LABEL: rid}) for rid in sorted(look.raw)]


def _kind(expr: str) -> str:
    """Which of the check's queries `expr` is (the phased name contains the raw one: first)."""
    if phased(ENGINE_PRESENCE) in expr:
        return "phased"
    if PHASE_INFO in expr:
        return "info"
    if ENGINE_PRESENCE in expr:
        return "raw"
    raise ValueError(f"not a query this script answers: {expr[:120]}")


def _sample(labels: dict[str, str]) -> dict[str, Any]:
    return {"metric": labels, "value": [round(time.time(), 3), "1"]}


def _handler(script: ScriptedPrometheus) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            url = urllib.parse.urlsplit(self.path)
            expr = (urllib.parse.parse_qs(url.query).get("query") or [""])[0]
            if url.path != "/api/v1/query":
                self._json(404, {"status": "error", "errorType": "not_found", "error": url.path})
                return
            try:
                result = script.answer(expr)
            except ValueError as exc:
                self._json(400, {"status": "error", "errorType": "bad_data", "error": str(exc)})
                return
            self._json(200, {"status": "success", "data": {"resultType": "vector", "result": result}})

        def _json(self, status: int, document: Any) -> None:
            send_json(self, status, document)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler
