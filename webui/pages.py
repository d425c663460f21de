"""Server-rendered pages: list, new deployment (form -> preview -> launch), deployment, login.

Views are thin: they turn form posts into calls of `app.service` (webui/deployments) and render
templates. Every page extends base.html; the little JavaScript there is lives in static/app.js (the
CSP forbids inline).
"""

from __future__ import annotations

from typing import Any, Optional

from flask import (
    Blueprint,
    Response,
    flash,
    g,
    make_response,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask.typing import ResponseReturnValue
from markupsafe import Markup

from components.defaults import UPGRADE_STRATEGIES
from components.errors import FieldError, SpecError
from components.topology import plan_deployment
from webui import forms
from webui.api_keys import KeysUnavailable, keys_box_state
from webui.api_models import BodyRefused
from webui.benchmarking import (
    FORM_DEFAULTS,
    FORM_FIELDS,
    FORM_FIELDS_BY_KEY,
    MAX_COMPARED,
    cost_notes_of,
    form_values,
    price_basis_of,
    request_from_form,
    values_from_settings,
)
from webui.deployments.errors import Conflict, NotFound
from webui.deployments.reads import ACTIVE_STATUSES
from webui.diagram import architecture_svg
from webui.engines.base import EngineError
from webui.errors import render_error
from webui.security import client_address, csrf_token, csrf_valid, safe_next, token_matches
from webui.state import raypd
from webui.summary import rayservice_yaml, summarize

bp = Blueprint("pages", __name__)

OPERATION_LABELS = {"preview": "Preview", "up": "Deploy", "refresh": "Refresh", "destroy": "Tear down",
                    "preflight": "Preflight", "verify": "Verify", "benchmark": "Benchmark",
                    "clear-pending": "Clear pending operations"}
FORCE_FIELD = "force"  # the "launch anyway" box: launch despite a failed preflight


# ---- login ----

@bp.get("/login")
def login() -> str:
    csrf_token()
    return render_template("login.html", next=safe_next(request.args.get("next")), error=None)


@bp.post("/login")
def login_post() -> Any:
    app = raypd()
    target = safe_next(request.form.get("next"))
    if not csrf_valid(request.form.get("csrf_token")):
        return render_template("login.html", next=target,
                               error="The login form expired; try again."), 400
    if app.throttle.blocked(client_address()):
        return render_template("login.html", next=target,
                               error="Too many failed attempts; wait a minute."), 429
    if not token_matches(app.settings.token, request.form.get("token", "").strip()):
        app.throttle.failed(client_address())
        app.service.audit(g.actor, "login", "web", "failed", None)
        return render_template("login.html", next=target, error="That access token is not valid."), 401
    session.clear()
    session.permanent = True
    session["auth"] = True
    session["sid"] = app.start_session()
    csrf_token()
    app.service.audit(g.actor, "login", "web", "succeeded", None)
    return redirect(target)


@bp.post("/logout")
def logout() -> ResponseReturnValue:
    session_id = session.get("sid")
    if isinstance(session_id, str):
        raypd().end_session(session_id)  # a copy of the cookie must not outlive the logout
    session.clear()
    return redirect(url_for("pages.login"))


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
        sections=forms.SECTIONS, section_modes=forms.SECTION_MODES, fields=forms.FIELDS, draft=draft,
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
    return _render_deployment(name)


def _render_deployment(name: str, new_key: Optional[dict[str, str]] = None) -> Any:
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
    # A preview says what an update would do while settings are pending; once they are deployed
    # or discarded an update would do none of it.
    preview = job_summary if job and job["operation"] == "preview" and detail["pending"] else None
    return render_template(
        "deployment.html", d=detail, job=job, events=events, checks=checks,
        job_reports=job_summary.get("reports") or {},
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


# ---- the Benchmark tab ----

# serve.benchmark.compare.PLOT_NAMES with their captions (that module loads matplotlib: not at start-up).
PLOT_TITLES = {"ttft_cdf.png": "TTFT distribution (CDF over completed requests)",
               "tpot_cdf.png": "TPOT distribution (CDF over completed requests)",
               "percentiles_vs_rate.png": "TTFT and TPOT percentiles against the offered rate"}


def _render_benchmark(name: str, values: Optional[dict[str, str]], errors: list[FieldError],
                      status: int = 200) -> tuple[str, int]:
    """The tab; `values` None: the form as the newest run of this deployment was asked (or the defaults)."""
    app = raypd()
    detail = app.service.get(name, jobs=20)
    record = app.service.record(name)
    job = app.reads.job_of(name, request.args.get("job"))
    if job is None:  # a benchmark still running is what this tab is about
        latest = next((j for j in detail["jobs"] if j["operation"] == "benchmark"), None)
        if latest is not None and latest["status"] in ACTIVE_STATUSES:
            job = app.reads.job(latest["id"])
    # The newest events: a benchmark logs its progress every few seconds for hours.
    events = app.reads.latest_events(job["id"], limit=500) if job else []
    all_runs = app.benchmarks.runs()["runs"]
    own = [run for run in all_runs if run["deployment"] == name]
    others = [run for run in all_runs if run["deployment"] != name]
    if values is None:
        values = values_from_settings(own[0]["settings"]) if own else dict(FORM_DEFAULTS)
    ids = [run_id for run_id in request.args.getlist("runs") if run_id][:MAX_COMPARED]
    if not ids and job is not None and any(run["id"] == job["id"] for run in own):
        ids = [job["id"]]
    if not ids and own:
        ids = [own[0]["id"]]
    shown = None
    if ids:
        try:
            shown = app.benchmarks.comparison(ids)
        except NotFound as exc:
            flash(str(exc), "error")
    by_field, general = forms.split_errors(errors, FORM_FIELDS_BY_KEY)
    bench_live = next((e["message"] for e in reversed(events) if e.get("kind") == "benchmark"), None)
    return render_template(
        "benchmark.html", d=detail, tab="benchmark", job=job, events=events,
        active=job is not None and job["status"] in ACTIVE_STATUSES, labels=OPERATION_LABELS,
        job_reports={}, job_steps=None, job_consequences=[], job_assessment=None, job_eta=None, bench_live=bench_live,
        unavailable=app.benchmarks.available(record), fields=FORM_FIELDS, values=values,
        field_errors=by_field, general_errors=general, shown=shown,
        shown_ids=[run["id"] for run in shown["runs"]] if shown else [],
        plots=[p for p in PLOT_TITLES if p != "percentiles_vs_rate.png" or any(
            run["summary"].get("sweep") for run in shown["runs"])] if shown else [],
        plot_titles=PLOT_TITLES, own_runs=own, other_runs=others, max_compared=MAX_COMPARED,
        price_bases={run["id"]: price_basis_of(run) for run in all_runs},
        cost_notes={"own-runs": cost_notes_of(own), "other-runs": cost_notes_of(others)},
    ), status


@bp.get("/deployments/<name>/benchmark")
def benchmark(name: str) -> Any:
    try:
        return _render_benchmark(name, None, [])
    except NotFound:
        return render_error(404, f"There is no deployment named “{name}”.")


@bp.post("/deployments/<name>/benchmark")
def benchmark_post(name: str) -> Any:
    app = raypd()
    values = form_values(request.form)
    try:
        wanted = request_from_form(request.form)
        job_id = app.benchmarks.start(name, wanted, g.actor)
    except NotFound:
        return render_error(404, f"There is no deployment named “{name}”.")
    except BodyRefused as exc:
        return _render_benchmark(name, values, exc.errors, status=400)
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for("pages.benchmark", name=name, job=exc.job))
    except EngineError as exc:
        return _render_benchmark(name, values, [FieldError("engine", exc.message)], status=exc.http_status)
    return redirect(url_for("pages.benchmark", name=name, job=job_id))


@bp.get("/benchmarks/plots/<plot>")
def benchmark_plot(plot: str) -> Any:
    try:
        image = raypd().benchmarks.plot(plot, [run for run in request.args.getlist("runs") if run])
    except NotFound as exc:
        return render_error(404, str(exc))
    return Response(image, mimetype="image/png", headers={"Cache-Control": "private, max-age=3600"})


def _start(name: str, operation: str, force: bool = False, confirm: Optional[str] = None) -> ResponseReturnValue:
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
    return _start(name, "preview")


@bp.post("/deployments/<name>/up")
def deployment_up(name: str) -> ResponseReturnValue:
    return _start(name, "up", force=request.form.get(FORCE_FIELD) == "1")


# ---- change a deployment's settings ----

def _render_change(name: str, values: dict[str, str], errors: list[FieldError], status: int = 200) -> tuple[str, int]:
    by_field, general = forms.split_errors(errors)
    return render_template(
        "change.html", name=name, values=values, field_errors=by_field, general_errors=general,
        sections=forms.SECTIONS, section_modes=forms.SECTION_MODES,
        fields=[f for f in forms.FIELDS if f.key != forms.NAME_FIELD],
    ), status


@bp.get("/deployments/<name>/change")
def deployment_change(name: str) -> Any:
    try:
        record = raypd().service.record(name)
    except NotFound:
        return render_error(404, f"There is no deployment named “{name}”.")
    return _render_change(name, forms.values_from_config(name, record["config"]), [])


@bp.post("/deployments/<name>/change")
def deployment_change_post(name: str) -> Any:
    app = raypd()
    values = forms.form_values(request.form) | {forms.NAME_FIELD: name}
    patch, errors = forms.form_to_patch(request.form)
    if errors:
        return _render_change(name, values, errors, status=400)
    token = request.form.get(forms.TOKEN_FIELD, "")
    if token.strip():
        patch[forms.TOKEN_FIELD] = token.strip()
    try:
        app.service.change(name, patch, g.actor)
    except NotFound:
        return render_error(404, f"There is no deployment named “{name}”.")
    except SpecError as exc:
        return _render_change(name, values, exc.errors, status=400)
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for("pages.deployment", name=name, job=exc.job))
    except EngineError as exc:
        return _render_change(name, values, [FieldError("engine", exc.message)], status=exc.http_status)
    flash("Settings saved. Nothing changes in the cloud until Deploy; the preview below shows what it "
          "would do.", "info")
    return _start(name, "preview")


@bp.post("/deployments/<name>/discard")
def deployment_discard(name: str) -> ResponseReturnValue:
    """Discard the pending changes: the deployed (offline: planned) settings back on the stack."""
    try:
        detail = raypd().service.discard(name, g.actor)
    except NotFound:
        return render_error(404, f"There is no deployment named “{name}”.")
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for("pages.deployment", name=name, job=exc.job))
    except EngineError as exc:
        flash(f"Nothing was discarded: {exc.message}", "error")
        return redirect(url_for("pages.deployment", name=name))
    label = detail["deployed"]["label"] if detail.get("deployed") else "deployed"
    kept = [c["note"] for c in (detail.get("pending") or {}).get("changes", []) if c.get("note")]
    flash(f"Pending changes discarded: the stack has the {label} settings again (nothing ran in the cloud)."
          + (" Still pending: " + "; ".join(kept) + "." if kept else ""), "info")
    return redirect(url_for("pages.deployment", name=name))


@bp.post("/deployments/<name>/strategy")
def deployment_strategy(name: str) -> Any:
    """The preview's "roll it out this way" buttons: set raypd:upgradeStrategy (a pending setting
    like any other) and preview again, so the new preview shows what that strategy will do."""
    app = raypd()
    wanted = request.form.get("strategy", "")
    if wanted not in UPGRADE_STRATEGIES:
        return render_error(400, "Pick one of the strategies the preview offers.")
    try:
        app.service.change(name, {"raypd:upgradeStrategy": wanted}, g.actor)
    except NotFound:
        return render_error(404, f"There is no deployment named “{name}”.")
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for("pages.deployment", name=name, job=exc.job))
    except (SpecError, EngineError) as exc:
        flash(str(getattr(exc, "message", exc)), "error")
        return redirect(url_for("pages.deployment", name=name))
    flash("Strategy saved. Nothing changes in the cloud until Deploy; the preview below shows what it "
          "would do.", "info")
    return _start(name, "preview")


@bp.post("/deployments/<name>/clear-pending")
def deployment_clear_pending(name: str) -> ResponseReturnValue:
    return _start(name, "clear-pending", confirm=request.form.get("confirm", "").strip())


@bp.post("/deployments/<name>/preflight")
def deployment_preflight(name: str) -> ResponseReturnValue:
    return _start(name, "preflight")


@bp.post("/deployments/<name>/verify")
def deployment_verify(name: str) -> ResponseReturnValue:
    return _start(name, "verify")


@bp.post("/deployments/<name>/refresh")
def deployment_refresh(name: str) -> ResponseReturnValue:
    return _start(name, "refresh")


@bp.post("/deployments/<name>/destroy")
def deployment_destroy(name: str) -> ResponseReturnValue:
    if request.form.get("confirm", "").strip() != name:
        flash(f"Type the deployment name “{name}” exactly to tear it down.", "error")
        return redirect(url_for("pages.deployment", name=name) + "#teardown")
    return _start(name, "destroy")


# ---- API keys (the values never go into the session cookie, a flash message or a URL) ----

@bp.post("/deployments/<name>/api-keys")
def api_key_create(name: str) -> ResponseReturnValue:
    app = raypd()
    try:
        created = app.api_keys.create(name, str(request.form.get("name", "")).strip(), g.actor)
    except NotFound:
        return render_error(404, f"There is no deployment named “{name}”.")
    except BodyRefused as exc:
        flash("; ".join(f"Key {e.field}: {e.message}" for e in exc.errors), "error")
    except (KeysUnavailable, EngineError) as exc:
        flash(exc.message, "error")
    else:
        # The new key is in this answer and nowhere else (no redirect to a page that would have to
        # find it again: behind a load balancer that page may be served by another server). The
        # page's script swaps the address for the deployment's, so a reload is a plain GET.
        answer = make_response(_render_deployment(name, new_key=created))
        answer.headers["Cache-Control"] = "no-store"
        return answer
    return redirect(url_for("pages.deployment", name=name, _anchor="api-keys"))


@bp.post("/deployments/<name>/api-keys/<key_name>/revoke")
def api_key_revoke(name: str, key_name: str) -> ResponseReturnValue:
    app = raypd()
    try:
        revoked = app.api_keys.revoke(name, key_name, g.actor)
    except NotFound as exc:
        flash(str(exc), "error")
    except BodyRefused as exc:
        flash("; ".join(e.message for e in exc.errors), "error")
    except (KeysUnavailable, EngineError) as exc:
        flash(exc.message, "error")
    else:
        flash(f"API key {revoked} revoked: the gateway refuses it within moments, no redeploy needed.", "info")
    return redirect(url_for("pages.deployment", name=name, _anchor="api-keys"))


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
