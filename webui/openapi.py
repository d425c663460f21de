"""The OpenAPI 3.1 document of the JSON API (served at /api/v1/openapi.json).

Its schemas are not written here: they are derived from the pydantic models the API parses bodies
with and builds answers from (webui/api_models/), from the Contract 5 report model, and, for
Contract 1 config, from DeploymentSpec. What stays here is the map of paths, methods and status
codes. OpenAPI 3.1 schemas are JSON Schema 2020-12, as pydantic writes them, so a test validates
real answers against this document exactly (tests/web/test_api_contract.py); another compares its
paths with the registered /api/v1 routes in both directions.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from components.config.spec import MAX_STACK_NAME
from components.render.endpoint_names import KEY_NAME_PATTERN
from webui import api_models as m
from webui.api_models import MAX_WINDOW_SECONDS

_NAME = {
    "name": "name", "in": "path", "required": True,
    "schema": {"type": "string", "pattern": m.STACK_NAME_PATTERN, "maxLength": MAX_STACK_NAME},
}
_JOB_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
_KEY_NAME = {"name": "keyName", "in": "path", "required": True,
             "schema": {"type": "string", "pattern": KEY_NAME_PATTERN.pattern, "maxLength": 32},
             "description": "the API key's name"}
_RUN_ID = {"name": "run", "in": "path", "required": True, "schema": {"type": "string"},
           "description": "a benchmark run's id (the job that made it)"}


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": m.SCHEMA_REF.format(model=model.__name__)}


def _json(model: type[BaseModel], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _errors(description: str) -> dict[str, Any]:
    return _json(m.Errors, description)


def _body(model: type[m.ApiRequest], required: bool) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": _ref(model)}}}


_COMMON = {"401": _errors("missing or wrong access token")}
_BAD_BODY = _errors("a body that is not a JSON object, a wrong type or an unknown key (named)")
_BUSY = _json(m.BusyErrors, "another operation is running (its job id)")


def _operation(operation_id: str, summary: str, body: type[m.ApiRequest] = m.NoOptions,
               body_required: bool = False) -> dict[str, Any]:
    """An operation that starts a job: 202 with its id at once."""
    return {
        "operationId": operation_id,
        "summary": summary,
        "parameters": [_NAME],
        "requestBody": _body(body, body_required),
        "responses": {
            "202": _json(m.JobAccepted, "job accepted; follow it at /jobs/{id}"),
            "400": _BAD_BODY,
            "404": _errors("no such deployment"),
            "409": _BUSY,
            "413": _errors("body too large"),
            "503": _errors("the deployment's engine is not available here"),
            **_COMMON,
        },
    }


def _benchmark_operation() -> dict[str, Any]:
    operation = _operation("startBenchmark", "Benchmark a running deployment from a Job in its cluster "
                                             "(real engine); the run is kept and listed by GET",
                           body=m.BenchmarkRequest, body_required=True)
    operation["responses"]["409"] = _json(m.BusyErrors, "another operation is running, or nothing is serving "
                                                        "(an offline plan, or not deployed)")
    return operation


def _keys_errors(conflict_first: str = "") -> dict[str, Any]:
    """What an API-key call answers when the keys, the deployment or the cluster say no."""
    conflict = ("the deployment has no keys to manage: an offline plan (it has no cluster), not "
                "deployed yet, or its endpoint has auth none")
    return {
        "404": _errors("no such deployment (field name), or no such key (field keyName)"),
        "409": _errors(f"{conflict_first}; or {conflict}" if conflict_first else conflict),
        "503": _errors("the cluster's API did not answer or refused the call, or its kubeconfig "
                       "cannot be used; or the engine is not available here"),
    }


def _read(operation_id: str, summary: str, model: type[BaseModel]) -> dict[str, Any]:
    return {
        "get": {
            "operationId": operation_id,
            "summary": summary,
            "parameters": [_NAME],
            "responses": {"200": _json(model, summary), "404": _errors("no such deployment"), **_COMMON},
        }
    }


def _paths() -> dict[str, Any]:

    return {
        "/deployments": {
            "get": {
                "operationId": "listDeployments",
                "summary": "List deployments (from the app's database; never calls the Pulumi CLI)",
                "responses": {"200": _json(m.DeploymentList, "deployments and the engine in use"), **_COMMON},
            },
            "post": {
                "operationId": "createDeployment",
                "summary": "Validate a Contract 1 config and create the stack (no cloud action)",
                "requestBody": _body(m.CreateDeployment, True),
                "responses": {
                    "201": _json(m.DeploymentView, "created"),
                    "400": _errors("invalid body or config; one entry per field"),
                    "409": _errors("a deployment with this name exists"),
                    "413": _errors("body too large"),
                    **_COMMON,
                },
            },
        },
        "/deployments/{name}": {
            "get": {
                "operationId": "getDeployment",
                "summary": "Spec, status, engine, outputs (secrets masked), resources, connect, last jobs",
                "parameters": [_NAME],
                "responses": {
                    "200": _json(m.DeploymentView, "the deployment"),
                    "404": _errors("no such deployment"),
                    **_COMMON,
                },
            },
            "patch": {
                "operationId": "changeDeployment",
                "summary": "Merge Contract 1 keys over the config (null resets a key to its default); "
                           "no cloud action until up",
                "parameters": [_NAME],
                "requestBody": _body(m.ChangeDeployment, True),
                "responses": {
                    "200": _json(m.DeploymentView, "the deployment with its new spec"),
                    "400": _errors("invalid keys or values, each named; nothing changes"),
                    "404": _errors("no such deployment"),
                    "409": _BUSY,
                    "413": _errors("body too large"),
                    "503": _errors("the deployment's engine is not available here"),
                    **_COMMON,
                },
            },
            "delete": _operation("destroyDeployment", "Destroy every resource, then remove the stack"),
        },
        "/deployments/{name}/pending-config": {
            "delete": {
                "operationId": "discardPendingChanges",
                "summary": "Discard the pending changes: put the stack's settings back to the deployed "
                           "(offline: planned) ones; no cloud action. An HF token replaced or removed "
                           "since the deploy cannot be brought back and stays pending",
                "parameters": [_NAME],
                "requestBody": _body(m.NoOptions, False),
                "responses": {
                    "200": _json(m.DeploymentView, "the deployment, its settings the deployed ones again"),
                    "400": _BAD_BODY,
                    "404": _errors("no such deployment"),
                    "409": _json(m.BusyErrors, "a job runs (its id), nothing is pending, or nothing was "
                                               "deployed to go back to; nothing changes"),
                    "413": _errors("body too large"),
                    "500": _errors("the engine could not write the stack's config; it keeps the config it had"),
                    "503": _errors("the deployment's engine is not available here"),
                    **_COMMON,
                },
            },
        },
        "/deployments/{name}/preview": {"post": _operation(
            "previewDeployment", "Preview the changes an update would make (runs the preflight first)")},
        "/deployments/{name}/up": {"post": _operation(
            "upDeployment", "Create or update the deployment's resources (runs the preflight first)",
            body=m.UpOptions)},
        "/deployments/{name}/refresh": {"post": _operation(
            "refreshDeployment", "Read back the real state of the resources")},
        "/deployments/{name}/preflight": {"post": _operation(
            "preflightDeployment", "Check AWS (credentials, types, zone, quota) and the GPU memory fit; "
                                   "the job's result is a Contract 5 report")},
        "/deployments/{name}/verify": {"post": _operation(
            "verifyDeployment", "Check what really runs (nodes, EFA, RayService, NIXL backend, KV "
                                "transfers); the job's result is a Contract 5 report")},
        "/deployments/{name}/clear-pending": {"post": _operation(
            "clearPending", "After checking them in the AWS console: drop pending operations from the "
                            "state (refresh with clear_pending_creates); confirm must be the name",
            body=m.ClearPending, body_required=True)},
        "/deployments/{name}/pending": _read(
            "getPendingOperations", "Operations an interrupted update left pending in the state (real engine)",
            m.PendingView),
        "/deployments/{name}/checks": _read("getDeploymentChecks", "The last report of each kind", m.ChecksView),
        "/deployments/{name}/status": _read(
            "getDeploymentStatus", "What runs now: nodes, pods, RayService and Serve (real engine, "
                                   "at most 15 s old)", m.LiveStatus),
        "/deployments/{name}/benchmarks": {
            "post": _benchmark_operation(),
            **_read("listDeploymentBenchmarks", "The deployment's benchmark runs, newest first", m.BenchmarkRuns),
        },
        "/deployments/{name}/api-keys": {
            "get": {
                "operationId": "listApiKeys",
                "summary": "The endpoint's API keys by name and creation time, never their values "
                           "(read from the cluster's key Secret)",
                "parameters": [_NAME],
                "responses": {"200": _json(m.ApiKeyList, "the keys"), **_keys_errors(), **_COMMON},
            },
            "post": {
                "operationId": "createApiKey",
                "summary": "Create a key; this answer is the only place its value is ever shown. The "
                           "gateway accepts it within moments, without a redeploy",
                "parameters": [_NAME],
                "requestBody": _body(m.CreateApiKey, True),
                "responses": {
                    "201": _json(m.CreatedApiKey, "created: keep the key now"),
                    "400": _errors("no name, or a name that breaks the rule (field name)"),
                    **_keys_errors("a key by that name exists (field name)"),
                    "413": _errors("body too large"),
                    **_COMMON,
                },
            },
        },
        "/deployments/{name}/api-keys/{keyName}": {
            "delete": {
                "operationId": "revokeApiKey",
                "summary": "Revoke a key: the gateway refuses it within moments, without a redeploy. The "
                           "last key is not revoked (create its replacement first)",
                "parameters": [_NAME, _KEY_NAME],
                "responses": {
                    "204": {"description": "revoked"},
                    "400": _errors("a key name that breaks the rule"),
                    **_keys_errors("it is the deployment's last key (field keyName)"),
                    **_COMMON,
                },
            },
        },
        "/benchmarks": {
            "get": {
                "operationId": "listBenchmarks",
                "summary": "Every deployment's benchmark runs, newest first (also of torn-down deployments)",
                "responses": {"200": _json(m.BenchmarkRuns, "runs"), **_COMMON},
            },
        },
        "/benchmarks/{run}": {
            "get": {
                "operationId": "getBenchmark",
                "summary": "One benchmark run: its settings and its Contract 6 summary",
                "parameters": [_RUN_ID],
                "responses": {"200": _json(m.BenchmarkRun, "the run"), "404": _errors("no such run"), **_COMMON},
            },
        },
        "/benchmarks/{run}/requests.jsonl": {
            "get": {
                "operationId": "getBenchmarkRequests",
                "summary": "The run's per-request records (Contract 6 requests.jsonl)",
                "parameters": [_RUN_ID],
                "responses": {"200": {"description": "one JSON object per line",
                                      "content": {"application/x-ndjson": {"schema": {"type": "string"}}}},
                              "404": _errors("no such run"), **_COMMON},
            },
        },
        "/jobs/{id}": {
            "get": {
                "operationId": "getJob",
                "summary": "A job's status and progress",
                "parameters": [_JOB_ID],
                "responses": {"200": _json(m.JobView, "the job"), "404": _errors("no such job"), **_COMMON},
            },
        },
        "/jobs/{id}/events": {
            "get": {
                "operationId": "streamJobEvents",
                "summary": "Server-sent events: one JSON progress record per `data:` line (with `id:` its "
                           "sequence number); ends with the job's `end` record",
                "parameters": [
                    _JOB_ID,
                    {"name": "after", "in": "query", "required": False,
                     "schema": {"type": "integer", "minimum": 0},
                     "description": "skip events up to this sequence number (like Last-Event-ID)"},
                    {"name": "window", "in": "query", "required": False,
                     "schema": {"type": "integer", "minimum": 1, "maximum": MAX_WINDOW_SECONDS},
                     "description": "end the stream after this many seconds (reconnect with Last-Event-ID)"},
                    {"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": {"description": "event stream",
                            "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                    "400": _errors("Last-Event-ID, after or window out of range (named)"),
                    "404": _errors("no such job"),
                    **_COMMON,
                },
            },
        },
        "/jobs/{id}/cancel": {
            "post": {
                "operationId": "cancelJob",
                "summary": "Cancel a queued or running job (or close an interrupted one)",
                "parameters": [_JOB_ID],
                "requestBody": _body(m.NoOptions, False),
                "responses": {
                    "202": _json(m.JobView, "cancel requested: the job"),
                    "400": _BAD_BODY,
                    "404": _errors("no such job"),
                    "409": _errors("the job already ended"),
                    **_COMMON,
                },
            },
        },
        "/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This document",
                "responses": {"200": {"description": "OpenAPI 3.1 document",
                                      "content": {"application/json": {"schema": {"type": "object"}}}},
                              **_COMMON},
            },
        },
    }


def _mark_to_ref(node: Any) -> Any:
    """Swap each Contract 1 mark (api_models.CONFIG_MARK) for a $ref to the derived schema."""
    if isinstance(node, dict):
        if m.CONFIG_MARK in node:
            swapped = {"$ref": m.SCHEMA_REF.format(model=node[m.CONFIG_MARK])}
            if "description" in node:
                swapped["description"] = node["description"]
            return swapped
        return {key: _mark_to_ref(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_mark_to_ref(item) for item in node]
    return node


def component_schemas() -> dict[str, Any]:
    """Every model's schema: answers as they are serialized, requests as they are validated."""
    inputs: list[tuple[type[BaseModel], JsonSchemaMode]] = [(model, "serialization") for model in m.ANSWERS]
    inputs += [(model, "validation") for model in m.REQUESTS]
    _, definitions = models_json_schema(inputs, ref_template=m.SCHEMA_REF)
    schemas = _mark_to_ref(definitions.get("$defs", {}))
    derived = m.contract1_schema()
    clash = set(schemas) & set(derived)
    if clash:  # two models of one name would silently share a schema
        raise RuntimeError(f"schema names used twice: {sorted(clash)}")
    return {**schemas, **derived}


@functools.lru_cache(maxsize=1)
def _document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "raypd web API",
            "version": "1",
            "description": (
                "Launch, inspect and tear down prefill/decode-disaggregated LLM deployments. "
                "Every call needs `Authorization: Bearer <access token>`. Operations return a job "
                "id at once (202); follow progress with GET /jobs/{id} or the SSE stream. "
                "Deployments made by the offline engine carry `notice`: nothing was created in AWS. "
                "Request bodies are strict: an unknown key or a wrong JSON type is a 400 naming the field."
            ),
        },
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}],
        "paths": _paths(),
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": component_schemas(),
        },
    }


def openapi_document() -> dict[str, Any]:
    """The document (built once per process: the models do not change while it runs)."""
    return copy.deepcopy(_document())
