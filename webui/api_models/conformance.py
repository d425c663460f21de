"""The Conformance tab's API bodies: what starts a run, and the last run as it is answered."""

from __future__ import annotations

from typing import Any, ClassVar, Optional

from pydantic import Field

from components.config.spec import MAX_STACK_NAME
from webui.api_models.answers import ApiAnswer
from webui.api_models.common import STACK_NAME_PATTERN, absent
from webui.api_models.requests import ApiRequest

REFERENCE_RULE = (f"must be the name of another deployment of this app (lowercase letters, digits and '-', "
                  f"at most {MAX_STACK_NAME} characters), or left out for none")


class ConformanceRequest(ApiRequest):
    """Run serve.conformance against the deployment's endpoint; with `reference`, the same requests
    to another deployment of this app serving the same model (typically a colocated one)."""

    # The hostile-text rule: the pattern refuses anything that is not a stack name, and the message
    # is this fixed sentence, so what was sent is never echoed.
    messages: ClassVar[dict[str, str]] = {"reference": REFERENCE_RULE}

    reference: Optional[str] = absent(
        "another deployment of this app serving the same model id (real engine, deployed); left out: none",
        pattern=STACK_NAME_PATTERN, max_length=MAX_STACK_NAME)


class ConformanceRun(ApiAnswer):
    """A deployment's last conformance run: who ran it, against which reference, and the report."""

    id: str = Field(description="the run's id (the job that made it)")
    deployment: str
    reference: Optional[str] = Field(description="the reference deployment's name; null: none was given")
    createdAt: Optional[str]
    actor: Optional[str]
    report: dict[str, Any] = Field(description=(
        "Contract 7 conformance report (serve.conformance --json): schemaVersion, endpoint, reference, model, "
        "counts, features [{id, verdict, evidence, data, reference, pdOnly}]; API keys never included"))
