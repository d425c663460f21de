"""The disconnect judge on the readings Ray Serve's metrics export really gives.

Ray exports vLLM's gauges only while they are set: after the client left, CI's run on Ray 2.60 read
`ray_vllm_generation_tokens_total` alone, without `ray_vllm_num_requests_running`, and the judge called
the page unreadable. The counter without the gauge is an idle engine; a page with neither is not read.
"""

from __future__ import annotations

from typing import Any, Optional

from serve.conformance.exchange import Exchange
from serve.conformance.features import Context
from serve.conformance.groups.disconnect import judge

ASKED = 768


def exchanges(after: Optional[dict[str, float]], chunks: int = 2, status: int = 200) -> list[Exchange]:
    walked = Exchange("walk away", "chat", {"max_tokens": ASKED, "stream": True}, 200,
                      chunks=tuple({"choices": [{"index": 0, "delta": {"content": "x"}}]} for _ in range(chunks)))
    before = Exchange("before", "metrics", {}, 200, body={"generated": 600.0, "running": 0.0})
    return [before, walked, Exchange("after 1", "metrics", {}, status, body=after)]


def verdict(after: Optional[dict[str, float]], **kwargs: Any) -> tuple[str, str]:
    outcome = judge(exchanges(after, **kwargs), Context(model="m"))
    return outcome.verdict.value, outcome.evidence


def test_an_idle_ray_engine_without_its_running_gauge_passes() -> None:
    status, evidence = verdict({"generated": 642.0})
    assert status == "pass", evidence
    assert "dropped the idle engine's running gauge" in evidence


def test_a_page_without_any_engine_series_is_still_not_read() -> None:
    status, evidence = verdict({})
    assert status == "fail" and "could not be read" in evidence


def test_an_engine_still_running_for_nobody_fails() -> None:
    status, evidence = verdict({"generated": 700.0, "running": 1.0})
    assert status == "fail" and "goes on for nobody" in evidence


def test_the_whole_answer_generated_for_a_client_that_left_fails() -> None:
    status, evidence = verdict({"generated": 600.0 + ASKED})
    assert status == "fail" and "the whole answer" in evidence
