"""Each phase's replica count over a run, read from Ray Serve's application status, and the scale-ups in it.

Where the counts come from: the Serve REST API on the Ray head's dashboard (port 8265),
`GET /api/serve/applications/`, whose answer is `ServeInstanceDetails` in Ray's
python/ray/serve/schema.py (read in Ray 2.60.0, commit b7f4259, the version tests/real runs;
Ray 2.58's has the same fields): `applications: {app name: ApplicationDetails}`, each with
`deployments: {deployment name: DeploymentDetails}`, each with `target_num_replicas` (the count
Serve is steering to: the autoscaler's decision) and `replicas: [ReplicaDetails]` whose `state` is
a `ReplicaState` (ray/serve/_private/common.py: STARTING, UPDATING, RECOVERING, RUNNING, STOPPING,
STOPPED, PENDING_MIGRATION). A replica serves when it is RUNNING: `serve status` counts the same
list by state (ServeInstanceDetails._get_status, `replica_states`).

Which deployment is which phase is raypd's naming (components/render/serve_config.py
`serve_deployment_name`, its one home); this module is one of job.RUN_FILES and cannot import it,
so the caller hands the mapping in ({phase: deployment name}).

    sampler = ReplicaSampler("http://127.0.0.1:8265", raypd_deployments("tiny"))  # Prefill:tiny, Decode:tiny, ...
    sampler.sample()   # {"prefill": {"target": 1, "running": 1}, "decode": {"target": 2, "running": 1}}

A scale-up is a rise of a phase's RUNNING count; it took from the load step that caused it (the
latest step start, at or before Serve raised the target, whose rate rose) to the first sample
with the new replica RUNNING. Times are those of the samples, so they are as exact as the sample
interval.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Mapping, Optional, Sequence

from serve.benchmark.schedule import Schedule

SERVE_API_PATH = "/api/serve/applications/"
SAMPLE_EVERY_S = 2.0
SAMPLE_TIMEOUT_S = 5.0
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
_ERROR_TEXT_LIMIT = 200
Counts = dict[str, dict[str, int]]


class SampleError(Exception):
    """The Serve REST API did not answer with its status (unreachable, an error, not its shape)."""


def phase_counts(document: Any, deployments: Mapping[str, str], app: Optional[str] = None) -> Counts:
    """{phase: {"target", "running"}} from a `ServeInstanceDetails` document, for each phase whose
    deployment is in it (in `app`, or in any application when None); phases not deployed are left out."""
    if not isinstance(document, dict) or not isinstance(document.get("applications"), dict):
        raise SampleError("the answer has no `applications` (not Ray Serve's GET /api/serve/applications/)")
    apps = [document["applications"].get(app)] if app is not None else list(document["applications"].values())
    counts: Counts = {}
    for details in apps:
        found = details.get("deployments") if isinstance(details, dict) else None
        if not isinstance(found, dict):
            continue
        for phase, name in deployments.items():
            deployment = found.get(name)
            if not isinstance(deployment, dict):
                continue
            target = deployment.get("target_num_replicas")
            replicas = deployment.get("replicas")
            if not isinstance(target, int) or isinstance(target, bool) or not isinstance(replicas, list):
                raise SampleError(f"deployment {name!r} has no target_num_replicas/replicas")
            running = sum(isinstance(r, dict) and r.get("state") == "RUNNING" for r in replicas)
            counts[phase] = {"target": target, "running": running}
    return counts


def raypd_deployments(model_id: str) -> dict[str, str]:
    """{phase: Serve deployment} for every phase raypd names, for a model: what to hand the
    sampler outside a pod (phases the app does not run are simply not found)."""
    try:
        # Imported here: the names' one home is components/render/serve_config.py, which a pod
        # running `run` does not have (the Job passes the mapping instead: job.sampling_args).
        from components.render.serve_config import DEPLOYMENT_PREFIXES, serve_deployment_name
    except ImportError:
        raise SampleError("raypd's deployment names need the raypd checkout; pass the mapping") from None
    return {phase: serve_deployment_name(phase, model_id) for phase in DEPLOYMENT_PREFIXES}


class ReplicaSampler:
    """Reads each phase's target and RUNNING replicas from the Serve REST API at `dashboard_url`.

    `headers`/`ssl_context`: for a dashboard behind the Kubernetes API server's service proxy."""

    def __init__(self, dashboard_url: str, deployments: Mapping[str, str], *, app: Optional[str] = None,
                 timeout_s: float = SAMPLE_TIMEOUT_S, headers: Optional[Callable[[], Mapping[str, str]]] = None,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.url = dashboard_url.rstrip("/") + SERVE_API_PATH
        self.deployments = dict(deployments)
        self.app, self.timeout_s, self.headers, self.ssl_context = app, timeout_s, headers, ssl_context

    def document(self) -> Any:
        """The raw `ServeInstanceDetails` JSON."""
        request = urllib.request.Request(self.url, headers=dict(self.headers()) if self.headers else {})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self.ssl_context) as answer:
                body = answer.read(MAX_DOCUMENT_BYTES + 1)
        except urllib.error.HTTPError as exc:
            raise SampleError(f"{self.url} answered HTTP {exc.code}") from None
        except (OSError, ValueError) as exc:  # URLError, timeouts, resets
            raise SampleError(f"{self.url}: {str(getattr(exc, 'reason', exc))[:_ERROR_TEXT_LIMIT]}") from None
        if len(body) > MAX_DOCUMENT_BYTES:
            raise SampleError(f"{self.url} answered more than {MAX_DOCUMENT_BYTES} bytes")
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            raise SampleError(f"{self.url} answered something that is not JSON") from None

    def sample(self) -> Counts:
        """{phase: {"target": n, "running": m}} now; SampleError when the API cannot say."""
        return phase_counts(self.document(), self.deployments, self.app)


class ReplicaRecorder:
    """Samples a ReplicaSampler every `every_s` while a run lasts; `samples` are
    `{"t": s from the run start, "phases": {...}}` or `{"t": ..., "error": "..."}` (a miss is kept,
    never read as zero replicas). `clock` must be the run's clock (loadgen uses perf_counter)."""

    def __init__(self, sampler: Any, every_s: float = SAMPLE_EVERY_S,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.sampler, self.every_s, self.clock = sampler, every_s, clock
        self.samples: list[dict[str, Any]] = []

    def take(self, t0: float) -> dict[str, Any]:
        try:
            row: dict[str, Any] = {"phases": self.sampler.sample()}
        except SampleError as exc:
            row = {"error": str(exc)[:_ERROR_TEXT_LIMIT]}
        row = {"t": round(self.clock() - t0, 3), **row}
        self.samples.append(row)
        return row

    async def run(self, t0: float, stop: asyncio.Event) -> None:
        """Sample (in a thread: urllib blocks) until `stop` is set, then once more."""
        while not stop.is_set():
            await asyncio.to_thread(self.take, t0)
            try:
                await asyncio.wait_for(stop.wait(), self.every_s)
            except TimeoutError:
                pass
        await asyncio.to_thread(self.take, t0)


def _cause(schedule: Optional[Schedule], raised_s: float) -> Optional[int]:
    """The latest step starting at or before `raised_s` whose rate rose (above the end rate of the
    step before it, or a ramp upward); None without a schedule or such a step."""
    if schedule is None:
        return None
    best = None
    for index, step in enumerate(schedule.steps):
        if step.at > raised_s:
            break
        before = schedule.steps[index - 1].end_rate if index else 0.0
        if step.rate > before or step.end_rate > step.rate:
            best = index
    return best


def scale_ups(samples: Sequence[Mapping[str, Any]], schedule: Optional[Schedule] = None) -> list[dict[str, Any]]:
    """Every rise of a phase's RUNNING replicas in `samples`: from, to, when Serve's target first
    rose above `from`, when the new replicas were RUNNING, and how long that took from the load step."""
    ups: list[dict[str, Any]] = []
    running: dict[str, int] = {}
    reached: dict[str, dict[int, float]] = {}  # phase -> {n: since when the target has been >= n}
    for row in samples:
        for phase, now in (row.get("phases") or {}).items():
            marks = reached.setdefault(phase, {})
            for n in [n for n in marks if n > now["target"]]:
                del marks[n]
            for n in range(1, now["target"] + 1):
                marks.setdefault(n, row["t"])
            before = running.get(phase)
            if before is not None and now["running"] > before:
                target_s = marks.get(before + 1, row["t"])
                cause = _cause(schedule, target_s)
                step_at = schedule.steps[cause].at if schedule is not None and cause is not None else None
                ups.append({"phase": phase, "from": before, "to": now["running"], "load_step": cause,
                            "step_at_s": step_at, "target_raised_s": target_s, "serving_s": row["t"],
                            "took_s": None if step_at is None else round(row["t"] - step_at, 3),
                            "target_to_serving_s": round(row["t"] - target_s, 3)})
            running[phase] = now["running"]
    return ups


def changes(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The first sample, each one whose counts differ from the sample before, and the last: the
    replica counts over the run as a step function, a few rows however long the run (summary.json
    travels as one log line from the in-cluster Job)."""
    kept: list[Mapping[str, Any]] = []
    for row in rows:
        if not kept or row["phases"] != kept[-1]["phases"]:
            kept.append(row)
    if rows and kept[-1] is not rows[-1]:
        kept.append(rows[-1])
    return kept


def replicas_summary(recorder: Optional[ReplicaRecorder], schedule: Optional[Schedule],
                     why_not: str = "no --dashboard given") -> dict[str, Any]:
    """summary.json's `replicas`: the phases seen, the counts over the run (`changes`), the
    scale-ups; or, when nothing was sampled, `sampled: false` and why (never zero replicas that
    nobody counted)."""
    if recorder is None:
        return {"sampled": False, "why": why_not}
    counted = [row for row in recorder.samples if "phases" in row]
    errors = [row["error"] for row in recorder.samples if "error" in row]
    if not counted:
        return {"sampled": False, "why": f"the Serve REST API never answered ({errors[-1] if errors else 'no sample'})"}
    phases = sorted({phase for row in counted for phase in row["phases"]})
    most = {p: max(row["phases"][p]["running"] for row in counted if p in row["phases"]) for p in phases}
    return {"sampled": True, "every_s": recorder.every_s, "phases": phases, "max_running": most,
            "samples_taken": len(recorder.samples), "failed_samples": len(errors),
            "last_error": errors[-1] if errors else None, "scale_ups": scale_ups(counted, schedule),
            "samples": changes(counted)}
