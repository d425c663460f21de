"""Deployments through the API: list, create, read, change and discard changes; the operations, each
started as a job (202 with its id at once); and what they left (pending operations, the last
reports, what runs now)."""

from __future__ import annotations

from typing import Any

from flask import Response, g, jsonify, url_for

from webui.api.blueprint import answer, bp, json_body
from webui.api_models import (
    BusyErrors,
    ChangeDeployment,
    ChecksView,
    ClearPending,
    CreateDeployment,
    DeploymentList,
    DeploymentView,
    JobAccepted,
    LiveStatus,
    NoOptions,
    PendingView,
    UpOptions,
)
from webui.engines.base import OFFLINE_NOTICE
from webui.openapi import (
    BAD_BODY,
    BUSY,
    NO_DEPLOYMENT,
    NO_ENGINE,
    TOO_LARGE,
    documented,
    errors,
    json_answer,
    reads,
    starts_job,
)
from webui.state import raypd


@bp.get("/deployments")
@documented("listDeployments", "List deployments (from the app's database; never calls the Pulumi CLI)",
            {"200": json_answer(DeploymentList, "deployments and the engine in use")})
def list_deployments() -> Response:
    app = raypd()
    return answer(DeploymentList(deployments=app.service.list(), engine=app.engines.describe()))


@bp.post("/deployments")
@documented("createDeployment", "Validate a Contract 1 config and create the stack (no cloud action)", {
    "201": json_answer(DeploymentView, "created"),
    "400": errors("invalid body or config; one entry per field"),
    "409": errors("a deployment with this name exists"),
    "413": TOO_LARGE,
}, body=CreateDeployment, body_required=True)
def create_deployment() -> tuple[Response, int, dict[str, str]]:
    body = json_body(CreateDeployment)
    created = raypd().service.create(body.name, body.config, g.actor)
    location = url_for("api.get_deployment", name=created["name"])
    return jsonify(created), 201, {"Location": location}


@bp.get("/deployments/<name>")
@documented("getDeployment", "Spec, status, engine, outputs (secrets masked), resources, connect, last jobs",
            {"200": json_answer(DeploymentView, "the deployment"), "404": NO_DEPLOYMENT})
def get_deployment(name: str) -> Response:
    return jsonify(raypd().service.get(name))


@bp.patch("/deployments/<name>")
@documented("changeDeployment", "Merge Contract 1 keys over the config (null resets a key to its default); "
                                "no cloud action until up", {
    "200": json_answer(DeploymentView, "the deployment with its new spec"),
    "400": errors("invalid keys or values, each named; nothing changes"),
    "404": NO_DEPLOYMENT,
    "409": BUSY,
    "413": TOO_LARGE,
    "503": NO_ENGINE,
}, body=ChangeDeployment, body_required=True)
def change_deployment(name: str) -> Response:
    config = json_body(ChangeDeployment).config
    return jsonify(raypd().service.change(name, config, g.actor))


@bp.delete("/deployments/<name>/pending-config")
@documented("discardPendingChanges", "Discard the pending changes: put the stack's settings back to the "
                                     "deployed (offline: planned) ones; no cloud action. An HF token "
                                     "replaced or removed since the deploy cannot be brought back and "
                                     "stays pending", {
    "200": json_answer(DeploymentView, "the deployment, its settings the deployed ones again"),
    "400": BAD_BODY,
    "404": NO_DEPLOYMENT,
    "409": json_answer(BusyErrors, "a job runs (its id), nothing is pending, or nothing was deployed to "
                                   "go back to; nothing changes"),
    "413": TOO_LARGE,
    "500": errors("the engine could not write the stack's config; it keeps the config it had"),
    "503": NO_ENGINE,
}, body=NoOptions)
def discard_pending_config(name: str) -> Response:
    json_body(NoOptions)
    return jsonify(raypd().service.discard(name, g.actor))


def _start(name: str, operation: str, force: bool = False,
           confirm: Any = None) -> tuple[Response, int, dict[str, str]]:
    service = raypd().service
    job_id = service.start(name, operation, g.actor, force=force, confirm=confirm)
    offline = service.job(job_id)["engine"] == "offline"
    accepted = JobAccepted(job=job_id, **({"notice": OFFLINE_NOTICE} if offline else {}))
    return answer(accepted), 202, {"Location": url_for("api.get_job", job_id=job_id)}


@bp.post("/deployments/<name>/preview")
@starts_job("previewDeployment", "Preview the changes an update would make (runs the preflight first)")
def preview_deployment(name: str) -> tuple[Response, int, dict[str, str]]:
    json_body(NoOptions)
    return _start(name, "preview")


@bp.post("/deployments/<name>/up")
@starts_job("upDeployment", "Create or update the deployment's resources (runs the preflight first)",
            body=UpOptions)
def up_deployment(name: str) -> tuple[Response, int, dict[str, str]]:
    return _start(name, "up", force=json_body(UpOptions).force)


@bp.post("/deployments/<name>/refresh")
@starts_job("refreshDeployment", "Read back the real state of the resources")
def refresh_deployment(name: str) -> tuple[Response, int, dict[str, str]]:
    json_body(NoOptions)
    return _start(name, "refresh")


@bp.delete("/deployments/<name>")
@starts_job("destroyDeployment", "Destroy every resource, then remove the stack")
def destroy_deployment(name: str) -> tuple[Response, int, dict[str, str]]:
    json_body(NoOptions)
    return _start(name, "destroy")


@bp.post("/deployments/<name>/preflight")
@starts_job("preflightDeployment", "Check AWS (credentials, types, zone, quota) and the GPU memory fit; "
                                   "the job's result is a Contract 5 report")
def preflight_deployment(name: str) -> tuple[Response, int, dict[str, str]]:
    json_body(NoOptions)
    return _start(name, "preflight")


@bp.post("/deployments/<name>/verify")
@starts_job("verifyDeployment", "Check what really runs (nodes, EFA, RayService, NIXL backend, KV "
                                "transfers); the job's result is a Contract 5 report")
def verify_deployment(name: str) -> tuple[Response, int, dict[str, str]]:
    json_body(NoOptions)
    return _start(name, "verify")


@bp.get("/deployments/<name>/pending")
@reads("getPendingOperations", "Operations an interrupted update left pending in the state (real engine)",
       PendingView)
def deployment_pending(name: str) -> Response:
    return jsonify(raypd().service.pending(name))


@bp.post("/deployments/<name>/clear-pending")
@starts_job("clearPending", "After checking them in the AWS console: drop pending operations from the "
                            "state (refresh with clear_pending_creates); confirm must be the name",
            body=ClearPending, body_required=True)
def clear_pending(name: str) -> tuple[Response, int, dict[str, str]]:
    return _start(name, "clear-pending", confirm=json_body(ClearPending).confirm)


@bp.get("/deployments/<name>/checks")
@reads("getDeploymentChecks", "The last report of each kind", ChecksView)
def deployment_checks(name: str) -> Response:
    return jsonify(raypd().service.checks(name))


@bp.get("/deployments/<name>/status")
@reads("getDeploymentStatus", "What runs now: nodes, pods, RayService and Serve (real engine, at most "
                              "15 s old)", LiveStatus)
def deployment_status(name: str) -> Response:
    return jsonify(raypd().service.live_status(name))
