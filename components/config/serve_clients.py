"""raypd:inClusterClients: the namespaces whose pods may call the Serve port directly.

The endpoint's front door is the gateway (components.render.endpoint_names); an in-cluster program that
talks to the Serve Service itself (`openaiBaseUrl`) needs its namespace listed here, or the
NetworkPolicies (components.render.network_policy) drop its connections. Every pod of a listed
namespace is admitted, on the Serve port only, with no API key: list only namespaces you trust.
Its own module so that the endpoint model (raypd:endpoint) and this list stay apart.
"""

from __future__ import annotations

from typing import Any

from components.config import defaults
from components.config.rules import ascii_pattern

KEY = "raypd:inClusterClients"
MAX_NAMESPACES = 32
_NAMESPACE = ascii_pattern(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# Quoted back at most this long (a namespace name is at most 63 characters).
_SHOWN = 63


def client_namespaces_problem(value: Any) -> tuple[tuple[str, ...], list[tuple[str, str]]]:
    """(the namespaces, [(where, why)...]): `where` is "" for the list itself or "[i]" for an
    entry, so the caller names `raypd:inClusterClients[2]`. Control characters and surrogates
    are refused before this (components.config.spec's text check); this judges the shape."""
    if not isinstance(value, (list, tuple)):
        kind = "text" if isinstance(value, str) else type(value).__name__
        return (), [("", f'must be a list of namespace names such as ["apps"], not {kind}')]
    if len(value) > MAX_NAMESPACES:
        return (), [("", f"has {len(value)} entries; at most {MAX_NAMESPACES} namespaces")]
    problems: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(value):
        where = f"[{index}]"
        if not isinstance(item, str):
            problems.append((where, f"is {type(item).__name__}, not a namespace name"))
        elif not _NAMESPACE.fullmatch(item):
            shown = item if len(item) <= _SHOWN else item[:_SHOWN] + "..."
            problems.append((where, f"'{shown}' is not a Kubernetes namespace name (lower-case "
                                    "letters, digits and '-', at most 63 characters)"))
        elif item in seen:
            problems.append((where, f"'{item}' is given twice (also [{seen[item]}])"))
        elif item == defaults.KUBERAY_NAMESPACE:
            problems.append((where, f"'{item}' is the KubeRay operator's namespace, not a client"))
        else:
            seen[item] = index
    return tuple(value) if not problems else (), problems
