"""Who may reach the Ray pods, and the add-on namespaces' Pod Security labels, as Pulumi resources.

Every rule and label is decided by the pure functions of components.render.network_policy (its
docstring explains each one); this module only creates the `networking.k8s.io/v1` NetworkPolicy
objects from them, and patches the labels onto namespaces a Helm release created.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.render.network_policy import pod_security_labels, render_network_policies


@dataclass(frozen=True)
class NetworkPoliciesArgs:
    namespace: str
    service_name: str
    # The control plane ENIs' addresses (components.stack.cluster.Cluster.control_plane_cidrs).
    api_server_cidrs: pulumi.Input[Sequence[str]]
    client_namespaces: tuple[str, ...] = ()
    # NetworkPolicy peers (Prometheus's namespace and pod labels, issue 18) that may scrape the
    # Ray pods' metrics ports; none when raypd:observability is off.
    metrics_peers: tuple[Mapping[str, Any], ...] = ()
    # The namespace the policies live in (its owner sets it): created first.
    wait_for: tuple[pulumi.Resource, ...] = ()


class NetworkPolicies(pulumi.ComponentResource):
    """The rendered policies as `networking.k8s.io/v1` NetworkPolicy objects; children inherit the
    Kubernetes provider from this component's `providers` option."""

    policies: list[k8s.networking.v1.NetworkPolicy]

    def __init__(self, name: str, args: NetworkPoliciesArgs,
                 opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("raypd:security:NetworkPolicies", name, None, opts)

        def render(cidrs: Sequence[str]) -> list[dict[str, Any]]:
            return render_network_policies(args.namespace, args.service_name,
                                           api_server_cidrs=list(cidrs),
                                           client_namespaces=args.client_namespaces,
                                           metrics_peers=args.metrics_peers)

        # The set of policies and their names do not depend on the addresses; only specs do.
        shapes = render(())
        rendered = pulumi.Output.from_input(args.api_server_cidrs).apply(render)

        def spec_of(index: int) -> pulumi.Output[Any]:
            return rendered.apply(lambda documents: documents[index]["spec"])

        self.policies = [
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{shape['metadata']['name']}",
                metadata=shape["metadata"],
                spec=spec_of(index),
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.wait_for)),
            )
            for index, shape in enumerate(shapes)
        ]
        self.register_outputs({"policies": [shape["metadata"]["name"] for shape in shapes]})


def label_addon_namespace(name: str, namespace: str, level: str, version: str,
                          opts: Optional[pulumi.ResourceOptions] = None) -> k8s.core.v1.NamespacePatch:
    """Pod Security labels on a namespace a Helm release created (`create_namespace`): a
    server-side-apply patch of its labels, so Helm keeps the namespace and Pulumi owns only these
    fields (removed again on destroy)."""
    return k8s.core.v1.NamespacePatch(
        name,
        metadata=k8s.meta.v1.ObjectMetaPatchArgs(
            name=namespace, labels=pod_security_labels(level, version)),
        opts=opts,
    )
