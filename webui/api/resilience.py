"""Resilience checks through the API (issue 31 §2): start one against a running deployment (the
body's `confirm` must be the deployment's name) and list the deployment's runs."""

from __future__ import annotations

from flask import Response, g, jsonify, url_for

from webui.api.blueprint import answer, bp, json_body
from webui.api_models import BusyErrors, JobAccepted, ResilienceRequest, ResilienceRuns
from webui.openapi import json_answer, reads, starts_job
from webui.state import raypd


@bp.post("/deployments/<name>/resilience")
@starts_job("startResilience", "Inject a fault into a running deployment under a steady load and measure "
                               "what its users see (real engine; deletes a pod or drains a node: confirm must "
                               "be the deployment's name); the report is kept and listed by GET",
            body=ResilienceRequest, body_required=True,
            conflict=json_answer(BusyErrors, "another operation is running, or nothing is serving (an "
                                             "offline plan, or not deployed)"))
def start_resilience(name: str) -> tuple[Response, int, dict[str, str]]:
    body = json_body(ResilienceRequest)
    job_id = raypd().resilience.start(name, body, g.actor)
    return answer(JobAccepted(job=job_id)), 202, {"Location": url_for("api.get_job", job_id=job_id)}


@bp.get("/deployments/<name>/resilience")
@reads("listDeploymentResilience", "The deployment's resilience runs (Contract 8 reports), newest first",
       ResilienceRuns)
def deployment_resilience(name: str) -> Response:
    return jsonify(raypd().resilience.runs(name))
