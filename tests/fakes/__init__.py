"""Reusable fakes for tests: a Kubernetes API for a deployed stack, an OpenAI-compatible server."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from typing import Any, Self


class LoopbackServer:
    """Start, stop and `with` for a fake that serves `_server` on `_thread` (127.0.0.1 only)."""

    _server: ThreadingHTTPServer
    _thread: threading.Thread

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
