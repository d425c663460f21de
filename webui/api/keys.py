"""A deployment's API keys through the API: list, create (the value is in that answer only) and
revoke; the keys live in the cluster (webui/api_key_service.py), never in the store."""

from __future__ import annotations

from typing import Any

from flask import Response, g

from webui.api.blueprint import answer, bp, json_body
from webui.api_models import ApiKeyList, CreateApiKey, CreatedApiKey, NoOptions
from webui.openapi import TOO_LARGE, documented, errors, json_answer
from webui.state import raypd


def _keys_errors(conflict_first: str = "") -> dict[str, Any]:
    """What an API-key call answers when the keys, the deployment or the cluster say no."""
    conflict = ("the deployment has no keys to manage: an offline plan (it has no cluster), not "
                "deployed yet, or its endpoint has auth none")
    return {
        "404": errors("no such deployment (field name), or no such key (field keyName)"),
        "409": errors(f"{conflict_first}; or {conflict}" if conflict_first else conflict),
        "503": errors("the cluster's API did not answer or refused the call, or its kubeconfig "
                      "cannot be used; or the engine is not available here"),
    }


@bp.get("/deployments/<name>/api-keys")
@documented("listApiKeys", "The endpoint's API keys by name and creation time, never their values (read "
                           "from the cluster's key Secret)",
            {"200": json_answer(ApiKeyList, "the keys"), **_keys_errors()})
def list_api_keys(name: str) -> Response:
    return answer(ApiKeyList.model_validate({"keys": raypd().api_keys.list(name)}))


@bp.post("/deployments/<name>/api-keys")
@documented("createApiKey", "Create a key; this answer is the only place its value is ever shown. The "
                            "gateway accepts it within moments, without a redeploy", {
    "201": json_answer(CreatedApiKey, "created: keep the key now"),
    "400": errors("no name, or a name that breaks the rule (field name)"),
    **_keys_errors("a key by that name exists (field name)"),
    "413": TOO_LARGE,
}, body=CreateApiKey, body_required=True)
def create_api_key(name: str) -> tuple[Response, int]:
    body = json_body(CreateApiKey)
    # The key's value is in this answer only: never logged, stored or put in an event.
    return answer(CreatedApiKey.model_validate(raypd().api_keys.create(name, body.name, g.actor))), 201


@bp.delete("/deployments/<name>/api-keys/<keyName>")
@documented("revokeApiKey", "Revoke a key: the gateway refuses it within moments, without a redeploy. The "
                            "last key is not revoked (create its replacement first)", {
    "204": {"description": "revoked"},
    "400": errors("a key name that breaks the rule, or a body that is not an empty JSON object (named)"),
    **_keys_errors("it is the deployment's last key (field keyName)"),
}, body=NoOptions)
def revoke_api_key(name: str, keyName: str) -> tuple[str, int]:  # keyName: as the OpenAPI document names it
    json_body(NoOptions)
    raypd().api_keys.revoke(name, keyName, g.actor)
    return "", 204
