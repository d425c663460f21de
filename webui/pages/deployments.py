"""The list, the new-deployment form (form -> preview -> launch) and one deployment's page."""

from __future__ import annotations

from typing import Any, Optional

from flask import g, redirect, render_template, request, url_for
from markupsafe import Markup

from components.config.errors import FieldError, SpecError
from components.plan.topology import plan_deployment
from webui import form_words, forms
from webui.api_key_service import keys_box_state
from webui.deployments.errors import Conflict, NotFound
from webui.deployments.reads import ACTIVE_STATUSES
from webui.diagram import architecture_svg
from webui.engines.base import EngineError
from webui.errors import render_error
from webui.pages.blueprint import FORCE_FIELD, OPERATION_LABELS, bp
from webui.state import DRAFT_LOST, raypd
from webui.summary import rayservice_yaml, summarize

# ---- list ----

@bp.get("/")
def index() -> str:
    app = raypd()
    rows = app.service.list()
    rows_html = app.fragments.render(
        "deployment-rows", rows, lambda: Markup(render_template("_deployment_rows.html", deployments=rows)))
    return render_template(
        "index.html", deployments=rows, rows_html=rows_html, removed=request.args.get("removed"),
    )


# ---- new deployment ----

def _render_form(values: dict[str, str], errors: list[FieldError], draft: Optional[str],
                 status: int = 200) -> tuple[str, int]:
    by_field, general = forms.split_errors(errors)
    return render_template(
        "new.html", values=values, field_errors=by_field, general_errors=general,
        sections=form_words.SECTIONS, groups=form_words.GROUPS, section_modes=forms.SECTION_MODES,
        fields=forms.FIELDS, draft=draft,
        token_kept=raypd().drafts.peek(draft) is not None,
    ), status


@bp.get("/deployments/new")
def new_deployment() -> tuple[str, int]:
    return _render_form(forms.default_values(), [], None)


@bp.post("/deployments/new")
def new_deployment_post() -> Any:
    app = raypd()
    action = request.form.get("action", "preview")
    values = forms.form_values(request.form)
    draft = request.form.get("draft") or None
    typed = request.form.get(forms.TOKEN_FIELD, "")
    if typed.strip():
        app.drafts.drop(draft)
        draft = app.drafts.put(typed.strip())
    elif app.drafts.lost(draft):  # never go on without the token silently: say so, ask again
        return _render_form(values, [FieldError(forms.TOKEN_FIELD, DRAFT_LOST)], None, status=409)
    token = app.drafts.peek(draft)
    if action == "edit":
        return _render_form(values, [], draft)
    name, config, errors = forms.form_to_config(request.form)
    config.pop(forms.TOKEN_FIELD, None)
    if token:
        config[forms.TOKEN_FIELD] = token
    spec = None
    try:
        spec, _ = app.service.validate(name, config)
    except SpecError as exc:
        errors = errors + [e for e in exc.errors if e.field not in {x.field for x in errors}]
    if spec is not None and app.reads.exists(spec.stack):
        errors.append(FieldError(forms.NAME_FIELD, f"a deployment named {spec.stack} already exists"))
    if errors or spec is None:
        return _render_form(values, errors, draft, status=400)
    force = request.form.get(FORCE_FIELD) == "1"
    if action != "launch" or not force:
        # Read-only AWS calls with short timeouts, and the memory fit: the page shows the report.
        report = app.service.checker.preflight(spec, None)
        if action != "launch" or not report.ok:
            blocked = action == "launch"
            plan = plan_deployment(spec)  # built once for the three pictures of the page
            return render_template(
                "preview.html", spec=spec, summary=summarize(plan), values=values, draft=draft,
                has_token=token is not None, diagram=architecture_svg(plan),
                rayservice=rayservice_yaml(plan), engine=app.engines.default,
                preflight=report.as_dict(), blocked=blocked,
            ), (409 if blocked else 200)
    try:
        app.service.create(name, config, g.actor)
    except Conflict as exc:
        return _render_form(values, [FieldError(forms.NAME_FIELD, exc.message)], draft, status=409)
    except EngineError as exc:
        return _render_form(values, [FieldError("engine", exc.message)], draft, status=exc.http_status)
    app.drafts.drop(draft)
    job_id = app.service.start(spec.stack, "up", g.actor, force=force)
    return redirect(url_for("pages.deployment", name=spec.stack, job=job_id))


# ---- one deployment ----

@bp.get("/deployments/<name>")
def deployment(name: str) -> Any:
    return render_deployment(name)


def render_deployment(name: str, new_key: Optional[dict[str, str]] = None) -> Any:
    """The deployment page; `new_key` only in the answer to the form that created that key."""
    app = raypd()
    try:
        # The plan the page draws, built once with the detail (None: see detail["warnings"]).
        detail, plan = app.service.get_with_plan(name, jobs=20)
        checks = app.service.checks(name)  # here too: a tear-down may remove the record meanwhile
    except NotFound:
        gone = app.reads.job_of(name, request.args.get("job"))
        if gone and gone["operation"] == "destroy" and gone["status"] in (
                "succeeded", "running"):
            # The tear-down finished before this page loaded (offline it takes milliseconds); a
            # record is removed only by a succeeded destroy, whose job may still be recording its end.
            return redirect(url_for("pages.index", removed=name))
        return render_error(404, f"There is no deployment named “{name}”. It may have been torn down.")
    job = app.reads.job_of(name, request.args.get("job"))
    if job is None and detail["jobs"]:
        job = app.reads.job(detail["jobs"][0]["id"])
    events = app.reads.events_after(job["id"], 0, limit=2000) if job else []
    job_summary = (job.get("summary") or {}) if job else {}
    job_reports = dict(job_summary.get("reports") or {})
    for kind, last in checks.items():  # the job's report is the last of its kind: say if it is stale
        if job is not None and last and last["job"] == job["id"] and kind in job_reports:
            job_reports[kind] = last
    # A preview says what an update would do while settings are pending; once they are deployed
    # or discarded an update would do none of it.
    preview = job_summary if job and job["operation"] == "preview" and detail["pending"] else None
    return render_template(
        "deployment.html", d=detail, job=job, events=events, checks=checks,
        job_reports=job_reports,
        pending=job_summary.get("pendingOperations") or [],
        job_steps=preview.get("steps") if preview is not None else None,
        job_consequences=job_summary.get("consequences") or [],
        job_assessment=preview.get("assessment") if preview is not None else None,
        job_eta=next((e["etaSeconds"] for e in reversed(events)
                      if isinstance(e.get("etaSeconds"), (int, float))), None),
        active=job is not None and job["status"] in ACTIVE_STATUSES,
        diagram=architecture_svg(plan) if plan else None,
        rayservice=rayservice_yaml(plan) if plan else None,
        connect=detail["connect"], labels=OPERATION_LABELS,
        engine_available=app.engines.get(detail["engine"]) is not None, tab="overview",
        new_key=new_key, keys_unavailable=keys_box_state(detail),
    )
