"""Capture Ray Serve's own per-replica series (run with the real venv's python, PYTHONPATH=.):
`python -m tests.real.capture_serve_metrics`.

The LLM capture (tests/fixtures/real/ray/metrics-export-*.txt) was cut to vLLM's families, so it
holds no `ray_serve_*` series; the phase join of components/render/observability_rules.py reads one. This
starts a local Ray head (no model: a replica named like Ray Serve LLM's, `Decode:tiny`, in app
`llm`), answers one request that returns the replica's own id and one that raises (500), and writes the `ray_serve_*`
families raypd reads from the metrics export port to tests/fixtures/real/ray/serve-metrics-probe.txt, headed by a
`# captured` line naming the versions and that id. About 30 s, under the machine's real-engine lock.
"""

from __future__ import annotations

import datetime
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import ray
from ray import serve

from components.render import metric_names as m
from tests.real.machine_lock import machine_lock
from tests.real.processes import free_port

# The Serve families raypd's rules and dashboard read (cut as tests/real/capture.py cuts vLLM's).
FAMILIES = tuple(name.removesuffix("_total") for name in (
    m.SERVE_REPLICA_STARTS, m.SERVE_HTTP_REQUESTS, m.SERVE_HTTP_ERRORS, m.SERVE_REPLICA_HEALTHY,
    m.SERVE_REPLICA_QUERIES))
OUT = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "ray" / "serve-metrics-probe.txt"


@serve.deployment(name="Decode:tiny", num_replicas=1, ray_actor_options={"num_cpus": 0.1})
class Probe:
    def __call__(self, request: Any) -> dict[str, str]:
        if request.query_params.get("fail"):
            raise RuntimeError("planted failure")  # Serve answers 500: the error counters
        replica = serve.get_replica_context().replica_id
        return {"unique_id": replica.unique_id, "full_id": replica.to_full_id_str()}


def _families(text: str) -> str:
    def family(line: str) -> str:
        name = line.split(" ")[2] if line.startswith("# ") else line.split("{")[0].split(" ")[0]
        return name.removesuffix("_total")
    keep = [line for line in text.splitlines()
            if line.strip() and (not line.startswith("#") or line.startswith(("# HELP", "# TYPE")))
            and family(line) in FAMILIES]
    return "\n".join(keep) + "\n"


def main() -> None:
    export_port, http_port = free_port(), free_port()
    with machine_lock("capture serve metrics"):
        ray.init(_metrics_export_port=export_port, num_cpus=1, include_dashboard=False)
        try:
            serve.start(http_options={"host": "127.0.0.1", "port": http_port})
            serve.run(Probe.bind(), name="llm", route_prefix="/")
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/", timeout=60) as answer:
                ids = json.load(answer)
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{http_port}/?fail=1", timeout=60)
            except urllib.error.HTTPError as error:
                assert error.code == 500, error.code
            else:
                raise AssertionError("the planted failure did not answer HTTP 500")
            deadline, text = time.monotonic() + 120, ""
            while time.monotonic() < deadline:  # Ray exports every few seconds
                with urllib.request.urlopen(f"http://127.0.0.1:{export_port}/metrics", timeout=30) as page:
                    text = page.read().decode()
                if f'replica="{ids["unique_id"]}"' in text and all(f in text for f in FAMILIES):
                    break
                time.sleep(2)
            header = (f"# captured {datetime.date.today()} by tests/real/capture_serve_metrics.py "
                      f"(ray {ray.__version__}, CPU): Ray metrics export port, app llm with one replica "
                      "of deployment Decode:tiny after one request and one that raised (HTTP 500); the "
                      f"replica said its id is {ids['unique_id']} ({ids['full_id']})\n")
            OUT.write_text(header + _families(text))
            print(f"wrote {OUT}")
        finally:
            serve.shutdown()
            ray.shutdown()


if __name__ == "__main__":
    main()
