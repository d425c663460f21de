"""The settings table of docs/infrastructure.md (`python -m components.changes` prints it).

One example change per Contract 1 setting, run through the change preview (components.changes.assess):
docs/infrastructure.md embeds the output between its BEGIN/END settings-table markers, and a test
keeps the two equal, so the docs cannot drift from what the preview says.
"""

from __future__ import annotations

from typing import Any

from components.changes.assess import assess
from components.changes.effects import Strategy, minutes
from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment

# A phase's autoscaling block (issue 30) for the examples below.
_AUTOSCALING = {"minReplicas": 1, "maxReplicas": 4, "targetOngoingRequests": 8, "downscaleDelaySeconds": 1200}
# One example change per Contract 1 setting, from the reference deployment (Pulumi.dev.yaml's
# defaults), deployed in us-east-2a.
EXAMPLES: tuple[tuple[str, str, dict[str, Any], dict[str, Any]], ...] = (
    ("raypd:decode.replicas / raypd:prefill.replicas", "1 -> 2", {}, {"raypd:decode": {"replicas": 2}}),
    ("raypd:decode.replicas / raypd:prefill.replicas", "2 -> 1", {"raypd:decode": {"replicas": 2}}, {}),
    ("raypd:decode.autoscaling", "turned on (or off)", {}, {"raypd:decode": {"autoscaling": _AUTOSCALING}}),
    ("raypd:decode.autoscaling.*", "maxReplicas 4 -> 6, targetOngoingRequests 8 -> 4",
     {"raypd:decode": {"autoscaling": _AUTOSCALING}},
     {"raypd:decode": {"autoscaling": {**_AUTOSCALING, "maxReplicas": 6, "targetOngoingRequests": 4}}}),
    ("raypd:model.*", "maxModelLen 4096 -> 8192", {}, {"raypd:model": {"maxModelLen": 8192}}),
    ("raypd:model.id", "served name", {}, {"raypd:model": {"id": "renamed"}}),
    ("raypd:decode.tensorParallelSize", "1 -> 4 on g6e.12xlarge",
     {"raypd:decode": {"instanceType": "g6e.12xlarge"}},
     {"raypd:decode": {"instanceType": "g6e.12xlarge", "tensorParallelSize": 4}}),
    ("raypd:decode.instanceType", "g6.8xlarge -> g6e.8xlarge", {},
     {"raypd:decode": {"instanceType": "g6e.8xlarge"}}),
    ("raypd:availabilityZone", "us-east-2a -> us-east-2b (the second zone)", {},
     {"raypd:availabilityZone": "us-east-2b"}),
    ("raypd:kubernetesVersion", "1.34 -> 1.35", {"raypd:kubernetesVersion": "1.34"}, {}),
    ("raypd:kubernetesVersion", "1.35 -> 1.34, or two versions up", {}, {"raypd:kubernetesVersion": "1.34"}),
    ("raypd:systemNodes.instanceType", "m7i.xlarge -> m7i.2xlarge", {},
     {"raypd:systemNodes": {"instanceType": "m7i.2xlarge"}}),
    ("raypd:systemNodes.count", "1 -> 2", {}, {"raypd:systemNodes": {"count": 2}}),
    ("raypd:image / raypd:rayVersion", "another image", {}, {"raypd:image": "example.com/ray-llm:2"}),
    ("raypd:kvTransfer.backend", "LIBFABRIC -> UCX", {}, {"raypd:kvTransfer": {"backend": "UCX"}}),
    ("raypd:kvTransfer.loadFailurePolicy", "fail -> recompute", {},
     {"raypd:kvTransfer": {"loadFailurePolicy": "recompute"}}),
    ("raypd:kvTransfer.leaseSeconds", "300 -> 600", {}, {"raypd:kvTransfer": {"leaseSeconds": 600}}),
    ("raypd:mode", "disaggregated -> colocated", {}, {"raypd:mode": "colocated"}),
    ("raypd:kuberayVersion", "1.4.0 -> 1.5.1", {}, {"raypd:kuberayVersion": "1.5.1"}),
    ("raypd:namespace / raypd:serviceName", "another name", {}, {"raypd:serviceName": "other"}),
    ("raypd:clusterName / aws:region", "another cluster", {}, {"raypd:clusterName": "other"}),
    ("raypd:hfToken", "a first token", {}, {"raypd:hfToken": "hf_new"}),
    ("raypd:hfToken", "another token", {"raypd:hfToken": "hf_old"}, {"raypd:hfToken": "hf_new"}),
    ("raypd:apiAccessCidrs", "0.0.0.0/0 -> 203.0.113.0/24", {},
     {"raypd:apiAccessCidrs": ["203.0.113.0/24"]}),
    ("raypd:adminRoleArns", "add a role", {}, {"raypd:adminRoleArns": ["arn:aws:iam::123456789012:role/ci"]}),
    ("raypd:upgradeStrategy", "inPlace -> newCluster", {}, {"raypd:upgradeStrategy": "newCluster"}),
    ("raypd:endpoint.scope", "vpc -> internet", {}, {"raypd:endpoint": {
        "scope": "internet", "allowedCidrs": ["203.0.113.0/24"],
        "certificateArn": "arn:aws:acm:us-east-2:123456789012:certificate/0f3c7d2e-1b4a-4c5d-9e8f-a1b2c3d4e5f6"}}),
    ("raypd:endpoint.scope", "cluster -> vpc", {"raypd:endpoint": {"scope": "cluster"}}, {}),
    ("raypd:endpoint.allowedCidrs", "the VPC -> 10.0.0.0/8", {},
     {"raypd:endpoint": {"allowedCidrs": ["10.0.0.0/8"]}}),
    ("raypd:endpoint.auth", "apiKey -> none", {}, {"raypd:endpoint": {"auth": "none"}}),
    ("raypd:faultTolerance.gcs", "elasticache -> off (or back on)", {}, {"raypd:faultTolerance": {"gcs": "off"}}),
    ("raypd:faultTolerance.cacheNodeType", "cache.t4g.small -> cache.t4g.medium", {},
     {"raypd:faultTolerance": {"cacheNodeType": "cache.t4g.medium"}}),
    ("raypd:observability.enabled", "true -> false", {}, {"raypd:observability": {"enabled": False}}),
    ("raypd:observability.prometheusStorageSize", "50Gi -> 100Gi", {},
     {"raypd:observability": {"prometheusStorageSize": "100Gi"}}),
)
DOC_ZONE = "us-east-2a"


def _downtime_words(seconds: float) -> str:
    return "none" if not seconds else minutes(seconds)


def _extra_words(strategy: Strategy) -> str:
    if not strategy.extra_nodes:
        return "none"
    nodes = " + ".join(f"{line.nodes} x {line.instance_type}" for line in strategy.extra_nodes)
    return f"{nodes} for {minutes(strategy.extra_seconds)}"


def settings_table() -> str:
    """The markdown table of every setting: what a change does, its downtime and extra capacity."""
    rows = ["| setting | example | what a change does | downtime in place | extra capacity in place "
            "| with `newCluster` instead |", "|---|---|---|---|---|---|"]
    for setting, example, before, after in EXAMPLES:
        result = assess(plan_deployment(DeploymentSpec.from_config(before, "dev")),
                        plan_deployment(DeploymentSpec.from_config(after, "dev")), DOC_ZONE)
        kinds = ", ".join(dict.fromkeys(e.kind.words for e in result.effects))
        in_place = next((c for c in result.choices if c.name == "inPlace"), result.chosen)
        zero = next((c for c in result.choices if c.name == "newCluster"), None)
        alternative = "-" if zero is None else (
            ("no downtime" if not zero.downtime_seconds else
             f"{minutes(zero.downtime_seconds)} of downtime") + f"; {_extra_words(zero)}"
            + (f" (~${zero.extra_usd:g})" if zero.extra_usd is not None else ""))
        rows.append(f"| `{setting}` | {example} | {kinds} | {_downtime_words(in_place.downtime_seconds)} "
                    f"| {_extra_words(in_place)} | {alternative} |")
    return "\n".join(rows) + "\n"
