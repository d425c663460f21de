"""Conformance through the API: start serve.conformance against a real deployment (a job), read
the last report (Contract 7) it left."""

from __future__ import annotations

from flask import Response, g, jsonify, url_for

from webui.api.blueprint import answer, bp, json_body
from webui.api_models import BusyErrors, ConformanceRequest, ConformanceRun, JobAccepted
from webui.openapi import documented, errors, json_answer, starts_job
from webui.state import raypd


@bp.post("/deployments/<name>/conformance")
@starts_job("startConformance", "Run serve.conformance's features of the OpenAI API against a real, deployed "
                                "deployment (and the same requests against `reference`, another deployment "
                                "of this app serving the same model); the report is kept and read by GET",
            body=ConformanceRequest,
            conflict=json_answer(BusyErrors, "another operation is running (its job id), nothing is serving (an "
                                             "offline plan, or not deployed), or the reference cannot be one "
                                             "(offline, not deployed, another model): the field says which"))
def start_conformance(name: str) -> tuple[Response, int, dict[str, str]]:
    body = json_body(ConformanceRequest)
    job_id = raypd().conformance.start(name, body, g.actor)
    return answer(JobAccepted(job=job_id)), 202, {"Location": url_for("api.get_job", job_id=job_id)}


@bp.get("/deployments/<name>/conformance")
@documented("getConformance", "The deployment's last conformance run: its Contract 7 report and reference",
            {"200": json_answer(ConformanceRun, "the last run"),
             "404": errors("no such deployment, or no conformance run yet")})
def last_conformance(name: str) -> Response:
    return jsonify(raypd().conformance.last(name))
