"""The JSON API's bodies as pydantic models (Contract 4): the one list of their fields, in
common.py (shared pieces), requests.py, answers.py and deployment_answers.py.

Requests are strict (no key the model does not name, no "true" for true); `parse` turns a refusal
into the API's `{"errors": [{"field", "message"}]}` entries with the messages people rely on.
Answers are built by the service through these models and dumped (`dump`), so a key cannot be
answered without being documented: webui/openapi.py derives the OpenAPI schemas from them.

Contract 1 config (`config`, `spec`) stays an object here: DeploymentSpec validates it (the API
must not hold a second copy of its rules), and its schema in the document is derived from
DeploymentSpec (`contract1_schema`).
"""

from __future__ import annotations

from pydantic import BaseModel

from webui.api_models.answers import (
    ApiAnswer,
    ApiKeyItem,
    ApiKeyList,
    BenchmarkRun,
    BenchmarkRuns,
    BusyErrors,
    CheckReport,
    CreatedApiKey,
    EngineInfo,
    ErrorEntry,
    Errors,
    JobAccepted,
    JobView,
    LastReport,
    Passthrough,
    Progress,
    SettingsKind,
    dump,
)
from webui.api_models.common import (
    CONFIG_MARK,
    MAX_WINDOW_SECONDS,
    SCHEMA_REF,
    STACK_NAME_PATTERN,
    Contract1,
    Contract1Patch,
    JobStatus,
    Operation,
    absent,
    contract1_schema,
)
from webui.api_models.conformance import ConformanceRequest, ConformanceRun
from webui.api_models.deployment_answers import (
    ChecksView,
    ConfigChange,
    Connect,
    CostChange,
    DeployedSettings,
    DeploymentList,
    DeploymentRow,
    DeploymentSummary,
    DeploymentView,
    LiveStatus,
    PendingChanges,
    PendingOperation,
    PendingSettings,
    PendingView,
    SectionError,
)
from webui.api_models.requests import (
    BENCHMARK_PRESETS,
    MAX_BENCHMARK_OUTPUT_TOKENS,
    MAX_BENCHMARK_RATES,
    MAX_BENCHMARK_REQUESTS,
    MAX_BENCHMARK_SECONDS,
    ApiRequest,
    BenchmarkRequest,
    BodyRefused,
    ChangeDeployment,
    ClearPending,
    CreateApiKey,
    CreateDeployment,
    NoOptions,
    RequestT,
    UpOptions,
    parse,
)
from webui.api_models.resilience import ResilienceRequest, ResilienceRun, ResilienceRuns

# The answers' and requests' models, for the document (webui/openapi.py).
ANSWERS: tuple[type[BaseModel], ...] = (
    Errors, BusyErrors, JobAccepted, JobView, DeploymentList, DeploymentView, PendingView,
    ChecksView, LiveStatus, CheckReport, BenchmarkRun, BenchmarkRuns, ApiKeyList, CreatedApiKey,
    ResilienceRun, ResilienceRuns, ConformanceRun,
)
REQUESTS: tuple[type[ApiRequest], ...] = (
    CreateDeployment, ChangeDeployment, UpOptions, ClearPending, NoOptions, BenchmarkRequest, CreateApiKey,
    ResilienceRequest, ConformanceRequest)

__all__ = [
    "ANSWERS", "ApiAnswer", "ApiKeyItem", "ApiKeyList", "ApiRequest", "BENCHMARK_PRESETS", "BenchmarkRequest",
    "BenchmarkRun", "BenchmarkRuns", "BodyRefused", "BusyErrors", "CONFIG_MARK", "ChangeDeployment",
    "CheckReport", "ChecksView", "ClearPending", "ConfigChange", "Connect", "Contract1", "Contract1Patch",
    "CostChange", "CreateApiKey", "CreateDeployment", "CreatedApiKey", "DeployedSettings", "DeploymentList",
    "DeploymentRow", "DeploymentSummary", "DeploymentView", "EngineInfo", "ErrorEntry", "Errors",
    "JobAccepted", "JobStatus", "JobView", "LastReport", "LiveStatus", "MAX_BENCHMARK_OUTPUT_TOKENS",
    "MAX_BENCHMARK_RATES", "MAX_BENCHMARK_REQUESTS", "MAX_BENCHMARK_SECONDS", "MAX_WINDOW_SECONDS",
    "NoOptions", "Operation", "Passthrough", "PendingChanges", "PendingOperation", "PendingSettings",
    "PendingView", "Progress", "REQUESTS", "RequestT", "SCHEMA_REF", "STACK_NAME_PATTERN", "SectionError",
    "SettingsKind", "UpOptions", "absent", "contract1_schema", "dump", "parse",
    "ResilienceRequest", "ResilienceRun", "ResilienceRuns", "ConformanceRequest", "ConformanceRun",
]
