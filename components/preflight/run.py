"""Preflight: ask AWS, before `pulumi up`, whether this account and region can host the spec.

    python -m components.preflight --config Pulumi.<stack>.yaml [--stack NAME] [--json]

Every check answers one question a failed deploy would otherwise answer 20 minutes in (Contract 5
ids, see components/config/checks.py): do the credentials work (and is the caller not also listed in
raypd:adminRoleArns, which breaks the first `up`), do the instance types exist here with the GPUs
and EFA the spec assumes, does one AZ offer them all, can EKS use that AZ, is there vCPU quota for
the nodes (and for the extra nodes a rolling node-group update launches), does the model fit the
GPUs (`gpu-memory-fit`, no AWS), and can the model be downloaded (`model-source`: the Hugging Face
Hub or S3, components/preflight/model_source.py), and is the endpoint's TLS certificate issued for its host
(`endpoint-certificate`, ACM, components/preflight/certificate.py). All AWS calls are read-only.

Layout: pure functions (zone choice, EKS-excluded zones, vCPUs per quota code, update surge) that
tests call without AWS; `_Aws`, a thin layer over boto3 with short timeouts; `run_preflight`, which
turns answers into checks. No credentials: the AWS checks are skipped, the memory and Hub checks
still run. An endpoint that does not answer fails `aws-credentials` in seconds, naming the
endpoint (the other AWS checks skip), never a hang or a traceback.
Exit codes: 0 no fail, 1 a fail, 2 invalid configuration.
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import shlex
import sys
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, TypeVar

import boto3
from botocore.client import BaseClient
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
)
from botocore.parsers import ResponseParserError

from components.changes.assess import DEFAULT_MAX_UNAVAILABLE, GPU_GROUP_ZONES
from components.config import catalogue
from components.config.checks import Check, Report, write_report
from components.config.errors import SpecError
from components.config.spec import ADMIN_ROLE_ARNS_KEY, REGION_KEY, DeploymentSpec
from components.config.stack_file import add_stack_arguments, read_stack
from components.plan import model_shapes
from components.plan.model_shapes import memory_fit
from components.plan.topology import DeploymentPlan, plan_deployment
from components.plan.zones import (
    AZ_FIELD,
    EKS_UNSUPPORTED_ZONE_IDS,
    PreviousZones,
    eks_usable,
    gpu_instance_types,
    is_regular_zone,
    pick_gpu_zone,
    pick_second_zone,
    previous_zones_from_tags,
    zones_offering_all,
)
from components.plan.zones import CLUSTER_TAG as VPC_CLUSTER_TAG
from components.plan.zones import STACK_TAG as VPC_STACK_TAG
from components.preflight import certificate as endpoint_certificate
from components.preflight import model_source
from components.preflight.admin_access import caller_in_admins, matching_entry

log = logging.getLogger(__name__)

EXIT_INVALID = 2

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

# Short timeouts and one retry: a dead or blackholed endpoint must end the run in seconds.
BOTO_CONFIG = Config(
    connect_timeout=5, read_timeout=5, retries={"max_attempts": 2, "mode": "standard"},
)

# EKS-excluded AZ IDs: one table, in components.plan.zones, shared with the program.

# EKS managed node group updates: the rule lives with the other change effects (components.changes).

QUOTA_NAMES: dict[str, str] = {
    catalogue.QUOTA_G_AND_VT: "Running On-Demand G and VT instances",
    catalogue.QUOTA_P: "Running On-Demand P instances",
    catalogue.QUOTA_STANDARD: "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
}
# EKS tags every managed node group instance with its cluster's name.
CLUSTER_TAG = "eks:cluster-name"

_CREDENTIAL_ERRORS = frozenset({
    "InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException", "SignatureDoesNotMatch",
    "UnrecognizedClientException", "InvalidAccessKeyId", "AccessDenied", "AccessDeniedException",
    "AuthFailure", "RequestExpired", "InvalidToken",
})
NO_CREDENTIALS = (
    "no AWS credentials found (set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, run "
    "`aws configure` or `aws sso login`, or run where an instance/container role is available)"
)


# ---- pure logic ----

def second_zone(region: str, zone_names: Iterable[str], gpu_zone: str) -> Optional[str]:
    """The program's second cluster subnet zone on a first deploy (components.plan.zones'
    pick_second_zone): the first other regular AZ EKS can use. `zone_names`: names, or a
    name -> zone id mapping (then EKS's unsupported zone ids are left out)."""
    pairs = (list(zone_names.items()) if isinstance(zone_names, Mapping)
             else [(name, "") for name in zone_names])
    return pick_second_zone(gpu_zone, None, eks_usable(region, pairs))


def choose_gpu_zone(
    plan: DeploymentPlan, offerings: Iterable[tuple[str, str]], usable: Optional[Sequence[str]] = None,
    previous: Optional[PreviousZones] = None,
) -> tuple[Optional[str], list[str]]:
    """(the GPU AZ the program would use, every AZ offering all GPU types), by the program's own
    rule (components.plan.zones.pick_gpu_zone): the configured raypd:availabilityZone (None when it
    lacks a type: the program would stop), else the zone the stack already uses, else the first
    zone offering every GPU type where EKS can place cluster subnets (`usable`; None: not known)."""
    spec = plan.spec
    zones = zones_offering_all(spec.region, offerings, gpu_instance_types(plan))
    if spec.availability_zone is not None:
        return (spec.availability_zone if spec.availability_zone in zones else None), zones
    zone = pick_gpu_zone(None, previous, zones, zones if usable is None else usable)
    return zone, zones


def quota_code_for(instance_type: str) -> Optional[str]:
    """The On-Demand vCPU quota an instance type counts against; None for the families raypd does
    not track (F, X, Inf, Trn, DL, HPC, Mac, high-memory...). Known types: the catalogue decides."""
    known = catalogue.lookup(instance_type)
    if known is not None:
        return known.quota_code
    letters = re.match(r"[a-z]+", instance_type.split(".", 1)[0])
    prefix = letters.group(0) if letters else ""
    if prefix in ("g", "gr", "vt"):
        return catalogue.QUOTA_G_AND_VT
    if prefix == "p":
        return catalogue.QUOTA_P
    if prefix in ("a", "c", "d", "h", "i", "m", "r", "t", "z"):
        return catalogue.QUOTA_STANDARD
    return None


@dataclass(frozen=True)
class NodeLine:
    """`nodes` x `instance_type` (`vcpus` each), counted against `quota_code`."""
    what: str
    instance_type: str
    nodes: int
    vcpus: int
    quota_code: str

    @property
    def total(self) -> int:
        return self.nodes * self.vcpus


def node_lines(plan: DeploymentPlan, vcpus: Mapping[str, int]) -> list[NodeLine]:
    """Every node the stack runs: GPU node groups (topology plan) and the system nodes.

    `vcpus` is per instance type from EC2 DescribeInstanceTypes; the catalogue fills gaps.
    """
    def cpus(name: str) -> int:
        if name in vcpus:
            return vcpus[name]
        known = catalogue.lookup(name)
        return known.vcpus if known is not None else 0

    lines = [
        NodeLine(f"GPU group {g.name}", g.instance_type, g.nodes, cpus(g.instance_type),
                 quota_code_for(g.instance_type) or catalogue.QUOTA_STANDARD)
        for g in plan.groups
    ]
    system = plan.spec.system_nodes.instance_type
    lines.append(NodeLine("system nodes", system, plan.spec.system_nodes.count, cpus(system),
                          quota_code_for(system) or catalogue.QUOTA_STANDARD))
    return lines


def vcpus_needed(lines: Iterable[NodeLine]) -> dict[str, int]:
    need: dict[str, int] = {}
    for line in lines:
        need[line.quota_code] = need.get(line.quota_code, 0) + line.total
    return need


def surge_nodes(zones: int = GPU_GROUP_ZONES, max_unavailable: int = DEFAULT_MAX_UNAVAILABLE) -> int:
    """Extra nodes a managed node group may launch during a rolling update (documented upper bound)."""
    return max(2 * zones, max_unavailable)


def update_surge_vcpus(lines: Iterable[NodeLine]) -> dict[str, int]:
    """Extra vCPUs per quota code while the GPU node groups are replaced (all at once, worst case)."""
    extra: dict[str, int] = {}
    for line in lines:
        if line.what.startswith("GPU group"):
            extra[line.quota_code] = extra.get(line.quota_code, 0) + surge_nodes() * line.vcpus
    return extra


def increase_command(code: str, desired: int, region: str) -> str:
    """The copy-paste Service Quotas request, every value shell-quoted."""
    return " ".join([
        "aws service-quotas request-service-quota-increase --service-code ec2",
        "--quota-code", shlex.quote(code), "--desired-value", shlex.quote(str(desired)),
        "--region", shlex.quote(region),
    ])


def gpu_shortfalls(spec: DeploymentSpec, types: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Phases needing more GPUs per node than DescribeInstanceTypes reports for their type."""
    problems = []
    for phase_name, phase in spec.phases.items():
        info = types.get(phase.instance_type)
        if info is None:
            continue
        gpus = sum(g.get("Count", 0) for g in info.get("GpuInfo", {}).get("Gpus", []))
        if gpus < phase.gpus_per_replica:
            problems.append(
                f"{phase.instance_type} has {gpus} GPU(s) per EC2, but raypd:{phase_name} needs "
                f"tensorParallelSize x pipelineParallelSize = {phase.gpus_per_replica}"
            )
    return problems


def efa_missing(types: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Instance types whose DescribeInstanceTypes answer says no EFA."""
    return sorted(name for name, info in types.items()
                  if not info.get("NetworkInfo", {}).get("EfaSupported", False))


# ---- the thin AWS layer ----

T = TypeVar("T")


class Unreachable(Exception):
    """The endpoint did not answer (connection refused, DNS, timeout)."""


def _error_code(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "ClientError"))
    return type(exc).__name__


def _short(exc: Exception, limit: int = 200) -> str:
    """One line naming the error, short enough for a report (servers may answer with HTML)."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code", "ClientError")
        if str(code).isdigit():  # an HTTP status with no AWS error body
            text = f"HTTP {code} with no AWS error code"
        else:
            text = f"{code}: {error.get('Message', '')}".strip().rstrip(":")
    else:
        text = f"{type(exc).__name__}: {exc}"
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


class _Aws:
    """boto3 clients for one region, built once each; `clients` overrides them (tests, Stubber)."""

    def __init__(self, session: boto3.Session, region: str, clients: Optional[Mapping[str, BaseClient]]):
        self._session = session
        self._region = region
        self._clients: dict[str, BaseClient] = dict(clients or {})

    def client(self, service: str) -> BaseClient:
        if service not in self._clients:
            self._clients[service] = self._session.client(
                service, region_name=self._region, config=BOTO_CONFIG,
            )
        return self._clients[service]

    def endpoint(self, service: str) -> str:
        """Where the service's calls go (AWS_ENDPOINT_URL or the regional endpoint): named when it
        does not answer."""
        return str(self.client(service).meta.endpoint_url)

    def caller_identity(self) -> dict[str, Any]:
        return self.client("sts").get_caller_identity()

    def region_status(self) -> Optional[str]:
        """The region's opt-in status, or None when EC2 does not list it."""
        regions = self.client("ec2").describe_regions(RegionNames=[self._region], AllRegions=True)["Regions"]
        for region in regions:
            if region.get("RegionName") == self._region:
                return str(region.get("OptInStatus", "opt-in-not-required"))
        return None

    def instance_types(self, names: Sequence[str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """(DescribeInstanceTypes answer per type, types EC2 does not know)."""
        found: dict[str, dict[str, Any]] = {}
        unknown: list[str] = []
        try:
            answer = self.client("ec2").describe_instance_types(InstanceTypes=list(names))
            found.update({item["InstanceType"]: item for item in answer["InstanceTypes"]})
        except ClientError as exc:
            if _error_code(exc) != "InvalidInstanceType":
                raise
            for name in names:  # find which one(s), one call each
                try:
                    items = self.client("ec2").describe_instance_types(InstanceTypes=[name])["InstanceTypes"]
                    found.update({item["InstanceType"]: item for item in items})
                except ClientError as inner:
                    if _error_code(inner) != "InvalidInstanceType":
                        raise
                    unknown.append(name)
        unknown += [n for n in names if n not in found and n not in unknown]
        return found, unknown

    def offerings(self, location_type: str, names: Sequence[str]) -> list[tuple[str, str]]:
        paginator = self.client("ec2").get_paginator("describe_instance_type_offerings")
        pairs: list[tuple[str, str]] = []
        for page in paginator.paginate(
            LocationType=location_type, Filters=[{"Name": "instance-type", "Values": list(names)}],
        ):
            pairs += [(o["InstanceType"], o["Location"]) for o in page["InstanceTypeOfferings"]]
        return pairs

    def zones(self) -> list[tuple[str, str]]:
        """(name, zone id) of the region's available, not-opt-in Availability Zones."""
        answer = self.client("ec2").describe_availability_zones()["AvailabilityZones"]
        return [
            (z["ZoneName"], z["ZoneId"]) for z in answer
            if z.get("State", "available") == "available"
            and z.get("ZoneType", "availability-zone") == "availability-zone"
            and z.get("OptInStatus", "opt-in-not-required") == "opt-in-not-required"
        ]

    def stack_vpc_tags(self, stack: str, cluster: str) -> Optional[dict[str, str]]:
        """Tags of this stack's VPC (the program remembers its zones there), None before a deploy."""
        answer = self.client("ec2").describe_vpcs(Filters=[
            {"Name": f"tag:{VPC_STACK_TAG}", "Values": [stack]},
            {"Name": f"tag:{VPC_CLUSTER_TAG}", "Values": [cluster]},
        ])["Vpcs"]
        if not answer:
            return None
        first = sorted(answer, key=lambda vpc: vpc["VpcId"])[0]
        return {tag["Key"]: tag["Value"] for tag in first.get("Tags", [])}

    def running_instances(self) -> list[tuple[str, dict[str, str]]]:
        """(instance type, tags) of running/pending On-Demand instances (spot has its own quotas)."""
        paginator = self.client("ec2").get_paginator("describe_instances")
        found = []
        for page in paginator.paginate(
            Filters=[{"Name": "instance-state-name", "Values": ["running", "pending"]}],
        ):
            for reservation in page["Reservations"]:
                for instance in reservation["Instances"]:
                    if instance.get("InstanceLifecycle") == "spot":
                        continue
                    tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
                    found.append((instance["InstanceType"], tags))
        return found

    def cluster_exists(self, name: str) -> bool:
        try:
            self.client("eks").describe_cluster(name=name)
        except ClientError as exc:
            if _error_code(exc) == "ResourceNotFoundException":
                return False
            raise
        return True

    def access_entry_principals(self, cluster: str) -> list[str]:
        """Principal ARNs of the cluster's access entries (EKS ListAccessEntries, every page)."""
        client = self.client("eks")
        principals: list[str] = []
        token: Optional[str] = None
        while True:
            page = client.list_access_entries(clusterName=cluster, **({"nextToken": token} if token else {}))
            principals += list(page.get("accessEntries", []))
            token = page.get("nextToken")
            if not token:
                return principals

    def quota(self, code: str) -> float:
        """The applied quota value; the AWS default when the account never changed it."""
        client = self.client("service-quotas")
        try:
            return float(client.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"])
        except ClientError as exc:
            if _error_code(exc) != "NoSuchResourceException":
                raise
            default = client.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=code)
            return float(default["Quota"]["Value"])


def _call(fn: Callable[[], T]) -> T:
    """Run one AWS call; connection-level failures become Unreachable."""
    try:
        return fn()
    except (ClientError, NoCredentialsError, PartialCredentialsError):
        raise
    except BotoCoreError as exc:  # EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, ...
        raise Unreachable(_short(exc)) from None
    except ResponseParserError:  # something answered, but not AWS (a proxy, a captive portal)
        raise Unreachable("the endpoint answered with something that is not an AWS response") from None


def aws_credentials_available(session: boto3.Session) -> bool:
    """Whether the default credential chain finds any credentials (it does not check them)."""
    try:
        return session.get_credentials() is not None
    except (BotoCoreError, ProfileNotFound):
        return False


# ---- the checks ----

@dataclass
class _Context:
    plan: DeploymentPlan
    aws: _Aws
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


def _skip_all(ids: Iterable[str], why: str, remedy: str = "") -> list[Check]:
    return [Check.skipped(i, TITLES[i], why, remedy) for i in ids]


def _check_credentials(ctx: _Context) -> Optional[str]:
    """The aws-credentials check; returns why the other AWS checks must be skipped, if they must."""
    spec, cid, title = ctx.spec, "aws-credentials", TITLES["aws-credentials"]
    try:
        identity = _call(ctx.aws.caller_identity)
    except (NoCredentialsError, PartialCredentialsError) as exc:
        ctx.add(Check.skipped(cid, title, f"{NO_CREDENTIALS}; {type(exc).__name__}"))
        return "no AWS credentials"
    except Unreachable as exc:
        ctx.add(Check.failed(cid, title, f"AWS STS at {ctx.aws.endpoint('sts')} did not answer ({exc})",
                             _unreachable_remedy()))
        return "AWS did not answer"
    except ClientError as exc:
        code = _error_code(exc)
        if code in _CREDENTIAL_ERRORS:
            ctx.add(Check.failed(cid, title, f"AWS rejected the credentials ({code})",
                                 "refresh or replace them: `aws sso login`, `aws configure`, or new "
                                 "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN"))
        elif code.isdigit():  # an HTTP status and no AWS error: a proxy or gateway, not AWS
            ctx.add(Check.failed(cid, title, f"AWS STS at {ctx.aws.endpoint('sts')} did not answer: "
                                 f"{_short(exc)}", _unreachable_remedy()))
            return "AWS did not answer"
        else:
            ctx.add(Check.warned(cid, title, f"STS GetCallerIdentity failed ({_short(exc)})"))
        return "the credentials did not work"
    who = f"account {identity.get('Account')} as {identity.get('Arn')}"
    try:
        status = _call(ctx.aws.region_status)
    except Unreachable as exc:
        ctx.add(Check.failed(cid, title, f"{who}; EC2 at {ctx.aws.endpoint('ec2')} did not answer ({exc})",
                             _unreachable_remedy()))
        return f"EC2 in {spec.region} did not answer"
    except ClientError as exc:
        code = _error_code(exc)
        if code in _CREDENTIAL_ERRORS or code == "UnauthorizedOperation":
            ctx.add(Check.failed(cid, title, f"{who}; EC2 DescribeRegions refused ({code})",
                                 "grant read-only EC2 access (ec2:Describe*) to this identity"))
        else:
            ctx.add(Check.failed(cid, title, f"{who}; EC2 does not accept region {spec.region} ({code})",
                                 f"set {REGION_KEY} to a region this account can use"))
        return f"region {spec.region} is not usable"
    if status is None:
        ctx.add(Check.failed(cid, title, f"{who}; EC2 does not list region {spec.region}",
                             f"set {REGION_KEY} to an AWS region (e.g. us-east-2)"))
        return f"region {spec.region} is not usable"
    if status == "not-opted-in":
        ctx.add(Check.failed(cid, title, f"{who}; region {spec.region} is not enabled for this account",
                             f"enable {spec.region} (AWS console: Account > AWS Regions) or pick "
                             f"another {REGION_KEY}"))
        return f"region {spec.region} is not enabled"
    evidence = f"{who}; region {spec.region} answers ({status})"
    admin = _caller_as_admin(ctx, str(identity.get("Arn", "")))
    if admin is None:
        ctx.add(Check.passed(cid, title, evidence))
    elif admin.status == "fail":
        ctx.add(Check.failed(cid, title, f"{evidence}; {admin.detail}", admin.remedy))
    else:
        ctx.add(Check.warned(cid, title, f"{evidence}; {admin.detail}", admin.remedy))
    return None  # the credentials work: the other checks run either way


def _unreachable_remedy() -> str:
    return ("check network access to AWS, and AWS_ENDPOINT_URL if it is set (it replaces every AWS "
            "endpoint), then rerun")


@dataclass(frozen=True)
class _Finding:
    status: str  # "fail" | "warn"
    detail: str
    remedy: str


def _caller_as_admin(ctx: _Context, caller_arn: str) -> Optional[_Finding]:
    """Issue 14: the deploying identity in raypd:adminRoleArns (components.preflight.admin_access).

    No cluster yet: the first `up` will create it with the caller as bootstrap admin, then fail
    creating the caller's entry again: a failure. A cluster already there: EKS's access entries say
    whether the caller has one; on an update whose deployed spec already listed the ARN the stack
    owns that entry (fine); otherwise an existing entry collides (fail on an update, warn when
    preflight cannot know what the stack owns)."""
    listed = caller_in_admins(caller_arn, ctx.spec.admin_role_arns)
    if not listed:
        return None
    cluster = ctx.spec.effective_cluster_name
    keys = ", ".join(f"{ADMIN_ROLE_ARNS_KEY}[{index}] ({arn})" for index, arn in listed)
    remove = (f"remove it from {ADMIN_ROLE_ARNS_KEY}: the identity that runs `up` is cluster admin "
              "anyway; list only other identities (teammates', CI's)")
    try:
        exists = _call(lambda: ctx.aws.cluster_exists(cluster))
    except (ClientError, Unreachable) as exc:
        why = _short(exc) if isinstance(exc, ClientError) else str(exc)
        return _Finding("warn", f"{keys} is the identity running preflight, and EKS could not say "
                        f"whether cluster {cluster} exists ({why}); if it does not, the first `up` "
                        "fails with ResourceInUseException", remove)
    if not exists:
        return _Finding("fail", f"{keys} is the identity running preflight: the first `up` creates "
                        f"cluster {cluster} with it as the bootstrap cluster admin, so EKS already has "
                        "its access entry and creating it again fails with ResourceInUseException "
                        "about 10 minutes in", remove)
    managed = ctx.deployed is not None and all(arn in ctx.deployed.admin_role_arns for _, arn in listed)
    if managed:
        return None  # deployed with this list: the stack owns that entry already
    try:
        entry = matching_entry(caller_arn, _call(lambda: ctx.aws.access_entry_principals(cluster)))
    except (ClientError, Unreachable) as exc:
        why = _short(exc) if isinstance(exc, ClientError) else str(exc)
        return _Finding("warn", f"{keys} is the identity running preflight and cluster {cluster} "
                        f"exists, but its access entries could not be listed ({why}); if the caller "
                        "already has an entry the stack did not create, `up` fails with "
                        "ResourceInUseException", remove + " (or grant eks:ListAccessEntries to check)")
    if entry is None:
        return None  # no entry yet: the program's CreateAccessEntry will succeed
    if ctx.deployed is not None:
        return _Finding("fail", f"{keys} is the identity running preflight, and cluster {cluster} "
                        f"already has an access entry for it ({entry}) that this stack did not create "
                        "(the deployed settings do not list it): `up` fails with ResourceInUseException",
                        remove)
    return _Finding("warn", f"{keys} is the identity running preflight, and cluster {cluster} already "
                    f"has an access entry for it ({entry}): if this stack did not create it from "
                    f"{ADMIN_ROLE_ARNS_KEY} (for example, it is the creator's bootstrap entry), `up` "
                    "fails with ResourceInUseException", remove)


def _all_types(plan: DeploymentPlan) -> list[str]:
    return sorted({*gpu_instance_types(plan), plan.spec.system_nodes.instance_type})


def _type_keys(spec: DeploymentSpec, names: Iterable[str]) -> str:
    """The config keys that chose these instance types, e.g. "raypd:prefill.instanceType"."""
    wanted = set(names)
    keys = [f"raypd:{p}.instanceType" for p, ph in spec.phases.items() if ph.instance_type in wanted]
    if spec.system_nodes.instance_type in wanted:
        keys.append("raypd:systemNodes.instanceType")
    return ", ".join(keys)


def _check_instance_types(ctx: _Context) -> None:
    spec, cid, title = ctx.spec, "instance-types", TITLES["instance-types"]
    names = _all_types(ctx.plan)
    found, unknown = _call(lambda: ctx.aws.instance_types(names))
    ctx.types = found
    in_region = {t for t, _ in _call(lambda: ctx.aws.offerings("region", names))}
    not_offered = [n for n in names if n in found and n not in in_region]
    problems = [f"{n} does not exist in EC2 (InvalidInstanceType)" for n in unknown]
    problems += [f"{n} is not offered in {spec.region}" for n in not_offered]
    shortfalls = gpu_shortfalls(spec, found)
    problems += shortfalls
    if problems:
        bad = [*unknown, *not_offered]
        fixes = []
        if bad:
            fixes.append(f"pick instance types offered in {spec.region} ({_type_keys(spec, bad)}) or "
                         f"another {REGION_KEY}")
        short_phases = [p for p, ph in spec.phases.items()
                        if any(f"raypd:{p} needs" in line for line in shortfalls)]
        for phase_name in short_phases:
            fixes.append(f"lower raypd:{phase_name}.tensorParallelSize x pipelineParallelSize to the "
                         f"GPUs EC2 reports, or pick a type with more GPUs in "
                         f"raypd:{phase_name}.instanceType")
        ctx.add(Check.failed(cid, title, "; ".join(problems), "; ".join(fixes)))
        return
    parts = []
    for name in names:
        info = found[name]
        gpus = sum(g.get("Count", 0) for g in info.get("GpuInfo", {}).get("Gpus", []))
        vcpus = info.get("VCpuInfo", {}).get("DefaultVCpus")
        parts.append(f"{name} ({gpus} GPU, {vcpus} vCPU)" if gpus else f"{name} ({vcpus} vCPU)")
    per_phase = ", ".join(f"{p} needs {ph.gpus_per_replica}" for p, ph in spec.phases.items())
    ctx.add(Check.passed(
        cid, title, f"offered in {spec.region}: {', '.join(parts)}; GPUs per replica: {per_phase}",
    ))


def _check_efa(ctx: _Context) -> None:
    spec, cid, title = ctx.spec, "efa-support", TITLES["efa-support"]
    if spec.mode != "disaggregated":
        ctx.add(Check.skipped(cid, title, "colocated mode: no KV transfer between nodes"))
        return
    if spec.kv_transfer.backend != "LIBFABRIC":
        ctx.add(Check.skipped(cid, title, f"raypd:kvTransfer.backend is {spec.kv_transfer.backend}: "
                                          "KV transfer does not use EFA"))
        return
    gpu_types = {name: ctx.types[name] for name in gpu_instance_types(ctx.plan) if name in ctx.types}
    if not gpu_types:
        ctx.add(Check.skipped(cid, title, "no DescribeInstanceTypes answer for the GPU types"))
        return
    missing = efa_missing(gpu_types)
    if missing:
        ctx.add(Check.failed(cid, title, f"EC2 reports no EFA support for {', '.join(missing)}",
                             f"pick EFA-capable GPU types (e.g. g6.8xlarge, p5.48xlarge) in "
                             f"{_type_keys(spec, missing)}, or set raypd:kvTransfer.backend UCX (slow)"))
        return
    evidence = ", ".join(
        f"{name} (EfaSupported, up to "
        f"{info.get('NetworkInfo', {}).get('EfaInfo', {}).get('MaximumEfaInterfaces', '?')} interface(s))"
        for name, info in sorted(gpu_types.items())
    )
    ctx.add(Check.passed(cid, title, evidence))


def _check_zone_offering(ctx: _Context) -> None:
    spec, cid, title = ctx.spec, "zone-offering", TITLES["zone-offering"]
    types = gpu_instance_types(ctx.plan)
    offerings = _call(lambda: ctx.aws.offerings("availability-zone", types))
    usable = eks_usable(spec.region, _call(ctx.aws.zones))
    previous = previous_zones_from_tags(
        _call(lambda: ctx.aws.stack_vpc_tags(spec.stack, spec.effective_cluster_name)))
    zone, all_zones = choose_gpu_zone(ctx.plan, offerings, usable, previous)
    listed = ", ".join(all_zones) if all_zones else "none"
    if previous is not None and previous.gpu:
        ctx.deployed_zone = previous.gpu
    if (spec.availability_zone is not None and previous is not None and previous.gpu and previous.second
            and spec.availability_zone not in (previous.gpu, previous.second)):
        ctx.add(Check.failed(
            cid, title,
            f"{spec.availability_zone} (raypd:availabilityZone) is outside the zones this stack's EKS "
            f"cluster was created in ({previous.gpu}, {previous.second}): EKS accepts new cluster "
            "subnets only in those (aws/containers-roadmap#2330), so the program refuses the move",
            f"set {AZ_FIELD} to {previous.second} (the zones swap) or back to {previous.gpu}; another "
            "zone needs a new stack",
        ))
        return
    if spec.availability_zone is not None:
        if zone is None:
            there = {t for t, z in offerings if z == spec.availability_zone}
            lacking = [t for t in types if t not in there]
            ctx.add(Check.failed(
                cid, title,
                f"{spec.availability_zone} (raypd:availabilityZone) does not offer {', '.join(lacking)}; "
                f"zones offering all of {', '.join(types)}: {listed}",
                f"set {AZ_FIELD} to one of: {listed}, or leave it unset" if all_zones
                else f"pick GPU instance types offered together in one zone of {spec.region}",
            ))
            return
        ctx.gpu_zone = zone
        ctx.add(Check.passed(cid, title, f"{zone} (set by {AZ_FIELD}) offers {', '.join(types)}"))
        return
    if zone is None:
        def where(instance_type: str) -> str:
            zones = sorted(z for t, z in offerings if t == instance_type and is_regular_zone(spec.region, z))
            return ", ".join(zones) or "no zone"

        per_type = "; ".join(f"{t}: {where(t)}" for t in types)
        ctx.add(Check.failed(
            cid, title, f"no zone of {spec.region} offers all of {', '.join(types)} ({per_type})",
            "the GPU node groups share one zone (EFA cannot cross zones): pick GPU instance types "
            f"offered together, or another {REGION_KEY}",
        ))
        return
    ctx.gpu_zone = zone
    if previous is not None and previous.gpu == zone:
        why = "the zone this stack already runs in; it never moves on its own"
        if zone not in all_zones:
            ctx.add(Check.warned(
                cid, title, f"{zone}, where this stack's GPU nodes run, no longer offers all of "
                f"{', '.join(types)}; zones that do: {listed}",
                f"new nodes may fail to launch there; set {AZ_FIELD} to move on purpose (the GPU "
                "node groups and subnets are then replaced)"))
            return
    else:
        why = f"the first zone offering {', '.join(types)} where EKS can place the cluster"
    ctx.add(Check.passed(
        cid, title, f"{zone} ({why}; set {AZ_FIELD} to pin it); all zones offering them: {listed}",
    ))


def _check_eks_zone(ctx: _Context) -> None:
    spec, cid, title = ctx.spec, "eks-zone", TITLES["eks-zone"]
    zones = _call(ctx.aws.zones)
    ids = dict(zones)
    excluded_ids = EKS_UNSUPPORTED_ZONE_IDS.get(spec.region, frozenset())
    excluded = sorted(f"{n} ({i})" for n, i in zones if i in excluded_ids)
    excluded_note = (
        f"zones EKS does not support here: {', '.join(excluded)} (UnsupportedAvailabilityZoneException)"
        if excluded else f"no zone of {spec.region} is on EKS's unsupported list"
    )
    usable = eks_usable(spec.region, zones)
    # A configured zone is judged even when it lacks a GPU type (zone-offering fails then): a zone
    # EKS is known to refuse is a failure of its own, with its own remedy.
    gpu_zone = ctx.gpu_zone or spec.availability_zone
    if gpu_zone is None:
        ctx.add(Check.skipped(cid, title, f"no GPU zone to judge (see zone-offering); {excluded_note}"))
        return
    second = second_zone(spec.region, ids, gpu_zone)
    problems = []
    if gpu_zone not in ids:
        problems.append(f"GPU zone {gpu_zone} is not an available zone of this account")
    elif gpu_zone not in usable:
        problems.append(f"GPU zone {gpu_zone} is {ids[gpu_zone]}, where EKS cannot place cluster subnets")
    if second is None:
        problems.append(f"{spec.region} has no second availability zone; EKS needs subnets in two")
    elif second not in usable:
        problems.append(f"the second cluster subnet zone would be {second} ({ids[second]}), which EKS "
                        "does not support")
    if problems:
        ctx.add(Check.failed(
            cid, title, "; ".join(problems) + f"; {excluded_note}",
            f"set {AZ_FIELD} to a zone that offers the GPU types and that EKS supports "
            f"(EKS-supported zones here: {', '.join(usable)})" if len(usable) >= 2
            else f"pick another {REGION_KEY}: EKS needs two supported zones",
        ))
        return
    assert second is not None  # a missing second zone is one of the problems above
    ctx.add(Check.passed(
        cid, title,
        f"GPU zone {gpu_zone} ({ids[gpu_zone]}) and second zone {second} ({ids[second]}) are EKS "
        f"zones; {excluded_note}",
    ))


@dataclass
class _QuotaFacts:
    lines: list[NodeLine]
    need: dict[str, int]
    quotas: dict[str, float]  # only the codes that could be read
    unreadable: dict[str, str]  # code -> why
    used_others: dict[str, int]
    used_this_stack: dict[str, int]
    usage_error: Optional[str]


def _usage(ctx: _Context, codes: Iterable[str]) -> tuple[dict[str, int], dict[str, int], Optional[str]]:
    """vCPUs of running instances per quota code: (other instances, this stack's cluster on update)."""
    cluster = ctx.deployed.effective_cluster_name if ctx.deployed is not None else None
    try:
        running = _call(ctx.aws.running_instances)
        unknown_types = sorted({t for t, _ in running if t not in ctx.types})
        if unknown_types:
            found, _ = _call(lambda: ctx.aws.instance_types(unknown_types))
            ctx.types.update(found)
    except (ClientError, Unreachable) as exc:
        return {}, {}, _short(exc) if isinstance(exc, ClientError) else str(exc)
    others: dict[str, int] = {code: 0 for code in codes}
    mine: dict[str, int] = {code: 0 for code in codes}
    for instance_type, tags in running:
        code = quota_code_for(instance_type)
        if code is None:
            continue
        info = ctx.types.get(instance_type)
        known = catalogue.lookup(instance_type)
        vcpus = (info or {}).get("VCpuInfo", {}).get("DefaultVCpus") or (known.vcpus if known else 0)
        bucket = mine if cluster is not None and tags.get(CLUSTER_TAG) == cluster else others
        bucket[code] = bucket.get(code, 0) + int(vcpus)
    return others, mine, None


def _quota_facts(ctx: _Context) -> _QuotaFacts:
    vcpus = {n: int(i.get("VCpuInfo", {}).get("DefaultVCpus", 0)) for n, i in ctx.types.items()}
    lines = node_lines(ctx.plan, vcpus)
    need = vcpus_needed(lines)
    quotas: dict[str, float] = {}
    unreadable: dict[str, str] = {}
    for code in sorted(need):
        try:
            quotas[code] = _call(partial(ctx.aws.quota, code))
        except (ClientError, Unreachable) as exc:
            unreadable[code] = _short(exc) if isinstance(exc, ClientError) else str(exc)
    others, mine, usage_error = _usage(ctx, need)
    return _QuotaFacts(lines, need, quotas, unreadable, others, mine, usage_error)


def _need_text(facts: _QuotaFacts, code: str) -> str:
    parts = [f"{line.nodes} x {line.instance_type} ({line.vcpus})"
             for line in facts.lines if line.quota_code == code]
    return f"{facts.need[code]} vCPUs ({' + '.join(parts)})"


def _check_vcpu_quota(ctx: _Context, facts: _QuotaFacts) -> None:
    spec, cid, title = ctx.spec, "vcpu-quota", TITLES["vcpu-quota"]
    codes = sorted(facts.need)
    if facts.unreadable:
        needs = "; ".join(f"{c} ({QUOTA_NAMES.get(c, 'quota')}): needs {_need_text(facts, c)}" for c in codes)
        why = "; ".join(f"{c}: {w}" for c, w in sorted(facts.unreadable.items()))
        ctx.add(Check.warned(
            cid, title, f"Service Quotas could not be read ({why}); this stack {needs}",
            "check the quotas in the Service Quotas console (grant servicequotas:GetServiceQuota to "
            "let preflight read them)",
        ))
        return
    lines, fails = [], []
    for code in codes:
        quota = facts.quotas[code]
        used = facts.used_others.get(code, 0)
        free = quota - used
        counted = f"{used} in use by other running instances"
        if ctx.deployed is not None:
            counted += (f", {facts.used_this_stack.get(code, 0)} by this stack's cluster "
                        f"{ctx.deployed.effective_cluster_name} (not counted: the update reuses them)")
        text = (f"{code} ({QUOTA_NAMES.get(code, 'quota')}): needs {_need_text(facts, code)}; quota "
                f"{quota:g}, {counted}, {free:g} free")
        lines.append(text)
        if facts.need[code] > free:
            desired = int(math.ceil(used + facts.need[code]))
            fails.append(increase_command(code, desired, spec.region))
    detail = "; ".join(lines)
    if facts.usage_error:
        detail += f"; running instances could not be listed ({facts.usage_error}), usage counted as 0"
    if fails:
        ctx.add(Check.failed(cid, title, "not enough quota: " + detail,
                             "request an increase in Service Quotas: " + " && ".join(fails)))
    elif facts.usage_error:
        ctx.add(Check.warned(cid, title, detail, "grant ec2:DescribeInstances to count running instances"))
    else:
        ctx.add(Check.passed(cid, title, detail))


def _check_update_headroom(ctx: _Context, facts: Optional[_QuotaFacts]) -> None:
    """The peak of THIS update (components.changes: the old group beside its replacement until the
    end, the old Ray cluster's nodes until a zero-downtime switch, surge nodes of a rolling
    update) against the free quota; with no such peak, the headroom a later rolling update needs."""
    from components.changes.assess import STRATEGY_WORDS, assess

    spec, cid, title = ctx.spec, "update-headroom", TITLES["update-headroom"]
    if ctx.deployed is None:
        ctx.add(Check.skipped(cid, title, "new stack: nothing runs beside its nodes"))
        return
    if facts is None or facts.unreadable:
        ctx.add(Check.skipped(cid, title, "Service Quotas could not be read (see vcpu-quota)"))
        return
    strategy = assess(plan_deployment(ctx.deployed), ctx.plan, ctx.deployed_zone).chosen
    if strategy.extra_nodes:
        extra = strategy.extra_vcpus
        why = ", ".join(f"{line.nodes} x {line.instance_type} ({line.why})" for line in strategy.extra_nodes)
        rule = f"this update ({STRATEGY_WORDS[strategy.name]}) runs {why} beside the new settings' nodes"
    else:
        extra = update_surge_vcpus(facts.lines)
        rule = (f"this update adds no nodes; a later rolling update (AMI or Kubernetes version) lets "
                f"each GPU node group launch up to {surge_nodes()} extra nodes before draining old "
                f"ones (EKS: larger of 2 x its {GPU_GROUP_ZONES} zone and maxUnavailable "
                f"{DEFAULT_MAX_UNAVAILABLE})")
    lines, short = [], []
    for code in sorted(extra):
        free = facts.quotas.get(code, 0.0) - facts.used_others.get(code, 0)
        need = facts.need.get(code, 0)
        peak = need + extra[code]
        lines.append(f"{code}: {need} + {extra[code]} = {peak} vCPUs at peak, {free:g} free")
        if peak > free:
            desired = int(math.ceil(facts.used_others.get(code, 0) + peak))
            short.append(increase_command(code, desired, spec.region))
    detail = f"{rule}; " + "; ".join(lines)
    if short and strategy.extra_nodes:
        ctx.add(Check.failed(
            cid, title, "not enough quota for this update's peak: its new nodes would wait for "
            "capacity and `up` would stall: " + detail,
            "request an increase first: " + " && ".join(short)
            + ("" if strategy.name == "inPlace" else
               ", or roll out in place (raypd:upgradeStrategy inPlace) at the price of downtime"),
        ))
    elif short:
        ctx.add(Check.warned(
            cid, title,
            "a later update that replaces GPU nodes (AMI or Kubernetes version, launch template) "
            "would stall waiting for capacity: " + detail,
            "request headroom before such an update: " + " && ".join(short),
        ))
    else:
        ctx.add(Check.passed(cid, title, detail))


def _aws_checks(ctx: _Context) -> Optional[_QuotaFacts]:
    """The AWS checks after the credentials passed; a call that fails turns its check into warn."""
    steps: list[tuple[str, Callable[[], None]]] = [
        ("instance-types", lambda: _check_instance_types(ctx)),
        ("efa-support", lambda: _check_efa(ctx)),
        ("zone-offering", lambda: _check_zone_offering(ctx)),
        ("eks-zone", lambda: _check_eks_zone(ctx)),
    ]
    for index, (cid, step) in enumerate(steps):
        try:
            step()
        except Unreachable as exc:
            ctx.add(Check.failed(cid, TITLES[cid], f"AWS stopped answering ({exc})", _unreachable_remedy()))
            remaining = [c for c, _ in steps[index + 1:]] + ["vcpu-quota", "update-headroom"]
            ctx.checks += _skip_all(remaining, f"AWS stopped answering (see {cid})")
            return None
        except ClientError as exc:
            ctx.add(Check.warned(cid, TITLES[cid], f"EC2 call failed ({_short(exc)})",
                                 "grant read-only EC2 access (ec2:Describe*) to this identity"))
    facts = _quota_facts(ctx)  # each of its calls fails soft (warn), so nothing to catch here
    _check_vcpu_quota(ctx, facts)
    _check_update_headroom(ctx, facts)
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
        checks += _skip_all(AWS_CHECK_IDS, "the AWS profile does not exist")
        checks.append(model_source.check_model_source(spec, None, "the AWS profile does not exist"))
        checks.append(endpoint_certificate.check_endpoint_certificate(
            spec, None, "the AWS profile does not exist"))
        return Report.of("preflight", checks)
    if "sts" not in (clients or {}) and not aws_credentials_available(session):
        checks.append(Check.skipped("aws-credentials", TITLES["aws-credentials"], NO_CREDENTIALS))
        checks += _skip_all(AWS_CHECK_IDS, "no AWS credentials: nothing to ask AWS with")
        checks.append(model_source.check_model_source(spec, None, "no AWS credentials found"))
        checks.append(endpoint_certificate.check_endpoint_certificate(
            spec, None, "no AWS credentials found"))
        return Report.of("preflight", checks)
    plan = plan_deployment(spec)  # the one plan every check below reads
    ctx = _Context(plan=plan, aws=_Aws(session, spec.region, clients), deployed=deployed,
                   deployed_zone=deployed_zone)
    blocked = _check_credentials(ctx)
    if blocked is not None:
        ctx.checks += _skip_all(AWS_CHECK_IDS, f"skipped: {blocked} (see aws-credentials)")
        ctx.add(model_source.check_model_source(spec, None, f"{blocked} (see aws-credentials)"))
        ctx.add(endpoint_certificate.check_endpoint_certificate(
            spec, None, f"{blocked} (see aws-credentials)"))
    else:
        _aws_checks(ctx)
        ctx.add(model_source.check_model_source(spec, lambda: ctx.aws.client("s3")))
        ctx.add(endpoint_certificate.check_endpoint_certificate(spec, lambda: ctx.aws.client("acm")))
    return Report.of("preflight", checks + ctx.checks)


# ---- the CLI ----

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.preflight",
        description="Check an AWS account and region can host a raypd stack (read-only AWS calls).",
    )
    add_stack_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the Contract 5 report as JSON")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        stack, config, _secret_keys = read_stack(args.config, args.stack)
        spec = DeploymentSpec.from_config(config, stack)
    except SpecError as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        return EXIT_INVALID
    report = run_preflight(spec)
    return write_report(report, args.json, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
