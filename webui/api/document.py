"""The OpenAPI document of this API, served at /api/v1/openapi.json (built in webui/openapi.py)."""

from __future__ import annotations

from flask import Response, jsonify

from webui.api.blueprint import bp
from webui.openapi import openapi_document


@bp.get("/openapi.json")
def openapi() -> Response:
    return jsonify(openapi_document())
