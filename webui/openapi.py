"""The OpenAPI 3.1 document of the JSON API (served at /api/v1/openapi.json), built from the routes.

Each API view carries its own entry, next to its route: `documented` (or the presets `starts_job`
and `reads`) gives its operationId, summary, request body and answers by status. The document walks
the app's url_map: each /api/v1 rule gives a path (its variables named as PATH_PARAMETERS documents
them) and a method, the view the rest; the 401 every call may answer is added here. So a route and
its entry are one definition; a view without an entry is left out, which tests/web/test_api.py
reports.

Its schemas are not written here: they are derived from the pydantic models the API parses bodies
with and builds answers from (webui/api_models/), from the Contract 5 report model, and, for
Contract 1 config, from DeploymentSpec. OpenAPI 3.1 schemas are JSON Schema 2020-12, as pydantic
writes them, so a test validates real answers against this document exactly
(tests/web/test_api_contract.py).
"""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, TypeVar

from flask import Flask
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from components.config.spec import MAX_STACK_NAME
from components.render.endpoint_names import KEY_NAME_PATTERN
from webui import api_models as m

API_PREFIX = "/api/v1"
# What each route variable is, under the name the document gives it (the views' `job_id` is `id`).
PATH_PARAMETERS: dict[str, dict[str, Any]] = {
    "name": {"name": "name", "in": "path", "required": True,
             "schema": {"type": "string", "pattern": m.STACK_NAME_PATTERN, "maxLength": MAX_STACK_NAME}},
    "job_id": {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
    "keyName": {"name": "keyName", "in": "path", "required": True,
                "schema": {"type": "string", "pattern": KEY_NAME_PATTERN.pattern, "maxLength": 32},
                "description": "the API key's name"},
    "run": {"name": "run", "in": "path", "required": True, "schema": {"type": "string"},
            "description": "a benchmark run's id (the job that made it)"},
}
_VARIABLE = re.compile(r"<(?:[^<>:]+:)?([^<>]+)>")  # `<name>`, `<int:n>`: werkzeug's rule syntax
_ENTRY = "openapi_operation"  # the attribute `documented` sets on a view


# ---- what a view's entry is made of ----

def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": m.SCHEMA_REF.format(model=model.__name__)}


def json_answer(model: type[BaseModel], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def errors(description: str) -> dict[str, Any]:
    return json_answer(m.Errors, description)


def stream_answer(description: str, media_type: str) -> dict[str, Any]:
    """An answer that is not one JSON document (an event stream, JSON lines)."""
    return {"description": description, "content": {media_type: {"schema": {"type": "string"}}}}


COMMON = {"401": errors("missing or wrong access token")}
BAD_BODY = errors("a body that is not a JSON object, a wrong type or an unknown key (named)")
BUSY = json_answer(m.BusyErrors, "another operation is running (its job id)")
TOO_LARGE = errors("body too large")
NO_DEPLOYMENT = errors("no such deployment")
NO_ENGINE = errors("the deployment's engine is not available here")


@dataclass(frozen=True)
class Entry:
    """A view's part of the document; the path and its variables come from the view's route."""

    operation_id: str
    summary: str
    responses: Mapping[str, Mapping[str, Any]]
    body: Optional[type[m.ApiRequest]] = None
    body_required: bool = False
    parameters: tuple[Mapping[str, Any], ...] = ()  # query and header; the path's come from the route

    def operation(self, path_parameters: list[dict[str, Any]]) -> dict[str, Any]:
        operation: dict[str, Any] = {"operationId": self.operation_id, "summary": self.summary}
        if path_parameters or self.parameters:
            operation["parameters"] = [*path_parameters, *self.parameters]
        if self.body is not None:
            operation["requestBody"] = {"required": self.body_required,
                                        "content": {"application/json": {"schema": _ref(self.body)}}}
        operation["responses"] = {**self.responses, **COMMON}
        return operation


View = TypeVar("View", bound=Callable[..., Any])


def documented(operation_id: str, summary: str, responses: Mapping[str, Mapping[str, Any]], *,
               body: Optional[type[m.ApiRequest]] = None, body_required: bool = False,
               parameters: tuple[Mapping[str, Any], ...] = ()) -> Callable[[View], View]:
    """The view's entry in the document: its answers by status (401 is added for every view), and
    the model its body is parsed with (`json_body`), if it reads one."""
    entry = Entry(operation_id, summary, responses, body, body_required, parameters)

    def attach(view: View) -> View:
        setattr(view, _ENTRY, entry)
        return view

    return attach


def starts_job(operation_id: str, summary: str, body: type[m.ApiRequest] = m.NoOptions,
               body_required: bool = False, conflict: Optional[Mapping[str, Any]] = None
               ) -> Callable[[View], View]:
    """An operation that starts a job: 202 with its id at once."""
    return documented(operation_id, summary, {
        "202": json_answer(m.JobAccepted, "job accepted; follow it at /jobs/{id}"),
        "400": BAD_BODY,
        "404": NO_DEPLOYMENT,
        "409": conflict or BUSY,
        "413": TOO_LARGE,
        "503": NO_ENGINE,
    }, body=body, body_required=body_required)


def reads(operation_id: str, summary: str, model: type[BaseModel]) -> Callable[[View], View]:
    """A read of one deployment: the summary says what the answer is."""
    return documented(operation_id, summary, {"200": json_answer(model, summary), "404": NO_DEPLOYMENT})


def entry_of(view: Callable[..., Any]) -> Optional[Entry]:
    entry = getattr(view, _ENTRY, None)
    return entry if isinstance(entry, Entry) else None


# ---- the document ----

def _path(rule: str) -> tuple[str, list[dict[str, Any]]]:
    """A rule under API_PREFIX -> the document's path template and its parameters, in order."""
    parameters: list[dict[str, Any]] = []

    def named(variable: re.Match[str]) -> str:
        if variable.group(1) not in PATH_PARAMETERS:
            raise LookupError(f"{rule}: say what <{variable.group(1)}> is in webui/openapi.py PATH_PARAMETERS")
        parameter = PATH_PARAMETERS[variable.group(1)]
        parameters.append(parameter)
        return "{" + parameter["name"] + "}"

    return _VARIABLE.sub(named, rule.removeprefix(API_PREFIX)), parameters


def api_paths(app: Flask) -> dict[str, Any]:
    """The document's paths: every /api/v1 route whose view has an entry, with its methods."""
    paths: dict[str, Any] = {}
    for rule in app.url_map.iter_rules():
        entry = entry_of(app.view_functions[rule.endpoint])
        if not rule.rule.startswith(f"{API_PREFIX}/") or entry is None:
            continue
        methods = sorted((rule.methods or set()) - {"HEAD", "OPTIONS"})
        if len(methods) != 1:  # one entry cannot describe two methods: give each its own view
            raise ValueError(f"{rule.rule}: one view documented for {', '.join(methods)}")
        template, parameters = _path(rule.rule)
        paths.setdefault(template, {})[methods[0].lower()] = entry.operation(parameters)
    return paths


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
def _frame() -> dict[str, Any]:
    """Everything but the paths (built once per process: the models do not change while it runs)."""
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
        "servers": [{"url": API_PREFIX}],
        "security": [{"bearer": []}],
        "paths": {},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": component_schemas(),
        },
    }


def openapi_document(app: Flask) -> dict[str, Any]:
    """The document of `app`'s API routes."""
    document = copy.deepcopy(_frame())
    document["paths"] = copy.deepcopy(api_paths(app))  # the entries are shared: hand out a copy
    return document
