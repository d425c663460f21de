"""How Pulumi decides "update" or "replace" for a resource whose inputs changed, for the offline plan.

The offline engine has no provider to ask, so it applies the same two rules to the inputs the
program registers (the mock runtime records them, components.stack.mockrun):

1. The provider's detailed diff: the property paths that changed. pulumi-kubernetes builds it in
   `convertPatchToDiff` (provider/pkg/provider/provider.go): maps are compared key by key, arrays
   element by element (an element added at the end is an ADD at `[i]`, one removed a DELETE), and
   a leaf that is equal does not count. Paths print as `a.b[0].c`, with `["..."]` around keys that
   hold `.`, `"`, `[` or `]` (annotation keys such as `raypd.io/ray-cluster-digest`).
2. The engine's `applyReplaceOnChanges` (pkg/resource/deploy/step_generator.go): a diff path turns
   into a replacement when a `replaceOnChanges` path (parsed by `ParsePropertyPath`) contains it
   (`PropertyPath.Contains`: the replace path is a prefix of the diff path; `*` matches any key or
   index). The same containment decides the create-only inputs of other providers.

Pure functions on plain dicts; the tests hold them to the cases those sources define.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Union

PathPart = Union[str, int]
_NEEDS_BRACKETS = re.compile(r'[."\[\]]')


def format_path(parts: Iterable[PathPart]) -> str:
    """pulumi-kubernetes's path text for a list of keys and indexes."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _NEEDS_BRACKETS.search(part) or not part:
            escaped = part.replace('"', '\\"')
            text += f'["{escaped}"]'
        elif text:
            text += f".{part}"
        else:
            text = part
    return text


def parse_path(text: str) -> list[PathPart]:
    """Pulumi's property path grammar: `a.b`, `a["b.c"]`, `a[0]`, `a[*]`, `a["*"]`."""
    parts: list[PathPart] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == ".":
            i += 1
            continue
        if char == "[":
            if i + 1 < n and text[i + 1] == '"':
                j, value = i + 2, ""
                while j < n and text[j] != '"':
                    if text[j] == "\\" and j + 1 < n:
                        j += 1
                    value += text[j]
                    j += 1
                if j + 1 >= n or text[j + 1] != "]":
                    raise ValueError(f"unterminated key in property path {text!r}")
                parts.append(value)
                i = j + 2
            else:
                end = text.index("]", i)
                inner = text[i + 1:end]
                parts.append("*" if inner == "*" else int(inner))
                i = end + 1
            continue
        j = i
        while j < n and text[j] not in ".[":
            j += 1
        parts.append(text[i:j])
        i = j
    return parts


def contains(prefix: list[PathPart], path: list[PathPart]) -> bool:
    """`PropertyPath.Contains`: `prefix` is at or above `path`; `*` matches one key or index."""
    if len(path) < len(prefix):
        return False
    for want, got in zip(prefix, path, strict=False):
        if want == "*":
            continue
        if isinstance(want, int) != isinstance(got, int) or want != got:
            return False
    return True


_MISSING = object()


def detailed_diff(old: Any, new: Any) -> dict[str, str]:
    """Changed leaf paths -> "add" | "delete" | "update", as pulumi-kubernetes reports them."""
    diff: dict[str, str] = {}

    def walk(path: list[PathPart], before: Any, after: Any) -> None:
        if before is _MISSING and after is _MISSING:
            return
        if before is _MISSING:
            diff[format_path(path)] = "add"
        elif after is _MISSING:
            diff[format_path(path)] = "delete"
        elif isinstance(before, dict) and isinstance(after, dict):
            for key in list(after) + [k for k in before if k not in after]:
                walk(path + [key], before.get(key, _MISSING), after.get(key, _MISSING))
        elif isinstance(before, list) and isinstance(after, list):
            for index in range(max(len(before), len(after))):
                walk(path + [index], before[index] if index < len(before) else _MISSING,
                     after[index] if index < len(after) else _MISSING)
        elif before != after:
            diff[format_path(path)] = "update"

    walk([], old, new)
    return diff


def as_sets(inputs: Any, set_keys: Iterable[str]) -> Any:
    """`inputs` with the top-level lists named in `set_keys` sorted: set-typed properties (the
    subnet ids of an EKS node group or cluster are TypeSet in terraform-provider-aws, which
    pulumi-aws bridges) compare equal whatever their order."""
    if not isinstance(inputs, dict):
        return inputs
    keys = set(set_keys)
    return {key: (sorted(value, key=repr) if key in keys and isinstance(value, list) else value)
            for key, value in inputs.items()}


def step_keys(old_inputs: Any, new_inputs: Any) -> list[str]:
    """The changed paths of a step, sorted (what the preview lists as "inputs changed")."""
    return sorted(detailed_diff(old_inputs, new_inputs))


def replace_paths(old_inputs: Any, new_inputs: Any, triggers: Iterable[str]) -> list[str]:
    """The changed paths that make the engine replace the resource (module docstring, rule 2)."""
    parsed = [parse_path(trigger) for trigger in triggers]
    return sorted(
        path for path in detailed_diff(old_inputs, new_inputs)
        if any(contains(trigger, parse_path(path)) for trigger in parsed)
    )
