"""An IAM role a Kubernetes ServiceAccount assumes (IRSA), with its inline policy.

Who may assume it is components.render.model_access.irsa_trust_policy (the cluster's OIDC provider,
one namespace and ServiceAccount); what it may do is the caller's policy document. The ARN is
published only once the policy is attached: a pod or chart that reads it earlier starts with a
role that has no permissions yet and fails its first AWS calls with AccessDenied.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import pulumi
import pulumi_aws as aws

from components.render.model_access import irsa_trust_policy


def irsa_role(role_name: str, policy_name: str, *, oidc_provider_arn: pulumi.Input[str],
              oidc_issuer: pulumi.Input[str], namespace: str, service_account: str,
              policy: Mapping[str, Any], tags: Mapping[str, str],
              opts: pulumi.ResourceOptions) -> pulumi.Output[str]:
    """Create the role `role_name` and its inline policy `policy_name`; return the role's ARN,
    known once the policy is attached."""
    trust = pulumi.Output.all(oidc_provider_arn, oidc_issuer).apply(
        lambda v: json.dumps(irsa_trust_policy(v[0], v[1], namespace, service_account)))
    role = aws.iam.Role(role_name, assume_role_policy=trust, tags=dict(tags), opts=opts)
    attached = aws.iam.RolePolicy(policy_name, role=role.name, policy=json.dumps(policy), opts=opts)
    return pulumi.Output.all(role.arn, attached.id).apply(lambda v: v[0])
