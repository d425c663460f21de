"""List latency with 200 deployments under load: the list page and GET /api/v1/deployments.

Fills a temp RAYPD_HOME with 200 deployments (directly through the store, with a finished job
each, as the web app would leave them), serves the real app with the production server users run
(webui/server.py, waitress) on a free 127.0.0.1 port, and has 8 concurrent clients request each
endpoint for 20 s (one TCP connection per request, like a browser without keep-alive), timing each
request end to end (connect, request, full body). Prints requests, p50/p95/max in milliseconds;
exit status 1 when a p95 misses the target (50 ms).

    .venv/bin/python bench/list_bench.py [--deployments 200] [--clients 8] [--seconds 20]
"""

from __future__ import annotations

import argparse
import http.client
import logging
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from components.config.spec import DeploymentSpec  # noqa: E402
from webui import Settings, close_app, create_app  # noqa: E402
from webui.server import make_server  # noqa: E402
from webui.store import Store  # noqa: E402
from webui.summary import summarize  # noqa: E402

TARGET_P95_MS = 50.0
TOKEN = "bench-token-0123456789abcdef"
# A realistic mix: the reference, bigger PD splits, heterogeneous phases, colocated baselines.
VARIANTS: list[dict[str, Any]] = [
    {},
    {"raypd:decode": {"replicas": 3}},
    {"raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
     "raypd:decode": {"instanceType": "g6e.48xlarge", "tensorParallelSize": 8, "replicas": 2}},
    {"raypd:mode": "colocated", "aws:region": "us-west-2"},
    {"raypd:model": {"id": "llama-8b", "source": "meta-llama/Llama-3.1-8B-Instruct"}},
]


def fill(home: Path, count: int) -> None:
    store = Store(home / "raypd.db")
    for index in range(count):
        name = f"bench-{index:03d}"
        spec = DeploymentSpec.from_config(VARIANTS[index % len(VARIANTS)], name)
        store.create_deployment(name, "offline", spec.public_config(), summarize(spec))
        job = store.create_job(name, "up", "offline", "bench@127.0.0.1", "updating")
        store.set_job_running(job)
        store.set_progress(job, 34, 34)
        store.finish_job(job, "succeeded")
        store.record_deployed(name, {"status": "planned (offline)"}, spec.public_config(), summarize(spec), job=job)
        if index % 4 == 0:  # a quarter with a change saved since: the list marks them "pending changes"
            grown = DeploymentSpec.from_config({**spec.public_config(), "raypd:systemNodes": {"count": 2}}, name)
            store.set_config(name, grown.public_config(), summarize(grown))
    store.close()


def under_load(request: Callable[[], bytes], clients: int, seconds: float) -> list[float]:
    """Latencies (ms) of `clients` threads requesting back to back for `seconds`."""
    for _ in range(10):  # warm-up: imports, template compile, SQLite page cache
        request()
    samples: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client() -> None:
        mine = []
        while time.monotonic() < deadline:
            start = time.perf_counter()
            request()
            mine.append((time.perf_counter() - start) * 1000)
        with lock:
            samples.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 60)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deployments", type=int, default=200)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    logging.getLogger("waitress").setLevel(logging.ERROR)

    with tempfile.TemporaryDirectory(prefix="raypd-bench-") as tmp:
        home = Path(tmp)
        settings = Settings.from_env({"RAYPD_HOME": str(home), "RAYPD_ENGINE": "offline", "RAYPD_TOKEN": TOKEN})
        fill(home, args.deployments)
        app = create_app(settings)
        server = make_server(app, "127.0.0.1", 0)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        port = server.effective_port

        def get(path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            body = response.read()
            conn.close()
            return response.status, dict(response.getheaders()), body

        # A browser session for the page: the login form's CSRF token and cookie.
        _, login_headers, login_body = get("/login", {})
        cookie = login_headers["Set-Cookie"].split(";")[0]
        found = re.search(rb'name="csrf_token" value="([^"]+)"', login_body)
        assert found is not None, "the login page has no CSRF token"
        csrf = found.group(1).decode()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/login", body=f"token={TOKEN}&csrf_token={csrf}&next=/",
                     headers={"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"})
        login = conn.getresponse()
        login.read()
        session = (login.getheader("Set-Cookie") or "").split(";")[0]
        conn.close()

        def page() -> bytes:
            status, _, body = get("/", {"Cookie": session})
            assert status == 200 and body.count(b"<tr data-name=") == args.deployments, status
            return body

        def api() -> bytes:
            status, _, body = get("/api/v1/deployments", {"Authorization": f"Bearer {TOKEN}"})
            assert status == 200 and body.count(b'"name"') == args.deployments, status
            return body

        results = {"GET / (list page)": under_load(page, args.clients, args.seconds),
                   "GET /api/v1/deployments": under_load(api, args.clients, args.seconds)}
        server.close()
        close_app(app)

    print(f"{args.deployments} deployments, {args.clients} concurrent clients for {args.seconds:.0f} s "
          f"per endpoint, production server (waitress) on 127.0.0.1, one connection per request")
    failed = False
    for label, samples in results.items():
        ordered = sorted(samples)
        p50 = statistics.median(ordered)
        p95 = ordered[max(0, int(round(0.95 * len(ordered))) - 1)]
        ok = p95 < TARGET_P95_MS
        failed |= not ok
        print(f"  {label:28s} {len(ordered):5d} requests   p50 {p50:6.2f} ms   p95 {p95:6.2f} ms   "
              f"max {ordered[-1]:6.2f} ms   "
              f"{'ok' if ok else 'MISSED'} (target p95 < {TARGET_P95_MS:.0f} ms)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
