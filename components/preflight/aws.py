"""What the preflight asks AWS, and nothing else: a thin layer over boto3 (components.preflight).

`Aws` holds one boto3 client per service for one region, built once each, with short timeouts and
one retry: a dead or blackholed endpoint must end the run in seconds, so `call` turns
connection-level failures (and answers that are not AWS's) into `Unreachable`, which the checks
report naming the endpoint. Every call here is read-only. Tests pass ready clients (Stubber) in
place of the session's.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence, TypeVar

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

from components.plan.zones import CLUSTER_TAG as VPC_CLUSTER_TAG
from components.plan.zones import STACK_TAG as VPC_STACK_TAG

# Short timeouts and one retry: a dead or blackholed endpoint must end the run in seconds.
BOTO_CONFIG = Config(
    connect_timeout=5, read_timeout=5, retries={"max_attempts": 2, "mode": "standard"},
)

T = TypeVar("T")


class Unreachable(Exception):
    """The endpoint did not answer (connection refused, DNS, timeout)."""


def error_code(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "ClientError"))
    return type(exc).__name__


def short(exc: Exception, limit: int = 200) -> str:
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


class Aws:
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
            if error_code(exc) != "InvalidInstanceType":
                raise
            for name in names:  # find which one(s), one call each
                try:
                    items = self.client("ec2").describe_instance_types(InstanceTypes=[name])["InstanceTypes"]
                    found.update({item["InstanceType"]: item for item in items})
                except ClientError as inner:
                    if error_code(inner) != "InvalidInstanceType":
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
            if error_code(exc) == "ResourceNotFoundException":
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
            if error_code(exc) != "NoSuchResourceException":
                raise
            default = client.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=code)
            return float(default["Quota"]["Value"])


def call(fn: Callable[[], T]) -> T:
    """Run one AWS call; connection-level failures become Unreachable."""
    try:
        return fn()
    except (ClientError, NoCredentialsError, PartialCredentialsError):
        raise
    except BotoCoreError as exc:  # EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, ...
        raise Unreachable(short(exc)) from None
    except ResponseParserError:  # something answered, but not AWS (a proxy, a captive portal)
        raise Unreachable("the endpoint answered with something that is not an AWS response") from None


def aws_credentials_available(session: boto3.Session) -> bool:
    """Whether the default credential chain finds any credentials (it does not check them)."""
    try:
        return session.get_credentials() is not None
    except (BotoCoreError, ProfileNotFound):
        return False
