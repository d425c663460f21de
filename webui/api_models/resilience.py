"""The Resilience tab's request and answers (issue 31 §2): a fault injected into a live deployment
under a steady load, behind a typed confirmation, and the Contract 8 reports it kept.

The faults, limits and defaults are serve.resilience's (serve/resilience/limits.py), so the API
accepts exactly the runs the CLI does; the confirmation is checked against the deployment's name
by the service (webui/resilience_runs.py), which knows the name the body is for."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Optional, get_args

from pydantic import Field, model_validator

from serve.resilience.limits import (
    DEFAULT_DURATION_S,
    DEFAULT_FAULT_AT_S,
    DEFAULT_RATE,
    FAULTS,
    MAX_DURATION_S,
    MAX_RATE,
    fault_timing_problem,
)
from webui.api_models.answers import ApiAnswer
from webui.api_models.requests import ApiRequest

FaultName = Literal["prefill-pod", "decode-pod", "head-pod", "node"]
if get_args(FaultName) != FAULTS:  # spelled out for the schema; the one list is serve.resilience's
    raise RuntimeError(f"FaultName must list serve.resilience's FAULTS {FAULTS}")


class ResilienceRequest(ApiRequest):
    """A resilience check of a running deployment (serve.resilience; docs/resilience-check.md)."""

    messages: ClassVar[dict[str, str]] = {
        "fault": f"must be one of {', '.join(FAULTS)}",
        "rate": f"must be a number of requests per second above 0 and at most {MAX_RATE:g}",
        "durationSeconds": f"must be a number of seconds above 0 and at most {MAX_DURATION_S:g}",
        "confirm": "must be the deployment's name, typed: the run deletes a pod (or drains a node) of it",
    }

    fault: FaultName = Field(description=(
        "prefill-pod / decode-pod: delete the pod of a RUNNING replica of that phase; head-pod: delete the "
        "Ray head's pod; node: cordon and drain the GPU node hosting a decode replica (uncordoned after)"))
    rate: float = Field(DEFAULT_RATE, gt=0, le=MAX_RATE, allow_inf_nan=False,
                        description="the steady load's Poisson rate, requests/s")
    durationSeconds: float = Field(DEFAULT_DURATION_S, gt=0, le=MAX_DURATION_S, allow_inf_nan=False, description=(
        f"the most seconds of load (it stops once recovered); the fault comes {DEFAULT_FAULT_AT_S:g} s in"))
    confirm: str = Field(description="the deployment's name, typed: this run disrupts the LIVE deployment")

    @model_validator(mode="after")
    def _fault_during_the_load(self) -> "ResilienceRequest":
        problem = fault_timing_problem(DEFAULT_FAULT_AT_S, self.durationSeconds)
        if problem is not None:
            raise ValueError(f"durationSeconds: {problem}")
        return self


class ResilienceRun(ApiAnswer):
    """One finished resilience check of a deployment: what was asked and its Contract 8 report."""

    id: str = Field(description="the run's id (the job that made it)")
    deployment: str
    createdAt: Optional[str]
    actor: Optional[str]
    settings: dict[str, Any] = Field(description="fault, rate, durationSeconds and faultAtSeconds as run")
    report: dict[str, Any] = Field(description="Contract 8 resilience report")
    plotUrl: str = Field(description="the report's timeline plot (PNG)")


class ResilienceRuns(ApiAnswer):
    runs: list[ResilienceRun] = Field(description="newest first")
