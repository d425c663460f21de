"""Request limits as a real HTTP server meets them: chunked bodies, event-stream positions."""

from __future__ import annotations

import http.client
import json
import threading
from pathlib import Path
from typing import Iterator

import pytest
from werkzeug.serving import make_server

from tests.patience import PATIENCE_S
from tests.web.support import AUTH, TOKEN, create, settings_for
from webui import close_app, create_app


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, int, int]]:
    app = create_app(settings_for(tmp_path / "home"))
    httpd = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield "127.0.0.1", httpd.server_port, app.extensions["raypd"].settings.max_body_bytes
    httpd.shutdown()
    close_app(app)


def _post_chunked(host: str, port: int, body: bytes) -> tuple[int, dict]:
    conn = http.client.HTTPConnection(host, port, timeout=PATIENCE_S)
    pieces = (body[i:i + 65536] for i in range(0, len(body), 65536))
    conn.request("POST", "/api/v1/deployments", body=pieces, encode_chunked=True, headers={
        "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json",
        "Transfer-Encoding": "chunked"})
    response = conn.getresponse()
    return response.status, json.loads(response.read() or b"{}")


def test_a_chunked_body_over_the_limit_is_refused_whole(server):
    host, port, limit = server
    padded = (json.dumps({"name": "chunky", "config": {}}) + " " * (limit * 2)).encode()
    status, answer = _post_chunked(host, port, padded)
    assert status == 413 and answer["errors"][0]["field"] == "body"
    conn = http.client.HTTPConnection(host, port, timeout=PATIENCE_S)
    conn.request("GET", "/api/v1/deployments/chunky", headers={"Authorization": f"Bearer {TOKEN}"})
    assert conn.getresponse().status == 404  # nothing was created from the cut body


def test_a_chunked_body_within_the_limit_is_read_whole(server):
    host, port, _ = server
    status, answer = _post_chunked(host, port, json.dumps({"name": "small", "config": {}}).encode())
    assert status == 201 and answer["name"] == "small"


@pytest.mark.parametrize("position", [str(2**63), str(2**64 + 5), "-1", "9" * 400, "1e3", "1_0"])
def test_event_stream_positions_beyond_an_event_number_are_400(client, position):
    create(client, "demo")
    job = client.post("/api/v1/deployments/demo/preview", headers=AUTH).get_json()["job"]
    response = client.get(f"/api/v1/jobs/{job}/events", headers={**AUTH, "Last-Event-ID": position})
    assert response.status_code == 400
    assert response.get_json()["errors"][0]["field"] == "Last-Event-ID"


@pytest.mark.parametrize("query", ["after=1_0", "after=\uff11\uff10", "after=\u0661\u0660",
                                   "window=1_0", "window=\uff15"])
def test_event_stream_numbers_are_ascii_digits_only(client, query):
    """int() reads `1_0`, full-width and Arabic-Indic digits; a position or window must not."""
    create(client, "demo")
    job = client.post("/api/v1/deployments/demo/preview", headers=AUTH).get_json()["job"]
    response = client.get(f"/api/v1/jobs/{job}/events?{query}", headers=AUTH)
    assert response.status_code == 400
    assert response.get_json()["errors"][0]["field"] in ("Last-Event-ID", "window")


def test_a_windowed_event_stream_ends_early_and_resumes_where_it_stopped(fake_app, fake_engine):
    client = fake_app.test_client()
    create(client, "slow")
    fake_engine.gate.clear()
    job = client.post("/api/v1/deployments/slow/refresh", headers=AUTH).get_json()["job"]
    assert fake_engine.started.wait(PATIENCE_S)
    first = client.get(f"/api/v1/jobs/{job}/events?window=1", headers=AUTH).get_data(as_text=True)
    assert '"kind":"end"' not in first  # the job still runs: the stream ended by its window
    last_id = [line for line in first.splitlines() if line.startswith("id: ")][-1][4:]
    fake_engine.gate.set()
    rest = client.get(f"/api/v1/jobs/{job}/events?window=30",
                      headers={**AUTH, "Last-Event-ID": last_id}).get_data(as_text=True)
    assert '"kind":"end"' in rest
    ids = [int(line[4:]) for line in rest.splitlines() if line.startswith("id: ")]
    assert ids and min(ids) == int(last_id) + 1  # nothing lost, nothing repeated


@pytest.mark.parametrize("window", ["0", "301", "x", "-5"])
def test_a_window_outside_its_range_is_400(client, window):
    create(client, "win")
    job = client.post("/api/v1/deployments/win/preview", headers=AUTH).get_json()["job"]
    response = client.get(f"/api/v1/jobs/{job}/events?window={window}", headers=AUTH)
    assert response.status_code == 400 and response.get_json()["errors"][0]["field"] == "window"
