"""The API's one blueprint ("api", under /api/v1: every endpoint keeps its name, e.g. api.get_job),
the strict reading of request bodies, and the errors every view may let out, answered as JSON.

Bodies are strict: malformed JSON, a non-object, wrong types and unknown top-level keys are 400
with `{"errors": [{"field", "message"}]}`, like every config mistake. What a body may hold is the
request model's (webui/api_models/) to say.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request
from pydantic import BaseModel

from components.config.errors import FieldError, SpecError
from components.config.safe_documents import DocumentError, DuplicateKeyError, load_json
from webui.api_key_service import KeysUnavailable, UnknownKeyName
from webui.api_models import BodyRefused, RequestT, dump, parse
from webui.deployments.errors import Conflict, NotFound
from webui.engines.base import EngineError
from webui.errors import api_error

bp = Blueprint("api", __name__, url_prefix="/api/v1")

# Raised by the parsing below and by the views' own checks: 400 with the field errors.
BodyError = BodyRefused


def refused(field: str, message: str) -> BodyError:
    """A 400 naming one field, for a view to raise."""
    return BodyError([FieldError(field, message)])


def json_body(model: type[RequestT]) -> RequestT:
    """The request's JSON object, validated by `model` (webui/api_models/).

    The JSON itself is read here (size, media type, syntax, constants like NaN, a key given twice,
    runaway nesting and numbers: components.config.safe_documents, an object at the top); what the object
    may hold is the model's to say.
    """
    raw = request.get_data(cache=True)  # over MAX_CONTENT_LENGTH: 413 before anything is read
    if not raw.strip():
        if any(field.is_required() for field in model.model_fields.values()):
            raise refused("body", "a JSON object is required")
        return parse(model, {})
    if request.mimetype != "application/json":
        raise refused("Content-Type", "send the body as application/json")
    try:
        body = load_json(raw, max_bytes=len(raw))  # the size is MAX_CONTENT_LENGTH's to judge
    except DuplicateKeyError as exc:
        raise refused(exc.path, "is given twice in the body; give each key once") from None
    except DocumentError as exc:
        raise refused("body", f"malformed JSON: the body {exc}") from None
    if not isinstance(body, dict):
        raise refused("body", "must be a JSON object")
    return parse(model, body)


def answer(model: BaseModel) -> Response:
    return jsonify(dump(model))


@bp.errorhandler(BodyError)
def _body_error(exc: BodyError) -> tuple[Response, int]:
    return jsonify({"errors": [e.as_dict() for e in exc.errors]}), 400


@bp.errorhandler(SpecError)
def _spec_error(exc: SpecError) -> tuple[Response, int]:
    return jsonify({"errors": [e.as_dict() for e in exc.errors]}), 400


@bp.errorhandler(NotFound)
def _not_found(exc: NotFound) -> Response:
    return api_error(404, "keyName" if isinstance(exc, UnknownKeyName) else "name", str(exc))


@bp.errorhandler(KeysUnavailable)
def _keys_unavailable(exc: KeysUnavailable) -> Response:
    return api_error(exc.status, exc.field, exc.message)


@bp.errorhandler(Conflict)
def _conflict(exc: Conflict) -> Response:
    extra = {"job": exc.job} if exc.job else {}
    return api_error(409, exc.field, exc.message, **extra)


@bp.errorhandler(EngineError)
def _engine_error(exc: EngineError) -> Response:
    return api_error(exc.http_status, "engine", exc.message)
