"""Benchmark runs through the API: start one against a running deployment, list a deployment's
runs or every run, read one and its per-request records."""

from __future__ import annotations

from flask import Response, g, jsonify, url_for

from webui.api.blueprint import answer, bp, json_body
from webui.api_models import BenchmarkRequest, JobAccepted
from webui.state import raypd


@bp.post("/deployments/<name>/benchmarks")
def start_benchmark(name: str) -> tuple[Response, int, dict[str, str]]:
    body = json_body(BenchmarkRequest)
    job_id = raypd().benchmarks.start(name, body, g.actor)
    return answer(JobAccepted(job=job_id)), 202, {"Location": url_for("api.get_job", job_id=job_id)}


@bp.get("/deployments/<name>/benchmarks")
def deployment_benchmarks(name: str) -> Response:
    return jsonify(raypd().benchmarks.runs(name))


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


