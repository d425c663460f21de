"""The answers about deployments: the list's rows, one deployment's view (settings deployed and
pending, connect, checks), pending operations and the live status read from the cluster."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from webui.api_models.answers import ApiAnswer, EngineInfo, JobView, LastReport, Passthrough, SettingsKind
from webui.api_models.common import Contract1, absent


class DeploymentRow(ApiAnswer):
    """One deployment in the list: from the stored summaries, no spec validated, no engine called.

    modelId, mode, topology, region, gpus and estimatedUsdPerHour describe what runs: the settings
    of the last successful up (`settings` says which: deployed, or planned by the offline engine);
    only a deployment never deployed shows the stack's own settings (`settings`: pending). Changes
    saved since the last up do not show here until deployed: `hasPendingChanges` marks them.
    """

    name: str
    engine: str
    notice: str = absent("offline engine: nothing is created in AWS")
    status: str
    settings: SettingsKind = Field(description=(
        "whose settings the row shows: deployed (the last successful up), planned (the last offline "
        "up: a plan, nothing runs) or pending (never deployed: the stack's settings, nothing runs)"))
    hasPendingChanges: bool = Field(description=(
        "the stack's settings differ from the deployed (or planned) ones: a Deploy would change "
        "them, Discard would put them back; false when never deployed"))
    deployedAt: Optional[str] = Field(description="when the last successful up ended (null: never)")
    modelId: Optional[str]
    mode: Optional[str]
    topology: Optional[str]
    region: Optional[str]
    gpus: Optional[int]
    estimatedUsdPerHour: Optional[float]
    lastOperation: Optional[str]
    lastResult: Optional[str]
    lastOperationAt: Optional[str]
    lastJob: Optional[str]
    createdAt: Optional[str]


class DeploymentList(ApiAnswer):
    deployments: list[DeploymentRow]
    engine: EngineInfo


class DeploymentSummary(Passthrough):
    """What raypd computed from the spec when it was stored (webui/summary.py); a summary stored by
    an older raypd may lack keys."""

    modelId: str = absent()
    modelSource: str = absent()
    mode: str = absent()
    region: str = absent()
    clusterName: str = absent()
    topology: str = absent()
    phases: dict[str, dict[str, Any]] = absent("by phase: instanceType, replicas, parallelism, nodes, gpus")
    nodeGroups: list[dict[str, Any]] = absent()
    systemNodes: dict[str, Any] = absent()
    gpus: int = absent()
    gpuNodes: int = absent()
    usdPerHour: Optional[float] = absent()
    priceBasis: str = absent("where usdPerHour comes from: the us-east-1 on-demand list price, and for "
                             "other regions that it is not theirs")
    unpriced: list[str] = absent()
    warnings: list[str] = absent()
    kvTransfer: Optional[dict[str, str]] = absent("connector and backend; null in colocated mode")
    namespace: str = absent()
    serviceName: str = absent()
    hasHfToken: bool = absent()


class Connect(ApiAnswer):
    """How to reach the endpoint (commands to paste)."""

    portForward: str
    curl: str
    kubeconfig: str
    openaiBaseUrl: str
    externalUrl: str = absent("outputs endpoint.url, the OpenAI base URL ending /v1 (absent before it is deployed, "
                              "or for a stack from before issue 17)")
    externalCurl: str = absent("a chat completion against externalUrl; the key is read from $RAYPD_API_KEY "
                               "(absent when externalUrl is a placeholder)")
    externalUrlPlaceholder: str = absent("why externalUrl is no real address (an offline plan made it up); "
                                         "nothing to run against it, so no externalCurl")
    endpointScope: str = absent("outputs endpoint.scope: cluster, vpc or internet")
    endpointAuth: str = absent("outputs endpoint.auth: apiKey or none")


class ConfigChange(ApiAnswer):
    key: str
    old: Any = Field(description="the deployed value (null: not set)")
    new: Any = Field(description="the value now (null: not set)")
    note: str = absent("the HF token: what changed about it and what Discard can do")


class CostChange(ApiAnswer):
    old: Optional[float]
    new: Optional[float]
    delta: Optional[float]


class PendingChanges(ApiAnswer):
    """Settings changed since the last successful up, and the cost before and after."""

    config: list[ConfigChange]
    usdPerHour: CostChange


class DeployedSettings(ApiAnswer):
    """What the last successful up left: real resources (kind deployment), or, offline, the plan it
    made (kind plan, label "planned (offline)": nothing runs)."""

    kind: Literal["deployment", "plan"]
    label: str = Field(description='"deployed" or "planned (offline)"')
    at: Optional[str] = Field(description="when that up ended (UTC, ISO 8601)")
    job: Optional[str] = Field(description="the up job (null in records an older raypd wrote)")
    spec: Contract1 = Field(description="the deployed settings (Contract 1; token as [secret])")
    summary: DeploymentSummary
    estimatedUsdPerHour: Optional[float]


class PendingSettings(ApiAnswer):
    """Settings saved to the stack that no up has deployed yet."""

    spec: Contract1 = Field(description="the settings the next Deploy applies (the same as the top-level spec)")
    summary: DeploymentSummary
    estimatedUsdPerHour: Optional[float]
    changes: list[ConfigChange] = Field(description=(
        "per setting, deployed -> pending; empty when nothing was deployed (every setting is pending)"))
    usdPerHour: CostChange = Field(description="the cost before (deployed; null: nothing is) and after a Deploy")
    hfTokenReplaced: bool = Field(description=(
        "a new HF token was written to the stack since the deploy; Discard cannot bring the old one back"))


class DeploymentView(ApiAnswer):
    """One deployment: what is deployed and what is pending, status, engine, outputs (secrets
    masked), resources, last jobs.

    `spec`, `summary`, `warnings` and `estimatedUsdPerHour` are the stack's settings: what the next
    Deploy applies. What runs is `deployed`; what no up has deployed yet is `pending`.
    """

    name: str
    engine: str
    notice: str = absent("offline engine: nothing is created in AWS")
    status: str
    spec: Contract1 = Field(description="the stack's settings: the deployed ones plus any pending change")
    summary: DeploymentSummary
    warnings: list[str]
    estimatedUsdPerHour: Optional[float] = Field(description="of `spec`; what runs costs deployed.estimatedUsdPerHour")
    deployed: Optional[DeployedSettings] = Field(description=(
        "what the last successful up deployed (offline: planned); null when it never ran"))
    pending: Optional[PendingSettings] = Field(description=(
        "settings saved since the last successful up (all of them when it never ran); null when nothing is pending"))
    outputs: Optional[dict[str, Any]] = Field(description="Contract 3 outputs; secrets as [secret]")
    placeholders: dict[str, str] = absent(
        "offline plans: the outputs the plan made up or assumed (a load balancer's name, an image digest, "
        "the zone), by dotted path into outputs, with why; none is a real value, none is to be used")
    resources: Optional[list[dict[str, Any]]]
    connect: Optional[Connect] = Field(description=(
        "how to reach what runs (the deployed settings; the stack's when never deployed); null when "
        "those settings no longer validate"))
    pendingChanges: Optional[PendingChanges] = Field(description=(
        "the older spelling of pending.changes and pending.usdPerHour: null when nothing was deployed "
        "or nothing is pending"))
    lastOperation: Optional[str]
    lastResult: Optional[str]
    lastOperationAt: Optional[str]
    createdAt: Optional[str]
    jobs: list[JobView] = Field(description="the last jobs, newest first")


class PendingOperation(ApiAnswer):
    """One pending operation: the engine keeps these five fields of the state and nothing else."""

    urn: str
    type: str
    name: str
    operation: str = Field(description="creating, updating, deleting, reading or unknown")
    check: str = Field(description="where to look in the AWS console before clearing it")


class PendingView(ApiAnswer):
    operations: list[PendingOperation]
    reason: str = absent("why nothing can be pending (offline engine)")


class ChecksView(ApiAnswer):
    """The last report of each kind; null where that kind never ran."""

    preflight: Optional[LastReport]
    verify: Optional[LastReport]


class SectionError(ApiAnswer):
    error: str


class LiveStatus(Passthrough):
    """What runs now, read from the cluster (serve/live_status.py), or why there is nothing to read.

    A section that could not be read is `{"error": ...}`; a whole snapshot that failed is `error`.
    """

    available: bool
    reason: str = absent("why there is no live status")
    checkedAt: str = absent()
    error: str = absent("the whole snapshot failed")
    namespace: str = absent()
    rayService: Any = absent("the RayService")
    nodes: list[dict[str, Any]] | SectionError = absent("GPU nodes: name, ready, zone, instanceType, gpus, efa")
    rayPods: list[dict[str, Any]] | SectionError = absent("Ray worker pods: name, group, phase, node, status")
    ready: dict[str, Any] = absent("the RayService's Ready condition (or error)")
    serveApplication: dict[str, Any] = absent("the Serve application and its deployments (or error)")
    metrics: dict[str, Any] = absent(
        "from the deployment's Prometheus: {available, reason?, strip: [{key, label, unit, value, slo, "
        "breached}], alerts: [{name, state, severity, summary, runbook, activeAt}]}")
    scaling: dict[str, Any] = absent(
        "per phase (serve/live_scaling.py): {phases: [{phase, deployment, autoscaled, running, starting, "
        "target, min, max, initial, boundsSource, targetOngoingRequests, signal: {words, value, perReplica}, "
        "status: {status, trigger, message}, decisions: [{time, from, to, direction, reason}]}], "
        "serveSource, decisionsSource, signals: {available, reason?}} (or error)")
    dashboards: dict[str, Any] = absent(
        "Grafana of the deployment: {portForward: the command that reaches it, links: [{title, url}]}")
