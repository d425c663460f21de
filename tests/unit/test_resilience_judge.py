"""serve.resilience's judging (serve/resilience/judge.py and report.py): pure functions of
synthetic records, each number checked against the value worked out by hand."""

from __future__ import annotations

from typing import Any, Optional

from serve.kv_evidence import KvReading
from serve.resilience import judge
from serve.resilience.golden import Golden, golden_answers
from serve.resilience.report import Measured, Settings, build_report, table

GOLDEN = ["alpha", "beta"]


def rec(index: int, sent: float, ok: bool = True, text: Optional[str] = None, ttft: Optional[float] = 50.0,
        end: Optional[float] = None, status: Optional[int] = 200, finish: Optional[str] = "length",
        error_kind: Optional[str] = None) -> dict[str, Any]:
    return {"index": index, "sent_s": sent, "end_s": sent + 0.5 if end is None else end, "ok": ok,
            "text": GOLDEN[index % 2] if text is None and ok else text, "ttft_ms": ttft if ok or ttft else None,
            "status": status, "finish_reason": finish if status == 200 else None,
            "error_kind": None if ok else (error_kind or "http")}


def steady(start: float, stop: float, step: float = 1.0, first_index: int = 0) -> list[dict[str, Any]]:
    out, t, i = [], start, first_index
    while t < stop - 1e-9:
        out.append(rec(i, t))
        t, i = t + step, i + 1
    return out


def test_outcomes_tell_wrong_from_failed_before_and_after_the_first_token() -> None:
    rows = [rec(0, 0), rec(1, 1, text="BETA"), rec(2, 2, ok=False, ttft=None, status=503),
            rec(3, 3, ok=False, ttft=40.0, status=200, error_kind="stream")]
    assert [judge.outcome(r, GOLDEN) for r in rows] == [
        "ok", "wrong", "failed-before-first-token", "failed-after-first-token"]
    assert judge.outcome(rec(1, 1, text="anything"), ["alpha", None]) == "ok"  # an unstable prompt is not judged


def test_wrong_answers_are_counted_exactly() -> None:
    records = steady(0, 40)
    for i in (5, 17, 18, 33):
        records[i]["text"] = "corrupted"
    report = _report(records, fault_s=20.0)
    assert report["requests"]["wrong"] == 4
    assert report["requests"]["ok"] == 36
    assert next(c for c in report["checks"] if c["id"] == "no-wrong-answers")["status"] == "fail"


def test_recovery_time_is_the_first_good_request_after_the_last_bad_one() -> None:
    # one request a second; the fault at 20.0; requests sent at 20..26 fail; 27 is good, 28 fails,
    # from 29 on all are good until 59: recovered at 29, 9.0 s after the fault
    records = steady(0, 60)
    for i in (*range(20, 27), 28):
        records[i] = rec(i, float(i), ok=False, ttft=None, status=500)
    rows = judge.judged(records, GOLDEN)
    recovery = judge.recovery(rows, 20.0, settle_s=10.0)
    assert recovery.baseline_good_share == 1.0
    assert recovery.recovered and recovery.time_to_recover_s == 9.0 and recovery.recovered_at_s == 29.0


def test_recovery_tolerates_the_pre_fault_rate_of_failures_and_no_more() -> None:
    # before the fault 1 in 10 fails (b = 0.9); after it, 5 fail in a row, then 1 in 10 again
    records = steady(0, 80)
    for i in (5, 15):
        records[i] = rec(i, float(i), ok=False, ttft=None)
    for i in (*range(20, 25), 35, 45, 55, 65, 75):
        records[i] = rec(i, float(i), ok=False, ttft=None)
    rows = judge.judged(records, GOLDEN)
    recovery = judge.recovery(rows, 20.0, settle_s=10.0)
    assert recovery.baseline_good_share == 0.9
    # from 25 on: 55 requests, 5 bad (35, 45, ..., 75), within floor(0.1 x 55) = 5; 24 itself failed
    assert recovery.time_to_recover_s == 5.0
    records[35] = rec(35, 35.0, ok=False, ttft=None)  # one more after: from 25, 6 bad of 55; from 26, 6 of 54
    records[36] = rec(36, 36.0, ok=False, ttft=None)  # ... until from 37: 43 requests, 4 bad <= floor(4.3)
    assert judge.recovery(judge.judged(records, GOLDEN), 20.0, settle_s=10.0).time_to_recover_s == 17.0


def test_no_recovery_without_enough_load_after_the_last_failure() -> None:
    records = steady(0, 30)
    for i in range(20, 27):
        records[i] = rec(i, float(i), ok=False, ttft=None)
    recovery = judge.recovery(judge.judged(records, GOLDEN), 20.0, settle_s=10.0)
    assert not recovery.recovered and recovery.time_to_recover_s is None
    assert "only 2.0 s of load" in recovery.why


def test_in_flight_requests_count_neither_in_the_baseline_nor_after() -> None:
    records = steady(0, 30)
    records[19] = rec(19, 19.0, ok=False, ttft=30.0, end=24.0, status=200, error_kind="transport")
    rows = judge.judged(records, GOLDEN)
    split = judge.phases(rows, 20.0)
    assert [r["index"] for r in split.in_flight] == [19]
    assert judge.recovery(rows, 20.0, settle_s=5.0).time_to_recover_s == 0.0
    assert _report(records, 20.0)["requests"]["inFlightAtFault"]["failed-after-first-token"] == 1


def test_a_wedge_is_failing_requests_with_every_pod_ready_for_over_a_minute() -> None:
    records = steady(0, 120)
    for i in range(20, 95):  # 75 s of failures from 20 s
        records[i] = rec(i, float(i), ok=False, ttft=None, status=200, finish="error")
    ready = [(float(t), True) for t in range(0, 120, 2)]
    rows = judge.judged(records, GOLDEN)
    wedge = judge.wedge(judge.timeline(rows), ready)
    assert wedge.detected and wedge.longest_s == 75.0 and wedge.starts_at_s == 20.0
    # the same failures while the pods were not Ready are an outage, not a wedge
    not_ready = [(t, not 20 <= t < 95) for t, _ in ready]
    assert not judge.wedge(judge.timeline(rows), not_ready).detected
    # 55 s of it is not yet a wedge
    short = judge.wedge(judge.timeline(rows)[:0] or judge.timeline(judge.judged(
        [r if not 75 <= r["index"] < 95 else rec(r["index"], r["sent_s"]) for r in records], GOLDEN)), ready)
    assert not short.detected and short.longest_s == 55.0
    assert not judge.wedge(judge.timeline(rows), []).detected  # no readiness sampled: not judged


def test_finish_reasons_count_every_200_answer() -> None:
    records = [rec(0, 0), rec(1, 1), rec(2, 2, ok=False, ttft=None, status=200, finish="error"),
               rec(3, 3, ok=False, ttft=None, status=500)]
    assert judge.finish_reasons(judge.judged(records, GOLDEN)) == {"error": 1, "length": 2}


def test_golden_answers_need_every_asking_to_agree() -> None:
    # request i asks prompt i mod 3: prompt 0 -> a, a; prompt 1 -> b, c (they differ); prompt 2 -> x, failed
    texts = ["a", "b", "x", "a", "c", None]
    records = [{"index": i, "ok": text is not None, "text": text} for i, text in enumerate(texts)]
    assert golden_answers(records, 3) == ["a", None, None]


def test_the_report_carries_kv_counter_changes_and_a_readable_table() -> None:
    before = KvReading.of_engine("decode", _page(transfers=10, failed=0, expired=0, local=0), "")
    after = KvReading.of_engine("decode", _page(transfers=40, failed=4, expired=1, local=96), "")
    report = _report(steady(0, 40), 20.0, before, after)
    assert report["kind"] == "resilience" and report["schemaVersion"] == 1
    assert report["kv"]["change"] == {"transfers": 30.0, "failedTransfers": 4.0, "expiredLeases": 1.0,
                                      "localComputeTokens": 96.0, "externalTokens": 0.0}
    assert next(c for c in report["checks"] if c["id"] == "kv-transfer")["status"] == "fail"
    text = table(report)
    assert "4 failed transfers, 1 expired leases, 96 local_compute tokens" in text
    assert "time to recover: 0.0 s" in text


def _page(transfers: int, failed: int, expired: int, local: int) -> str:
    labels = '{engine="0",model_name="tiny"}'
    return "\n".join([
        f"vllm:nixl_xfer_time_seconds_count{labels} {transfers}",
        f"vllm:nixl_num_failed_transfers_total{labels} {failed}",
        f"vllm:nixl_num_kv_expired_reqs_total{labels} {expired}",
        f'vllm:prompt_tokens_by_source_total{{engine="0",model_name="tiny",source="local_compute"}} {local}',
    ]) + "\n"


def _report(records: list[dict[str, Any]], fault_s: float, before: Optional[KvReading] = None,
            after: Optional[KvReading] = None) -> dict[str, Any]:
    measured = Measured("prefill-pod", "pod p", "deleted pod p", fault_s, Golden(list(GOLDEN), []), records,
                        [], before, after)
    return build_report(measured, Settings(rate=1.0, duration_s=60.0, fault_at_s=fault_s, timeout_s=60.0,
                                           settle_s=5.0))


def test_answers_held_until_a_replacement_came_are_not_a_recovery() -> None:
    """Ray Serve holds requests while a deployment has no live replica (the real Ray Serve LLM stack:
    the only decode replica killed, nothing failed, each request sent in the next 38 s waited for
    the replacement). Pre-fault TTFT 50 ms: a first token later than max(5 x p95, 2 s) is a stall."""
    records = steady(0, 60)
    for i in range(20, 35):  # sent 20..34, all answered when the replacement came at 38 s
        records[i] = rec(i, float(i), ttft=(38.0 - i) * 1000, end=38.5)
    rows = judge.judged(records, GOLDEN)
    assert all(row["outcome"] == "ok" for row in rows)  # nothing failed, nothing wrong
    recovery = judge.recovery(rows, 20.0, settle_s=10.0)
    assert recovery.stall_ttft_ms == judge.STALL_FLOOR_MS
    # the first request sent after the stall (35 s) is the recovery
    assert recovery.stalled == 15 and recovery.recovered and recovery.time_to_recover_s == 15.0
    assert "15 answered request(s) before it waited over 2.0 s" in recovery.why


def test_the_stall_threshold_follows_a_slow_baseline() -> None:
    records = [rec(i, float(i), ttft=1000.0) for i in range(20)]  # a slow deployment: 1 s to each first token
    rows = judge.judged(records, GOLDEN)
    assert judge.stall_threshold_ms(rows) == 5 * 1000.0
