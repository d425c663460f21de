"""Safe retries at the gateway (issue 31 §1; components.render.endpoint.retry_policy): a request that
failed before any byte reached the client (no connection, a reset before the response, a 503) is
sent once more, to another Serve proxy pod; a 500 from an engine, Envoy's own 502/504 and anything
after the response started never are. Valid for Envoy Gateway v1.9.0's BackendTrafficPolicy CRD."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import jsonschema
import pytest

from components.render.endpoint import RETRY_TRIGGERS, backend_traffic_policy, path_timeouts
from tests.unit.test_endpoint_render import SCOPES, crd_schema, objects_of, spec_of


@dataclass(frozen=True)
class Failure:
    """What went wrong on one attempt, as Envoy's router sees it."""

    connected: bool = True
    status: Optional[int] = None  # the upstream's response status, None: no response headers
    response_started: bool = False  # Envoy had already sent response headers to the client


# Envoy's trigger semantics, as Envoy Gateway v1.9.0 api/v1alpha1/retry_types.go documents each
# TriggerEnum (and Envoy's router_filter docs, x-envoy-retry-on).
def _fires(trigger: str, failure: Failure, codes: list[int]) -> bool:
    no_response = failure.status is None
    return {
        "5xx": not failure.connected or no_response or (failure.status or 0) >= 500,
        "gateway-error": not failure.connected or failure.status in (502, 503, 504),
        "reset": failure.connected and no_response,
        "connect-failure": not failure.connected,
        "retriable-status-codes": failure.status in codes,
        "retriable-4xx": failure.status == 409,
    }.get(trigger, False)


def envoy_retries(retry: dict[str, Any], failure: Failure, attempt: int = 1) -> bool:
    """Whether Envoy sends the request again. Never once the response started downstream
    (source/common/router/router.cc Filter::maybeRetryReset: "We don't retry if we already started
    the response"; retriable statuses are judged on the upstream's headers before forwarding)."""
    if failure.response_started or attempt > retry.get("numRetries", 2):
        return False
    on = retry.get("retryOn", {})
    return any(_fires(t, failure, on.get("httpStatusCodes", [503])) for t in on.get("triggers", []))


def retry_of(scope: str = "vpc") -> dict[str, Any]:
    return objects_of(scope)["backend-policy"]["spec"]["retry"]


@pytest.mark.parametrize(("failure", "retried"), [
    (Failure(connected=False), True),                      # the proxy pod is gone: connect failure
    (Failure(), True),                                     # reset before any response: a dying pod
    (Failure(status=503), True),                           # Serve: no replica available / back-pressure
    (Failure(status=500), False),                          # an engine's error (a failed KV load)
    (Failure(status=502), False),
    (Failure(status=504), False),
    (Failure(status=429), False),
    (Failure(status=200, response_started=True), False),   # a stream that broke after it started
    (Failure(response_started=True), False),               # reset mid-stream
])
def test_only_failures_before_any_byte_are_retried(failure, retried):
    assert envoy_retries(retry_of(), failure) is retried


def test_a_request_is_retried_once_never_twice():
    retry = retry_of()
    assert retry["numRetries"] == 1
    assert envoy_retries(retry, Failure(connected=False), attempt=1)
    assert not envoy_retries(retry, Failure(connected=False), attempt=2)


def test_no_trigger_retries_an_engines_error_or_envoys_own_timeouts():
    assert set(RETRY_TRIGGERS) <= {"connect-failure", "reset", "reset-before-request", "retriable-status-codes"}
    assert retry_of()["retryOn"]["httpStatusCodes"] == [503]


def test_no_per_try_timeout_cuts_and_repeats_a_slow_healthy_completion():
    # A non-streamed answer sends its headers only when complete: a per-try timeout shorter than
    # the longest answer would abandon it and run it again.
    per_retry = retry_of()["perRetry"]
    assert "timeout" not in per_retry
    assert per_retry["backOff"] == {"baseInterval": "250ms", "maxInterval": "1s"}


@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_every_scope_gets_the_same_retry_and_it_fits_envoy_gateways_crd(scope):
    manifest = objects_of(scope)["backend-policy"]
    assert manifest["spec"]["retry"] == retry_of()
    errors = list(jsonschema.Draft7Validator(crd_schema("BackendTrafficPolicy", "v1alpha1")).iter_errors(manifest))
    assert not errors, "; ".join(f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5])


def test_the_crd_refuses_a_trigger_envoy_gateway_does_not_know():
    manifest = backend_traffic_policy(spec_of("vpc"))
    manifest["spec"]["retry"]["retryOn"]["triggers"].append("reset-after-headers")
    assert list(jsonschema.Draft7Validator(crd_schema("BackendTrafficPolicy", "v1alpha1")).iter_errors(manifest))


def test_the_retry_adds_no_timeout_to_the_stream_path():
    assert not [t for t in path_timeouts(objects_of("vpc")) if "retry" in t.where]
