"""JSON Merge Patch (RFC 7396): how a PATCH of a deployment's config (the API and the change form)
applies to the config it has.

A PATCH names only what changes. `{"raypd:decode": {"replicas": 3}}` must leave the decode phase's
instance type alone: replacing the whole object instead would put every sub-key left out back to its
default, and on a real stack a changed instance type replaces a node group. So, as RFC 7396 section 2
says: an object merges into the current object, key by key and recursively; `null` removes a key (the
spec then gives it its default); anything else (a string, a number, a list) replaces the value.

Pure; neither argument is modified.
"""

from __future__ import annotations

from typing import Any, Mapping


def merge_patch(target: Any, patch: Any) -> Any:
    """The result of applying `patch` to `target` (RFC 7396 section 2, MergePatch(Target, Patch))."""
    if not isinstance(patch, Mapping):
        return patch
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged
