"""The JSON API's bodies as pydantic models (Contract 4): the one list of their fields.

Requests are strict (no key the model does not name, no "true" for true); `parse` turns a refusal
into the API's `{"errors": [{"field", "message"}]}` entries with the messages people rely on.
Answers are built by the service through these models and dumped (`dump`), so a key cannot be
answered without being documented: webui/openapi.py derives the OpenAPI schemas from them.

Contract 1 config (`config`, `spec`) stays an object here: DeploymentSpec validates it (the API
must not hold a second copy of its rules), and its schema in the document is derived from
DeploymentSpec (`contract1_schema`).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema, model_validator

from components.checks import Report
from components.endpoint_names import KEY_NAME_PATTERN
from components.errors import FieldError
from components.spec import MAX_STACK_NAME, NAMESPACE, REGION_KEY, DeploymentSpec
from serve.benchmark.workload import MAX_PROMPT_WORDS, PRESETS

# The longest window a client may ask the event stream to wait for new events (GET .../events?window=).
MAX_WINDOW_SECONDS = 300

SCHEMA_REF = "#/components/schemas/{model}"
STACK_NAME_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled", "interrupted"]
Operation = Literal["preview", "up", "refresh", "destroy", "clear-pending", "preflight", "verify", "benchmark"]


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def absent(description: str = "", **kwargs: Any) -> Any:
    """A key that is left out of the answer when it does not apply (never sent as null).

    The model holds None for it and `dump` drops what was never set; the schema says the key is
    optional, with its real type and no null.
    """
    return Field(None, description=description or None, json_schema_extra=_no_default, **kwargs)


# ---- Contract 1 config: an object here, validated by DeploymentSpec, documented from it ----

# In a model's own schema a Contract 1 object is marked; the document swaps the mark for a $ref to
# the schema `contract1_schema` derives (pydantic cannot hold a $ref to a schema it did not make).
CONFIG_MARK = "x-raypd-config"
Contract1 = Annotated[dict[str, Any], WithJsonSchema({"type": "object", CONFIG_MARK: "DeploymentConfig"})]
Contract1Patch = Annotated[dict[str, Any], WithJsonSchema({"type": "object", CONFIG_MARK: "DeploymentConfigPatch"})]


def contract1_schema() -> dict[str, dict[str, Any]]:
    """`DeploymentConfig` (Contract 1 keys), `DeploymentConfigPatch` (each key may be null) and the
    nested objects, derived from DeploymentSpec: its field rules are the only ones written down."""
    spec = DeploymentSpec.model_json_schema(ref_template=SCHEMA_REF)
    definitions = spec.pop("$defs", {})
    fields = spec["properties"]
    properties = {REGION_KEY: fields["region"]}
    properties.update({f"{NAMESPACE}:{alias}": schema for alias, schema in fields.items()
                       if alias not in ("stack", "region")})
    token = f"{NAMESPACE}:hfToken"
    properties[token] = {"type": "string", "description": (
        "the Hugging Face token: kept as a stack secret, answered as \"[secret]\"; in a PATCH, "
        "\"[secret]\" keeps the token the stack has")}
    config = {
        "type": "object", "additionalProperties": False, "properties": properties,
        "description": "Contract 1 keys: aws:region and raypd:*; every value has its JSON type "
                       "(\"2\" is not a number). Validated by DeploymentSpec; a mistake is a 400 naming the key.",
    }
    patch = {
        "type": "object", "additionalProperties": False,
        "properties": {key: {"anyOf": [schema, {"type": "null"}]} for key, schema in properties.items()},
        "description": "Contract 1 keys merged over the config; null resets a key to its default "
                       "(raypd:hfToken: null removes the token)",
    }
    return {**definitions, "DeploymentConfig": config, "DeploymentConfigPatch": patch}


# ---- requests ----

class ApiRequest(BaseModel):
    """A request body: strict JSON types, no unknown keys. `messages` words a field's type error."""

    model_config = ConfigDict(extra="forbid", strict=True)
    messages: ClassVar[dict[str, str]] = {}


class NoOptions(ApiRequest):
    """Operations that take no options: an empty body, `{}`, or none at all."""


class CreateDeployment(ApiRequest):
    messages: ClassVar[dict[str, str]] = {
        "name": "must be a string", "config": "must be an object of Contract 1 keys"}

    # The stack-name rule lives in components.spec (its message names the rule); shown here only.
    name: str = Field(description="the stack name", json_schema_extra={
        "pattern": STACK_NAME_PATTERN, "maxLength": MAX_STACK_NAME})
    config: Contract1 = Field(default_factory=dict)


class ChangeDeployment(ApiRequest):
    messages: ClassVar[dict[str, str]] = {"config": "must be an object of Contract 1 keys (null resets one)"}

    config: Contract1Patch


class UpOptions(ApiRequest):
    messages: ClassVar[dict[str, str]] = {"force": "must be true or false"}

    force: bool = Field(False, description="launch even when a preflight check fails (the job says so)")


class CreateApiKey(ApiRequest):
    messages: ClassVar[dict[str, str]] = {"name": "must be a string (the key's name)"}

    # The name rule lives in components.endpoint_names (KEY_NAME_PATTERN); serve.api_keys applies
    # it and its message says the rule; shown here only.
    name: str = Field(description="the key's name", json_schema_extra={
        "pattern": KEY_NAME_PATTERN.pattern, "maxLength": 32})


class ClearPending(ApiRequest):
    messages: ClassVar[dict[str, str]] = {"confirm": "must be the deployment's name"}

    confirm: str = Field(description="the deployment's name, typed")


BENCHMARK_PRESETS = tuple(sorted(PRESETS))
MAX_BENCHMARK_RATES = 8
MAX_BENCHMARK_REQUESTS = 5000
MAX_BENCHMARK_SECONDS = 4 * 3600  # the sending time the rates and request counts add up to
# Every output token is an inter-token gap in the records, which come back through the pod's log:
# 4 to 4.5 bytes each gzipped and in base64, and the kubelet rotates a container's log at 10 MiB by
# default; this leaves room for the progress lines (a few hundred KB over 4 hours).
MAX_BENCHMARK_OUTPUT_TOKENS = 1_500_000


class BenchmarkRequest(ApiRequest):
    """A benchmark of a running deployment, in the cluster (serve.benchmark; docs/benchmark.md)."""

    messages: ClassVar[dict[str, str]] = {
        "preset": f"must be one of {', '.join(BENCHMARK_PRESETS)}", "api": "must be chat or completions",
        "rates": f"must be 1 to {MAX_BENCHMARK_RATES} request rates (numbers > 0 and at most 500 per s)",
        "requests": f"must be an integer from 1 to {MAX_BENCHMARK_REQUESTS}",
        "inputTokens": "must be an integer from 1 to 131072", "outputTokens": "must be an integer from 1 to 32768",
        "sloTtftMs": "must be a number of milliseconds > 0", "sloTpotMs": "must be a number of milliseconds > 0",
        "timeoutS": "must be a number of seconds from 1 to 600", "ignoreEos": "must be true or false",
    }

    preset: Literal["chat", "rag", "agentic"] = Field("chat", description=(
        "chat 1024 in / 256 out; rag 8192 in / 256 out; agentic 4096 in (3584 shared prefix) / 128 out"))
    api: Literal["chat", "completions"] = Field("chat", description="/v1/chat/completions or /v1/completions")
    rates: list[Annotated[float, Field(gt=0, le=500, allow_inf_nan=False)]] = Field(
        min_length=1, max_length=MAX_BENCHMARK_RATES,
        description="Poisson request rates (req/s); several make a sweep, which gives the goodput")
    requests: int = Field(100, ge=1, le=MAX_BENCHMARK_REQUESTS, description="requests per rate")
    inputTokens: Optional[int] = absent("prompt length in words (about tokens); default: the preset's",
                                        ge=1, le=131072)
    outputTokens: Optional[int] = absent("max_tokens; default: the preset's", ge=1, le=32768)
    sloTtftMs: Optional[float] = absent("TTFT SLO (with sloTpotMs): SLO attainment and goodput", gt=0, le=600_000)
    sloTpotMs: Optional[float] = absent("TPOT SLO (with sloTtftMs)", gt=0, le=60_000)
    timeoutS: float = Field(60.0, ge=1, le=600, description="per request, from send to the last token")
    ignoreEos: bool = Field(False, description="vLLM's ignore_eos: every answer is exactly outputTokens long")

    @model_validator(mode="after")
    def _consistent(self) -> "BenchmarkRequest":
        if (self.sloTtftMs is None) != (self.sloTpotMs is None):
            missing = "sloTpotMs" if self.sloTpotMs is None else "sloTtftMs"
            raise ValueError(f"{missing}: the two SLOs go together (sloTtftMs and sloTpotMs): give both or neither")
        if len(set(self.rates)) != len(self.rates):
            raise ValueError("rates: a rate is repeated")
        if self.inputTokens is not None and self.requests * self.inputTokens > MAX_PROMPT_WORDS:
            raise ValueError(f"inputTokens: {self.requests} requests x {self.inputTokens} input tokens is more than "
                             f"the {MAX_PROMPT_WORDS:,} prompt words the load generator builds up front")
        output_tokens = self.requests * len(self.rates) * (self.outputTokens or PRESETS[self.preset]["output_tokens"])
        if output_tokens > MAX_BENCHMARK_OUTPUT_TOKENS:
            raise ValueError(f"requests: {self.requests} requests x {len(self.rates)} rates x "
                             f"{output_tokens // (self.requests * len(self.rates))} output tokens is more than "
                             f"{MAX_BENCHMARK_OUTPUT_TOKENS:,} output tokens, which the results could not bring back "
                             "through the pod's log; run fewer requests or several benchmarks")
        seconds = sum(self.requests / rate for rate in self.rates)
        if seconds > MAX_BENCHMARK_SECONDS:
            raise ValueError(f"requests: {self.requests} requests per rate at these rates would send for "
                             f"{seconds / 3600:.1f} h; the most is {MAX_BENCHMARK_SECONDS // 3600} h")
        return self


RequestT = TypeVar("RequestT", bound=ApiRequest)
_ORDER = {"extra_forbidden": 0, "missing": 1}


def parse(model: type[RequestT], body: dict[str, Any]) -> RequestT:
    """Validate a decoded JSON object; raise `BodyRefused` with one entry per field.

    Unknown keys come first (naming the key and what is allowed), then missing ones, then type
    errors in the model's own words.
    """
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        allowed = ", ".join(sorted(model.model_fields)) or "none"
        problems = []
        for error in sorted(exc.errors(), key=lambda e: _ORDER.get(e["type"], 2)):
            field = ".".join(str(part) for part in error["loc"]) or "body"
            if error["type"] == "extra_forbidden":
                problems.append(FieldError(field, f"unknown key; allowed: {allowed}"))
            elif error["type"] == "missing":
                problems.append(FieldError(field, "is required"))
            elif not error["loc"] and error["type"] == "value_error":
                # A rule across fields (a model validator) names its field first: "field: why".
                text = str(error["ctx"]["error"]) if "ctx" in error else error["msg"]
                named, _, why = text.partition(": ")
                problems.append(FieldError(named, why) if named in model.model_fields else FieldError(field, text))
            else:
                top = str(error["loc"][0]) if error["loc"] else field
                problems.append(FieldError(field, model.messages.get(field) or model.messages.get(top, error["msg"])))
        raise BodyRefused(problems) from None


class BodyRefused(Exception):
    """A request body the API refuses: 400 with these field errors."""

    def __init__(self, errors: list[FieldError]):
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in errors))
        self.errors = errors


# ---- answers ----

class ApiAnswer(BaseModel):
    """An answer the API builds itself: every key it sends is declared (the document says so)."""

    model_config = ConfigDict(extra="forbid")


class Passthrough(BaseModel):
    """An answer section read from elsewhere (the cluster, a stored summary): its known
    keys are declared, others pass through rather than fail the request."""

    model_config = ConfigDict(extra="allow")


def dump(model: BaseModel) -> dict[str, Any]:
    """The JSON object of an answer: what was set, nothing invented (absent keys stay absent)."""
    return model.model_dump(mode="json", exclude_unset=True)


class ErrorEntry(ApiAnswer):
    field: str = Field(description=(
        "the key, header or part of the request at fault (Contract 1 keys as raypd:prefill.replicas)"))
    message: str


class Errors(ApiAnswer):
    """Every refusal: one entry per field."""

    errors: list[ErrorEntry]


class BusyErrors(Errors):
    """A 409: the running job's id, when another operation holds the deployment."""

    job: str = absent("the running job's id (absent when the conflict is not a running job)")


class JobAccepted(ApiAnswer):
    job: str = Field(description="the job's id; follow it at /jobs/{id}")
    notice: str = absent("offline engine: nothing is created in AWS")


class CheckReport(Report):
    """A Contract 5 report. `ok` is derived: a stored or sent `ok` is dropped and recomputed."""

    @model_validator(mode="before")
    @classmethod
    def _recompute_ok(cls, value: Any) -> Any:
        if isinstance(value, Report):
            value = value.as_dict()
        if isinstance(value, dict):
            value = {key: item for key, item in value.items() if key != "ok"}
        return value


class LastReport(CheckReport):
    """The last report of one kind, with the job that made it and when."""

    job: Optional[str] = Field(description="the job that made it")
    at: Optional[str] = Field(description="when (UTC, ISO 8601)")


class Progress(ApiAnswer):
    done: int
    total: int


class JobView(ApiAnswer):
    """A job as Contract 4 shows it, plus when, who and a hint where there is one."""

    id: str
    deployment: str
    operation: Operation
    engine: str = Field(description="pulumi or offline")
    status: JobStatus
    progress: Progress
    error: Optional[str]
    createdAt: Optional[str]
    startedAt: Optional[str]
    finishedAt: Optional[str]
    actor: Optional[str] = Field(description="who asked: api-token@<address> or browser@<address>")
    hint: str = absent("what to do next (an interrupted job)")
    summary: dict[str, Any] = absent("what the operation found: changes, pendingOperations, ...")
    reports: dict[str, CheckReport] = absent("every Contract 5 report the job made, by kind")
    result: CheckReport = absent("preflight and verify jobs: their report")
    notice: str = absent("offline engine: nothing is created in AWS")


class EngineInfo(ApiAnswer):
    default: str
    available: list[str]
    banner: Optional[str]
    reason: Optional[str]


SettingsKind = Literal["deployed", "planned", "pending"]


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
    externalCurl: str = absent("a chat completion against externalUrl; the key is read from $RAYPD_API_KEY")
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
    dashboards: dict[str, Any] = absent(
        "Grafana of the deployment: {portForward: the command that reaches it, links: [{title, url}]}")


class BenchmarkRun(ApiAnswer):
    """One finished benchmark of a deployment: what was asked and the Contract 6 summary."""

    id: str = Field(description="the run's id (the job that made it)")
    deployment: str
    label: str = Field(description="how tables and plots name it: deployment, mode and the run's short id")
    createdAt: Optional[str]
    actor: Optional[str]
    settings: dict[str, Any] = Field(description=(
        "the BenchmarkRequest, plus the deployment's mode, usdPerHour and region (the stack's: what "
        "usdPerHour is estimated for, so its price basis can be named)"))
    summary: dict[str, Any] = Field(description="Contract 6 summary.json")
    requestsUrl: str = Field(description="Contract 6 requests.jsonl of this run")


class BenchmarkRuns(ApiAnswer):
    runs: list[BenchmarkRun] = Field(description="newest first")


class ApiKeyItem(ApiAnswer):
    name: str
    created: Optional[str] = Field(description="RFC 3339 UTC; null when the Secret does not record it")


class ApiKeyList(ApiAnswer):
    """A deployment's API keys, by name: never their values."""

    keys: list[ApiKeyItem]


class CreatedApiKey(ApiAnswer):
    """The one answer that holds a key's value: keep it now, it is not shown again."""

    name: str
    created: str = Field(description="RFC 3339 UTC")
    key: str = Field(description="the API key; send it as `Authorization: Bearer <key>`")


# The answers' and requests' models, for the document (webui/openapi.py).
ANSWERS: tuple[type[BaseModel], ...] = (
    Errors, BusyErrors, JobAccepted, JobView, DeploymentList, DeploymentView, PendingView,
    ChecksView, LiveStatus, CheckReport, BenchmarkRun, BenchmarkRuns, ApiKeyList, CreatedApiKey,
)
REQUESTS: tuple[type[ApiRequest], ...] = (
    CreateDeployment, ChangeDeployment, UpOptions, ClearPending, NoOptions, BenchmarkRequest, CreateApiKey)
