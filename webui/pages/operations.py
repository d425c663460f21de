"""The buttons that start a job on a deployment (preview, deploy, checks, refresh, tear down,
clear pending) and cancel one: each is one call of the service, then the deployment's page."""

from __future__ import annotations

from typing import Optional

from flask import flash, g, redirect, request, url_for
from flask.typing import ResponseReturnValue

from components.config.errors import SpecError
from webui.deployments.errors import Conflict, NotFound
from webui.engines.base import EngineError
from webui.pages.blueprint import FORCE_FIELD, bp
from webui.state import raypd


def start_operation(name: str, operation: str, force: bool = False,
                    confirm: Optional[str] = None) -> ResponseReturnValue:
    """Start a job and go to the deployment's page (or say, in a flash, why not)."""
    app = raypd()
    try:
        job_id = app.service.start(name, operation, g.actor, force=force, confirm=confirm)
    except NotFound:
        flash(f"There is no deployment named {name}.", "error")
        return redirect(url_for("pages.index"))
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for("pages.deployment", name=name, job=exc.job))
    except EngineError as exc:
        flash(exc.message, "error")
        return redirect(url_for("pages.deployment", name=name))
    except SpecError as exc:
        flash("; ".join(error.message for error in exc.errors), "error")
        return redirect(url_for("pages.deployment", name=name))
    return redirect(url_for("pages.deployment", name=name, job=job_id))


@bp.post("/deployments/<name>/preview")
def deployment_preview(name: str) -> ResponseReturnValue:
    return start_operation(name, "preview")


@bp.post("/deployments/<name>/up")
def deployment_up(name: str) -> ResponseReturnValue:
    return start_operation(name, "up", force=request.form.get(FORCE_FIELD) == "1")


@bp.post("/deployments/<name>/clear-pending")
def deployment_clear_pending(name: str) -> ResponseReturnValue:
    return start_operation(name, "clear-pending", confirm=request.form.get("confirm", "").strip())


@bp.post("/deployments/<name>/preflight")
def deployment_preflight(name: str) -> ResponseReturnValue:
    return start_operation(name, "preflight")


@bp.post("/deployments/<name>/verify")
def deployment_verify(name: str) -> ResponseReturnValue:
    return start_operation(name, "verify")


@bp.post("/deployments/<name>/refresh")
def deployment_refresh(name: str) -> ResponseReturnValue:
    return start_operation(name, "refresh")


@bp.post("/deployments/<name>/destroy")
def deployment_destroy(name: str) -> ResponseReturnValue:
    if request.form.get("confirm", "").strip() != name:
        flash(f"Type the deployment name “{name}” exactly to tear it down.", "error")
        return redirect(url_for("pages.deployment", name=name) + "#teardown")
    return start_operation(name, "destroy")


@bp.post("/jobs/<job_id>/cancel")
def job_cancel(job_id: str) -> ResponseReturnValue:
    app = raypd()
    try:
        job = app.service.cancel(job_id, g.actor)
    except NotFound:
        flash("There is no such job.", "error")
        return redirect(url_for("pages.index"))
    flash(f"Cancel requested for {job['operation']} ({job['status']}).", "info")
    return redirect(url_for("pages.deployment", name=job["deployment"], job=job_id))
