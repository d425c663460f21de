"""The disconnect judge on the readings Ray Serve's metrics export really gives.

Ray exports vLLM's gauges only while they are set: after the client left, CI's run on Ray 2.60 read
`ray_vllm_generation_tokens_total` alone, without `ray_vllm_num_requests_running`, and the judge called
the page unreadable; a later run read the same BEFORE the request (the engine idle since an earlier
test) and the probe gave up. The counter without the gauge is an idle engine, before or after; a page
with neither is not read.
"""

from __future__ import annotations

from typing import Any, Optional

from serve.conformance.exchange import Exchange
from serve.conformance.features import Context
from serve.conformance.groups.disconnect import judge, probe

ASKED = 768


IDLE_BEFORE = {"generated": 600.0, "running": 0.0}


def exchanges(after: Optional[dict[str, float]], chunks: int = 2, status: int = 200,
              before_body: Optional[dict[str, float]] = None) -> list[Exchange]:
    walked = Exchange("walk away", "chat", {"max_tokens": ASKED, "stream": True}, 200,
                      chunks=tuple({"choices": [{"index": 0, "delta": {"content": "x"}}]} for _ in range(chunks)))
    before = Exchange("before", "metrics", {}, 200, body=IDLE_BEFORE if before_body is None else before_body)
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


def test_an_engine_idle_before_the_request_without_its_running_gauge_is_judged() -> None:
    status, evidence = verdict({"generated": 642.0}, before_body={"generated": 600.0})
    assert status == "pass", evidence


def test_engines_that_never_served_before_the_request_are_judged_from_zero() -> None:
    """Ray exports nothing for an engine before its first request (a Ray run with this test first)."""
    assert verdict({"generated": 40.0}, before_body={})[0] == "pass"
    status, evidence = verdict({"generated": float(ASKED)}, before_body={})
    assert status == "fail" and "the whole answer" in evidence


def test_a_page_without_engine_series_before_and_after_is_a_skip_saying_where_to_look() -> None:
    status, evidence = verdict({}, before_body={})
    assert status == "skip" and "watch the engines' num_requests_running" in evidence


class IdleRayExport:
    """A session whose metrics page is Ray's export of an idle engine: the token counter alone."""

    def __init__(self) -> None:
        self.walked = False
        self.generated = 600.0

    def metrics(self, label: str, url: Optional[str]) -> Exchange:
        page = f"# TYPE ray_vllm_generation_tokens_total counter\nray_vllm_generation_tokens_total {self.generated}\n"
        return Exchange(label, "metrics", {}, 200, body=page)

    def walk_away(self, label: str, route: str, chunks: int, **body: Any) -> Exchange:
        self.walked, self.generated = True, self.generated + 5
        return Exchange(label, route, body, 200)


def test_the_probe_goes_on_when_an_idle_engine_exported_only_its_token_counter() -> None:
    session = IdleRayExport()
    readings = probe(session, Context(model="m", metrics_url="http://127.0.0.1:9/metrics"))  # type: ignore[arg-type]
    assert session.walked, [r.to_json() for r in readings]
    assert [r.label for r in readings] == ["before", "walk away", "after 1"]
