"""What every preflight check shares (components.preflight): the check titles, the run's context
(the one plan, the AWS layer, what earlier checks learned) and the words for skipped checks."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from components.config.checks import Check
from components.config.spec import DeploymentSpec
from components.plan import model_shapes
from components.plan.topology import DeploymentPlan
from components.preflight import certificate as endpoint_certificate
from components.preflight import model_source
from components.preflight.aws import Aws

log = logging.getLogger(__name__)

TITLES: dict[str, str] = {
    "aws-credentials": "AWS credentials work and the region answers",
    "instance-types": "instance types exist in the region with the GPUs each phase needs",
    "efa-support": "GPU instance types support EFA (LIBFABRIC KV transfer)",
    "zone-offering": "one availability zone offers every GPU instance type",
    "eks-zone": "EKS can use the GPU zone and a second zone",
    "vcpu-quota": "On-Demand vCPU quota covers the nodes",
    "gpu-memory-fit": model_shapes.TITLE,
    "update-headroom": "spare quota for a rolling node-group update",
    "model-source": model_source.TITLE,
    "endpoint-certificate": endpoint_certificate.TITLE,
}
# The checks that ask AWS after aws-credentials (model-source asks S3 only for s3:// sources;
# endpoint-certificate asks ACM only when the endpoint terminates TLS).
AWS_CHECK_IDS = tuple(i for i in TITLES if i not in (
    "aws-credentials", "gpu-memory-fit", "model-source", "endpoint-certificate"))

NO_CREDENTIALS = (
    "no AWS credentials found (set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, run "
    "`aws configure` or `aws sso login`, or run where an instance/container role is available)"
)


@dataclass
class Context:
    plan: DeploymentPlan
    aws: Aws
    deployed: Optional[DeploymentSpec]
    types: dict[str, dict[str, Any]] = field(default_factory=dict)
    gpu_zone: Optional[str] = None
    # The deployed stack's GPU zone: its VPC's tag when EC2 answered, else what the caller knows
    # (the web app: the stack's availabilityZone output).
    deployed_zone: Optional[str] = None
    checks: list[Check] = field(default_factory=list)

    @property
    def spec(self) -> DeploymentSpec:
        return self.plan.spec

    def add(self, check: Check) -> None:
        log.debug("%s: %s", check.id, check.status)
        self.checks.append(check)


def skip_all(ids: Iterable[str], why: str, remedy: str = "") -> list[Check]:
    return [Check.skipped(i, TITLES[i], why, remedy) for i in ids]


def unreachable_remedy() -> str:
    return ("check network access to AWS, and AWS_ENDPOINT_URL if it is set (it replaces every AWS "
            "endpoint), then rerun")

