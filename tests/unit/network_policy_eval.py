"""A small NetworkPolicy evaluator: may this source reach that port of that pod? (ingress only)

Written from the semantics in the Kubernetes documentation ("Network Policies",
kubernetes.io/docs/concepts/services-networking/network-policies/, and the NetworkPolicy API
reference, networking.k8s.io/v1):
- a pod is isolated for ingress when some NetworkPolicy of ITS namespace selects it and lists
  "Ingress" in policyTypes; a pod no policy isolates accepts every connection;
- an isolated pod accepts a connection when some rule of some policy that selects it allows it:
  policies are additive (a union), never ordered, never a deny;
- a rule allows when its ports match (no ports: every port) AND one of its `from` peers matches
  (no `from`: every source);
- a peer with only podSelector: pods of the policy's own namespace; only namespaceSelector:
  every pod of the matching namespaces; both in ONE entry: pods matching podSelector in the
  matching namespaces; ipBlock: a source address in `cidr` and not in `except`;
- a label selector: every matchLabels pair AND every matchExpressions requirement (In, NotIn,
  Exists, DoesNotExist); an empty selector matches everything;
- every namespace carries kubernetes.io/metadata.name=<its name> (set by the API server).
Named ports and SCTP/UDP are out of scope (raypd's policies use TCP port numbers).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    ip: str = "10.0.1.1"


@dataclass(frozen=True)
class Address:
    """A source that is no pod (the API server's ENI, a node, the internet)."""
    ip: str


def selector_matches(selector: Optional[Mapping[str, Any]], labels: Mapping[str, str]) -> bool:
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for requirement in selector.get("matchExpressions") or []:
        key, operator = requirement["key"], requirement["operator"]
        values = requirement.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def _namespace_labels(namespace: str, extra: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    return {**extra.get(namespace, {}), "kubernetes.io/metadata.name": namespace}


def _peer_matches(peer: Mapping[str, Any], source: Pod | Address, policy_namespace: str,
                  namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
    if "ipBlock" in peer:
        block = peer["ipBlock"]
        address = ipaddress.ip_address(source.ip)
        if address not in ipaddress.ip_network(block["cidr"]):
            return False
        return not any(address in ipaddress.ip_network(cidr) for cidr in block.get("except") or [])
    if not isinstance(source, Pod):
        return False  # pod and namespace selectors select pods only
    if "namespaceSelector" in peer:
        if not selector_matches(peer["namespaceSelector"],
                                _namespace_labels(source.namespace, namespace_labels)):
            return False
    elif source.namespace != policy_namespace:
        return False
    return selector_matches(peer.get("podSelector"), source.labels) if "podSelector" in peer else True


def _port_matches(ports: Sequence[Mapping[str, Any]], port: int) -> bool:
    if not ports:
        return True
    for item in ports:
        if item.get("protocol", "TCP") != "TCP":
            continue
        if "port" not in item:
            return True
        start = int(item["port"])
        if start <= port <= int(item.get("endPort", start)):
            return True
    return False


def may_reach(policies: Sequence[Mapping[str, Any]], source: Pod | Address, target: Pod, port: int,
              namespace_labels: Optional[Mapping[str, Mapping[str, str]]] = None) -> bool:
    """True when `source` may open a TCP connection to `port` of `target` (ingress side only)."""
    labels = namespace_labels or {}
    selecting = [
        policy for policy in policies
        if policy["metadata"]["namespace"] == target.namespace
        and "Ingress" in (policy["spec"].get("policyTypes") or ["Ingress"])
        and selector_matches(policy["spec"].get("podSelector"), target.labels)
    ]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress") or []:
            if not _port_matches(rule.get("ports") or [], port):
                continue
            peers = rule.get("from") or []
            if not peers or any(_peer_matches(peer, source, target.namespace, labels) for peer in peers):
                return True
    return False
