"""`raypd:endpoint.scope` changes on a running stack (issue 29 §1): which load balancer
`endpoint.url` names afterwards, and what keeps the AWS Load Balancer Controller running while an
NLB is deleted.

The URL tests run the real program for several `pulumi up`s in a row against `LiveCluster`: mocks
that remember what the last `up` left behind and answer the way Pulumi's engine and the cluster's
controllers do (see its docstring). Each step's op per resource (same, update, replace, create)
is what components.changes.pulumi_diff judges from the two offline plans, the engine's own rules.

The ordering tests read the plan's dependency graph the way the engine schedules deletions
(pulumi/pulumi pkg/resource/deploy/step_generator.go `ScheduleDeletes`: in antichains, each one
finished before the next starts, a resource never before the resources that depend on it), for
`destroy` and for the resources a change to scope cluster removes.
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping, Optional

import pytest
from pulumi.runtime import mocks

from components.config.spec import DeploymentSpec
from components.render import endpoint_names
from components.stack.endpoint_stack import OFFLINE_CREATED_AT
from components.stack.mockrun import PlanMocks, run_program
from components.stack.offline_plan import plan_spec
from components.stack.program import build
from webui.resource_steps import plan_diff

CERT = "arn:aws:acm:us-east-2:123456789012:certificate/0f3c7d2e-1b4a-4c5d-9e8f-a1b2c3d4e5f6"
SCOPES: dict[str, dict[str, Any]] = {
    "cluster": {"raypd:endpoint": {"scope": "cluster"}},
    "vpc": {},
    "internet": {"raypd:endpoint": {"scope": "internet", "certificateArn": CERT}},
}
SERVICE = "kubernetes:core/v1:Service"
GATEWAY = "kubernetes:gateway.networking.k8s.io/v1:Gateway"
ENVOY_PROXY = "kubernetes:gateway.envoyproxy.io/v1alpha1:EnvoyProxy"
RELEASE = "kubernetes:helm.sh/v3:Release"
SCHEME = "service.beta.kubernetes.io/aws-load-balancer-scheme"
NLB_CLASS = "service.k8s.aws/nlb"
PROXY_SERVICE_UID = "envoy-gateway-managed"


def _hex(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode("utf-8")).hexdigest()


def nlb_host(namespace: str, name: str, uid: str, scheme: str) -> str:
    """The DNS name of the NLB the controller makes for a Service: its name hashes the Service's
    UID and the scheme (aws-load-balancer-controller v3.5.0 pkg/service/model_build_load_balancer.go
    `buildLoadBalancerName`), so a new Service or a new scheme is a new NLB with a new name."""
    sanitized = [''.join(c for c in text if c.isalnum()) for text in (namespace, name)]
    lb_name = f"k8s-{sanitized[0][:8]}-{sanitized[1][:8]}-{_hex(uid, scheme)[:10]}"
    return f"{lb_name}-{_hex(lb_name)[:16]}.elb.us-east-2.amazonaws.com"


def _is_nlb_service(service: Mapping[str, Any]) -> bool:
    """A Service the controller makes an NLB for (type LoadBalancer; its class, or none)."""
    spec = service.get("spec") or service
    return spec.get("type") == "LoadBalancer" and spec.get("loadBalancerClass") in (None, NLB_CLASS)


def _scheme(annotations: Optional[Mapping[str, str]]) -> str:
    return (annotations or {}).get(SCHEME, "internal")


class LiveCluster(PlanMocks):
    """Mocks that carry a stack's state from one `pulumi up` to the next.

    The engine: a resource whose op is `same` is not sent to the provider; its outputs are the
    stored ones. A created or replaced one gets fresh outputs: pulumi-kubernetes waits for a
    LoadBalancer Service's status.loadBalancer.ingress (provider/pkg/await/service.go) and for the
    Gateway's Programmed condition. An updated Kubernetes object comes back as pulumi-kubernetes
    reads it right after the patch, when the wait is already met by the old status: the
    controllers have not acted on the change yet, so its `status` is still the one it had.
    The controllers: the AWS Load Balancer Controller gives every Service of type LoadBalancer the
    DNS name of its NLB (`nlb_host`; a Service Envoy Gateway manages from the EnvoyProxy keeps its
    UID across updates); Envoy Gateway copies its proxy Service's address into the Gateway's
    status.addresses (a Hostname for an NLB, the ClusterIP otherwise).
    """

    def __init__(self) -> None:
        super().__init__("us-east-2")
        self.stored: dict[tuple[str, str], tuple[Optional[str], dict[str, Any]]] = {}
        self.uids: dict[tuple[str, str], str] = {}
        self.ops: dict[tuple[str, str], str] = {}
        self.registered: dict[tuple[str, str], dict[str, Any]] = {}
        self.proxy_service: dict[str, Any] = {}

    def up(self, spec: DeploymentSpec, ops: Mapping[tuple[str, str], str]) -> dict[str, Any]:
        """One `pulumi up` of `spec`; returns the `endpoint` output."""
        self.ops, self.registered = dict(ops), {}
        run = run_program(lambda: build(spec, OFFLINE_CREATED_AT), project="raypd", stack=spec.stack,
                          region=spec.region, mock=self)
        self.stored = {key: value for key, value in self.stored.items() if key in self.registered}
        return dict(run.outputs["endpoint"].value)

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[Optional[str], dict]:
        key = (args.typ, args.name)
        self.registered[key] = dict(args.inputs)
        op = self.ops.get(key, "create")
        if op == "same" and key in self.stored:
            return self.stored[key]
        resource_id, outputs = super().new_resource(args)
        outputs.pop("status", None)
        if args.typ == ENVOY_PROXY:
            self.proxy_service = args.inputs["spec"]["provider"]["kubernetes"]["envoyService"]
        elif args.typ == GATEWAY:
            outputs["status"] = self._gateway_status()
        elif args.typ == SERVICE and _is_nlb_service(args.inputs):
            meta = args.inputs["metadata"]
            uid_key = (meta["namespace"], meta["name"])
            if op in ("create", "replace") or uid_key not in self.uids:
                self.uids[uid_key] = f"uid-{len(self.uids)}-{args.name}"
            host = nlb_host(*uid_key, self.uids[uid_key], _scheme(meta.get("annotations")))
            outputs["status"] = {"loadBalancer": {"ingress": [{"hostname": host}]}}
        if op == "update" and key in self.stored and "status" in self.stored[key][1]:
            outputs["status"] = self.stored[key][1]["status"]
        self.stored[key] = (resource_id, outputs)
        return resource_id, outputs

    def _gateway_status(self) -> dict[str, Any]:
        if _is_nlb_service(self.proxy_service):
            host = nlb_host(endpoint_names.GATEWAY_NAMESPACE, self.proxy_service["name"], PROXY_SERVICE_UID,
                            _scheme(self.proxy_service.get("annotations")))
            return {"addresses": [{"type": "Hostname", "value": host}]}
        return {"addresses": [{"type": "IPAddress", "value": "172.20.14.2"}]}

    def serving_hosts(self) -> set[str]:
        """The NLBs the controller keeps after this `up`: one per LoadBalancer Service that exists."""
        hosts = set()
        for (kind, _), inputs in self.registered.items():
            if kind == SERVICE and _is_nlb_service(inputs):
                meta = inputs["metadata"]
                uid_key = (meta["namespace"], meta["name"])
                hosts.add(nlb_host(*uid_key, self.uids[uid_key], _scheme(meta.get("annotations"))))
            elif kind == ENVOY_PROXY:
                service = inputs["spec"]["provider"]["kubernetes"]["envoyService"]
                if _is_nlb_service(service):
                    hosts.add(nlb_host(endpoint_names.GATEWAY_NAMESPACE, service["name"], PROXY_SERVICE_UID,
                                       _scheme(service.get("annotations"))))
        return hosts


def spec_of(scope: str) -> DeploymentSpec:
    return DeploymentSpec.from_config(SCOPES[scope], "dev")


@pytest.fixture(scope="module")
def plans() -> dict[str, dict[str, Any]]:
    return {scope: plan_spec(spec_of(scope)) for scope in SCOPES}


def step_ops(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    return {(s["type"], s["name"]): s["op"] for s in plan_diff(old, new) if not s.get("expanded")}


@pytest.mark.slow
@pytest.mark.parametrize("before, after", [("cluster", "vpc"), ("vpc", "internet"), ("internet", "vpc")])
def test_after_a_scope_change_the_url_names_the_load_balancer_that_serves_now(plans, before, after):
    live = LiveCluster()
    live.up(spec_of(before), {})
    url = live.up(spec_of(after), step_ops(plans[before], plans[after]))["url"]
    (host,) = live.serving_hosts()  # one NLB serves (the old one, if any, is deleted)
    scheme = "https" if after == "internet" else "http"
    assert url == f"{scheme}://{host}/v1", f"{before} -> {after}: the output names {url}, the NLB is {host}"


def test_the_first_up_of_a_load_balanced_stack_names_its_load_balancer():
    live = LiveCluster()
    url = live.up(spec_of("vpc"), {})["url"]
    (host,) = live.serving_hosts()
    assert url == f"http://{host}/v1"


# ---- the controller outlives every NLB ----

def _named(plan: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in plan["resources"]}


def deletion_waves(plan: Mapping[str, Any], condemned: set[str]) -> list[set[str]]:
    """`ScheduleDeletes` on the plan's graph: the antichains in the order they run. A resource's
    edges are its dependencies and its parent (pkg/resource/graph `DependenciesOf`)."""
    resources = _named(plan)

    def edges(name: str) -> set[str]:
        resource = resources[name]
        return {*resource["dependsOn"], *([resource["parent"]] if resource.get("parent") else [])}

    left, waves = set(condemned), []
    while left:
        wave = {name for name in left if not edges(name) & left}
        assert wave, f"a dependency cycle among {sorted(left)}"
        waves.append(wave)
        left -= wave
    return waves[::-1]


def dependencies(plan: Mapping[str, Any], name: str) -> set[str]:
    """Everything `name` depends on, directly or through others: what any order of deletions that
    respects the graph deletes after it."""
    resources, found, todo = _named(plan), set(), [name]
    while todo:
        for dependency in resources[todo.pop()]["dependsOn"]:
            if dependency not in found and dependency in resources:
                found.add(dependency)
                todo.append(dependency)
    return found


def wave_of(waves: list[set[str]], name: str) -> int:
    (index,) = [i for i, wave in enumerate(waves) if name in wave]
    return index


def nlb_services(plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [r for r in plan["resources"] if r["type"] == SERVICE and _is_nlb_service(r["inputs"])]


def lb_controller(plan: Mapping[str, Any]) -> set[str]:
    """The controller's release and what it runs on: its IAM role and policy, its CRDs."""
    names = {r["name"] for r in plan["resources"]
             if r["name"].startswith("lb-controller-") and r["type"] != "raypd:endpoint:LoadBalancerController"}
    assert "lb-controller-release" in names
    return names


@pytest.mark.parametrize("scope", ["vpc", "internet"])
def test_every_nlb_belongs_to_a_service_pulumi_deletes_and_waits_for(plans, scope):
    plan = plans[scope]
    # No NLB that only Envoy Gateway knows of: its proxy Service stays a ClusterIP, whose deletion
    # nothing in the stack would wait for.
    (proxy,) = [r for r in plan["resources"] if r["type"] == ENVOY_PROXY]
    assert proxy["inputs"]["spec"]["provider"]["kubernetes"]["envoyService"]["type"] == "ClusterIP"
    (service,) = nlb_services(plan)
    annotations = service["inputs"]["metadata"].get("annotations") or {}
    # pulumi-kubernetes deletes it and waits until it is gone (await.go `Deletion`), i.e. until
    # the controller has deleted the NLB and removed its finalizer service.k8s.aws/resources.
    assert annotations.get("pulumi.com/skipAwait") != "true"
    assert int(annotations["pulumi.com/timeoutSeconds"]) >= 600


@pytest.mark.parametrize("scope", ["vpc", "internet"])
def test_destroy_deletes_the_nlb_service_before_the_controller(plans, scope):
    plan = plans[scope]
    (service,) = nlb_services(plan)
    # Not by chance of the schedule: the Service depends on the controller and what it runs on.
    assert lb_controller(plan) <= dependencies(plan, service["name"])
    waves = deletion_waves(plan, set(_named(plan)))
    first = wave_of(waves, service["name"])
    for name in lb_controller(plan):
        assert first < wave_of(waves, name), f"{name} is deleted with or before the NLB's Service"


@pytest.mark.parametrize("scope", ["vpc", "internet"])
def test_a_change_to_scope_cluster_deletes_the_nlb_service_before_the_controller(plans, scope):
    old, new = plans[scope], plans["cluster"]
    removed = {s["name"] for s in plan_diff(old, new) if s["op"] == "delete"}
    (service,) = nlb_services(old)
    assert service["name"] in removed and "lb-controller-release" in removed
    assert lb_controller(old) & removed <= dependencies(old, service["name"])
    waves = deletion_waves(old, removed)
    first = wave_of(waves, service["name"])
    for name in lb_controller(old) & removed:
        assert first < wave_of(waves, name), f"{name} is deleted with or before the NLB's Service"


def test_a_scheme_change_makes_the_new_nlb_before_the_old_one_goes(plans):
    steps = {s["name"]: s for s in plan_diff(plans["vpc"], plans["internet"]) if s["type"] == SERVICE}
    ops = {name: step["op"] for name, step in steps.items()}
    (old,) = nlb_services(plans["vpc"])
    (new,) = nlb_services(plans["internet"])
    assert ops == {old["name"]: "delete", new["name"]: "create"}
    assert "lb-controller-release" in new["dependsOn"]
