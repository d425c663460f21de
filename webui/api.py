"""The JSON API under /api/v1 (Contract 4). Views parse and validate, call the service, answer.

Bodies are strict: malformed JSON, a non-object, wrong types and unknown top-level keys are 400
with `{"errors": [{"field", "message"}]}`, like every config mistake. What a body may hold and what
an answer holds are the models of webui/api_models/; the OpenAPI document is derived from them.
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterator, Optional

from flask import Blueprint, Response, g, jsonify, request, url_for
from pydantic import BaseModel

from components.config.errors import FieldError, SpecError
from components.config.safe_documents import DocumentError, DuplicateKeyError, load_json
from webui.api_keys import KeysUnavailable, UnknownKeyName
from webui.api_models import (
    MAX_WINDOW_SECONDS,
    ApiKeyList,
    BenchmarkRequest,
    BodyRefused,
    ChangeDeployment,
    ClearPending,
    CreateApiKey,
    CreatedApiKey,
    CreateDeployment,
    DeploymentList,
    JobAccepted,
    NoOptions,
    RequestT,
    UpOptions,
    dump,
    parse,
)
from webui.deployments.errors import Conflict, NotFound
from webui.deployments.reads import FINAL_STATUSES, STORE_ERRORS
from webui.deployments.views import public_job
from webui.engines.base import OFFLINE_NOTICE, EngineError
from webui.errors import api_error
from webui.forms import parse_form_int
from webui.openapi import openapi_document
from webui.state import raypd

bp = Blueprint("api", __name__, url_prefix="/api/v1")

KEEPALIVE_SECONDS = 15.0
# `?window=N`: the stream ends after N seconds even if the job has not (the pages ask for it:
# EventSource reconnects on its own and resumes after its Last-Event-ID), so a browser tab does not
# hold a server thread for the whole of a 40-minute update. Without it the stream ends with the job.
MAX_EVENT_SEQ = 2**63 - 1
# A job's end record follows its final status by a moment; wait that long before closing.


# Raised by the parsing below and by `_after`: 400 with the field errors.
BodyError = BodyRefused


def json_body(model: type[RequestT]) -> RequestT:
    """The request's JSON object, validated by `model` (webui/api_models/).

    The JSON itself is read here (size, media type, syntax, constants like NaN, a key given twice,
    runaway nesting and numbers: components.config.safe_documents, an object at the top); what the object
    may hold is the model's to say.
    """
    raw = request.get_data(cache=True)  # over MAX_CONTENT_LENGTH: 413 before anything is read
    if not raw.strip():
        if any(field.is_required() for field in model.model_fields.values()):
            raise BodyError([FieldError("body", "a JSON object is required")])
        return parse(model, {})
    if request.mimetype != "application/json":
        raise BodyError([FieldError("Content-Type", "send the body as application/json")])
    try:
        body = load_json(raw, max_bytes=len(raw))  # the size is MAX_CONTENT_LENGTH's to judge
    except DuplicateKeyError as exc:
        raise BodyError([FieldError(exc.path, "is given twice in the body; give each key once")]) from None
    except DocumentError as exc:
        raise BodyError([FieldError("body", f"malformed JSON: the body {exc}")]) from None
    if not isinstance(body, dict):
        raise BodyError([FieldError("body", "must be a JSON object")])
    return parse(model, body)


def answer(model: BaseModel) -> Response:
    return jsonify(dump(model))


@bp.errorhandler(BodyError)
def _body_error(exc: BodyError) -> tuple[Response, int]:
    return jsonify({"errors": [e.as_dict() for e in exc.errors]}), 400


@bp.errorhandler(SpecError)
def _spec_error(exc: SpecError) -> tuple[Response, int]:
    return jsonify({"errors": [e.as_dict() for e in exc.errors]}), 400


@bp.errorhandler(NotFound)
def _not_found(exc: NotFound) -> Response:
    return api_error(404, "keyName" if isinstance(exc, UnknownKeyName) else "name", str(exc))


@bp.errorhandler(KeysUnavailable)
def _keys_unavailable(exc: KeysUnavailable) -> Response:
    return api_error(exc.status, exc.field, exc.message)


@bp.errorhandler(Conflict)
def _conflict(exc: Conflict) -> Response:
    extra = {"job": exc.job} if exc.job else {}
    return api_error(409, exc.field, exc.message, **extra)


@bp.errorhandler(EngineError)
def _engine_error(exc: EngineError) -> Response:
    return api_error(exc.http_status, "engine", exc.message)


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


@bp.post("/deployments/<name>/benchmarks")
def start_benchmark(name: str) -> tuple[Response, int, dict[str, str]]:
    body = json_body(BenchmarkRequest)
    job_id = raypd().benchmarks.start(name, body, g.actor)
    return answer(JobAccepted(job=job_id)), 202, {"Location": url_for("api.get_job", job_id=job_id)}


@bp.get("/deployments/<name>/benchmarks")
def deployment_benchmarks(name: str) -> Response:
    return jsonify(raypd().benchmarks.runs(name))


@bp.get("/deployments/<name>/api-keys")
def list_api_keys(name: str) -> Response:
    return answer(ApiKeyList.model_validate({"keys": raypd().api_keys.list(name)}))


@bp.post("/deployments/<name>/api-keys")
def create_api_key(name: str) -> tuple[Response, int]:
    body = json_body(CreateApiKey)
    # The key's value is in this answer only: never logged, stored or put in an event.
    return answer(CreatedApiKey.model_validate(raypd().api_keys.create(name, body.name, g.actor))), 201


@bp.delete("/deployments/<name>/api-keys/<keyName>")
def revoke_api_key(name: str, keyName: str) -> tuple[str, int]:  # keyName: as the OpenAPI document names it
    json_body(NoOptions)
    raypd().api_keys.revoke(name, keyName, g.actor)
    return "", 204


@bp.get("/benchmarks")
def all_benchmarks() -> Response:
    return jsonify(raypd().benchmarks.runs())


@bp.get("/benchmarks/<run>")
def get_benchmark(run: str) -> Response:
    return jsonify(raypd().benchmarks.run(run))


@bp.get("/benchmarks/<run>/requests.jsonl")
def benchmark_records(run: str) -> Response:
    data = raypd().benchmarks.records_jsonl(run)
    return Response(data, mimetype="application/x-ndjson", headers={
        "Content-Disposition": f'attachment; filename="benchmark-{run}-requests.jsonl"'})


@bp.get("/jobs/<job_id>")
def get_job(job_id: str) -> Response:
    try:
        return jsonify(public_job(raypd().service.job(job_id)))
    except NotFound as exc:
        return api_error(404, "id", str(exc))


@bp.post("/jobs/<job_id>/cancel")
def cancel_job(job_id: str) -> tuple[Response, int]:
    json_body(NoOptions)
    service = raypd().service
    try:
        job = service.job(job_id)
    except NotFound as exc:
        return api_error(404, "id", str(exc)), 404
    if job["status"] in ("succeeded", "failed", "cancelled"):
        return api_error(409, "id", f"job {job_id} already ended ({job['status']})"), 409
    return jsonify(public_job(service.cancel(job_id, g.actor))), 202


def _after() -> int:
    for raw in (request.headers.get("Last-Event-ID"), request.args.get("after")):
        if raw is not None:
            try:
                after = parse_form_int(raw)  # ASCII digits only: not 1_0, not full-width
            except ValueError:
                raise BodyError([FieldError("Last-Event-ID", "must be an event sequence number")]) from None
            if not 0 <= after <= MAX_EVENT_SEQ:  # SQLite integers are 64-bit
                raise BodyError([FieldError("Last-Event-ID", "must be an event sequence number")])
            return after
    return 0


def _window() -> Optional[float]:
    raw = request.args.get("window")
    if raw is None:
        return None
    try:
        seconds = parse_form_int(raw)
    except ValueError:
        seconds = 0
    if not 1 <= seconds <= MAX_WINDOW_SECONDS:
        raise BodyError([FieldError("window", f"must be a whole number of seconds, 1 to {MAX_WINDOW_SECONDS}")])
    return float(seconds)


@bp.get("/jobs/<job_id>/events")
def job_events(job_id: str) -> Response:
    app = raypd()
    reads = app.reads
    if reads.job(job_id) is None:
        return api_error(404, "id", f"no job with id {job_id}")
    after = _after()
    poll = app.settings.sse_poll_seconds

    window = _window()

    def stream() -> Iterator[str]:
        last = after
        quiet_since = started = time.monotonic()
        yield "retry: 1000\n\n"
        while window is None or time.monotonic() - started < window:
            ended = app.runner.ended(job_id)
            if ended is not None:  # ended, but the store could not take its records: say so and close
                record = {"kind": "end", "status": ended["status"], "error": ended["error"],
                          "message": f"{ended['status']}: {ended['error']}"}
                yield f"data: {json.dumps(record, separators=(',', ':'))}\n\n"
                return
            try:
                events = reads.events_after(job_id, last)
            except STORE_ERRORS:
                events = []  # the store is failing; the runner ends the job, and the loop says so
            for event in events:
                last = event["seq"]
                yield f"id: {last}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n"
                if event.get("kind") == "end":
                    return
            if events:
                quiet_since = time.monotonic()
                continue
            job = reads.job(job_id)
            if job is None:
                return
            if job["status"] in FINAL_STATUSES:
                # The end event is committed with the final status, but it may have landed between
                # the read above and this one: send what is left, then close.
                for event in reads.events_after(job_id, last):
                    yield f"id: {event['seq']}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n"
                return
            if time.monotonic() - quiet_since > KEEPALIVE_SECONDS:
                quiet_since = time.monotonic()
                yield ": keep-alive\n\n"
            time.sleep(poll)

    return Response(stream(), mimetype="text/event-stream",
                    headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


@bp.get("/openapi.json")
def openapi() -> Response:
    return jsonify(openapi_document())
