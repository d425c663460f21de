"""Contract 4's response shapes: what a deployment, its list row, a job and its checks look like
to the API and the pages. Pure functions of the store's records (webui/store/records.py) and
the plan; no store, no engine."""

from __future__ import annotations

import json
import shlex
import time
from typing import Any, Mapping, Optional, Union

from components.config import defaults
from components.config.spec import DeploymentSpec
from components.plan.topology import DeploymentPlan, as_plan
from components.render.outputs import offline_placeholders, render_stack_outputs
from webui.api_models import (
    ChecksView,
    DeployedSettings,
    DeploymentRow,
    DeploymentView,
    JobView,
    LastReport,
    PendingSettings,
    dump,
)
from webui.engines.base import OFFLINE_NOTICE
from webui.pending_changes import (
    DEPLOYED_LABEL,
    REPORT_SETTINGS_KEY,
    deployed_kind,
    pending_changes,
    report_staleness,
    settings_kind,
    token_replaced,
)
from webui.resource_steps import cost_change
from webui.status import CHECK_OPERATIONS
from webui.summary import summarize


def iso_time(timestamp: Optional[float]) -> Optional[str]:
    if timestamp is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


def engine_fields(engine: str) -> dict[str, Any]:
    fields: dict[str, Any] = {"engine": engine}
    if engine == "offline":
        fields["notice"] = OFFLINE_NOTICE
    return fields


def placeholders_of(engine: str, plan: Optional[DeploymentPlan],
                    outputs: Optional[Mapping[str, Any]]) -> dict[str, str]:
    """The outputs an offline plan made up ({dotted path: why}, components.render.outputs); {} for a
    real deployment, whose outputs are what AWS answered. `plan`: the settings the outputs are of."""
    if engine != "offline" or plan is None or not outputs:
        return {}
    return offline_placeholders(plan.spec, outputs)


def connect_info(shown: Union[DeploymentPlan, DeploymentSpec],
                 outputs: Optional[Mapping[str, Any]],
                 placeholders: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """How to reach the endpoint: the port-forward command and a chat completion with curl.
    Pass the plan when the request has one (given a spec, it is planned here). No command is
    offered against a value in `placeholders` (an offline plan's made-up load balancer)."""
    plan = as_plan(shown)
    spec = plan.spec
    planned = render_stack_outputs(
        plan, availability_zone=spec.availability_zone or "",
        cluster_name=spec.effective_cluster_name,
    )
    port_forward = (outputs or {}).get("portForwardCommand") or planned["portForwardCommand"]
    port = defaults.SERVE_PORT
    # Every value that lands in a command people paste is shell-quoted, whatever the spec allowed.
    payload = json.dumps({"model": spec.model.id, "messages": [{"role": "user", "content": "Hello!"}],
                          "max_tokens": 64})
    curl = (
        f"curl -s http://localhost:{port}/v1/chat/completions \\\n"
        "  -H 'Content-Type: application/json' \\\n"
        f"  -d {shlex.quote(payload)}"
    )
    kubeconfig = (
        f"aws eks update-kubeconfig --region {shlex.quote(spec.region)} "
        f"--name {shlex.quote(spec.effective_cluster_name)}"
    )
    external = external_connect(outputs, payload)
    invented = (placeholders or {}).get("endpoint.url")
    if invented and "externalUrl" in external:
        external.pop("externalCurl", None)
        external["externalUrlPlaceholder"] = invented
    return {"portForward": port_forward, "curl": curl, "kubeconfig": kubeconfig,
            "openaiBaseUrl": planned["openaiBaseUrl"], **external}


def external_connect(outputs: Optional[Mapping[str, Any]], payload: str) -> dict[str, str]:
    """The endpoint's own URL (outputs `endpoint.url`, issue 17) and a curl line for it that reads
    the API key from $RAYPD_API_KEY, so the key is never pasted into a shell history. {} for a
    stack without the output. externalUrl is endpoint.url as the stack gives it (the OpenAI base URL,
    ending /v1, an SDK's base_url); the curl line is shell-quoted like every value a person pastes."""
    endpoint = (outputs or {}).get("endpoint")
    if not isinstance(endpoint, Mapping) or not isinstance(endpoint.get("url"), str) or not endpoint["url"]:
        return {}
    url = endpoint["url"].strip().rstrip("/")  # the contract's form: the OpenAI base URL, .../v1
    base = url[: -len("/v1")] if url.endswith("/v1") else url
    auth = endpoint.get("auth")
    lines = [f"curl -s {shlex.quote(base + '/v1/chat/completions')} \\"]
    if auth != "none":
        lines.append('  -H "Authorization: Bearer $RAYPD_API_KEY" \\')
    lines += ["  -H 'Content-Type: application/json' \\", f"  -d {shlex.quote(payload)}"]
    found = {"externalUrl": url, "externalCurl": "\n".join(lines)}
    for key, field in (("endpointScope", "scope"), ("endpointAuth", "auth")):
        if isinstance(endpoint.get(field), str):
            found[key] = endpoint[field]
    return found


def list_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """One row of the list (the list page, GET /deployments)."""
    deployed = row["deployed"]
    # What runs (or was planned) is what the list shows, the store's `summary` says; the
    # stack's own settings only when nothing was ever deployed (`settings`: "pending").
    summary = row["summary"] or {}
    return dump(DeploymentRow(
        name=row["name"],
        **engine_fields(row["engine"]),
        status=row["status"],
        settings=settings_kind(row["engine"], deployed is not None),
        hasPendingChanges=deployed is not None and (deployed["configDiffers"] or deployed["tokenReplaced"]),
        deployedAt=iso_time(deployed["time"]) if deployed is not None else None,
        modelId=summary.get("modelId"),
        mode=summary.get("mode"),
        topology=summary.get("topology"),
        region=summary.get("region"),
        gpus=summary.get("gpus"),
        estimatedUsdPerHour=summary.get("usdPerHour"),
        lastOperation=row["lastOperation"],
        lastResult=row["lastResult"],
        lastOperationAt=iso_time(row["lastOperationAt"]),
        lastJob=row["lastJob"],
        createdAt=iso_time(row["createdAt"]),
    ))


def deployed_view(engine: str, deployed: Mapping[str, Any],
                  plan: Optional[DeploymentPlan]) -> DeployedSettings:
    """The deployed settings; `plan` is theirs (None when they no longer validate)."""
    summary = deployed["summary"] or (summarize(plan) if plan is not None else {})
    kind = deployed_kind(engine)
    return DeployedSettings(
        kind=kind, label=DEPLOYED_LABEL[kind], at=iso_time(deployed["time"]), job=deployed["job"],
        spec=deployed["config"], summary=summary, estimatedUsdPerHour=summary.get("usdPerHour"),
    )


def pending_view(record: Mapping[str, Any], deployed: Optional[Mapping[str, Any]],
                 deployed_settings: Optional[DeployedSettings]) -> Optional[PendingSettings]:
    """The stack's settings that no up has deployed: all of them when none ran, else the ones
    that differ (None when nothing does). Costs from the stored summaries, as the list shows them."""
    current, summary = record["config"], record["summary"]
    if deployed is None or deployed_settings is None:
        changes: list[dict[str, Any]] = []
        before = None
        replaced = False
    else:
        changes = pending_changes(deployed["config"], current, deployed["tokenReplaced"])
        if not changes:
            return None
        before = deployed_settings.estimatedUsdPerHour
        replaced = token_replaced(deployed["config"], current, deployed["tokenReplaced"])
    return PendingSettings.model_validate({
        "spec": current, "summary": summary, "estimatedUsdPerHour": summary.get("usdPerHour"),
        "changes": changes, "usdPerHour": cost_change(before, summary.get("usdPerHour")),
        "hfTokenReplaced": replaced,
    })


def deployment_view(record: Mapping[str, Any], *, warnings: list[str],
                    deployed: Optional[DeployedSettings], pending: Optional[PendingSettings],
                    plan: Optional[DeploymentPlan], jobs: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One deployment (GET /deployments/<name>, the deployment page); `plan` is the one the page
    draws (the deployed settings' when something is deployed, else the stack's own)."""
    placeholders = placeholders_of(record["engine"], plan, record["outputs"])
    return dump(DeploymentView(
        name=record["name"],
        **engine_fields(record["engine"]),
        status=record["status"],
        spec=record["config"],
        summary=record["summary"],
        warnings=warnings,
        estimatedUsdPerHour=record["summary"].get("usdPerHour"),
        deployed=deployed,
        pending=pending,
        outputs=record["outputs"],
        **({"placeholders": placeholders} if placeholders else {}),
        resources=record["resources"],
        connect=connect_info(plan, record["outputs"], placeholders) if plan is not None else None,
        pendingChanges=(
            {"config": pending.changes, "usdPerHour": pending.usdPerHour}
            if pending is not None and deployed is not None else None),
        lastOperation=record["lastOperation"],
        lastResult=record["lastResult"],
        lastOperationAt=iso_time(record["lastOperationAt"]),
        createdAt=iso_time(record["createdAt"]),
        jobs=[job_view(job) for job in jobs],
    ))


def checks_view(stored: Mapping[str, Mapping[str, Any]],
                current: Optional[Mapping[str, Optional[str]]] = None) -> dict[str, Any]:
    """The last report of each kind (None where that kind never ran), with its job and time, and
    whether it is stale: made for other settings than `current` (kind -> settings_digest of the
    settings it would be made for now: the stack's for a preflight, the deployed ones for verify)."""
    answer: dict[str, Any] = {}
    for kind in CHECK_OPERATIONS:
        item = stored.get(kind)
        if item is None:
            answer[kind] = None
            continue
        report = dict(item["report"])
        made_for = report.pop(REPORT_SETTINGS_KEY, None)
        why = report_staleness(kind, made_for, (current or {}).get(kind)) if current is not None else None
        answer[kind] = LastReport.model_validate(
            {**report, "job": item["job"], "at": iso_time(item["time"]), "stale": why is not None,
             **({"staleReason": why} if why else {})})
    return dump(ChecksView(**answer))


def public_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """A job as Contract 4 shows it (plus when, who and a hint where there is one)."""
    return dump(job_view(job))


def job_view(job: Mapping[str, Any]) -> JobView:
    """The `JobView` model of a stored job: keys that do not apply are left unset, not null."""
    answer: dict[str, Any] = {
        "id": job["id"],
        "deployment": job["deployment"],
        "operation": job["operation"],
        "engine": job["engine"],
        "status": job["status"],
        "progress": dict(job["progress"]),
        "error": job["error"],
        "createdAt": iso_time(job["createdAt"]),
        "startedAt": iso_time(job["startedAt"]),
        "finishedAt": iso_time(job["finishedAt"]),
        "actor": job["actor"],
    }
    if job.get("hint"):
        answer["hint"] = job["hint"]
    summary = dict(job.get("summary") or {})
    reports = summary.pop("reports", None) or {}
    if summary:
        answer["summary"] = summary
    if reports:
        answer["reports"] = reports  # every Contract 5 report the job made (preflight, verify)
    if job["operation"] in CHECK_OPERATIONS and job["operation"] in reports:
        answer["result"] = reports[job["operation"]]
    if job["engine"] == "offline":
        answer["notice"] = OFFLINE_NOTICE
    return JobView.model_validate(answer)
