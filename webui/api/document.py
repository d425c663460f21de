"""The OpenAPI document of this API, served at /api/v1/openapi.json (built in webui/openapi.py from
the routes and their entries)."""

from __future__ import annotations

from flask import Response, current_app, jsonify

from webui.api.blueprint import bp
from webui.openapi import documented, openapi_document


@bp.get("/openapi.json")
@documented("openapi", "This document", {"200": {
    "description": "OpenAPI 3.1 document", "content": {"application/json": {"schema": {"type": "object"}}}}})
def openapi() -> Response:
    return jsonify(openapi_document(current_app))
