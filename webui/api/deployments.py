"""Deployments through the API: list, create, read, change and discard changes; the operations, each
started as a job (202 with its id at once); and what they left (pending operations, the last
reports, what runs now)."""

from __future__ import annotations

from typing import Any

from flask import Response, g, jsonify, url_for

from webui.api.blueprint import answer, bp, json_body
from webui.api_models import (
    ChangeDeployment,
    ClearPending,
    CreateDeployment,
    DeploymentList,
    JobAccepted,
    NoOptions,
    UpOptions,
)
from webui.engines.base import OFFLINE_NOTICE
from webui.state import raypd


@bp.get("/deployments")
def list_deployments() -> Response:
    app = raypd()
    return answer(DeploymentList(deployments=app.service.list(), engine=app.engines.describe()))


@bp.post("/deployments")
def create_deployment() -> tuple[Response, int, dict[str, str]]:
    body = json_body(CreateDeployment)
    created = raypd().service.create(body.name, body.config, g.actor)
    location = url_for("api.get_deployment", name=created["name"])
    return jsonify(created), 201, {"Location": location}


@bp.get("/deployments/<name>")
def get_deployment(name: str) -> Response:
    return jsonify(raypd().service.get(name))


@bp.patch("/deployments/<name>")
def change_deployment(name: str) -> Response:
    config = json_body(ChangeDeployment).config
    return jsonify(raypd().service.change(name, config, g.actor))


@bp.delete("/deployments/<name>/pending-config")
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
def preview_deployment(name: str) -> tuple[Response, int, dict[str, str]]:
    json_body(NoOptions)
    return _start(name, "preview")


@bp.post("/deployments/<name>/up")
def up_deployment(name: str) -> tuple[Response, int, dict[str, str]]:
    return _start(name, "up", force=json_body(UpOptions).force)


@bp.post("/deployments/<name>/refresh")
def refresh_deployment(name: str) -> tuple[Response, int, dict[str, str]]:
    json_body(NoOptions)
    return _start(name, "refresh")


@bp.delete("/deployments/<name>")
def destroy_deployment(name: str) -> tuple[Response, int, dict[str, str]]:
    json_body(NoOptions)
    return _start(name, "destroy")


@bp.post("/deployments/<name>/preflight")
def preflight_deployment(name: str) -> tuple[Response, int, dict[str, str]]:
    json_body(NoOptions)
    return _start(name, "preflight")


@bp.post("/deployments/<name>/verify")
def verify_deployment(name: str) -> tuple[Response, int, dict[str, str]]:
    json_body(NoOptions)
    return _start(name, "verify")


@bp.get("/deployments/<name>/pending")
def deployment_pending(name: str) -> Response:
    return jsonify(raypd().service.pending(name))


@bp.post("/deployments/<name>/clear-pending")
def clear_pending(name: str) -> tuple[Response, int, dict[str, str]]:
    return _start(name, "clear-pending", confirm=json_body(ClearPending).confirm)


@bp.get("/deployments/<name>/checks")
def deployment_checks(name: str) -> Response:
    return jsonify(raypd().service.checks(name))


@bp.get("/deployments/<name>/status")
def deployment_status(name: str) -> Response:
    return jsonify(raypd().service.live_status(name))


