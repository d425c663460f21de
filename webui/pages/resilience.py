"""The Resilience tab: the confirmed form, the running check's phases, the last runs' reports and
their timeline plots. The work and its refusals are webui/resilience_runs.py's."""

from __future__ import annotations

from typing import Any, Optional

from flask import Response, flash, g, redirect, render_template, request, url_for

from components.config.errors import FieldError
from serve.resilience.limits import DEFAULT_DURATION_S, DEFAULT_FAULT_AT_S, DEFAULT_RATE, FAULTS
from webui.api_models import BodyRefused, ResilienceRequest, parse
from webui.deployments.errors import Conflict, NotFound
from webui.deployments.reads import ACTIVE_STATUSES
from webui.engines.base import EngineError
from webui.errors import render_error
from webui.forms import parse_form_float
from webui.pages.blueprint import OPERATION_LABELS, bp
from webui.resilience_runs import what_users_see
from webui.state import raypd

FORM_KEYS = ("fault", "rate", "durationSeconds", "confirm")
FORM_DEFAULTS = {"fault": "decode-pod", "rate": f"{DEFAULT_RATE:g}", "durationSeconds": f"{DEFAULT_DURATION_S:g}",
                 "confirm": ""}
MAX_FORM_TEXT = 200
SHOWN_RUNS = 10


def request_from_form(form: Any) -> ResilienceRequest:
    """The form's text as a ResilienceRequest; BodyRefused names each field that is wrong."""
    body: dict[str, Any] = {"fault": str(form.get("fault", "") or "").strip(),
                            "confirm": str(form.get("confirm", "") or "").strip()[:MAX_FORM_TEXT]}
    problems: list[FieldError] = []
    for key in ("rate", "durationSeconds"):
        text = str(form.get(key, "") or "").strip()
        if not text:
            continue
        try:
            body[key] = parse_form_float(text[:MAX_FORM_TEXT])
        except ValueError:
            problems.append(FieldError(key, f"must be a number, got {text[:40]!r}"))
    if problems:
        raise BodyRefused(problems)
    return parse(ResilienceRequest, body)


def _render(name: str, values: Optional[dict[str, str]], errors: list[FieldError],
            status: int = 200) -> tuple[str, int]:
    app = raypd()
    detail = app.service.get(name, jobs=20)
    record = app.service.record(name)
    job = app.reads.job_of(name, request.args.get("job"))
    if job is None:  # a check still running is what this tab is about
        latest = next((j for j in detail["jobs"] if j["operation"] == "resilience"), None)
        if latest is not None and latest["status"] in ACTIVE_STATUSES:
            job = app.reads.job(latest["id"])
    events = app.reads.latest_events(job["id"], limit=500) if job else []
    runs = app.resilience.runs(name)["runs"][:SHOWN_RUNS]
    wanted = request.args.get("run")
    shown = next((run for run in runs if run["id"] == wanted), runs[0] if runs else None)
    field_errors = {e.field: e.message for e in errors if e.field in FORM_KEYS}
    general = [e.message for e in errors if e.field not in FORM_KEYS]
    return render_template(
        "resilience.html", d=detail, tab="resilience", job=job, events=events,
        active=job is not None and job["status"] in ACTIVE_STATUSES, labels=OPERATION_LABELS,
        job_reports={}, job_steps=None, job_consequences=[], job_assessment=None, job_eta=None,
        unavailable=app.resilience.available(record), values=values or dict(FORM_DEFAULTS),
        field_errors=field_errors, general_errors=general, faults=[(f, what_users_see(f)) for f in FAULTS],
        fault_at_s=DEFAULT_FAULT_AT_S, runs=runs, shown=shown,
    ), status


@bp.get("/deployments/<name>/resilience")
def resilience(name: str) -> Any:
    try:
        return _render(name, None, [])
    except NotFound:
        return render_error(404, f"There is no deployment named “{name}”.")


@bp.post("/deployments/<name>/resilience")
def resilience_post(name: str) -> Any:
    app = raypd()
    values = {key: str(request.form.get(key, "") or "")[:MAX_FORM_TEXT] for key in FORM_KEYS}
    values["confirm"] = ""  # typed again for every attempt
    try:
        job_id = app.resilience.start(name, request_from_form(request.form), g.actor)
    except NotFound:
        return render_error(404, f"There is no deployment named “{name}”.")
    except BodyRefused as exc:
        return _render(name, values, exc.errors, status=400)
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for("pages.resilience", name=name, job=exc.job))
    except EngineError as exc:
        return _render(name, values, [FieldError("engine", exc.message)], status=exc.http_status)
    return redirect(url_for("pages.resilience", name=name, job=job_id))


@bp.get("/resilience/<run>/timeline.png")
def resilience_plot(run: str) -> Any:
    try:
        image = raypd().resilience.plot(run)
    except NotFound as exc:
        return render_error(404, str(exc))
    return Response(image, mimetype="image/png", headers={"Cache-Control": "private, max-age=3600"})
