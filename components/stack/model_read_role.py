"""The IAM role the Ray pods' ServiceAccount assumes to read an `s3://` model source (IRSA).

What the role may do and who may assume it are pure functions in components.render.model_access
(its docstring says why IRSA, and why exactly these permissions); this component only creates the
role and its inline policy from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi

from components.render.model_access import S3Location, read_policy
from components.stack.irsa import irsa_role


@dataclass(frozen=True)
class ModelReadRoleArgs:
    partition: str
    location: S3Location
    namespace: str
    service_account: str
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    tags: dict[str, str]


class ModelReadRole(pulumi.ComponentResource):
    """The IAM role the Ray pods' ServiceAccount assumes to read the model (see module docstring)."""

    role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: ModelReadRoleArgs,
                 opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("raypd:serving:ModelReadRole", name, None, opts)
        self.role_arn = irsa_role(
            f"{name}-role", f"{name}-s3-read", oidc_provider_arn=args.oidc_provider_arn,
            oidc_issuer=args.oidc_issuer, namespace=args.namespace,
            service_account=args.service_account, policy=read_policy(args.partition, args.location),
            tags=args.tags, opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"roleArn": self.role_arn})
