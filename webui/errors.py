"""The two ways the app answers with an error: a JSON body for the API, an HTML page for a browser.

Views, the security layer and the app's error handlers all need them, and none of those may import
another (pages imports security; api imports the OpenAPI models): here, with no view imported,
neither is an import circle hidden behind a function-level import.
"""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify, render_template


def api_error(status: int, field: str, message: str, **extra: Any) -> Response:
    """Contract 4's error shape: {"errors": [{"field", "message"}], ...extra}."""
    response = jsonify({"errors": [{"field": field, "message": message}], **extra})
    response.status_code = status
    return response


def render_error(status: int, message: str) -> tuple[str, int]:
    """The error page, with the status to answer."""
    return render_template("error.html", status=status, message=message), status
