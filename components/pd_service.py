"""The serving namespace, the optional Hugging Face token Secret, and the RayService itself.

The manifest comes whole from `components.rayservice.render_rayservice`; this component only
applies it. It waits for (and on destroy goes before) the KubeRay operator, which owns the
RayService finalizer, and the device plugins and GPU node groups its workers need.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s
from pydantic import SecretStr

from components.rayservice import HF_TOKEN_SECRET_KEY


@dataclass(frozen=True)
class PdServiceArgs:
    namespace: str
    manifest: dict[str, Any]  # render_rayservice(spec)
    hf_token: Optional[SecretStr]
    hf_token_secret_name: str
    # The KubeRay release, device plugins and GPU node groups: created first, destroyed last.
    wait_for: tuple[pulumi.Resource, ...] = ()


class PdService(pulumi.ComponentResource):
    """Children inherit the Kubernetes provider from this component's `providers` option."""

    ray_service: k8s.apiextensions.CustomResource

    def __init__(self, name: str, args: PdServiceArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("raypd:serving:PdService", name, None, opts)
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=args.namespace),
            opts=pulumi.ResourceOptions(parent=self),
        )
        needs: list[pulumi.Resource] = [namespace, *args.wait_for]
        if args.hf_token is not None:
            token = k8s.core.v1.Secret(
                f"{name}-hf-token",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=args.hf_token_secret_name, namespace=args.namespace
                ),
                # Secret end to end: encrypted in the Pulumi state, masked in every output.
                string_data={
                    HF_TOKEN_SECRET_KEY: pulumi.Output.secret(args.hf_token.get_secret_value())
                },
                opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
            )
            needs.append(token)

        manifest = args.manifest
        self.ray_service = k8s.apiextensions.CustomResource(
            f"{name}-rayservice",
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=needs),
        )
        self.register_outputs({"rayServiceName": manifest["metadata"]["name"]})
