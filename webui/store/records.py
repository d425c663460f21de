"""The rows the store hands back, typed: what `Store.get_deployment`, `list_deployments`, `get_job`,
`jobs_for` and `deployed` return. Plain dicts at run time (the JSON columns already decoded), so
webui/deployments/views.py shapes them and mypy knows their keys."""

from __future__ import annotations

from typing import Any, Optional, TypedDict


class DeploymentBase(TypedDict):
    name: str
    engine: str  # "offline" | "pulumi": the engine it was created with
    status: str  # webui.status's words (Standing, RUNNING_STATUS, "up failed", ...)
    summary: dict[str, Any]  # webui.summary.summarize of its settings
    createdAt: float
    updatedAt: float
    lastOperation: Optional[str]
    lastOperationAt: Optional[float]
    lastResult: Optional[str]
    lastJob: Optional[str]


class DeploymentRecord(DeploymentBase):
    """One deployment, whole (`Store.get_deployment`)."""

    config: dict[str, Any]  # Contract 1, the token as a placeholder
    outputs: Optional[dict[str, Any]]
    resources: Optional[list[dict[str, Any]]]


class ListedDeployed(TypedDict):
    time: float
    tokenReplaced: bool
    configDiffers: bool


class ListedDeployment(DeploymentBase):
    """A row of `Store.list_deployments`: `summary` is the deployed settings' once an up recorded them."""

    deployed: Optional[ListedDeployed]


class DeployedRecord(TypedDict):
    """The last successful up (`Store.deployed`); `summary` and `plan` None in rows before version 4."""

    config: dict[str, Any]
    summary: Optional[dict[str, Any]]
    plan: Optional[dict[str, Any]]
    job: Optional[str]
    time: float
    tokenReplaced: bool


class JobProgress(TypedDict):
    done: Optional[int]
    total: Optional[int]


class JobRecord(TypedDict):
    """One job (`Store.get_job`, `Store.jobs_for`)."""

    id: str
    deployment: str
    operation: str
    engine: str
    status: str  # webui.status.JobStatus's words
    previousStatus: Optional[str]
    progress: JobProgress
    error: Optional[str]
    hint: Optional[str]
    actor: Optional[str]
    summary: Optional[dict[str, Any]]
    createdAt: float
    startedAt: Optional[float]
    finishedAt: Optional[float]
