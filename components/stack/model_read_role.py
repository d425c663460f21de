"""The IAM role the Ray pods' ServiceAccount assumes to read an `s3://` model source (IRSA).

What the role may do and who may assume it are pure functions in components.render.model_access
(its docstring says why IRSA, and why exactly these permissions); this component only creates the
role and its inline policy from them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_aws as aws

from components.render.model_access import S3Location, irsa_trust_policy, read_policy


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
        child = pulumi.ResourceOptions(parent=self)
        trust = pulumi.Output.all(args.oidc_provider_arn, args.oidc_issuer).apply(
            lambda values: json.dumps(irsa_trust_policy(
                values[0], values[1], args.namespace, args.service_account
            ))
        )
        role = aws.iam.Role(f"{name}-role", assume_role_policy=trust, tags=args.tags, opts=child)
        policy = aws.iam.RolePolicy(
            f"{name}-s3-read",
            role=role.name,
            policy=json.dumps(read_policy(args.partition, args.location)),
            opts=child,
        )
        # Published once the policy is attached: a pod that starts earlier gets AccessDenied.
        self.role_arn = pulumi.Output.all(role.arn, policy.id).apply(lambda values: values[0])
        self.register_outputs({"roleArn": self.role_arn})
