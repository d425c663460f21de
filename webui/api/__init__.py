"""The JSON API under /api/v1 (Contract 4). Views parse and validate, call the service, answer.

One blueprint (`bp`, "api", with the body parsing and the error answers: blueprint.py); each module
adds the routes of one part: deployments.py (create, change, the operations, what they left),
keys.py (a deployment's API keys), benchmarks.py, resilience.py, conformance.py, jobs.py (a job, its
cancel, its event stream) and document.py (the OpenAPI document). What a body may hold and what an
answer holds are the models of webui/api_models/; the OpenAPI document is derived from them and
from the routes (webui/openapi.py).
"""

from __future__ import annotations

from webui.api import benchmarks, conformance, deployments, document, jobs, keys, resilience
from webui.api.blueprint import bp

__all__ = ["benchmarks", "bp", "conformance", "deployments", "document", "jobs", "keys", "resilience"]
