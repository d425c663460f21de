"""The API's answers: built by the service through these models and dumped (`dump`), so a key
cannot be answered without being documented (webui/openapi.py derives the schemas from them).
Here: the answer bases, errors, jobs, check reports, benchmark runs and API keys; a deployment's
own views are in deployment_answers.py."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from components.config.checks import Report
from webui.api_models.common import JobStatus, Operation, absent

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
    stale: bool = Field(False, description=(
        "made for other settings than the deployment has now (a preflight: the stack's settings were "
        "changed or discarded since; a verify: something else was deployed since): it no longer applies"))
    staleReason: str = absent("why the report is stale, and what to run again")


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
