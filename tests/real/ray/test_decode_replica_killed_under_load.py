"""Issue 31 §3 on the real Ray Serve LLM 2.60 + vLLM CPU stack: a decode replica killed under load.

serve.resilience's own measurement (`measure`: golden answers, a steady load, the fault under it,
recovery) runs against raypd's small stack on Ray, with a test-side `Target` and `Fault` (its
`Fault` and `Target` interfaces, serve/resilience/run.py): the fault SIGKILLs the decode replica's
process group (the Serve replica actor and its vLLM EngineCore child, as a pod's death ends both),
chosen from Serve's own replica list and checked to be that replica's process before the kill.
What is asserted:
- Serve replaces the replica: a RUNNING decode replica with another id (Serve retries nothing
  in flight; the report shows what failed, before and after the first token). Measured here: with
  the only decode replica gone, Serve HELD the requests sent meanwhile until the replacement ran
  (none failed; each waited up to ~38 s for its first token), so the recovery is the first request
  whose first token came within the stall threshold again (serve/resilience/judge.py);
- every request the load generator sent is accounted for: answered, failed with a status or an
  error, or answered 200 with a text other than its golden answer (counted as wrong);
- the report's counts and recovery time are the records' own, counted again here.
Runs last in this package (conftest.py orders it after the scaling tests): the app it leaves has a
new decode replica. The measured numbers are printed for docs/resilience.md.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any, Optional

import requests

from serve.kv_evidence import KvReading, kv_series, parse_vllm_samples, replica_filter
from serve.resilience.golden import Workload
from serve.resilience.report import Settings, build_report, table
from serve.resilience.run import measure
from tests.real.processes import wait_until
from tests.real.ray_serve import RayServe

DECODE = "Decode:tiny"
WORKLOAD = Workload(prompts=6, input_tokens=32, max_tokens=8)
PATIENT = {"connect_timeout_s": 120.0}  # as the pair's resilience tests: a starved client loop is not a failure
REPLACEMENT_DEADLINE_S = 900.0  # a new CPU engine under load: ~150 s measured, far more on a busy machine


def replicas(ray: RayServe, deployment: str) -> list[dict[str, Any]]:
    app = (ray.applications().get("applications") or {}).get(ray.app_name) or {}
    return list(((app.get("deployments") or {}).get(deployment) or {}).get("replicas") or [])


def running(ray: RayServe, deployment: str) -> list[dict[str, Any]]:
    try:
        return [r for r in replicas(ray, deployment) if r.get("state") == "RUNNING"]
    except (requests.RequestException, ValueError):
        return []


class RayTarget:
    """The Serve app: ready when it is RUNNING with every replica RUNNING; the decode replicas' KV
    series from Ray's metrics export (as verify keeps only the decode replicas' series)."""

    def __init__(self, ray: RayServe) -> None:
        self.ray = ray

    def describe(self) -> str:
        return f"Ray Serve app {self.ray.app_name} at {self.ray.serve_url}"

    def ready(self) -> Optional[bool]:
        try:
            app = (self.ray.applications().get("applications") or {}).get(self.ray.app_name) or {}
        except (requests.RequestException, ValueError):
            return None
        deployments = (app.get("deployments") or {}).values()
        return app.get("status") == "RUNNING" and all(
            all(r.get("state") == "RUNNING" for r in d.get("replicas") or []) for d in deployments)

    def kv_reading(self) -> Optional[KvReading]:
        ids = [str(r.get("replica_id") or "") for r in running(self.ray, DECODE)]
        try:
            page = requests.get(self.ray.metrics_urls[0], timeout=60).text
        except requests.RequestException:
            return None
        series = kv_series(parse_vllm_samples(page), replica_filter(ids))
        return KvReading("Ray's metrics export (decode replicas)", {"decode replicas": series}, "not read", {})


class DecodeReplicaKill:
    """SIGKILL to the RUNNING decode replica's process group, chosen from Serve's replica list."""

    name = "decode-replica"

    def __init__(self, ray: RayServe) -> None:
        self.ray = ray
        self.replica: dict[str, Any] = {}

    def choose(self) -> str:
        (self.replica,) = running(self.ray, DECODE)
        return f"decode replica {self.replica['replica_id']} (pid {self.replica['pid']})"

    def inject(self) -> str:
        pid = int(self.replica["pid"])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        title = f"ServeReplica:{self.ray.app_name}:{DECODE}"
        assert title in cmdline, f"pid {pid} is not the decode replica: {cmdline}"
        os.killpg(os.getpgid(pid), signal.SIGKILL)
        return f"SIGKILL to decode replica {self.replica['replica_id']}'s process group (pid {pid} and its EngineCore)"

    def restore(self) -> None:
        pass


def test_a_decode_replica_killed_under_load_is_replaced_and_every_request_is_accounted_for(
        real_ray_serve: RayServe, real_artifacts: Path) -> None:
    ray = real_ray_serve
    target = RayTarget(ray)
    wait_until("the app RUNNING with one decode replica before the fault",
               lambda: bool(target.ready()) and len(running(ray, DECODE)) == 1,
               deadline_s=600, watch=[ray.process])
    settings = Settings(rate=1.0, duration_s=REPLACEMENT_DEADLINE_S, fault_at_s=20.0, timeout_s=600.0, settle_s=10.0)
    fault = DecodeReplicaKill(ray)
    measured = measure(ray.serve_url, ray.model_id, fault, target, settings, WORKLOAD, connection=PATIENT)
    out = real_artifacts / "resilience"
    out.mkdir(parents=True, exist_ok=True)
    (out / "ray-decode-kill.jsonl").write_text("".join(json.dumps(r) + "\n" for r in measured.records))
    report = build_report(measured, settings)
    (out / "ray-decode-kill.json").write_text(json.dumps(report, indent=1))
    print(table(report))
    message = f"{table(report)}\n{ray.describe()}"
    killed = fault.replica["replica_id"]
    wait_until("Serve's replacement decode replica RUNNING",
               lambda: any(r["replica_id"] != killed for r in running(ray, DECODE)),
               deadline_s=REPLACEMENT_DEADLINE_S, watch=[ray.process])
    assert killed not in {r["replica_id"] for r in replicas(ray, DECODE)}, message

    records = sorted(measured.records, key=lambda r: r["sent_s"])
    counted = report["requests"]
    failed = [r for r in records if not r["ok"]]
    assert counted["sent"] == len(records) > 0
    assert counted["failed-before-first-token"] + counted["failed-after-first-token"] == len(failed), message
    assert counted["failed-before-first-token"] == sum(r["ttft_ms"] is None for r in failed), message
    # nothing lost silently: each failure carries a status or the client's error
    unexplained = [r for r in failed if not (r.get("status") or r.get("error"))]
    assert not unexplained, unexplained
    golden = measured.golden.answers

    def wrong(r: dict[str, Any]) -> bool:
        expected = golden[r["index"] % len(golden)]
        return bool(r["ok"]) and expected is not None and r.get("text") != expected

    assert counted["wrong"] == sum(wrong(r) for r in records), message
    assert report["recovery"]["recovered"], message
    # recovery, counted again: the first request after the last bad one, where an answer whose first
    # token came later than the stall threshold is bad too (Serve holds requests while no replica lives)
    stall_ms = report["recovery"]["stallTtftMs"]
    bad = [r for r in records if r["sent_s"] >= measured.fault_s
           and (not r["ok"] or wrong(r) or (r["ttft_ms"] is not None and r["ttft_ms"] > stall_ms))]
    if bad:
        first_good = next(r for r in records if r["sent_s"] > bad[-1]["sent_s"])
        assert report["recovery"]["timeToRecoverS"] == first_good["sent_s"] - measured.fault_s, message
    statuses = sorted({str(r.get("status")) for r in failed})
    slowest = max((r["ttft_ms"] or 0.0) for r in records if r["sent_s"] >= measured.fault_s)
    print(f"measured: decode replica killed {measured.fault_s:.1f} s into the load; {len(failed)} of {len(records)} "
          f"request(s) failed ({counted['failed-before-first-token']} before the first token; statuses {statuses}), "
          f"{counted['wrong']} wrong, {report['recovery']['stalledAfterFault']} stalled (slowest first token "
          f"{slowest / 1000:.1f} s); recovered {report['recovery'].get('timeToRecoverS')} s after the kill")
