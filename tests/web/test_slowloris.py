"""Half-sent requests (slowloris, issue 29 §3) against the server `python -m webui` runs
(webui/server.py, waitress on 127.0.0.1): 210 connections that each send part of a request and
then nothing took every connection waitress allows, and /healthz and /login hung for 120 s and more.
Now a silent connection is closed after IDLE_SECONDS and a trickling one when its request is not
whole REQUEST_SECONDS after its first byte, so a health check waits about that long at most."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

import pytest
from waitress import wasyncore

from tests.patience import PATIENCE_S, until
from tests.web.support import settings_for
from webui import close_app, create_app
from webui.server import CONNECTION_LIMIT, make_server

HALF_SENT = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "  # the blank line never comes


@pytest.fixture
def app(tmp_path):
    app = create_app(settings_for(tmp_path / "home"))
    yield app
    close_app(app)


@contextmanager
def serving(app: Any, **settings: Any) -> Iterator[int]:
    server = make_server(app, "127.0.0.1", 0, **settings)
    thread = threading.Thread(target=server.run, name="waitress-under-test", daemon=True)
    thread.start()
    try:
        yield server.effective_port
    finally:
        server.task_dispatcher.shutdown(cancel_pending=True, timeout=5)
        wasyncore.close_all(server._map, ignore_all=True)  # run() returns once its map is empty
        thread.join(PATIENCE_S)


def hold(port: int, count: int) -> list[socket.socket]:
    held = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE_S)
        sock.sendall(HALF_SENT)
        held.append(sock)
    return held


def get(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=PATIENCE_S)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def cut_off(sock: socket.socket) -> bool:
    """Send the next header line of a request that never ends; True once the server closed the
    connection (reset, or end of stream)."""
    try:
        sock.sendall(b"X-Slow-Header: a\r\n")
        time.sleep(0.1)  # (the trickle itself: one header line per tenth of a second)
    except OSError:
        return True  # reset by the server
    sock.settimeout(0.01)
    try:
        return sock.recv(1) == b""  # closed by the server
    except TimeoutError:
        return False
    except OSError:
        return True
    finally:
        sock.settimeout(PATIENCE_S)


@pytest.mark.slow
def test_health_and_login_answer_while_more_half_sent_requests_are_held_than_connections_allowed(app):
    """With the server's own settings (so about IDLE_SECONDS, against waitress's 120 s + 30 s)."""
    with serving(app) as port:
        held = hold(port, CONNECTION_LIMIT + 10)
        try:
            started = time.monotonic()
            assert get(port, "/healthz") == 200
            assert get(port, "/login") == 200
            assert time.monotonic() - started < PATIENCE_S
        finally:
            for sock in held:
                sock.close()


def test_a_client_that_trickles_its_request_is_cut_off(app):
    """One byte at a time, never silent for long: waitress's idle timeout alone never fires."""
    with serving(app, request_seconds=1.0) as port:
        sock = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE_S)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        try:
            until(lambda: cut_off(sock), "the server to close a connection that trickles its request")
        finally:
            sock.close()
        assert get(port, "/healthz") == 200  # and the server answers as before
