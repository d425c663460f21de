"""Preflight: ask AWS, before `pulumi up`, whether this account and region can host the spec.

Every check answers one question a failed deploy would otherwise answer 20 minutes in (Contract 5
ids, see components/config/checks.py): do the credentials work (and is the caller not also listed in
raypd:adminRoleArns, which breaks the first `up`), do the instance types exist here with the GPUs
and EFA the spec assumes, does one AZ offer them all, can EKS use that AZ, is there vCPU quota for
the nodes (and for the extra nodes a rolling node-group update launches), does the model fit the
GPUs (`gpu-memory-fit`, no AWS), and can the model be downloaded (`model-source`: the Hugging Face
Hub or S3, components/preflight/model_source.py), and is the endpoint's TLS certificate issued for its host
(`endpoint-certificate`, ACM, components/preflight/certificate.py). All AWS calls are read-only.

Layout: `run_preflight` (here) runs the checks in their order; the checks live by what they judge
(credentials.py, placement.py, quota.py, with context.py holding what they share) and ask AWS
through aws.py, a thin layer over boto3 with short timeouts; the CLI (`python -m
components.preflight`) is cli.py. No credentials: the AWS checks are skipped, the memory and Hub
checks still run. An endpoint that does not answer fails `aws-credentials` in seconds, naming the
endpoint (the other AWS checks skip), never a hang or a traceback.
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional

import boto3
from botocore.client import BaseClient
from botocore.exceptions import ClientError, ProfileNotFound

from components.config.checks import Check, Report
from components.config.spec import DeploymentSpec
from components.plan.model_shapes import memory_fit
from components.plan.topology import plan_deployment
from components.preflight import certificate as endpoint_certificate
from components.preflight import model_source
from components.preflight.aws import Aws, Unreachable, aws_credentials_available, short
from components.preflight.context import (
    AWS_CHECK_IDS,
    NO_CREDENTIALS,
    TITLES,
    Context,
    skip_all,
    unreachable_remedy,
)
from components.preflight.credentials import check_credentials
from components.preflight.placement import (
    check_efa,
    check_eks_zone,
    check_instance_types,
    check_zone_offering,
)
from components.preflight.quota import QuotaFacts, check_update_headroom, check_vcpu_quota, quota_facts


def _aws_checks(ctx: Context) -> Optional[QuotaFacts]:
    """The AWS checks after the credentials passed; a call that fails turns its check into warn."""
    steps: list[tuple[str, Callable[[], None]]] = [
        ("instance-types", lambda: check_instance_types(ctx)),
        ("efa-support", lambda: check_efa(ctx)),
        ("zone-offering", lambda: check_zone_offering(ctx)),
        ("eks-zone", lambda: check_eks_zone(ctx)),
    ]
    for index, (cid, step) in enumerate(steps):
        try:
            step()
        except Unreachable as exc:
            ctx.add(Check.failed(cid, TITLES[cid], f"AWS stopped answering ({exc})", unreachable_remedy()))
            remaining = [c for c, _ in steps[index + 1:]] + ["vcpu-quota", "update-headroom"]
            ctx.checks += skip_all(remaining, f"AWS stopped answering (see {cid})")
            return None
        except ClientError as exc:
            ctx.add(Check.warned(cid, TITLES[cid], f"EC2 call failed ({short(exc)})",
                                 "grant read-only EC2 access (ec2:Describe*) to this identity"))
    facts = quota_facts(ctx)  # each of its calls fails soft (warn), so nothing to catch here
    check_vcpu_quota(ctx, facts)
    check_update_headroom(ctx, facts)
    return facts


def run_preflight(
    spec: DeploymentSpec,
    *,
    session: Optional[boto3.Session] = None,
    deployed: Optional[DeploymentSpec] = None,
    clients: Optional[Mapping[str, BaseClient]] = None,
    deployed_zone: Optional[str] = None,
) -> Report:
    """Every preflight check for `spec` (Contract 5 report, stable id order).

    `session`: the boto3 session (default: the default credential chain in spec.region; honours
    AWS_PROFILE and AWS_ENDPOINT_URL). `deployed`: the spec as currently deployed when this is an
    update, else None (`deployed_zone`: its GPU zone, when the caller knows it). `clients`:
    ready boto3 clients by service name ("sts", "ec2", "eks", "s3", "service-quotas"), used
    instead of the session's (tests stub Service Quotas this way).
    The Hub part of `model-source` needs no AWS and runs in every case.
    """
    checks: list[Check] = [memory_fit(spec)]
    try:
        session = session or boto3.Session(region_name=spec.region)
    except ProfileNotFound as exc:
        checks.append(Check.failed("aws-credentials", TITLES["aws-credentials"], str(exc),
                                   "set AWS_PROFILE to a profile in ~/.aws/config, or unset it"))
        checks += skip_all(AWS_CHECK_IDS, "the AWS profile does not exist")
        checks.append(model_source.check_model_source(spec, None, "the AWS profile does not exist"))
        checks.append(endpoint_certificate.check_endpoint_certificate(
            spec, None, "the AWS profile does not exist"))
        return Report.of("preflight", checks)
    if "sts" not in (clients or {}) and not aws_credentials_available(session):
        checks.append(Check.skipped("aws-credentials", TITLES["aws-credentials"], NO_CREDENTIALS))
        checks += skip_all(AWS_CHECK_IDS, "no AWS credentials: nothing to ask AWS with")
        checks.append(model_source.check_model_source(spec, None, "no AWS credentials found"))
        checks.append(endpoint_certificate.check_endpoint_certificate(
            spec, None, "no AWS credentials found"))
        return Report.of("preflight", checks)
    plan = plan_deployment(spec)  # the one plan every check below reads
    ctx = Context(plan=plan, aws=Aws(session, spec.region, clients), deployed=deployed,
                   deployed_zone=deployed_zone)
    blocked = check_credentials(ctx)
    if blocked is not None:
        ctx.checks += skip_all(AWS_CHECK_IDS, f"skipped: {blocked} (see aws-credentials)")
        ctx.add(model_source.check_model_source(spec, None, f"{blocked} (see aws-credentials)"))
        ctx.add(endpoint_certificate.check_endpoint_certificate(
            spec, None, f"{blocked} (see aws-credentials)"))
    else:
        _aws_checks(ctx)
        ctx.add(model_source.check_model_source(spec, lambda: ctx.aws.client("s3")))
        ctx.add(endpoint_certificate.check_endpoint_certificate(spec, lambda: ctx.aws.client("acm")))
    return Report.of("preflight", checks + ctx.checks)

