"""The Redis the Ray head's GCS keeps its tables in (issue 31 §1, `raypd:faultTolerance.gcs:
elasticache`): an ElastiCache for Valkey replication group in the cluster's VPC.

What it looks like is decided in components.render.gcs_fault_tolerance (replication_group_settings);
this component wires it: a subnet group over the VPC's private subnets, a security group whose only
rule admits TCP 6379 from the EKS cluster security group (the group EKS attaches to the managed
nodes the Ray head runs on; nothing else, and no CIDR), a Pulumi-generated auth token and the
replication group with TLS required in transit. The token is a pulumi_random RandomString with a
secret result (as the endpoint's first API key, components.stack.endpoint_stack, and for the same
reason: RandomPassword's type token reads as a password to the web app's redaction); it lives
encrypted in the Pulumi state, goes to ElastiCache and to the Kubernetes Secret the RayService
reads (components.stack.pd_service), and is never a stack output.

Order: the RayService depends on the replication group and the Secret, so Pulumi creates Redis
first, and on destroy deletes the RayService first; its RayCluster's Redis clean-up finalizer
(KubeRay deletes the cluster's keys with a Job) still finds Redis and the token then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import pulumi
import pulumi_aws as aws
import pulumi_random as random

from components.config import defaults
from components.render.gcs_fault_tolerance import AUTH_TOKEN_LENGTH


@dataclass(frozen=True)
class GcsStoreArgs:
    settings: dict  # components.render.gcs_fault_tolerance.replication_group_settings(spec)
    vpc_id: pulumi.Input[str]
    subnet_ids: pulumi.Input[Sequence[str]]  # the VPC's private subnets (both zones)
    # The security group of the nodes that may connect (the EKS cluster security group).
    node_security_group_id: pulumi.Input[str]
    tags: dict[str, str]


class GcsStore(pulumi.ComponentResource):
    host: pulumi.Output[str]  # the primary endpoint's DNS name (follows a failover)
    auth_token: pulumi.Output[str]  # secret
    replication_group: aws.elasticache.ReplicationGroup

    def __init__(self, name: str, args: GcsStoreArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("raypd:resilience:GcsStore", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        group = aws.ec2.SecurityGroup(
            f"{name}-sg",
            vpc_id=args.vpc_id,
            description="raypd: Redis for the Ray GCS, reachable from the cluster's nodes only",
            tags=args.tags,
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-from-nodes",
            security_group_id=group.id,
            referenced_security_group_id=args.node_security_group_id,
            ip_protocol="tcp",
            from_port=defaults.REDIS_PORT,
            to_port=defaults.REDIS_PORT,
            description="Ray head (GCS) to Redis, TLS",
            tags=args.tags,
            opts=child,
        )
        subnets = aws.elasticache.SubnetGroup(
            f"{name}-subnets",
            subnet_ids=args.subnet_ids,
            description="raypd: private subnets for the Ray GCS's Redis",
            tags=args.tags,
            opts=child,
        )
        token = random.RandomString(
            f"{name}-auth-token", length=AUTH_TOKEN_LENGTH, special=False,
            opts=pulumi.ResourceOptions(parent=self, additional_secret_outputs=["result"]))
        self.auth_token = pulumi.Output.secret(token.result)
        self.replication_group = aws.elasticache.ReplicationGroup(
            f"{name}-redis",
            **args.settings,
            auth_token=self.auth_token,
            subnet_group_name=subnets.name,
            security_group_ids=[group.id],
            tags=args.tags,
            # The subnet group by name is a dependency already; said outright, so it holds in the
            # offline plan too (the mocks know no autonamed name).
            opts=pulumi.ResourceOptions(parent=self, depends_on=[subnets, group],
                                        additional_secret_outputs=["authToken"]),
        )
        self.host = self.replication_group.primary_endpoint_address
        self.register_outputs({"host": self.host})
