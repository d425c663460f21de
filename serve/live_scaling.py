"""The Scaling section of the web app's Status panel (issue 30 §3): per phase, replicas now / target
/ min / max, the signal it scales on and its value, and the last scaling decisions with their reason.

Where each part comes from (never raises; a part that could not be read says so, and says where
it was to come from):
- Serve's application status, `GET /api/serve/applications/` on the head's dashboard (the cached
  answer serve.evidence already reads), shaped by ray/serve/schema.py `ServeInstanceDetails` (read
  in Ray 2.58's wheel, the DLC's, and 2.60's, the same fields): per deployment `target_num_replicas`,
  `replicas[].state` (ReplicaState: RUNNING, STARTING, UPDATING, RECOVERING, STOPPING,
  PENDING_MIGRATION), `deployment_config.autoscaling_config` {min_replicas, max_replicas,
  target_ongoing_requests, upscale_delay_s, downscale_delay_s, ...} (absent for a fixed count),
  `status` (UPSCALING / DOWNSCALING / HEALTHY ...), `status_trigger` (AUTOSCALING while Serve
  scales, UPSCALE_COMPLETED / DOWNSCALE_COMPLETED after; ray/serve/_private/common.py
  DeploymentStatusTrigger) and `message` ("Upscaling from 1 to 2 replicas.",
  deployment_state.py `_record_scaling_status_transition`): the latest decision, without a time.
  The schema's `autoscaling_detail.decisions` [{timestamp_s, reason, prev_num_replicas,
  curr_num_replicas, policy}] is read when present; neither 2.58 nor 2.60 fills it (nothing in
  ray/serve/_private writes it), so it is null there.
- The decisions with their time: Serve's controller logs each one (deployment_state.py
  `DeploymentState.autoscale`, the same text in 2.58 and 2.60) to its log file
  (`controller_info.log_file_path`, e.g. /serve/controller_9899.log, on `controller_info.node_id`),
  in Serve's text format (ray/serve/_private/logging_utils.py ServeFormatter:
  `LEVEL asctime controller <pid> -- message`):
  `INFO 2026-12-06 12:00:01,234 controller 1200 -- Upscaling Deployment(name='Decode:m',
  app='llm') from 1 to 2 replicas. Current ongoing requests: 9.20, current running replicas: 1.`
  It is read through Ray's log API (`/api/v0/logs/file?node_id=&filename=`, serve.evidence).
  "Current ongoing requests" there is Serve's own count (for decode it includes the prefill wait);
  raypd's policy decided on the signal below.
- The signal's value: the deployment's Prometheus (serve.prometheus_api), one instant query of the
  expressions of components/render/observability_scaling.py, the ones the dashboard draws.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Mapping, Optional

from components.render import observability_scaling as scaling
from serve.evidence import Evidence, VerifyPlan
from serve.kube import KubeClient, KubeError
from serve.prometheus_api import PrometheusError, finite, prometheus_for

log = logging.getLogger(__name__)

MAX_DECISIONS = 5
KEY_LABEL = "raypd_phase"
RUNNING = "RUNNING"
STARTING = ("STARTING", "UPDATING", "RECOVERING", "PENDING_MIGRATION")
SERVE_SOURCE = "Serve application status (GET /api/serve/applications/)"
# Serve's controller line for one autoscaling decision (see the module docstring).
DECISION_LINE = re.compile(
    r"^(?P<level>[A-Z]+) (?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d+)?) controller \S+ -- "
    r"(?P<verb>Upscaling|Downscaling) Deployment\(name='(?P<deployment>[^']*)', app='(?P<app>[^']*)'\) "
    r"from (?P<before>\d+) to (?P<after>\d+) replicas\.\s*(?P<reason>.*)$")


def parse_decisions(text: str, app: str) -> dict[str, list[dict[str, Any]]]:
    """Serve deployment -> its logged decisions, newest first (at most MAX_DECISIONS each)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for line in text.splitlines():
        match = DECISION_LINE.match(line.strip())
        if match is None or match["app"] != app:
            continue
        found.setdefault(match["deployment"], []).append({
            "time": match["time"], "from": int(match["before"]), "to": int(match["after"]),
            "direction": "up" if match["verb"] == "Upscaling" else "down",
            "reason": match["reason"][:300] or f"{match['verb']} (no reason logged)"})
    return {name: list(reversed(items))[:MAX_DECISIONS] for name, items in found.items()}


def _serve_phase(details: Mapping[str, Any]) -> dict[str, Any]:
    """What Serve says of one deployment (ServeInstanceDetails' DeploymentDetails)."""
    states = [str(r.get("state")) for r in details.get("replicas") or [] if isinstance(r, Mapping)]
    config = (details.get("deployment_config") or {}).get("autoscaling_config")
    config = config if isinstance(config, Mapping) else {}
    recorded = ((details.get("autoscaling_detail") or {}).get("decisions")) or []
    return {
        "running": states.count(RUNNING),
        "starting": sum(states.count(state) for state in STARTING),
        "target": details.get("target_num_replicas"),
        "min": config.get("min_replicas"), "max": config.get("max_replicas"),
        "targetOngoingRequests": config.get("target_ongoing_requests"),
        "upscaleDelaySeconds": config.get("upscale_delay_s"),
        "downscaleDelaySeconds": config.get("downscale_delay_s"),
        "status": {"status": details.get("status"), "trigger": details.get("status_trigger"),
                   "message": details.get("message") or ""},
        "recorded": [{"time": d.get("timestamp_s"), "from": d.get("prev_num_replicas"),
                      "to": d.get("curr_num_replicas"), "reason": str(d.get("reason", ""))[:300],
                      "policy": d.get("policy")}
                     for d in recorded if isinstance(d, Mapping)][-MAX_DECISIONS:][::-1],
    }


def _signal_query(deployments: Mapping[str, str], app: str) -> str:
    return " or ".join(f'label_replace(({scaling.signal(phase, deployments, app)}), "{KEY_LABEL}", '
                       f'"{phase}", "", "")' for phase in deployments)


def read_signals(client: KubeClient, outputs: Mapping[str, Any], deployments: Mapping[str, str], app: str,
                 timeout: Optional[float]) -> dict[str, Any]:
    """`{"available": true, "values": {phase: value or None}}` or `{"available": false, "reason"}`."""
    try:
        api = prometheus_for(client, outputs, timeout)
        if api is None:
            return {"available": False, "reason": "the stack has no metrics stack "
                    "(raypd:observability.enabled is false): no signal to read"}
        values: dict[str, Optional[float]] = dict.fromkeys(deployments)
        for sample in api.query(_signal_query(deployments, app)):
            phase = sample.labels.get(KEY_LABEL)
            if phase in values and values[phase] is None:
                values[phase] = finite(sample.value)
        return {"available": True, "values": values}
    except PrometheusError as exc:
        return {"available": False, "reason": str(exc)}


def _controller_log(ev: Evidence, details: Mapping[str, Any]) -> tuple[str, str]:
    """(the controller log's text, where it came from); KubeError when it cannot be read."""
    info = details.get("controller_info") or {}
    path, node = str(info.get("log_file_path") or ""), str(info.get("node_id") or "")
    if not path or not node:
        raise KubeError("Serve's status names no controller log file (controller_info)")
    return ev.ray_log({"node_id": node, "filename": path.lstrip("/")}), f"Serve controller log ({path})"


def scaling_status(ev: Evidence, plan: VerifyPlan, outputs: Mapping[str, Any], client: KubeClient,
                   timeout: Optional[float] = None) -> dict[str, Any]:
    """The Scaling section; never raises (see the module docstring)."""
    try:
        return _scaling_status(ev, plan, outputs, client, timeout)
    except Exception as exc:  # noqa: BLE001 - the Status panel must render whatever the cluster says
        log.debug("scaling status failed", exc_info=True)
        return {"error": f"cannot read the scaling status: {type(exc).__name__}"}


def _scaling_status(ev: Evidence, plan: VerifyPlan, outputs: Mapping[str, Any], client: KubeClient,
                    timeout: Optional[float]) -> dict[str, Any]:
    topology = outputs.get("topology") or {}
    deployments = {name: phase.deployment for name, phase in plan.phases.items()}
    result: dict[str, Any] = {"serveSource": SERVE_SOURCE}
    serve: dict[str, Any] = {}
    try:
        details = ev.serve_details()
        app = (details.get("applications") or {}).get(plan.app)
        if not isinstance(app, Mapping):
            raise KubeError(f"Serve has no application {plan.app!r}")
        serve = {name: d for name, d in (app.get("deployments") or {}).items() if isinstance(d, Mapping)}
    except KubeError as exc:
        details = {}
        result["serve"] = {"error": str(exc)}
    logged: dict[str, list[dict[str, Any]]] = {}
    try:
        if not details:
            raise KubeError("not read: Serve's status, which names the log file, could not be read")
        text, result["decisionsSource"] = _controller_log(ev, details)
        logged = parse_decisions(text, plan.app)
    except KubeError as exc:
        result["decisionsSource"] = {"error": f"Serve's controller log: {exc}"}
    signals = (read_signals(client, outputs, deployments, plan.app, timeout) if ev.down is None
               else {"available": False, "reason": str(ev.down)})
    result["signals"] = {k: v for k, v in signals.items() if k != "values"}
    values: Any = signals.get("values") or {}
    phases = []
    for name, phase in plan.phases.items():
        entry = topology.get(name) or {}
        row: dict[str, Any] = {
            "phase": name, "deployment": phase.deployment, "autoscaled": "minReplicas" in entry,
            "initial": phase.replicas, "min": phase.min_replicas, "max": phase.max_replicas,
            "boundsSource": "stack outputs (topology)",
            "signal": {"words": scaling.signal_words(name, deployments),
                       "value": values.get(name)},
        }
        if phase.deployment in serve:
            seen = _serve_phase(serve[phase.deployment])
            if row["autoscaled"] and seen["min"] is not None and seen["max"] is not None:
                row["boundsSource"] = "Serve's deployment config"
            else:
                seen["min"], seen["max"] = row["min"], row["max"]
            row.update(seen)
        elif serve:
            row["status"] = {"error": f"Serve has no deployment {phase.deployment}"}
        row["decisions"] = logged.get(phase.deployment, [])
        running = row.get("running")
        value = row["signal"]["value"]
        row["signal"]["perReplica"] = value / running if value is not None and running else None
        phases.append(row)
    result["phases"] = phases
    return result
