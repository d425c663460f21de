"""Run a Pulumi program under Pulumi's mock runtime and record what it would ask the engine for.

No CLI, no cloud, no credentials: `pulumi.runtime.set_mocks` stands in for the engine. Every
RegisterResource request is recorded (type, name, parent, inputs, dependencies), invokes get
offline answers, and the program's outputs are resolved with their secretness. This is the
machinery of the offline plan (`components.plan`) and of the tests in tests/pulumi.

Two pitfalls of pulumi 3.x mocks are handled here (see docs/plan.md):
- Remote components (pulumi-eks Cluster, ManagedNodeGroup) register as ONE resource whose outputs
  exist only if the mock returns them, so `PlanMocks` returns plausible ones for `eks:index:Cluster`.
- Passing a component object as an input (ManagedNodeGroup(cluster=...)) with resource references
  enabled fails about half the runs ("attached to a different loop"); `RecordingMonitor` does not
  advertise resource references, so the SDK sends the URN instead.
Each run happens on its own thread, so it gets a fresh event loop and fresh Pulumi context
variables (settings, config, root stack) and runs can repeat in one process.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import pulumi
from pulumi.runtime import mocks, rpc
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.settings import SETTINGS
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from components.stack.cluster import aws_partition

MOCK_ACCOUNT = "123456789012"
STACK_TYPE = "pulumi:pulumi:Stack"
SECRET = "[secret]"
UNKNOWN = "[unknown]"
SERVICE_TYPE = "kubernetes:core/v1:Service"
RANDOM_STRING_TYPE = "random:index/randomString:RandomString"
REPLICATION_GROUP_TYPE = "aws:elasticache/replicationGroup:ReplicationGroup"
# What the offline plan says an ECR tag resolves to: a well-formed digest no image has.
OFFLINE_IMAGE_DIGEST = "sha256:" + "0ff1" * 16
# How long one mock run may take before it is reported as stuck (real runs take about a second).
RUN_TIMEOUT_SECONDS = 900  # a net for a hang, not a speed target: a process's first run imports pulumi_aws
# and pulumi_kubernetes in the run's thread, which took over 120 s on a 2-core machine at load 40 (CI)

# Prefixes of the ids AWS gives these resources, so mock ids read like real ones.
_ID_PREFIXES = {
    "aws:ec2/vpc:Vpc": "vpc",
    "aws:ec2/subnet:Subnet": "subnet",
    "aws:ec2/internetGateway:InternetGateway": "igw",
    "aws:ec2/natGateway:NatGateway": "nat",
    "aws:ec2/eip:Eip": "eipalloc",
    "aws:ec2/routeTable:RouteTable": "rtb",
    "aws:ec2/routeTableAssociation:RouteTableAssociation": "rtbassoc",
    "aws:ec2/securityGroup:SecurityGroup": "sg",
}


def _digest(text: str, length: int = 17) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def _dns_suffix(region: str) -> str:
    return "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"


def offline_gpu_zone(region: str) -> str:
    """The AZ the offline plan assumes offers every GPU type asked about (nothing to ask)."""
    return f"{region}a"


def offline_zones(region: str) -> list[str]:
    return [f"{region}{letter}" for letter in "abc"]


def _kubeconfig(cluster_name: str, region: str, endpoint: str) -> dict[str, Any]:
    """The shape pulumi-eks generates: token minted by `aws eks get-token` on the user's host."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "kubernetes",
            "cluster": {"server": endpoint, "certificate-authority-data": "bW9jay1jYQ=="},
        }],
        "contexts": [{"name": "aws", "context": {"cluster": "kubernetes", "user": "aws"}}],
        "current-context": "aws",
        "users": [{
            "name": "aws",
            "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": "aws",
                "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region],
            }},
        }],
    }


class PlanMocks(mocks.Mocks):
    """Offline answers: ids derived from names, plausible outputs, AZ look-ups for `region`."""

    def __init__(self, region: str):
        self.region = region
        self.partition = aws_partition(region)

    def _arn(self, service: str, resource: str) -> str:
        return f"arn:{self.partition}:{service}:{self.region}:{MOCK_ACCOUNT}:{resource}"

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[Optional[str], dict]:
        if args.typ == "eks:index:Cluster":
            return None, self._eks_cluster(args)
        if not args.custom:
            return None, {}
        prefix = _ID_PREFIXES.get(args.typ)
        resource_id = f"{prefix}-{_digest(args.typ + args.name)}" if prefix else f"{args.name}-id"
        state = dict(args.inputs)
        if args.typ == SERVICE_TYPE and (state.get("spec") or {}).get("type") == "LoadBalancer":
            # The AWS Load Balancer Controller writes its NLB's DNS name into the Service's status;
            # an NLB's DNS name is k8s-<namespace>-<service>-<hash>.elb.<region>.amazonaws.com.
            meta = state.get("metadata") or {}
            names = ["".join(c for c in str(meta.get(key) or args.name) if c.isalnum())[:8]
                     for key in ("namespace", "name")]
            host = (f"k8s-{names[0]}-{names[1]}-{_digest(args.name, 10)}"
                    f"-{_digest('nlb' + args.name, 16)}.elb.{self.region}.{_dns_suffix(self.region)}")
            state["status"] = {"loadBalancer": {"ingress": [{"hostname": host}]}}
        elif args.typ == REPLICATION_GROUP_TYPE:
            # ElastiCache's primary endpoint of a cluster-mode-disabled group with TLS:
            # master.<group id>.<6 characters>.<region code>.cache.amazonaws.com (a stand-in).
            state["primaryEndpointAddress"] = (f"master.{args.name}.{_digest('rg' + args.name, 6)}."
                                               f"{self.region}.cache.{_dns_suffix(self.region)}")
        elif args.typ == RANDOM_STRING_TYPE:
            # A stand-in value, never a real key: the plan shows it as "[secret]".
            state["result"] = rpc.wrap_rpc_secret(_digest("key" + args.name, 48))
        if args.typ == "aws:iam/role:Role":
            role_name = state.get("name") or f"{args.name}-{_digest(args.name, 7)}"
            state["name"] = role_name
            state["arn"] = f"arn:{self.partition}:iam::{MOCK_ACCOUNT}:role/{role_name}"
        else:
            state.setdefault("arn", self._arn(args.typ.split(":")[1].split("/")[0], resource_id))
        return resource_id, state

    def _eks_cluster(self, args: mocks.MockResourceArgs) -> dict[str, Any]:
        name = args.inputs.get("name") or args.name
        endpoint = f"https://{_digest(name, 32).upper()}.gr7.{self.region}.eks.amazonaws.com"
        kubeconfig = _kubeconfig(name, self.region, endpoint)
        issuer = f"oidc.eks.{self.region}.amazonaws.com/id/{_digest('oidc' + name, 32).upper()}"
        oidc_arn = f"arn:{self.partition}:iam::{MOCK_ACCOUNT}:oidc-provider/{issuer}"
        # Resource-typed outputs (`eksCluster`, `core.cluster`, `core.oidcProvider`) are left out:
        # the SDK insists on resource objects there, which mocks without resource references
        # cannot provide; the program reads none of them.
        return {
            # The scalar part of pulumi-eks's CoreData.
            "core": {
                "endpoint": endpoint,
                "vpcId": args.inputs.get("vpcId"),
                "subnetIds": [
                    *(args.inputs.get("privateSubnetIds") or []),
                    *(args.inputs.get("publicSubnetIds") or []),
                ],
                "privateSubnetIds": args.inputs.get("privateSubnetIds"),
                "publicSubnetIds": args.inputs.get("publicSubnetIds"),
                "clusterSecurityGroupId": f"sg-{_digest('cluster' + name)}",
            },
            # A credential: secret here, as in any careful provider (raypd exports it as one).
            "kubeconfig": rpc.wrap_rpc_secret(kubeconfig),
            "kubeconfigJson": rpc.wrap_rpc_secret(json.dumps(kubeconfig)),
            "clusterSecurityGroupId": f"sg-{_digest('cluster' + name)}",
            "nodeSecurityGroupId": f"sg-{_digest('node' + name)}",
            "eksClusterIngressRuleId": f"sgrule-{_digest('ingress' + name)}",
            "oidcIssuer": issuer,
            "oidcProviderUrl": f"https://{issuer}",
            "oidcProviderArn": oidc_arn,
            "clusterOidcProviderArn": oidc_arn,
        }

    def call(self, args: mocks.MockCallArgs) -> dict[str, Any]:  # type: ignore[override]
        if args.token == "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings":
            return self._offerings(args.args)
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            zones = offline_zones(self.region)
            return {
                "id": self.region,
                "names": zones,
                "zoneIds": [f"{self.region}-az{i + 1}" for i in range(len(zones))],
                "groupNames": [self.region] * len(zones),
                "state": "available",
            }
        if args.token == "aws:eks/getAddonVersion:getAddonVersion":
            # The real answer is EKS's newest add-on build for that Kubernetes version; offline
            # the plan names it by the version it follows, so a version change shows as a change.
            addon, version = args.args.get("addonName"), args.args.get("kubernetesVersion")
            return {"id": f"{addon}-{version}", "addonName": addon, "kubernetesVersion": version,
                    "mostRecent": True, "version": f"newest-for-{version}"}
        if args.token == "aws:ec2/getNetworkInterfaces:getNetworkInterfaces":
            # The EKS control plane's ENIs (components.stack.cluster.control_plane_cidrs_output): two,
            # as EKS creates in a two-zone cluster; ids derived from the filters asked.
            key = json.dumps(args.args.get("filters"), sort_keys=True)
            return {"id": self.region, "ids": [f"eni-{_digest(key + str(i))}" for i in range(2)]}
        if args.token == "aws:ec2/getNetworkInterface:getNetworkInterface":
            eni = str(args.args.get("id"))
            octet = int(_digest(eni, 2), 16)
            # In the public /22 range raypd's default VPC layout keeps free of pods (offline only).
            address = f"10.0.{192 + octet % 4}.{10 + octet % 200}"
            return {"id": eni, "privateIp": address, "privateIps": [address]}
        if args.token == "aws:ecr/getImage:getImage":
            return self._ecr_image(args.args)
        return {}

    def _ecr_image(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """An ECR image look-up (components.config.image) answered with a digest no image has ("0ff1"
        sixteen times), so an offline plan never reads as resolved bits."""
        digest = OFFLINE_IMAGE_DIGEST
        return {"id": f"{request.get('repositoryName')}:{request.get('imageTag')}",
                "registryId": request.get("registryId"), "repositoryName": request.get("repositoryName"),
                "imageTag": request.get("imageTag"), "imageDigest": digest, "imageTags": [request.get("imageTag")]}

    def _offerings(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Every instance type asked about is offered in the AZ asked about, else in <region>a."""
        filters = {f.get("name"): list(f.get("values") or []) for f in request.get("filters") or []}
        types = filters.get("instance-type", [])
        locations = filters.get("location") or [offline_gpu_zone(self.region)]
        pairs = [(t, loc) for loc in locations for t in types]
        return {
            "id": self.region,
            "instanceTypes": [t for t, _ in pairs],
            "locations": [loc for _, loc in pairs],
            "locationTypes": ["availability-zone"] * len(pairs),
        }


@dataclass(frozen=True)
class RegisteredResource:
    urn: str
    type: str
    name: str
    custom: bool
    parent_urn: str
    provider: str
    dependencies: tuple[str, ...]
    inputs: dict[str, Any]
    # Resource options that decide how an update is carried out.
    replace_on_changes: tuple[str, ...] = ()
    delete_before_replace: bool = False
    # Inputs Pulumi leaves alone after creation (the API-key Secret's keys: the web app's).
    ignore_changes: tuple[str, ...] = ()
    # The transforms declared on the resource (the mock monitor does not run them; tests call
    # them on what the real provider would create, e.g. pulumi-eks's launch template).
    transforms: tuple[Any, ...] = ()


class RecordingMonitor(mocks.MockMonitor):
    """A MockMonitor that records requests and does not advertise resource references."""

    def __init__(self, mock: mocks.Mocks):
        super().__init__(mock)
        self.registered: list[RegisteredResource] = []
        self._lock = threading.Lock()

    def GetDeploymentInfo(self, request):  # noqa: N802 (gRPC method name)
        info = super().GetDeploymentInfo(request)
        features = [
            feature for feature in info.supportedFeatures
            if feature != resource_pb2.RESOURCE_MONITOR_FEATURE_RESOURCE_REFERENCES
        ]
        return resource_pb2.DeploymentInfo(supportedFeatures=features)

    def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)
        if request.type != STACK_TYPE:
            record = RegisteredResource(
                urn=response.urn,
                type=request.type,
                name=request.name,
                custom=bool(request.custom),
                parent_urn=request.parent,
                provider=request.provider,
                dependencies=tuple(request.dependencies),
                inputs=rpc.deserialize_properties(request.object, keep_unknowns=True),
                replace_on_changes=tuple(request.replaceOnChanges),
                delete_before_replace=bool(request.deleteBeforeReplace),
                ignore_changes=tuple(request.ignoreChanges),
                transforms=tuple(mocks._resolve_callbacks(request.transforms)),
            )
            with self._lock:
                self.registered.append(record)
        return response


@dataclass(frozen=True)
class ResolvedOutput:
    value: Any
    secret: bool
    known: bool


@dataclass
class MockRun:
    resources: list[RegisteredResource]
    outputs: dict[str, ResolvedOutput] = field(default_factory=dict)


def _resolve(value: Any) -> ResolvedOutput:
    output = pulumi.Output.from_input(value)
    known = _sync_await(output.is_known())
    secret = _sync_await(output.is_secret())
    resolved = _sync_await(output.future(with_unknowns=True)) if known else None
    return ResolvedOutput(resolved, bool(secret), bool(known))


def _run_in_fresh_context(
    program: Callable[[], Mapping[str, Any]], *, project: str, stack: str, mock: PlanMocks,
    config: Optional[Mapping[str, str]], secret_keys: Optional[list[str]],
) -> MockRun:
    # Pulumi tracks every Output's task in SETTINGS.outputs, a context property whose value a fresh
    # thread shares with every other fresh thread (pulumi/_utils.py ContextProperty.fset makes the first
    # value set the default), and `set_mocks` does not replace it. A run still going on another thread (a
    # timed-out one, a web job's plan) would otherwise put its tasks in our set, and wait_for_rpcs would
    # wait on them from this loop: "Event loop is closed" or a hang. Each run gets its own set and lock.
    SETTINGS.outputs = set()
    SETTINGS.lock = threading.Lock()
    monitor = RecordingMonitor(mock)
    if config is not None:
        pulumi.runtime.set_all_config(dict(config), list(secret_keys or []))
    pulumi.runtime.set_mocks(mock, project=project, stack=stack, preview=False, monitor=monitor)
    outputs: dict[str, ResolvedOutput] = {}

    def body() -> None:
        exported = program()
        for key, value in exported.items():
            outputs[key] = _resolve(value)

    _sync_await(run_pulumi_func(body))
    return MockRun(resources=list(monitor.registered), outputs=outputs)


def run_program(
    program: Callable[[], Mapping[str, Any]],
    *,
    project: str,
    stack: str,
    region: str,
    config: Optional[Mapping[str, str]] = None,
    secret_keys: Optional[list[str]] = None,
    mock: Optional[PlanMocks] = None,
) -> MockRun:
    """Run `program` (which returns its stack outputs) under mocks; exceptions propagate.

    `config` (Pulumi's "ns:key" -> string form) is what `pulumi.Config` answers inside the run;
    `mock` replaces the default offline answers (tests use it to script EC2's).
    """
    mock = mock if mock is not None else PlanMocks(region)
    result: dict[str, Any] = {}

    def target() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            result["run"] = _run_in_fresh_context(
                program, project=project, stack=stack, mock=mock,
                config=config, secret_keys=secret_keys,
            )
        except BaseException as exc:  # noqa: BLE001 re-raised on the caller's thread
            result["error"] = exc
        finally:
            asyncio.set_event_loop(None)
            loop.close()

    # A new thread starts with an empty contextvars context and no event loop: a clean runtime.
    worker = threading.Thread(target=target, name=f"pulumi-mocks-{stack}", daemon=True)
    worker.start()
    worker.join(RUN_TIMEOUT_SECONDS)
    if worker.is_alive():
        raise TimeoutError(f"the mock run of stack {stack} did not finish in {RUN_TIMEOUT_SECONDS} s")
    if "error" in result:
        raise result["error"]
    return result["run"]
