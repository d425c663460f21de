"""A real `prometheus` server on 127.0.0.1 for tests (Debian's package: scripts/ensure-prometheus).

It runs with the rules raypd renders and scrape jobs the test gives (pages of the real captures,
or the Kubernetes stand-in's worker pods through its pod proxy), every second, so a test can ask
it what the dashboards, the alerts, verify and the web app ask the deployment's Prometheus.
"""

from __future__ import annotations

import datetime
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import yaml

from tests.patience import PATIENCE_S, until
from tests.required_tools import need_on_path

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


def need_prometheus() -> str:
    """The prometheus server's path; the test fails when it is missing (tests/required_tools.py)."""
    return need_on_path(PROMETHEUS, "prometheus", "ensure-prometheus", "prometheus")


def need_promtool() -> str:
    """promtool's path; the test fails when it is missing (tests/required_tools.py)."""
    return need_on_path(PROMTOOL, "promtool", "ensure-prometheus", "prometheus")


class Pages:
    """What each scrape path answers: its first texts in turn, then the last one for ever (a
    deployment that starts idle and then serves requests)."""

    def __init__(self, pages: dict[str, Sequence[str]]):
        self.pages = {path: tuple(texts) for path, texts in pages.items()}
        self.served = dict.fromkeys(self.pages, 0)
        self.lock = threading.Lock()

    def answer(self, path: str) -> Optional[str]:
        with self.lock:
            if path not in self.pages:
                return None
            self.served[path] += 1
            texts = self.pages[path]
            return texts[min(self.served[path], len(texts)) - 1]

    def scrapes(self) -> int:
        """How many times the least-scraped path was read."""
        with self.lock:
            return min(self.served.values())


@contextmanager
def page_server(pages: Pages) -> Iterator[str]:
    """The pages over HTTP on 127.0.0.1; yields `host:port`."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = pages.answer(urllib.parse.urlsplit(self.path).path)
            if body is None:
                self.send_error(404)
                return
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def page_jobs(target: str, pages: Pages) -> list[dict[str, Any]]:
    """One scrape job per page path of a page server."""
    return [{"job_name": path.strip("/") or "root", "metrics_path": path, "honor_labels": True,
             "static_configs": [{"targets": [target]}]} for path in pages.pages]


def api(base: str, path: str, **params: str) -> dict[str, Any]:
    url = f"{base}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return dict(json.load(answer))
    except urllib.error.HTTPError as error:  # a bad query answers 400 with a JSON error
        return dict(json.load(error))


def query(base: str, expr: str, at: Optional[str] = None) -> dict[str, Any]:
    """An instant query, now or `at` (RFC 3339 or Unix time, as Prometheus's API takes it)."""
    return api(base, "/api/v1/query", query=expr, **({"time": at} if at else {}))


QUERY_LOG = "queries.log"


def asked_at(directory: Path, expr: str) -> str:
    """When the server evaluated the last HTTP instant query of `expr`, from its own query log
    (`query_log_file`: one JSON line per query, `params.end` the evaluation time). Asking the
    same expression `at` that time answers from the same samples, however long the ask took."""
    times = [entry["params"]["end"] for entry in map(json.loads, (directory / QUERY_LOG).read_text().splitlines())
             if entry.get("httpRequest", {}).get("path") == "/api/v1/query"
             and entry.get("params", {}).get("query") == expr]
    assert times, f"prometheus logged no query of {expr[:120]!r}"
    return str(times[-1])


def _unix(stamp: str) -> float:
    """Prometheus's RFC 3339 time (nanosecond fraction, `Z`) as Unix seconds."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    parsed = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.timezone.utc)
    return parsed.timestamp() + float(f"0.{fraction or 0}")


def scraped_since(base: str, since: float) -> bool:
    """Every target was scraped after `since` (Unix seconds)."""
    targets = api(base, "/api/v1/targets").get("data", {}).get("activeTargets", [])
    return bool(targets) and all(t.get("lastScrape", "").startswith("2") and _unix(t["lastScrape"]) > since
                                 for t in targets)


def evaluated_since(base: str, since: float) -> bool:
    """Every rule group was evaluated after `since` (Unix seconds)."""
    groups = api(base, "/api/v1/rules").get("data", {}).get("groups", [])
    return all(g.get("lastEvaluation", "").startswith("2") and _unix(g["lastEvaluation"]) > since
               for g in groups)


def wait_caught_up(base: str, since: float) -> None:
    """Until whatever the scraped pages held at `since` is in Prometheus, recorded series included:
    every target scraped after `since`, then every rule group evaluated after that moment (a group
    evaluated after the newest scrape may never be seen while scrapes keep coming). A test of a
    failure waits for this instead of a check's whole wait."""
    until(lambda: scraped_since(base, since), "every target scraped")
    scraped = time.time()
    until(lambda: evaluated_since(base, scraped), "every rule group evaluated after the scrapes")


def answers(base: str, expr: str) -> bool:
    """The query answers at least one sample (False while the server is still starting)."""
    try:
        return bool(query(base, expr).get("data", {}).get("result"))
    except (OSError, ValueError):
        return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_prometheus(directory: Path, rule_groups: list[dict[str, Any]],
                       scrape_configs: list[dict[str, Any]],
                       ready: Callable[[str], bool] = lambda base: True,
                       deadline_s: float = 180) -> Iterator[str]:
    """Yields the base URL of a prometheus scraping and evaluating every second, once `ready(base)`
    holds (a loaded 2-core machine may take a while: the deadline is generous)."""
    prometheus = need_prometheus()
    directory.mkdir(parents=True, exist_ok=True)
    rules = directory / "rules.yml"
    rules.write_text(yaml.safe_dump({"groups": rule_groups}, sort_keys=False))
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                         "query_log_file": str(directory / QUERY_LOG)},
              "rule_files": [str(rules)], "scrape_configs": scrape_configs}
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = directory / "prometheus.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [prometheus, f"--config.file={directory / 'prometheus.yml'}",
             f"--storage.tsdb.path={directory / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + deadline_s
            while not (answers(base, "up") and ready(base)):
                assert process.poll() is None, log_path.read_text()[-3000:]
                assert time.monotonic() < deadline, (
                    f"prometheus not ready in {deadline_s:g} s:\n" + log_path.read_text()[-3000:])
                time.sleep(0.2)
            yield base
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=20)


@contextmanager
def prometheus_scraping(kube: Any, directory: Path, rule_groups: Optional[list[dict[str, Any]]] = None,
                        extra_jobs: Sequence[dict[str, Any]] = ()) -> Iterator[str]:
    """A real Prometheus scraping the Kubernetes stand-in's worker pods (tests/fakes/kube_api.py
    `scrape_configs`) with the stack's rules (default: raypd's for the stand-in's spec), behind the
    stand-in's Prometheus Service proxy while it runs."""
    from components.render.observability_rules import prometheus_rule_groups

    groups = prometheus_rule_groups(kube.spec) if rule_groups is None else rule_groups
    jobs = kube.scrape_configs() + list(extra_jobs)
    scraped = f"count(up == 1) >= {len(jobs)}"
    with running_prometheus(directory, groups, jobs, ready=lambda base: answers(base, scraped)) as base:
        kube.prometheus_upstream = base
        try:
            yield base
        finally:
            kube.prometheus_upstream = None


@contextmanager
def prometheus_with_captures(kube: Any, directory: Path) -> Iterator[str]:
    """`prometheus_scraping` plus the real captured engine pages (tests/unit/prom_captures.py)
    under the stand-in's Serve deployment names, decode's after a KV load that failed: the SLO
    strip has real numbers and RaypdNixlTransferFailed really fires. Yields once it does."""
    from tests.unit import prom_captures as cap

    names = kube.deployment_names
    pages = Pages(cap.scrape_pages({"Prefill:tiny": names["prefill"], "Decode:tiny": names["decode"]},
                                   decode_after="after-failed-load"))
    with page_server(pages) as target, \
            prometheus_scraping(kube, directory, extra_jobs=page_jobs(target, pages)) as base:
        until(lambda: pages.scrapes() > cap.IDLE_SCRAPES and answers(base, 'ALERTS{alertstate="firing"}'),
              "the captures' after-pages scraped and an alert firing", timeout=3 * PATIENCE_S)
        yield base
