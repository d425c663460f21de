"""The OpenAPI 3 document of the JSON API (served at /api/v1/openapi.json).

Written by hand next to the routes it describes; a test compares it with the registered /api/v1
routes in both directions, so a route cannot be added or dropped without the document following.
"""

from __future__ import annotations

from typing import Any

from components.checks import Report
from components.spec import MAX_STACK_NAME

_ERRORS = {"$ref": "#/components/schemas/Errors"}
_JOB_REF = {"$ref": "#/components/schemas/JobAccepted"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(description: str) -> dict[str, Any]:
    return _json(_ERRORS, description)


_NAME = {
    "name": "name", "in": "path", "required": True,
    "schema": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": MAX_STACK_NAME},
}
_JOB_ID = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
_COMMON = {"401": _errors("missing or wrong access token")}


def _operation(name: str, summary: str) -> dict[str, Any]:
    return {
        "post": {
            "operationId": f"{name}Deployment",
            "summary": summary,
            "parameters": [_NAME],
            "responses": {
                "202": _json(_JOB_REF, "job accepted; follow it at /jobs/{id}"),
                "404": _errors("no such deployment"),
                "409": _json({"allOf": [_ERRORS, _JOB_REF]}, "another operation is running (its job id)"),
                "503": _errors("the deployment's engine is not available here"),
                **_COMMON,
            },
        }
    }


def _report_schemas() -> dict[str, Any]:
    """The Contract 5 report, written once as the pydantic model and derived here."""
    schema = Report.model_json_schema(mode="serialization", ref_template="#/components/schemas/{model}")
    definitions = schema.pop("$defs", {})
    return {**definitions, "CheckReport": schema}


def _read(operation_id: str, summary: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "get": {
            "operationId": operation_id,
            "summary": summary,
            "parameters": [_NAME],
            "responses": {"200": _json(schema, summary), "404": _errors("no such deployment"), **_COMMON},
        }
    }


def _up_operation() -> dict[str, Any]:
    up = _operation("up", "Create or update the deployment's resources (runs the preflight first)")
    up["post"]["requestBody"] = {
        "required": False,
        "content": {"application/json": {"schema": {
            "type": "object", "additionalProperties": False,
            "properties": {"force": {
                "type": "boolean", "default": False,
                "description": "launch even when a preflight check fails (the job says so)",
            }},
        }}},
    }
    return up


def _confirmed(operation: dict[str, Any]) -> dict[str, Any]:
    operation["post"]["requestBody"] = {
        "required": True,
        "content": {"application/json": {"schema": {
            "type": "object", "additionalProperties": False, "required": ["confirm"],
            "properties": {"confirm": {"type": "string", "description": "the deployment's name, typed"}},
        }}},
    }
    operation["post"]["responses"]["400"] = _errors("confirm missing or not the deployment's name")
    return operation


_REPORT_REF = {"$ref": "#/components/schemas/CheckReport"}
_LAST_REPORT = {"allOf": [_REPORT_REF, {"type": "object", "properties": {
    "job": {"type": "string", "nullable": True}, "at": {"type": "string"}}}], "nullable": True}


def openapi_document() -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "raypd web API",
            "version": "1",
            "description": (
                "Launch, inspect and tear down prefill/decode-disaggregated LLM deployments. "
                "Every call needs `Authorization: Bearer <access token>`. Operations return a job "
                "id at once (202); follow progress with GET /jobs/{id} or the SSE stream. "
                "Deployments made by the offline engine carry `notice`: nothing was created in AWS."
            ),
        },
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}],
        "paths": {
            "/deployments": {
                "get": {
                    "operationId": "listDeployments",
                    "summary": "List deployments (from the app's database; never calls the Pulumi CLI)",
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/DeploymentList"}, "deployments"),
                        **_COMMON,
                    },
                },
                "post": {
                    "operationId": "createDeployment",
                    "summary": "Validate a Contract 1 config and create the stack (no cloud action)",
                    "requestBody": {"required": True, "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/CreateDeployment"}}}},
                    "responses": {
                        "201": _json({"$ref": "#/components/schemas/Deployment"}, "created"),
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
                    "summary": "Spec, status, engine, outputs (secrets masked), resources, last jobs",
                    "parameters": [_NAME],
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/Deployment"}, "the deployment"),
                        "404": _errors("no such deployment"),
                        **_COMMON,
                    },
                },
                "patch": {
                    "operationId": "changeDeployment",
                    "summary": "Merge Contract 1 keys over the config (null resets a key to its default); no cloud action until up",
                    "parameters": [_NAME],
                    "requestBody": {"required": True, "content": {"application/json": {"schema": {
                        "type": "object", "additionalProperties": False, "required": ["config"],
                        "properties": {"config": {
                            "type": "object", "additionalProperties": True,
                            "description": "Contract 1 keys; null resets a key; raypd:hfToken null removes the token",
                        }},
                    }}}},
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/Deployment"}, "the deployment with its new spec"),
                        "400": _errors("invalid keys or values, each named"),
                        "404": _errors("no such deployment"),
                        "409": _json({"allOf": [_ERRORS, _JOB_REF]}, "a job is running (its id)"),
                        **_COMMON,
                    },
                },
                "delete": {
                    "operationId": "destroyDeployment",
                    "summary": "Destroy every resource, then remove the stack",
                    "parameters": [_NAME],
                    "responses": _operation("destroy", "")["post"]["responses"],
                },
            },
            "/deployments/{name}/preview": _operation("preview", "Preview the changes an update would make"),
            "/deployments/{name}/up": _up_operation(),
            "/deployments/{name}/preflight": _operation(
                "preflight", "Check AWS (credentials, types, zone, quota) and the GPU memory fit; the job's result is a Contract 5 report"),
            "/deployments/{name}/verify": _operation(
                "verify", "Check what really runs (nodes, EFA, RayService, NIXL backend, KV transfers); the job's result is a Contract 5 report"),
            "/deployments/{name}/pending": _read("getPendingOperations", "Operations an interrupted update left pending in the state (real engine)", {
                "type": "object", "required": ["operations"],
                "properties": {
                    "operations": {"type": "array", "items": {"type": "object", "properties": {
                        "urn": {"type": "string"}, "type": {"type": "string"}, "name": {"type": "string"},
                        "operation": {"type": "string"}, "check": {"type": "string"}}}},
                    "reason": {"type": "string"},
                },
            }),
            "/deployments/{name}/clear-pending": _confirmed(_operation(
                "clearPending", "After checking them in the AWS console: drop pending operations from the state (refresh with clear_pending_creates)")),
            "/deployments/{name}/checks": _read("getDeploymentChecks", "The last report of each kind", {
                "type": "object", "required": ["preflight", "verify"],
                "properties": {"preflight": _LAST_REPORT, "verify": _LAST_REPORT},
            }),
            "/deployments/{name}/status": _read("getDeploymentStatus", "What runs now: nodes, pods per phase, RayService and Serve (real engine)", {
                "type": "object", "required": ["available"],
                "properties": {
                    "available": {"type": "boolean"},
                    "reason": {"type": "string", "description": "why there is no live status"},
                    "checkedAt": {"type": "string"},
                    "error": {"type": "string"},
                    "nodes": {"type": "array", "items": {"type": "object"}},
                    "pods": {"type": "array", "items": {"type": "object"}},
                    "rayService": {"type": "object"},
                    "serve": {"type": "object"},
                },
            }),
            "/deployments/{name}/refresh": _operation("refresh", "Read back the real state of the resources"),
            "/jobs/{id}": {
                "get": {
                    "operationId": "getJob",
                    "summary": "A job's status and progress",
                    "parameters": [_JOB_ID],
                    "responses": {
                        "200": _json({"$ref": "#/components/schemas/Job"}, "the job"),
                        "404": _errors("no such job"),
                        **_COMMON,
                    },
                },
            },
            "/jobs/{id}/events": {
                "get": {
                    "operationId": "streamJobEvents",
                    "summary": "Server-sent events: one JSON progress record per `data:` line; ends with the job",
                    "parameters": [
                        _JOB_ID,
                        {"name": "after", "in": "query", "required": False,
                         "schema": {"type": "integer", "minimum": 0},
                         "description": "skip events up to this sequence number (like Last-Event-ID)"},
                        {"name": "Last-Event-ID", "in": "header", "required": False,
                         "schema": {"type": "string"}},
                    ],
                    "responses": {
                        "200": {"description": "event stream",
                                "content": {"text/event-stream": {"schema": {"type": "string"}}}},
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
                    "responses": {
                        "202": _json({"$ref": "#/components/schemas/Job"}, "cancel requested"),
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
                    "responses": {"200": {"description": "OpenAPI 3 document"}, **_COMMON},
                },
            },
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                **_report_schemas(),
                "Errors": {
                    "type": "object", "required": ["errors"],
                    "properties": {"errors": {"type": "array", "items": {
                        "type": "object", "required": ["field", "message"],
                        "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
                    }}},
                },
                "JobAccepted": {
                    "type": "object", "required": ["job"], "properties": {"job": {"type": "string"}},
                },
                "CreateDeployment": {
                    "type": "object", "additionalProperties": False, "required": ["name"],
                    "properties": {
                        "name": _NAME["schema"],
                        "config": {
                            "type": "object",
                            "description": "Contract 1 keys: aws:region and raypd:* (raypd:hfToken is kept as a secret)",
                            "additionalProperties": True,
                        },
                    },
                },
                "Progress": {
                    "type": "object",
                    "properties": {"done": {"type": "integer"}, "total": {"type": "integer"}},
                },
                "Job": {
                    "type": "object",
                    "required": ["id", "deployment", "operation", "status", "progress", "error"],
                    "properties": {
                        "id": {"type": "string"},
                        "deployment": {"type": "string"},
                        "operation": {"type": "string", "enum": [
                            "preview", "up", "refresh", "destroy", "clear-pending", "preflight", "verify"]},
                        "engine": {"type": "string", "enum": ["pulumi", "offline"]},
                        "status": {"type": "string", "enum": [
                            "queued", "running", "succeeded", "failed", "cancelled", "interrupted"]},
                        "progress": {"$ref": "#/components/schemas/Progress"},
                        "error": {"type": "string", "nullable": True},
                        "hint": {"type": "string"},
                        "notice": {"type": "string"},
                        "result": {**_REPORT_REF, "description": "preflight and verify jobs: their report"},
                        "reports": {"type": "object", "description": "every report the job made, by kind",
                                    "additionalProperties": _REPORT_REF},
                    },
                },
                "DeploymentSummary": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "engine": {"type": "string", "enum": ["pulumi", "offline"]},
                        "notice": {"type": "string"},
                        "status": {"type": "string"},
                        "modelId": {"type": "string"},
                        "mode": {"type": "string"},
                        "topology": {"type": "string"},
                        "region": {"type": "string"},
                        "estimatedUsdPerHour": {"type": "number", "nullable": True},
                        "lastOperation": {"type": "string", "nullable": True},
                        "lastOperationAt": {"type": "string", "nullable": True},
                    },
                },
                "DeploymentList": {
                    "type": "object",
                    "properties": {
                        "deployments": {"type": "array", "items": {"$ref": "#/components/schemas/DeploymentSummary"}},
                        "engine": {"type": "object"},
                    },
                },
                "Deployment": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "engine": {"type": "string"},
                        "notice": {"type": "string"},
                        "status": {"type": "string"},
                        "spec": {"type": "object", "description": "Contract 1 config; raypd:hfToken shows as [secret]"},
                        "outputs": {"type": "object", "nullable": True, "description": "secrets as [secret]"},
                        "resources": {"type": "array", "nullable": True, "items": {"type": "object"}},
                        "jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}},
                        "pendingChanges": {
                            "type": "object", "nullable": True,
                            "description": "settings changed since the last successful up, and the cost before and after",
                            "properties": {
                                "config": {"type": "array", "items": {"type": "object", "properties": {
                                    "key": {"type": "string"}, "old": {}, "new": {}}}},
                                "usdPerHour": {"type": "object", "properties": {
                                    "old": {"type": "number", "nullable": True},
                                    "new": {"type": "number", "nullable": True},
                                    "delta": {"type": "number", "nullable": True}}},
                            },
                        },
                    },
                },
            },
        },
    }
