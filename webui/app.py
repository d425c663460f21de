"""`create_app(settings)`: the Flask app factory. Everything stateful hangs off app.extensions."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any, Callable, Optional, cast

from flask import Flask, Response, jsonify, request
from flask.json.provider import DefaultJSONProvider
from werkzeug.exceptions import HTTPException

from components.config import catalogue
from components.config.checks import report_verdict
from components.render.outputs import placeholders_under
from webui import api, pages
from webui.api_key_service import ApiKeyService
from webui.benchmarking import BenchmarkService
from webui.conformance_runs import ConformanceService
from webui.deployments.commands import Deployments
from webui.deployments.errors import FORCE_LABEL, NotFound
from webui.deployments.upgrades import complete_deployed_records, complete_stack_files
from webui.docs_pages import link_doc_references
from webui.engines.base import OFFLINE_NOTICE
from webui.engines.pulumi_cli import CliDiscovery, find_pulumi_cli
from webui.engines.select import EngineSet, select_engines
from webui.engines.workdir import sweep_stale_work_dirs
from webui.errors import api_error, render_error
from webui.jobs import JobRunner
from webui.pages.docs import doc_url
from webui.security import init_security
from webui.settings import Settings, drop_empty_passphrase, prepare_home
from webui.state import Raypd
from webui.status import tone
from webui.store import STORE_ERRORS, Store, error_text
from webui.unavailable import RETRY_AFTER_SECONDS, unavailable_reason

logger = logging.getLogger(__name__)


def _when(value: Any) -> str:
    """ISO time or epoch seconds -> '2025-01-31 14:02 UTC' (pages show UTC, like the API)."""
    if value in (None, ""):
        return "—"
    if isinstance(value, (int, float)):
        moment = datetime.fromtimestamp(value, tz=timezone.utc)
    else:
        try:
            moment = datetime.strptime(str(value), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        except ValueError:
            return str(value)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _usd(value: Any) -> str:
    """A rate: what something costs per hour while it runs."""
    return "—" if value is None else f"${value:,.2f}/h"


def _usd_over(value: Any, seconds: Any) -> str:
    """A total: what something costs over the while it runs ("$1.54 over ~23 min"), never "/h"."""
    if value is None:
        return "unknown"
    minutes = max(1, round(float(seconds or 0) / 60))
    spell = f"~{minutes} min" if minutes < 120 else f"~{minutes / 60:.1f} h"
    return f"${value:,.2f} over {spell}"


def create_app(
    settings: Settings,
    discover: Optional[Callable[[], CliDiscovery]] = None,
    engines: Optional[EngineSet] = None,
) -> Flask:
    """Build the app. `discover` and `engines` exist for tests (a fake CLI finder or engine)."""
    _prepare(settings)
    state = _state(settings, engines or select_engines(settings, discover or find_pulumi_cli))
    app = Flask(__name__)
    app.extensions["raypd"] = state
    cast(DefaultJSONProvider, app.json).sort_keys = False  # answers keep their documented key order
    init_security(app, settings.token, settings.max_body_bytes, settings.trusted_proxies)
    app.register_blueprint(pages.bp)
    app.register_blueprint(api.bp)
    _template_helpers(app, state.engines)
    _probes(app)
    _error_answers(app, settings.max_body_bytes)
    return app


def _prepare(settings: Settings) -> None:
    """RAYPD_HOME made ready, and what a killed server left swept."""
    prepare_home(settings)
    swept = sweep_stale_work_dirs(settings.work_root)
    if swept:
        logger.info("removed %d work dir(s) older than a day under %s (left by a killed server)",
                    swept, settings.work_root)
    for name in drop_empty_passphrase():
        logger.warning("ignoring the empty %s in the environment (it would override the passphrase file)", name)


def _state(settings: Settings, engines: EngineSet) -> Raypd:
    """The store, the job runner (jobs a stopped server left: interrupted) and the services."""
    store = Store(settings.store_location)
    for engine in engines.engines.values():
        attach = getattr(engine, "attach", None)
        if attach is not None:
            attach(store)  # stack settings files live in the store, shared by every server
    runner = JobRunner(store, workers=settings.workers)
    interrupted = runner.recover()
    if interrupted:
        logger.warning("%d job(s) were interrupted by the last shutdown", len(interrupted))
    service = Deployments(store, runner, engines)
    try:  # (before the app serves: nothing was listed yet)
        complete_deployed_records(store, engines)
        complete_stack_files(store, engines, settings.workspaces_dir)
    except STORE_ERRORS as exc:  # the app still works; the next start tries again
        logger.warning("could not complete the records an older raypd left: %s", error_text(exc))
    return Raypd(
        settings=settings, store=store, runner=runner, engines=engines,
        service=service, benchmarks=BenchmarkService(service), api_keys=ApiKeyService(service),
        conformance=ConformanceService(service),
    )


def _template_helpers(app: Flask, engines: EngineSet) -> None:
    app.jinja_env.filters["when"] = _when
    app.jinja_env.filters["usd"] = _usd  # rates (per hour)
    app.jinja_env.filters["usd_over"] = _usd_over  # totals (over a while)
    app.jinja_env.filters["tone"] = tone
    app.jinja_env.filters["verdict"] = report_verdict  # a report's badge: ok | failed | not checked
    app.jinja_env.filters["placeholders_under"] = placeholders_under  # an offline plan's made-up values
    app.jinja_env.filters["doclinks"] = lambda text: link_doc_references(text, doc_url)  # "see docs/x.md"
    app.jinja_env.globals["OFFLINE_NOTICE"] = OFFLINE_NOTICE
    app.jinja_env.globals["FORCE_LABEL"] = FORCE_LABEL
    app.jinja_env.globals["price_basis"] = catalogue.price_basis  # said next to every cost shown
    app.jinja_env.globals["PRICE_REGION"] = catalogue.PRICE_REGION
    app.jinja_env.globals["engine_banner"] = engines.banner
    app.jinja_env.globals["default_engine"] = engines.default.name


def _probes(app: Flask) -> None:
    @app.get("/healthz")
    def healthz() -> Response:
        # Liveness: the process answers. It stays 200 while the store is down, since restarting
        # raypd cures nothing then (it reconnects by itself); /readyz says whether to send it traffic.
        return jsonify({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Any:
        # Readiness, for a load balancer's or Kubernetes' probe: the job store answers.
        try:
            app.extensions["raypd"].store.ping()
        except Exception as exc:
            reason = unavailable_reason(exc)
            if reason is None:
                raise
            response = jsonify({"status": "unavailable", "reason": reason})
            response.status_code = 503
            response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
            return response
        return jsonify({"status": "ready"})


def _error_answers(app: Flask, max_body_bytes: int) -> None:
    """What an error a view lets out answers: JSON under /api/, a page elsewhere."""

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> Any:
        status = exc.code or 500
        if request.path.startswith("/api/"):
            field = {413: "body", 405: "method", 404: "path"}.get(status, "request")
            message = {
                413: f"request body larger than {max_body_bytes} bytes",
            }.get(status, exc.description or exc.name)
            return api_error(status, field, message)
        return render_error(status, exc.description or exc.name)

    @app.errorhandler(NotFound)
    def _unknown(exc: NotFound) -> Any:
        # Views answer their own 404s; this is for one that lets NotFound out (e.g. while rendering
        # the answer to a refused form of a deployment that does not exist).
        if request.path.startswith("/api/"):
            return api_error(404, "name", str(exc))
        return render_error(404, f"{str(exc)[:1].upper()}{str(exc)[1:]}.")

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> Any:
        reason = unavailable_reason(exc)
        if reason is not None:  # the database is down or the disk full: not a bug, and it passes
            logger.warning("%s %s: 503, %s", request.method, request.path, reason)
            if request.path.startswith("/api/"):
                response = api_error(503, "store", reason)
            else:
                body, status = render_error(503, reason)
                response = app.make_response((body, status))
            response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
            return response
        # No traceback reaches a user; the log has it.
        logger.exception("unhandled error on %s %s", request.method, request.path)
        if request.path.startswith("/api/"):
            return api_error(500, "server", "internal error (see the server log)")
        return render_error(500, "Something went wrong on the server; the log has details.")


def close_app(app: Flask) -> None:
    """Stop the job threads and close the database (tests and `python -m webui` on exit)."""
    state: Raypd = app.extensions["raypd"]
    state.close()
