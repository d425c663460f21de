"""CRD schemas made strict for tests: the API server prunes unknown fields silently, so a typo such
as `streamIdleTimout` would pass and configure nothing; in a test, an unknown field is an error.
Shared by the tests that validate rendered objects against upstream CRDs kept in tests/fixtures/crds."""

from __future__ import annotations

from typing import Any


def strict(schema: Any) -> Any:
    """The schema with `additionalProperties: false` wherever it lists properties and does not
    say otherwise (nor preserves unknown fields)."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strict(value) for key, value in schema.items()}
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out
