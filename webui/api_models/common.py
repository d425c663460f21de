"""What the request and answer models share: the `absent` key, the schema references, the
Contract 1 objects (validated by DeploymentSpec, documented from it) and the enums of words."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

from components.config.spec import NAMESPACE, REGION_KEY, DeploymentSpec

# The longest window a client may ask the event stream to wait for new events (GET .../events?window=).
MAX_WINDOW_SECONDS = 300

SCHEMA_REF = "#/components/schemas/{model}"
STACK_NAME_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled", "interrupted"]
Operation = Literal["preview", "up", "refresh", "destroy", "clear-pending", "preflight", "verify", "benchmark",
                    "resilience", "conformance"]


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def absent(description: str = "", **kwargs: Any) -> Any:
    """A key that is left out of the answer when it does not apply (never sent as null).

    The model holds None for it and `dump` drops what was never set; the schema says the key is
    optional, with its real type and no null.
    """
    return Field(None, description=description or None, json_schema_extra=_no_default, **kwargs)


# ---- Contract 1 config: an object here, validated by DeploymentSpec, documented from it ----

# In a model's own schema a Contract 1 object is marked; the document swaps the mark for a $ref to
# the schema `contract1_schema` derives (pydantic cannot hold a $ref to a schema it did not make).
CONFIG_MARK = "x-raypd-config"
Contract1 = Annotated[dict[str, Any], WithJsonSchema({"type": "object", CONFIG_MARK: "DeploymentConfig"})]
Contract1Patch = Annotated[dict[str, Any], WithJsonSchema({"type": "object", CONFIG_MARK: "DeploymentConfigPatch"})]


def contract1_schema() -> dict[str, dict[str, Any]]:
    """`DeploymentConfig` (Contract 1 keys), `DeploymentConfigPatch` (each key may be null) and the
    nested objects, derived from DeploymentSpec: its field rules are the only ones written down."""
    spec = DeploymentSpec.model_json_schema(ref_template=SCHEMA_REF)
    definitions = spec.pop("$defs", {})
    fields = spec["properties"]
    properties = {REGION_KEY: fields["region"]}
    properties.update({f"{NAMESPACE}:{alias}": schema for alias, schema in fields.items()
                       if alias not in ("stack", "region")})
    token = f"{NAMESPACE}:hfToken"
    properties[token] = {"type": "string", "description": (
        "the Hugging Face token: kept as a stack secret, answered as \"[secret]\"; in a PATCH, "
        "\"[secret]\" keeps the token the stack has")}
    config = {
        "type": "object", "additionalProperties": False, "properties": properties,
        "description": "Contract 1 keys: aws:region and raypd:*; every value has its JSON type "
                       "(\"2\" is not a number). Validated by DeploymentSpec; a mistake is a 400 naming the key.",
    }
    # A PATCH is a JSON Merge Patch (RFC 7396, webui.merge_patch): a nested object may name only the
    # sub-keys that change, and null resets one, so each object has its patch form beside it.
    patches = {f"{name}{PATCH_SUFFIX}": _patch_form(schema) for name, schema in definitions.items()}
    patch = {
        "type": "object", "additionalProperties": False,
        "properties": {key: {"anyOf": [_patch_ref(schema), {"type": "null"}]} for key, schema in properties.items()},
        "description": "A JSON Merge Patch (RFC 7396) of Contract 1 keys: an object merges into the "
                       "current one (name only the sub-keys that change), null resets a key or sub-key "
                       "to its default (raypd:hfToken: null removes the token), arrays and scalars replace",
    }
    return {**definitions, **patches, "DeploymentConfig": config, "DeploymentConfigPatch": patch}


PATCH_SUFFIX = "Patch"


def _patch_ref(schema: dict[str, Any]) -> dict[str, Any]:
    """A property's schema with a reference to an object swapped for its patch form's."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return {**{k: v for k, v in schema.items() if k != "default"}, "$ref": ref + PATCH_SUFFIX}
    return schema


def _patch_form(definition: dict[str, Any]) -> dict[str, Any]:
    """An object's schema as a merge patch sees it: no key required, each may be null (reset)."""
    properties = {key: {"anyOf": [_patch_ref(schema), {"type": "null"}]}
                  for key, schema in definition.get("properties", {}).items()}
    form = {k: v for k, v in definition.items() if k not in ("properties", "required", "title")}
    return {**form, "title": f"{definition.get('title', 'object')}{PATCH_SUFFIX}", "properties": properties}
