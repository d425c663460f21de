"""Benchmark runs through the API: start one against a running deployment, list a deployment's
runs or every run, read one and its per-request records."""

from __future__ import annotations

from flask import Response, g, jsonify, url_for

from webui.api.blueprint import answer, bp, json_body
from webui.api_models import BenchmarkRequest, BenchmarkRun, BenchmarkRuns, BusyErrors, JobAccepted
from webui.openapi import documented, errors, json_answer, reads, starts_job, stream_answer
from webui.state import raypd

NO_RUN = errors("no such run")


@bp.post("/deployments/<name>/benchmarks")
@starts_job("startBenchmark", "Benchmark a running deployment from a Job in its cluster (real engine); the "
                              "run is kept and listed by GET", body=BenchmarkRequest, body_required=True,
            conflict=json_answer(BusyErrors, "another operation is running, or nothing is serving (an "
                                             "offline plan, or not deployed)"))
def start_benchmark(name: str) -> tuple[Response, int, dict[str, str]]:
    body = json_body(BenchmarkRequest)
    job_id = raypd().benchmarks.start(name, body, g.actor)
    return answer(JobAccepted(job=job_id)), 202, {"Location": url_for("api.get_job", job_id=job_id)}


@bp.get("/deployments/<name>/benchmarks")
@reads("listDeploymentBenchmarks", "The deployment's benchmark runs, newest first", BenchmarkRuns)
def deployment_benchmarks(name: str) -> Response:
    return jsonify(raypd().benchmarks.runs(name))


@bp.get("/benchmarks")
@documented("listBenchmarks", "Every deployment's benchmark runs, newest first (also of torn-down "
                              "deployments)", {"200": json_answer(BenchmarkRuns, "runs")})
def all_benchmarks() -> Response:
    return jsonify(raypd().benchmarks.runs())


@bp.get("/benchmarks/<run>")
@documented("getBenchmark", "One benchmark run: its settings and its Contract 6 summary",
            {"200": json_answer(BenchmarkRun, "the run"), "404": NO_RUN})
def get_benchmark(run: str) -> Response:
    return jsonify(raypd().benchmarks.run(run))


@bp.get("/benchmarks/<run>/requests.jsonl")
@documented("getBenchmarkRequests", "The run's per-request records (Contract 6 requests.jsonl)",
            {"200": stream_answer("one JSON object per line", "application/x-ndjson"), "404": NO_RUN})
def benchmark_records(run: str) -> Response:
    data = raypd().benchmarks.records_jsonl(run)
    return Response(data, mimetype="application/x-ndjson", headers={
        "Content-Disposition": f'attachment; filename="benchmark-{run}-requests.jsonl"'})
