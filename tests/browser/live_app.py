"""A web app whose deployments are "real" (the Automation API engine's test double), served on a
real HTTP server on loopback for the browser, and the JSON API calls the tests make beside it."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from tests.browser.test_browser_flow import CHROMIUM
from tests.patience import JOB_PATIENCE_S
from tests.required_tools import need_chromium
from tests.web.support import TOKEN, FakeEngine, settings_for


def need_a_browser() -> None:
    """Fail, saying which and how to get it, where the browser or its driver is missing."""
    need_chromium(CHROMIUM)


def api(base: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + "/api/v1" + path, data=data, method=method, headers={
        "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def wait_for(base: str, job: str, timeout: float = JOB_PATIENCE_S) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        found = api(base, "GET", f"/jobs/{job}")
        if found["status"] not in ("queued", "running"):
            return found
        assert time.monotonic() < deadline, f"job {job} did not end"
        time.sleep(0.2)


@contextmanager
def serving(home: Path, engine: FakeEngine) -> Iterator[tuple[str, Any]]:
    """(base URL, the app) of the web app on 127.0.0.1 with `engine` as its real engine."""
    from werkzeug.serving import make_server

    from webui import close_app, create_app
    from webui.engines.offline import OfflineEngine
    from webui.engines.select import EngineSet

    settings = settings_for(home)
    app = create_app(settings, engines=EngineSet(engine, {engine.name: engine, "offline": OfflineEngine(settings)}))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", app
    finally:
        server.shutdown()
        close_app(app)
