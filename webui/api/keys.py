"""A deployment's API keys through the API: list, create (the value is in that answer only) and
revoke; the keys live in the cluster (webui/api_key_service.py), never in the store."""

from __future__ import annotations

from flask import Response, g

from webui.api.blueprint import answer, bp, json_body
from webui.api_models import ApiKeyList, CreateApiKey, CreatedApiKey, NoOptions
from webui.state import raypd


@bp.get("/deployments/<name>/api-keys")
def list_api_keys(name: str) -> Response:
    return answer(ApiKeyList.model_validate({"keys": raypd().api_keys.list(name)}))


@bp.post("/deployments/<name>/api-keys")
def create_api_key(name: str) -> tuple[Response, int]:
    body = json_body(CreateApiKey)
    # The key's value is in this answer only: never logged, stored or put in an event.
    return answer(CreatedApiKey.model_validate(raypd().api_keys.create(name, body.name, g.actor))), 201


@bp.delete("/deployments/<name>/api-keys/<keyName>")
def revoke_api_key(name: str, keyName: str) -> tuple[str, int]:  # keyName: as the OpenAPI document names it
    json_body(NoOptions)
    raypd().api_keys.revoke(name, keyName, g.actor)
    return "", 204


