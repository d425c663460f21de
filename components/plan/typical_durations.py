"""Typical times: how long each Pulumi resource type takes to create, and each kind of change.

The one table of quoted durations, each with where the number comes from; components.plan.durations
turns it into a plan's critical path and an ETA, components.changes into downtime and the time
extra nodes run. The web app replaces entries with the medians of its own past runs
(durations.measured_durations, durations.merged) once it has them.
"""

from __future__ import annotations

from typing import NamedTuple

MANAGED_NODE_GROUP = "eks:index:ManagedNodeGroup"
# A GPU node group takes far longer than the CPU system group (bigger instances, the NVIDIA AMI,
# EFA), but both have the same Pulumi type; durations.duration_key tells them apart by their inputs.
GPU_NODE_GROUP = MANAGED_NODE_GROUP + "[gpu]"


class Typical(NamedTuple):
    seconds: float
    source: str


# Typical creation time per Pulumi type token (key), and why. Sources:
#   [guide]    the AWS multi-node Ray LLM DLC guide this project reproduces ("Timings the guide
#              quotes": cluster 15-20 min, GPU node group 5-20 min, KubeRay 1-2 min, RayService
#              several minutes; weights load ~145 s cold for the ~18 GiB Qwen3.5-9B checkpoint).
#   [eason]    https://easontechtalk.com/unofficial-eks-cluster-creation-performance-across-aws-regions
#              (EKS control plane creation measured in 21 regions: us-east-2 904.62 s).
#   [peks1819] https://github.com/pulumi/pulumi-eks/issues/1819 (a `pulumi up` log: eks:index:Cluster
#              created (748s), aws:iam:Role created (1s), RolePolicyAttachment created (0.71s-1s)).
#   [tf-ng]    https://github.com/umotif-public/terraform-aws-eks-node-group/issues/7 (managed node
#              group "Creation complete after 2m50s"); https://github.com/eksctl-io/eksctl/pull/482
#              (node group stack CREATE_COMPLETE after 3m36s); https://alchemy.run/providers/aws/eks/nodegroup
#              ("CREATING -> ACTIVE, ~2-5 min").
#   [ray63859] https://github.com/ray-project/ray/pull/63859 (cold Ray Serve LLM start on GPU nodes:
#              node + image pull + join ~300 s, vLLM engine init incl. weights ~100 s).
#   [soci]     AWS ML blog "Reducing container cold start times using SOCI index on DLAMI and DLC":
#              "Standard Docker image pulls of 15-20 GB can take 4-6 minutes per instance".
#   [kops944]  https://github.com/kubernetes/kops/pull/944 (NAT gateway Pending -> Available "can take
#              up to 10 min", code comment "up to 5 min").
#   [raydocs]  https://docs.ray.io/en/master/kuberay/getting-started/operator-installation.html
#              (kuberay-operator pod Running, AGE 24s, after `helm install`).
TYPICAL: dict[str, Typical] = {
    # ---- the slow path ----
    "eks:index:Cluster": Typical(
        900.0,
        "[eason] control plane 904.62 s in us-east-2; [guide] 15-20 min; [peks1819] 748 s",
    ),
    GPU_NODE_GROUP: Typical(
        600.0,
        "estimate inside [guide] 5-20 min for the GPU node group: a CPU group takes ~3 min "
        "[tf-ng], GPU instances with the NVIDIA AMI and EFA boot and join slower",
    ),
    MANAGED_NODE_GROUP: Typical(
        180.0,
        "CPU (system) managed node group: [tf-ng] 2m50s, 3m36s, '~2-5 min'",
    ),
    "kubernetes:ray.io/v1:RayService": Typical(
        780.0,
        "until condition Ready (model loaded on every node): pull of the ~30 GB Ray LLM DLC at "
        "[soci] rates (15-20 GB in 4-6 min, ~60 MB/s) ~500 s + weights download and load ~145 s "
        "cold [guide] + vLLM engine init and Serve deploy ~100 s [ray63859] + pod scheduling and "
        "Ray start ~35 s (estimate); ~30 GB is the project's figure for the image, not a published one",
    ),
    "kubernetes:helm.sh/v3:Release": Typical(
        90.0,
        "[guide] KubeRay 1-2 min (Helm waits for the pods: atomic); [raydocs] operator Running "
        "after 24 s on a warm cluster; the device-plugin charts are small DaemonSets, same order; "
        "kube-prometheus-stack (issue 18) waits for its EBS volumes and six images, likely 2-4 "
        "min (estimate), dcgm-exporter is not awaited",
    ),
    "aws:eks/addon:Addon": Typical(
        120.0,
        "estimate: coredns, added once the system node exists, goes ACTIVE when its pods run; "
        "without a node it stays DEGRADED until a 20-min timeout ([peks1819])",
    ),
    "aws:ec2/natGateway:NatGateway": Typical(
        120.0,
        "estimate: NAT gateways wait Pending -> Available, 'up to 5 min', 'up to 10 min' [kops944]; "
        "1-2 min is the common case",
    ),
    # ---- seconds: one API call and a short wait ----
    "aws:ec2/vpc:Vpc": Typical(5.0, "estimate: create, wait available, set DNS attributes"),
    "aws:ec2/subnet:Subnet": Typical(3.0, "estimate: create and wait available"),
    "aws:ec2/internetGateway:InternetGateway": Typical(3.0, "estimate: create and attach"),
    "aws:ec2/eip:Eip": Typical(2.0, "estimate: one AllocateAddress call"),
    "aws:ec2/routeTable:RouteTable": Typical(3.0, "estimate: create and add its routes"),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": Typical(1.0, "estimate: one call"),
    "aws:ec2/securityGroup:SecurityGroup": Typical(3.0, "estimate: create and set rules"),
    "aws:iam/role:Role": Typical(2.0, "[peks1819] aws:iam:Role created (1s)"),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": Typical(
        1.0, "[peks1819] RolePolicyAttachment created (0.71s-1s)"
    ),
    "kubernetes:core/v1:Namespace": Typical(2.0, "estimate: one API call, Pulumi awaits Active"),
    "kubernetes:yaml/v2:ConfigGroup": Typical(
        5.0, "estimate: KubeRay's CRDs, fetched from GitHub and applied server-side, Established"
    ),
    "kubernetes:batch/v1:Job": Typical(
        15.0,
        "estimate: the Serve rollout check (components.render.rollout) on a first deploy, where the app "
        "already runs: pod start with the image cached on the system node and one API call; on an "
        "in-place Serve change it lasts the whole redeploy instead",
    ),
    "kubernetes:core/v1:ServiceAccount": Typical(1.0, "estimate: one API call"),
    "aws:iam/rolePolicy:RolePolicy": Typical(1.0, "estimate: one PutRolePolicy call"),
    "raypd:serving:ModelReadRole": Typical(0.0, "component: its time is its children's"),
    "kubernetes:core/v1:Secret": Typical(1.0, "estimate: one API call"),
    "kubernetes:policy/v1:PodDisruptionBudget": Typical(1.0, "estimate: one API call"),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": Typical(1.0, "estimate: one call"),
    "aws:elasticache/subnetGroup:SubnetGroup": Typical(1.0, "estimate: one call"),
    "aws:elasticache/replicationGroup:ReplicationGroup": Typical(
        600.0, "estimate: create and wait available, a primary and one replica in two zones; AWS gives no "
        "figure beyond 'several minutes'; built beside the EKS cluster, so rarely on the critical path"),
    "raypd:resilience:GcsStore": Typical(0.0, "component: its time is its children's"),
    # ---- the endpoint (components.stack.endpoint_stack) and the lock-down (components.render.network_policy) ----
    "kubernetes:gateway.networking.k8s.io/v1:Gateway": Typical(
        30.0,
        "estimate: awaited until Programmed (pulumi.com/waitFor), i.e. until Envoy Gateway has "
        "started the proxy pods on the system nodes and given their ClusterIP Service an address",
    ),
    "kubernetes:core/v1:Service": Typical(
        180.0,
        "estimate: the NLB's Service (scopes vpc and internet), awaited until the LB controller "
        "writes the NLB's host name into its status; an NLB goes provisioning -> active in a "
        "few minutes",
    ),
    "kubernetes:gateway.networking.k8s.io/v1:GatewayClass": Typical(1.0, "estimate: one API call"),
    "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute": Typical(1.0, "estimate: one API call"),
    "kubernetes:gateway.envoyproxy.io/v1alpha1:EnvoyProxy": Typical(1.0, "estimate: one API call"),
    "kubernetes:gateway.envoyproxy.io/v1alpha1:SecurityPolicy": Typical(
        1.0, "estimate: one API call"),
    "kubernetes:gateway.envoyproxy.io/v1alpha1:ClientTrafficPolicy": Typical(
        1.0, "estimate: one API call"),
    "kubernetes:gateway.envoyproxy.io/v1alpha1:BackendTrafficPolicy": Typical(
        1.0, "estimate: one API call"),
    "kubernetes:networking.k8s.io/v1:NetworkPolicy": Typical(1.0, "estimate: one API call"),
    "kubernetes:core/v1:NamespacePatch": Typical(1.0, "estimate: one server-side apply call"),
    "random:index/randomString:RandomString": Typical(0.0, "local: no cloud call"),
    "raypd:endpoint:Endpoint": Typical(0.0, "component: its time is its children's"),
    "raypd:endpoint:LoadBalancerController": Typical(0.0, "component: its time is its children's"),
    "raypd:security:NetworkPolicies": Typical(0.0, "component: its time is its children's"),
    # ---- the metrics stack (components.stack.observability_stack, issue 18) ----
    "raypd:observability:Observability": Typical(0.0, "component: its time is its children's"),
    "kubernetes:monitoring.coreos.com/v1:PodMonitor": Typical(1.0, "estimate: one API call"),
    "kubernetes:monitoring.coreos.com/v1:PrometheusRule": Typical(
        1.0, "estimate: one API call (the operator's admission webhook validates it)"),
    "kubernetes:core/v1:ConfigMap": Typical(1.0, "estimate: one API call (a Grafana dashboard)"),
    "kubernetes:storage.k8s.io/v1:StorageClass": Typical(1.0, "estimate: one API call"),
    "pulumi:providers:kubernetes": Typical(1.0, "estimate: local, no cloud call"),
    "pulumi:providers:aws": Typical(1.0, "estimate: local, no cloud call"),
    "pulumi:providers:eks": Typical(1.0, "estimate: local, no cloud call"),
    # ---- components: nothing of their own ----
    "pulumi:pulumi:Stack": Typical(0.0, "component: its time is its children's"),
    "raypd:network:Network": Typical(0.0, "component: its time is its children's"),
    "raypd:cluster:Cluster": Typical(0.0, "component: its time is its children's"),
    "raypd:cluster:GpuNodeGroup": Typical(0.0, "component: its time is its children's"),
    "raypd:addons:Addons": Typical(0.0, "component: its time is its children's"),
    "raypd:serving:PdService": Typical(0.0, "component: its time is its children's"),
}

# The table as the functions below take it: key -> seconds.
TYPICAL_SECONDS: dict[str, float] = {key: entry.seconds for key, entry in TYPICAL.items()}

# How long the things a CHANGE does take (components.changes: downtime and the time extra nodes run).
# Same sources as above, plus:
#   [eks-upd]  EKS user guide, "Update existing cluster to new Kubernetes version": the control
#              plane update "takes several minutes"; managed node group updates replace nodes one
#              at a time after surge nodes join (Managed node group update behavior).
#   [eks-del]  EKS user guide, "Delete a managed node group": each node is drained before it is
#              terminated (forced after 5 minutes).
#   [eg-1.9]   envoyproxy/gateway v1.9.0 api/v1alpha1/shared_types.go `DefaultDeploymentReplicas = 1`;
#              envoyproxy_types.go `EnvoyPDB` is optional (raypd sets neither): one proxy pod, no
#              disruption budget.
#   [nlb-reg]  ELB user guide, "Register targets for your Network Load Balancer": "It can take a few
#              minutes for the registration process to complete and health checks to start."
CHANGE_TIMES: dict[str, Typical] = {
    "engine-restart": Typical(
        245.0,
        "an engine reloads its model on a node that already runs: weights ~145 s cold [guide] (the "
        "page cache can make a reload far faster) + vLLM engine init ~100 s [ray63859]",
    ),
    "ray-cluster-warm-nodes": Typical(
        280.0,
        "a new Ray cluster on nodes that already pulled the image: the RayService's 780 s minus "
        "its ~500 s image pull [soci]",
    ),
    "control-plane-upgrade": Typical(
        900.0, "estimate: [eks-upd] 'several minutes'; seen as 10-20 min in the field",
    ),
    "node-group-roll": Typical(
        900.0,
        "estimate: [eks-upd] surge nodes join (~600 s for GPU nodes, as above), then each old "
        "node is cordoned, drained and terminated",
    ),
    "gpu-node-join": Typical(
        180.0,
        "estimate: one more GPU node in a node group that exists (an autoscaling scale-up, issue 30): "
        "EC2 launch, the NVIDIA AL2023 AMI's boot and the kubelet's join, until the NVIDIA and EFA "
        "device plugins advertise the node's GPUs and EFA interfaces; [ray63859] measured node + "
        "image pull + join ~300 s together, and a CPU node group's ~3 min [tf-ng] includes its boot",
    ),
    "endpoint-proxy-move": Typical(
        60.0,
        "estimate: the endpoint's one Envoy proxy pod [eg-1.9] is evicted when its system node "
        "drains [eks-del] and starts on a new node: image pull, and its configuration from Envoy "
        "Gateway's controller, evicted from the same node at the same time",
    ),
    "nlb-target-registration": Typical(
        120.0,
        "estimate: the AWS Load Balancer Controller (drained from the same node too) registers the "
        "new proxy pod's IP and the NLB health-checks it: 'a few minutes' [nlb-reg]",
    ),
}
