"""Read access to an `s3://` model source for the Ray pods, and nothing more.

A model from S3 needs AWS credentials in every Ray pod that loads weights. raypd gives them through
IRSA (IAM roles for service accounts): the cluster's IAM OIDC provider (pulumi-eks
`create_oidc_provider=True`) lets one Kubernetes ServiceAccount, used by the Ray head and worker
pods, assume one IAM role; EKS's pod identity webhook injects the web-identity token and role into
the pods, which every AWS SDK picks up. IRSA rather than EKS Pod Identity: it needs no extra
add-on (the pod identity agent) on the nodes. The role may read exactly the source: s3:GetObject
on objects under the prefix, s3:ListBucket on the bucket only for keys under that prefix. A
Hugging Face source creates none of this.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

import pulumi

S3_SCHEME = "s3://"
# The audience EKS's pod identity webhook puts in projected tokens.
IRSA_AUDIENCE = "sts.amazonaws.com"
ROLE_ARN_ANNOTATION = "eks.amazonaws.com/role-arn"


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str  # without leading or trailing "/"; "" for the whole bucket


def s3_location(source: str) -> Optional[S3Location]:
    """`s3://bucket/some/prefix/` -> (bucket, "some/prefix"); None for a Hugging Face repo id."""
    if not source.startswith(S3_SCHEME):
        return None
    bucket, _, prefix = source[len(S3_SCHEME):].partition("/")
    return S3Location(bucket, prefix.strip("/"))


def service_account_name(service_name: str, source: str) -> Optional[str]:
    """The ServiceAccount of the Ray pods when the model comes from S3, else None (default SA)."""
    return f"{service_name}-model-reader" if s3_location(source) is not None else None


def read_policy(partition: str, location: S3Location) -> dict[str, Any]:
    """GetObject under the prefix; ListBucket on the bucket, limited to the prefix by condition."""
    bucket_arn = f"arn:{partition}:s3:::{location.bucket}"
    if location.prefix:
        objects = f"{bucket_arn}/{location.prefix}/*"
        listing: dict[str, Any] = {
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": bucket_arn,
            "Condition": {"StringLike": {"s3:prefix": [location.prefix, f"{location.prefix}/*"]}},
        }
    else:
        objects = f"{bucket_arn}/*"
        listing = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn}
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "s3:GetObject", "Resource": objects},
            listing,
        ],
    }


def irsa_trust_policy(
    oidc_provider_arn: str, oidc_issuer: str, namespace: str, service_account: str
) -> dict[str, Any]:
    """Only that ServiceAccount's tokens, minted for STS, may assume the role."""
    issuer = oidc_issuer.removeprefix("https://")
    return {
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Federated": oidc_provider_arn},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {"StringEquals": {
                f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                f"{issuer}:aud": IRSA_AUDIENCE,
            }},
        }],
    }


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
        import pulumi_aws as aws

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
