"""verify's api-parity (serve/verify/api_parity.py) against the Kubernetes stand-in: serve.conformance's
subset sent through the Serve Service's proxy (tests/fakes/kube_api.py) to the vLLM-shaped stand-in
(tests/fakes/vllm_openai.py). A healthy endpoint passes; each planted break fails the check, naming
its feature and the judge's evidence; verdicts map to statuses as the module says; the stack's key
goes only where it belongs and never into the report; a slow endpoint costs the budget, no more."""

from __future__ import annotations

import json
import time
from typing import Any, Optional

import pytest

from components.config.checks import Check, Report
from serve.conformance.features import Outcome, Verdict
from serve.conformance.report import FeatureResult
from serve.conformance.report import Report as ConformanceReport
from serve.verify import run_verify
from serve.verify.api_parity import CHECK_ID, FEATURES, check_api_parity, to_check
from serve.verify.endpoint import ChatOutcome, direct_endpoint
from serve.verify.external import key_for_endpoint
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.openai_server import OpenAIServer
from tests.fakes.vllm_openai import VllmStandIn

FAST = {"kv_wait_seconds": 0, "timeout": 5, "metrics_wait_seconds": 0}
KEY = "rpd_" + "k3y" * 12
SERVE_CHAT = "ray-llm-serve-svc:8000/proxy/v1/chat/completions"


def parity(report: Report) -> Check:
    return next(c for c in report.checks if c.id == CHECK_ID)


def verify_through_the_proxy(**breaks: Any) -> tuple[Report, VllmStandIn, list[str]]:
    """run_verify on the stand-in stack whose Serve Service leads to a VllmStandIn with `breaks`."""
    with FakeKubeApi("healthy") as kube, VllmStandIn(kube.spec.model.id, **breaks) as engines:
        kube.serve_upstream = engines.url
        report = run_verify(kube.outputs(), **FAST)
        return report, engines, [r["path"] for r in kube.requests]


def test_a_healthy_endpoint_passes_every_promised_feature_through_the_service_proxy() -> None:
    report, engines, proxied = verify_through_the_proxy()
    check = parity(report)
    assert check.status == "pass", check.detail
    assert all(feature in check.detail for feature in FEATURES)
    assert "through the Kubernetes API proxy" in check.detail
    sent = [body for what, body in engines.requests if what == "POST /v1/chat/completions"]
    # every request went through the API server's proxy, none to the engines directly
    assert sum(path.endswith(SERVE_CHAT) for path in proxied) == len(sent)
    assert any(b.get("stream") and b.get("stream_options") == {"include_usage": True} for b in sent)
    assert any(b.get("stop") for b in sent) and any(b.get("logprobs") for b in sent)


def test_only_the_over_long_prompt_is_long_no_near_max_model_len_prefill_is_paid_for() -> None:
    _, engines, _ = verify_through_the_proxy()
    lengths = [len(b["messages"][0]["content"].split()) for what, b in engines.requests
               if what == "POST /v1/chat/completions"]
    long = [n for n in lengths if n > engines.max_model_len // 2]
    assert len(long) == 1 and long[0] > engines.max_model_len, lengths


@pytest.mark.parametrize(("switch", "feature", "evidence"), [
    ("drop_usage_chunk", "chat.stream_usage", "no usage chunk"),
    ("ignore_stop", "chat.stop", "ignored: the answer goes on past it"),
    ("too_long_500", "limits.over_max_model_len", "HTTP 500"),
])
def test_each_planted_break_fails_the_check_naming_its_feature(switch: str, feature: str, evidence: str) -> None:
    report, _, _ = verify_through_the_proxy(**{switch: True})
    check = parity(report)
    assert check.status == "fail" and not report.ok, check.detail
    assert f"1 of {len(FEATURES)} promised feature(s) broken" in check.detail
    assert f"{feature} fail: " in check.detail and evidence in check.detail, check.detail
    assert not any(f"{other} " in check.detail for other in FEATURES if other != feature)
    assert "serve.conformance" in check.remedy


def result(feature: str, verdict: Verdict, evidence: str) -> FeatureResult:
    return FeatureResult(feature, feature.split(".")[0], feature, Outcome(verdict, evidence))


def report_of(*results: FeatureResult) -> ConformanceReport:
    return ConformanceReport(endpoint="http://e", model="m", results=results)


def test_verdicts_map_to_statuses_a_refusal_fails_a_skip_warns() -> None:
    ok = [result(f, Verdict.PASS, "fine") for f in FEATURES]
    assert to_check(report_of(*ok), "here").status == "pass"
    refused = to_check(report_of(*ok[1:], result(FEATURES[0], Verdict.UNSUPPORTED, "refused, HTTP 400")), "here")
    assert refused.status == "fail" and f"{FEATURES[0]} unsupported: refused, HTTP 400" in refused.detail
    differs = to_check(report_of(*ok[1:], result(FEATURES[0], Verdict.DIFFERS, "413")), "here")
    assert differs.status == "fail"
    unjudged = to_check(report_of(*ok[:-1], result(FEATURES[-1], Verdict.SKIP, "no max_model_len")), "here")
    assert unjudged.status == "warn" and f"{FEATURES[-1]} skip: no max_model_len" in unjudged.detail


def test_no_200_to_the_test_chat_means_not_run() -> None:
    check = check_api_parity(direct_endpoint("http://127.0.0.1:9"), ChatOutcome(500, b"boom"), "m", 1)
    assert check.status == "skip" and "endpoint-chat says why" in check.detail


def outputs_with_endpoint(kube: FakeKubeApi, url: str, auth: str = "apiKey") -> dict[str, Any]:
    return {**kube.outputs(), "endpoint": {"url": url + "/v1", "scope": "internet", "auth": auth}, "apiKey": KEY}


def test_the_stacks_key_goes_with_every_request_to_its_own_endpoint_and_never_into_the_report() -> None:
    with FakeKubeApi("healthy") as kube, VllmStandIn(kube.spec.model.id, api_key=KEY) as engines:
        report = run_verify(outputs_with_endpoint(kube, engines.url), endpoint=engines.url + "/v1", **FAST)
    got = {c.id: c for c in report.checks}
    assert got[CHECK_ID].status == "pass", got[CHECK_ID].detail
    assert got["endpoint-models"].status == got["endpoint-chat"].status == "pass"
    keyed = [carried for (what, _), carried in zip(engines.requests, engines.keyed, strict=True)
             if what.startswith("POST")]  # endpoint-auth's GETs go without a key on purpose
    assert len(keyed) > len(FEATURES) and all(keyed)
    assert got["endpoint-auth"].status == "pass"
    assert KEY not in json.dumps(report.as_dict())


@pytest.mark.parametrize(("url", "given", "auth", "expected"), [
    (None, KEY, "apiKey", None),  # through the proxy: the API server drops it
    ("https://llm.example.com/v1", None, "apiKey", KEY),  # the outputs' own endpoint
    ("https://llm.example.com:443", None, "apiKey", KEY),
    ("http://127.0.0.1:8000", None, "apiKey", None),  # another host: the stack's key stays home
    ("http://127.0.0.1:8000", "given-key", "apiKey", "given-key"),  # given for this URL
    ("https://llm.example.com", None, "none", None),  # auth none: no key
])
def test_the_key_goes_only_where_it_belongs(url: Optional[str], given: Optional[str], auth: str,
                                            expected: Optional[str]) -> None:
    outputs = {"endpoint": {"url": "https://llm.example.com", "scope": "internet", "auth": auth}, "apiKey": KEY}
    assert key_for_endpoint(outputs, given, url) == expected


def test_an_answer_that_quotes_the_key_is_reported_without_it() -> None:
    with VllmStandIn("tiny", echo_key=True) as engines:  # a 404 that quotes the Authorization header
        check = check_api_parity(direct_endpoint(engines.url, KEY), ChatOutcome(200), "not-served", 5)
    assert check.status == "fail" and "<api key>" in check.detail and KEY not in check.detail


def test_a_slow_endpoint_costs_the_budget_not_a_timeout_per_request() -> None:
    with OpenAIServer("m", hang_s=3) as slow:
        started = time.monotonic()
        check = check_api_parity(direct_endpoint(slow.url), ChatOutcome(200), "m", 30, budget_seconds=1)
        took = time.monotonic() - started
    assert check.status == "fail" and "the budget of 1 s ran out" in check.detail, check.detail
    assert took < 2.5, took
