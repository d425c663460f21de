"""The endpoint as its clients meet it behind Envoy Gateway: GET /v1/models on 127.0.0.1, guarded
by API keys the way Envoy's api_key_auth filter guards a route.

Built from envoy source/extensions/filters/http/api_key_auth/api_key_auth.cc: the key is read
from the configured header (here Authorization, as raypd's SecurityPolicy names it) and a leading
"Bearer " is dropped (`KeySources::Source::getKey`); no key -> 401 "Client authentication failed."
(missing_api_key), a key not in the credentials -> the same 401 (unknown key), a known key of a
client the route does not allow -> 403 "Client is forbidden."; otherwise the request goes on to
the model server (here tests.fakes.openai_server's /v1/models document).

`keys` is a callable read on every request, so a test can hand it the Kubernetes stand-in's
Secret (`lambda: kube.secret_data(ns, name)`): a key created or revoked there is accepted or
refused on the next request, as Envoy Gateway applies a change of the Secret it watches.
`open=True` answers without checking (a route the SecurityPolicy does not cover);
`allow_missing=True` lets a request without any key through while still refusing a wrong one (a
policy half applied: what endpoint-auth must catch even though the wrong key is refused);
`forbidden` names clients the route does not allow. `requests` records each request's path and
whether it carried an Authorization header (never the key).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Mapping

from tests.fakes import LoopbackServer
from tests.fakes.openai_server import models_document


class KeyedEndpoint(LoopbackServer):
    def __init__(self, model_id: str, keys: Callable[[], Mapping[str, str]], *, open: bool = False,
                 allow_missing: bool = False, forbidden: tuple[str, ...] = ()):
        self.model_id = model_id
        self.keys = keys  # client name -> key, as the Secret's data holds them
        self.open = open
        self.allow_missing = allow_missing
        self.forbidden = forbidden
        self.requests: list[dict[str, Any]] = []
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def decide(self, header: str) -> tuple[int, str]:
        """(status, body) for a request with this Authorization header ("" when absent)."""
        if self.open:
            return 200, ""
        key = header[len("Bearer "):] if header.startswith("Bearer ") else header
        if not key:
            return (200, "") if self.allow_missing else (401, "Client authentication failed.")
        clients = {value: name for name, value in self.keys().items()}
        if key not in clients:
            return 401, "Client authentication failed."
        if clients[key] in self.forbidden:
            return 403, "Client is forbidden."
        return 200, ""


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        fake = self.server.fake
        header = self.headers.get("Authorization", "")
        fake.requests.append({"path": self.path, "authorization": bool(header)})
        status, text = fake.decide(header)
        if status == 200 and self.path.split("?")[0] == "/v1/models":
            body, kind = json.dumps(models_document(fake.model_id)).encode(), "application/json"
        elif status == 200:
            status, body, kind = 404, b'{"detail": "Not Found"}', "application/json"
        else:
            body, kind = text.encode(), "text/plain"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: KeyedEndpoint):
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)
