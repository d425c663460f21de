"""The Benchmark tab: the form, the running job's progress, the runs and their comparison plots."""

from __future__ import annotations

from typing import Any, Optional

from flask import Response, flash, g, redirect, render_template, request, url_for

from components.config.errors import FieldError
from webui import forms
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
from webui.engines.base import EngineError
from webui.errors import render_error
from webui.pages.blueprint import OPERATION_LABELS, bp
from webui.state import raypd

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
