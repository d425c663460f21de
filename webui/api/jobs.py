"""Jobs through the API: a job's status and progress, its cancel, and its events as server-sent
events (replayed from any point: Last-Event-ID or ?after, and bounded by ?window)."""

from __future__ import annotations

import json
import time
from typing import Iterator, Optional

from flask import Response, g, jsonify, request

from webui.api.blueprint import bp, json_body, refused
from webui.api_models import MAX_WINDOW_SECONDS, JobView, NoOptions
from webui.deployments.errors import NotFound
from webui.deployments.reads import FINAL_STATUSES, STORE_ERRORS
from webui.deployments.views import public_job
from webui.errors import api_error
from webui.forms import parse_form_int
from webui.openapi import BAD_BODY, documented, errors, json_answer, stream_answer
from webui.state import raypd

KEEPALIVE_SECONDS = 15.0
MAX_EVENT_SEQ = 2**63 - 1
NO_JOB = errors("no such job")


@bp.get("/jobs/<job_id>")
@documented("getJob", "A job's status and progress", {"200": json_answer(JobView, "the job"), "404": NO_JOB})
def get_job(job_id: str) -> Response:
    try:
        return jsonify(public_job(raypd().service.job(job_id)))
    except NotFound as exc:
        return api_error(404, "id", str(exc))


@bp.post("/jobs/<job_id>/cancel")
@documented("cancelJob", "Cancel a queued or running job (or close an interrupted one)", {
    "202": json_answer(JobView, "cancel requested: the job"),
    "400": BAD_BODY,
    "404": NO_JOB,
    "409": errors("the job already ended"),
}, body=NoOptions)
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
                raise refused("Last-Event-ID", "must be an event sequence number") from None
            if not 0 <= after <= MAX_EVENT_SEQ:  # SQLite integers are 64-bit
                raise refused("Last-Event-ID", "must be an event sequence number")
            return after
    return 0


# `?window=N`: the stream ends after N seconds even if the job has not (the pages ask for it:
# EventSource reconnects on its own and resumes after its Last-Event-ID), so a browser tab does not
# hold a server thread for the whole of a 40-minute update. Without it the stream ends with the job.
def _window() -> Optional[float]:
    raw = request.args.get("window")
    if raw is None:
        return None
    try:
        seconds = parse_form_int(raw)
    except ValueError:
        seconds = 0
    if not 1 <= seconds <= MAX_WINDOW_SECONDS:
        raise refused("window", f"must be a whole number of seconds, 1 to {MAX_WINDOW_SECONDS}")
    return float(seconds)


@bp.get("/jobs/<job_id>/events")
@documented("streamJobEvents", "Server-sent events: one JSON progress record per `data:` line (with `id:` its "
                               "sequence number); ends with the job's `end` record", {
    "200": stream_answer("event stream", "text/event-stream"),
    "400": errors("Last-Event-ID, after or window out of range (named)"),
    "404": NO_JOB,
}, parameters=(
    {"name": "after", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 0},
     "description": "skip events up to this sequence number (like Last-Event-ID)"},
    {"name": "window", "in": "query", "required": False,
     "schema": {"type": "integer", "minimum": 1, "maximum": MAX_WINDOW_SECONDS},
     "description": "end the stream after this many seconds (reconnect with Last-Event-ID)"},
    {"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string"}},
))
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


