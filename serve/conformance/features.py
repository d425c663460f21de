"""What a feature is: an id, a probe that sends requests (client layer) and a judge that reads them.

A judge is a pure function of the recorded exchanges and the `Context` (what the models list said),
returning an `Outcome`: one of five verdicts with the evidence for it. `compare`, where a feature has
one, says whether the endpoint's answers differ from a reference's answers to the same requests
(e.g. prompt token counts): a feature that passes alone but answers otherwise than plain vLLM
serving the same weights is `differs`, and the difference is the PD path's, not the model's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

from serve.conformance.exchange import Exchange, error_object, said

if TYPE_CHECKING:  # the client layer only for the probes' type: judges never reach it
    from serve.conformance.client import Session


class Verdict(str, enum.Enum):
    """pass: works as OpenAI's API says; differs: works, but not as the reference answers;
    unsupported: refused cleanly (an OpenAI 4xx error object); fail: broken (a 5xx, a wrong or
    silently degraded answer, a hang); skip: not testable here, with the reason."""

    PASS = "pass"
    DIFFERS = "differs"
    UNSUPPORTED = "unsupported"
    FAIL = "fail"
    SKIP = "skip"


VERDICTS = tuple(v.value for v in Verdict)


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    evidence: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict.value, "evidence": self.evidence, "data": dict(self.data)}


def passed(evidence: str, **data: Any) -> Outcome:
    return Outcome(Verdict.PASS, evidence, data)


def failed(evidence: str, **data: Any) -> Outcome:
    return Outcome(Verdict.FAIL, evidence, data)


def differs(evidence: str, **data: Any) -> Outcome:
    return Outcome(Verdict.DIFFERS, evidence, data)


def unsupported(evidence: str, **data: Any) -> Outcome:
    return Outcome(Verdict.UNSUPPORTED, evidence, data)


def skipped(evidence: str, **data: Any) -> Outcome:
    return Outcome(Verdict.SKIP, evidence, data)


@dataclass(frozen=True)
class Context:
    """What the probes and judges know before they start: the model id, and its context length
    when the models list gives it (vLLM's `max_model_len` on each model card), and where the
    engines' Prometheus page is when it is not the endpoint's own /metrics (a program's option)."""

    model: str
    max_model_len: Optional[int] = None
    metrics_url: Optional[str] = None


Probe = Callable[["Session", Context], list[Exchange]]
Judge = Callable[[Sequence[Exchange], Context], Outcome]
Compare = Callable[[Sequence[Exchange], Sequence[Exchange]], Optional[Outcome]]


@dataclass(frozen=True)
class Feature:
    id: str
    group: str
    title: str
    probe: Probe
    judge: Judge
    compare: Optional[Compare] = None
    # a feature known to crash or wedge a PD decoder runs after every other (see groups' notes)
    risky: bool = False
    # judged only against a reference: `compare` gives the verdict, and without one it is a skip
    needs_reference: bool = False


def by_label(exchanges: Sequence[Exchange], label: str) -> Optional[Exchange]:
    for ex in exchanges:
        if ex.label == label:
            return ex
    return None


def not_answered(ex: Optional[Exchange], what: str) -> Optional[Outcome]:
    """The verdict when `ex` is not a complete 200 answer, else None: a 4xx with OpenAI's error
    object is a clean refusal (unsupported); a 5xx, a 4xx without the error object, no answer at
    all or a stream cut short is broken (fail)."""
    if ex is None:
        return failed(f"{what}: the request was never sent")
    if ex.answered:
        return None
    if ex.status is not None and 400 <= ex.status < 500 and error_object(ex) is not None:
        return unsupported(f"{what}: refused, {said(ex)}", status=ex.status)
    if ex.status is not None and 400 <= ex.status < 500:
        return failed(f"{what}: {said(ex)}, without OpenAI's error object", status=ex.status)
    return failed(f"{what}: {said(ex)}", status=ex.status)
