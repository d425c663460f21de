"""What verify and the live status read from a deployed stack, each piece fetched once.

`VerifyPlan` is what the stack outputs (Contract 3) say should run; `Evidence` asks the Kubernetes
API (objects, logs, the service and pod proxies) for what does run, caching every answer (errors
too) so ten checks cost one call per object, and an unreachable cluster costs one timeout, not ten.

Where each part is: plan.py (`VerifyPlan` and the inputs it is read from: the outputs JSON and
the kubeconfig, `VerifyInputError` for what cannot be used), cluster.py (`Evidence`, and the
formats of the Kubernetes and Ray answers it reads), objects.py (small readers of Kubernetes
objects and the labels they are found by). Everything other code uses is importable from
`serve.evidence` itself.
"""

from serve.evidence.cluster import LOG_LINES, STATE_API_LIMIT, WORKER_ACTOR_CLASS, Evidence
from serve.evidence.objects import (
    EKS_NODEGROUP_LABEL,
    INSTANCE_TYPE_LABEL,
    RAY_CLUSTER_LABEL,
    RAY_CR_NAME_LABEL,
    RAY_GROUP_LABEL,
    RAY_NODE_TYPE_LABEL,
    ZONE_LABEL,
    allocatable,
    condition_of,
    labels_of,
    name_list,
    name_of,
    node_ready,
    quantity,
    shorten,
)
from serve.evidence.plan import (
    INGRESS_DEPLOYMENT,
    MAX_OUTPUTS_BYTES,
    GroupPlan,
    PhasePlan,
    VerifyInputError,
    VerifyPlan,
    check_outputs,
    parse_outputs_text,
    read_outputs,
    resolve_kubeconfig,
)

__all__ = [
    "EKS_NODEGROUP_LABEL", "INGRESS_DEPLOYMENT", "INSTANCE_TYPE_LABEL", "LOG_LINES", "MAX_OUTPUTS_BYTES",
    "RAY_CLUSTER_LABEL", "RAY_CR_NAME_LABEL", "RAY_GROUP_LABEL", "RAY_NODE_TYPE_LABEL", "STATE_API_LIMIT",
    "WORKER_ACTOR_CLASS", "ZONE_LABEL", "Evidence", "GroupPlan", "PhasePlan", "VerifyInputError",
    "VerifyPlan", "allocatable", "check_outputs", "condition_of", "labels_of", "name_list", "name_of",
    "node_ready", "parse_outputs_text", "quantity", "read_outputs", "resolve_kubeconfig", "shorten",
]
