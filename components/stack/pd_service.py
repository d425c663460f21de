"""The serving namespace, the optional Hugging Face token Secret, and the RayService itself.

The manifest comes whole from `components.render.rayservice.render_rayservice`; this component only
applies it. It waits for (and on destroy goes before) the KubeRay operator, which owns the
RayService finalizer, and the device plugins and GPU node groups its workers need.

Updates (components.render.rayservice's docstring has KubeRay's rules): KubeRay applies a changed
serveConfigV2 to the running cluster, leaves replica counts to the Ray autoscaler, and answers any
other change of rayClusterConfig (worker sizes, image, env, selectors...) with a new RayCluster.
- In-place stacks (`raypd:upgradeStrategy: inPlace`): the GPU node groups are sized for exactly
  one cluster, so a second, pending cluster could never schedule (and `upgradeStrategy: None` makes
  KubeRay ignore such a change). So when the cluster digest annotation changes (the part of
  rayClusterConfig KubeRay would rebuild for) the RayService is replaced, the old one deleted
  first: serving stops until the new one is Ready. A replica-count change does not touch the digest
  and stays an in-place update.
- Zero-downtime stacks (`newCluster`): KubeRay's own NewCluster upgrade, on a new generation of GPU
  node groups (components.render.rayservice.node_set); no replacement. The RayService's update is
  awaited until KubeRay has switched to the new cluster (its waitFor holds UpgradeInProgress
  False, components.render.rollout 3), so the old generation, which Pulumi deletes only after every
  registered resource's step, outlives the switch whatever the change (Serve config or not).
GCS fault tolerance (issue 31): with an ElastiCache store the auth token's Secret lives here, the
RayService waits for it and for the replication group, and the primary endpoint's host is put into
`gcsFaultToleranceOptions.redisAddress` (components.render.gcs_fault_tolerance.with_redis_host).
Either way a rollout check Job (components.render.rollout) makes `pulumi up` wait until the new Serve
config is RUNNING. With an s3:// model, the Ray pods' ServiceAccount (IRSA,
components.render.model_access) lives here too, and so do the worker groups' PodDisruptionBudgets
(components.render.disruption).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s
from pydantic import SecretStr

from components.render.gcs_fault_tolerance import PASSWORD_SECRET_KEY, with_redis_host
from components.render.model_access import ROLE_ARN_ANNOTATION
from components.render.network_policy import pod_security_labels, pod_security_level
from components.render.rayservice import HF_TOKEN_SECRET_KEY, RAY_CLUSTER_DIGEST_ANNOTATION
from components.render.rollout import serve_rollout_job
from components.stack.network_policies import NetworkPolicies, NetworkPoliciesArgs

# A change of this annotation is a change KubeRay would build a new RayCluster for (see the module
# docstring); a Pulumi property path, bracketed because the key holds "." and "/".
REPLACE_ON_CHANGES = (f'metadata.annotations["{RAY_CLUSTER_DIGEST_ANNOTATION}"]',)


def replace_on_changes(upgrade_strategy: str) -> list[str]:
    """The RayService's replaceOnChanges for a stack's upgrade strategy (module docstring)."""
    return list(REPLACE_ON_CHANGES) if upgrade_strategy == "inPlace" else []


@dataclass(frozen=True)
class GcsRedisArgs:
    """The Redis of GCS fault tolerance as the RayService needs it (components.stack.gcs_store)."""

    # The ElastiCache primary endpoint (None: an external Redis, whose address is in the manifest).
    host: Optional[pulumi.Input[str]] = None
    # The auth token and the Secret raypd keeps it in (None: the user's own Secret, or no password).
    auth_token: Optional[pulumi.Input[str]] = None
    secret_name: Optional[str] = None
    # The replication group: created before the RayService, deleted after it.
    wait_for: tuple[pulumi.Resource, ...] = ()


@dataclass(frozen=True)
class PdServiceArgs:
    namespace: str
    manifest: dict[str, Any]  # render_rayservice(spec)
    hf_token: Optional[SecretStr]
    hf_token_secret_name: str
    # The KubeRay release, device plugins and GPU node groups: created first, destroyed last.
    wait_for: tuple[pulumi.Resource, ...] = ()
    # S3 model sources: the Ray pods' ServiceAccount and the IAM role it assumes (IRSA).
    service_account_name: Optional[str] = None
    service_account_role_arn: Optional[pulumi.Input[str]] = None
    upgrade_strategy: str = "inPlace"
    # Who may reach the Ray pods (components.stack.network_policies); None: no policies (tests only).
    network_policies: Optional[NetworkPoliciesArgs] = None
    # The Pod Security version label ("v1.35"): the cluster's Kubernetes minor.
    pod_security_version: str = "latest"
    # ConfigMaps the Ray pods mount (components.render.scaling_policy.rendering.mounted_config_maps).
    config_maps: tuple[dict[str, Any], ...] = ()
    # GCS fault tolerance's Redis (issue 31); None: gcs off.
    gcs_redis: Optional[GcsRedisArgs] = None
    # The worker groups' PodDisruptionBudgets (components.render.disruption.disruption_budgets).
    disruption_budgets: tuple[dict[str, Any], ...] = ()


class PdService(pulumi.ComponentResource):
    """Children inherit the Kubernetes provider from this component's `providers` option."""

    namespace: k8s.core.v1.Namespace
    ray_service: k8s.apiextensions.CustomResource
    rollout_check: k8s.apiextensions.CustomResource

    def __init__(self, name: str, args: PdServiceArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("raypd:serving:PdService", name, None, opts)
        manifest = args.manifest
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=args.namespace,
                # privileged only because the NIXL workers are (pod_security_level reads the
                # manifest): Pod Security admission then refuses nothing the RayService needs,
                # and audits/warns at the same level.
                labels=pod_security_labels(pod_security_level(manifest), args.pod_security_version),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.namespace = namespace  # the endpoint's objects live in it too (components.stack.endpoint_stack)
        needs: list[pulumi.Resource] = [namespace, *args.wait_for]
        if args.network_policies is not None:
            # Before the RayService: its pods never run without the policies around them.
            policies = NetworkPolicies(
                f"{name}-network", dataclasses.replace(args.network_policies, wait_for=(namespace,)),
                opts=pulumi.ResourceOptions(parent=self))
            needs.append(policies)
        needs += self._pod_inputs(name, args, namespace)
        spec = self._gcs_redis(name, args, namespace, needs)

        self._disruption_budgets(name, args.disruption_budgets, namespace)
        self.ray_service = k8s.apiextensions.CustomResource(
            f"{name}-rayservice",
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=manifest["metadata"],
            spec=spec,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=needs,
                # See the module docstring: no room for KubeRay's second cluster in place.
                replace_on_changes=replace_on_changes(args.upgrade_strategy),
                delete_before_replace=True,
            ),
        )
        # `pulumi up` returns once the Serve config just applied is RUNNING (components.render.rollout):
        # a Job per Serve config, awaited by Pulumi until Complete. Applied as a plain manifest;
        # the engine sees an ordinary batch/v1 Job.
        job = serve_rollout_job(manifest)
        self.rollout_check = k8s.apiextensions.CustomResource(
            f"{name}-rollout-check",
            api_version=job["apiVersion"],
            kind=job["kind"],
            metadata=job["metadata"],
            spec=job["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.ray_service]),
        )
        self.register_outputs({"rayServiceName": manifest["metadata"]["name"]})

    def _pod_inputs(self, name: str, args: PdServiceArgs, namespace: k8s.core.v1.Namespace) -> list[pulumi.Resource]:
        """What the Ray pods read at start (the HF token Secret, mounted ConfigMaps, the model
        reader's ServiceAccount): created before the RayService."""
        created: list[pulumi.Resource] = []
        if args.hf_token is not None:
            token = k8s.core.v1.Secret(
                f"{name}-hf-token",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=args.hf_token_secret_name, namespace=args.namespace
                ),
                # Secret end to end: encrypted in the Pulumi state, masked in every output.
                string_data={
                    HF_TOKEN_SECRET_KEY: pulumi.Output.secret(args.hf_token.get_secret_value())
                },
                opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
            )
            created.append(token)
        for config_map in args.config_maps:
            created.append(k8s.core.v1.ConfigMap(
                f"{name}-{config_map['metadata']['name']}",
                metadata=config_map["metadata"],
                data=config_map["data"],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
            ))
        if args.service_account_name is not None and args.service_account_role_arn is not None:
            account = k8s.core.v1.ServiceAccount(
                f"{name}-model-reader",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=args.service_account_name,
                    namespace=args.namespace,
                    # EKS's pod identity webhook gives pods of this account the role's credentials.
                    annotations={ROLE_ARN_ANNOTATION: args.service_account_role_arn},
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
            )
            created.append(account)
        return created

    def _gcs_redis(self, name: str, args: PdServiceArgs, namespace: k8s.core.v1.Namespace,
                   needs: list[pulumi.Resource]) -> pulumi.Input[dict[str, Any]]:
        """The RayService's spec with GCS fault tolerance's Redis wired in (module docstring):
        the auth token's Secret and the replication group join `needs`."""
        manifest_spec: dict[str, Any] = args.manifest["spec"]
        redis = args.gcs_redis
        if redis is None:
            return manifest_spec
        needs.extend(redis.wait_for)
        if redis.auth_token is not None and redis.secret_name is not None:
            needs.append(k8s.core.v1.Secret(
                f"{name}-gcs-redis",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=redis.secret_name, namespace=args.namespace),
                # Secret end to end, as the HF token: encrypted state, masked outputs.
                string_data={PASSWORD_SECRET_KEY: pulumi.Output.secret(redis.auth_token)},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
            ))
        if redis.host is None:
            return manifest_spec
        return pulumi.Output.from_input(redis.host).apply(lambda host: with_redis_host(manifest_spec, host))

    def _disruption_budgets(self, name: str, budgets: tuple[dict[str, Any], ...],
                            namespace: k8s.core.v1.Namespace) -> None:
        """Beside the RayService, not before it: a budget limits evictions only, and selects the
        worker pods of every RayCluster generation (components.render.disruption)."""
        for budget in budgets:
            spec = budget["spec"]
            k8s.policy.v1.PodDisruptionBudget(
                f"{name}-{budget['metadata']['name']}",
                metadata=budget["metadata"],
                spec=k8s.policy.v1.PodDisruptionBudgetSpecArgs(
                    min_available=spec["minAvailable"],
                    selector=k8s.meta.v1.LabelSelectorArgs(match_labels=spec["selector"]["matchLabels"]),
                    unhealthy_pod_eviction_policy=spec["unhealthyPodEvictionPolicy"],
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
            )
