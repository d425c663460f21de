"""serve.resilience's measurement on the real vLLM pair (issue 31 §3): the numbers its report gives
are the load generator's own, counted again here straight from the records; a planted proxy that
corrupts one answer in twenty is reported as exactly that many wrong answers; a decode held longer
than prefill's NIXL lease shows in the report's KV counters and in vLLM's, exactly once per held request.

Runs last in this package (conftest.py): the kill test restarts prefill, and leaves it ready.
"""

from __future__ import annotations

import json
from typing import Any

from serve.resilience.golden import ASKED, Workload
from serve.resilience.report import Settings, build_report, table
from serve.resilience.run import measure
from tests.real.pd_pair import PdPair
from tests.real.processes import wait_until
from tests.real.resilience_pair import CorruptingProxy, HeldDecode, HoldingProxy, NoFault, PairTarget, PrefillKill

WORKLOAD = Workload(prompts=6, input_tokens=32, max_tokens=8)
# The pair's engines keep NIXL's default lease (kv_lease_duration 30 s, vllm/.../nixl/base_scheduler.py):
# raypd renders 300 s (raypd:kvTransfer.leaseSeconds) exactly so that a slow decode queue never outlives it.
NIXL_DEFAULT_LEASE_S = 30.0
HELD_S = NIXL_DEFAULT_LEASE_S + 15.0
HELD_REQUESTS = 3
# A connect may wait as long as a request: on a 2-core machine at load 17 the client's event loop
# was starved for seconds, and the default 10 s connect timeout failed requests the server never saw.
PATIENT = {"connect_timeout_s": 120.0}


def _keep(pair: PdPair, name: str, records: list[dict[str, Any]]) -> None:
    """The load generator's records beside the engines' logs, for a failing run's reader."""
    (pair.log_dir / f"resilience-{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_a_corrupting_proxy_is_counted_as_exactly_its_wrong_answers(real_pd_pair: PdPair) -> None:
    pair = real_pd_pair
    settings = Settings(rate=4.0, duration_s=25.0, fault_at_s=5.0, timeout_s=120.0, settle_s=5.0)
    with CorruptingProxy(pair.proxy_url, pair.log_dir / "corrupting-proxy.log", every=20,
                         skip_first=WORKLOAD.prompts * ASKED) as proxy:
        measured = measure(proxy.url, pair.model_id, NoFault(), PairTarget(pair), settings, WORKLOAD,
                           connection=PATIENT)
        corrupted = proxy.corrupted()
    _keep(pair, "corrupting-proxy", measured.records)
    report = build_report(measured, settings)
    print(table(report))
    golden = measured.golden.answers
    prompts = [spec.prompt for spec in WORKLOAD.specs()]
    assert corrupted, "the proxy changed no answer: the load was too short"
    # an answer to a prompt without a repeatable golden answer is not judged (judge.py)
    judged_corruptions = [p for p in corrupted if golden[prompts.index(p)] is not None]
    assert judged_corruptions, f"every corrupted answer was to an unjudged prompt: {report['golden']}"
    assert report["requests"]["wrong"] == len(judged_corruptions), (report["requests"], len(judged_corruptions))
    assert report["requests"]["sent"] == len(measured.records)
    assert report["requests"]["failed-before-first-token"] + report["requests"]["failed-after-first-token"] == 0
    assert next(c for c in report["checks"] if c["id"] == "no-wrong-answers")["status"] == "fail"
    print(f"measured: {len(corrupted)} corrupted answer(s) of {len(measured.records)} ({len(judged_corruptions)} to "
          f"a judged prompt), {report['requests']['wrong']} reported wrong")


def test_prefill_killed_under_load_failures_and_recovery_match_the_records(real_pd_pair: PdPair) -> None:
    pair = real_pd_pair
    # the load stops once recovered; the cap covers a prefill restart on a busy 2-core machine
    # (~150 s measured with the load at 17: the new engine's imports alone took 30 s)
    settings = Settings(rate=2.0, duration_s=600.0, fault_at_s=20.0, timeout_s=120.0, settle_s=10.0)
    fault = PrefillKill(pair, pair.processes)
    try:
        measured = measure(pair.proxy_url, pair.model_id, fault, PairTarget(pair), settings, WORKLOAD,
                           connection=PATIENT)
        _keep(pair, "prefill-kill", measured.records)
    finally:  # the pair is shared: leave prefill ready whatever happened
        wait_until("the restarted prefill engine", pair.prefill.ready, deadline_s=900,
                   watch=[pair.prefill.process, pair.decode.process])
    report = build_report(measured, settings)
    print(table(report))
    print("measured report:", json.dumps({k: report[k] for k in ("fault", "requests", "recovery", "kv")}))
    records = sorted(measured.records, key=lambda r: r["sent_s"])
    failed = [r for r in records if not r["ok"]]
    requests = report["requests"]
    assert requests["sent"] == len(records)
    assert requests["failed-before-first-token"] + requests["failed-after-first-token"] == len(failed)
    assert requests["failed-before-first-token"] == sum(r["ttft_ms"] is None for r in failed)
    assert failed, f"killing prefill under load failed no request:\n{table(report)}"
    # recovery, counted again from the records: the first good request after the last failed one
    fault_s = measured.fault_s
    assert report["recovery"]["baselineGoodShare"] == 1.0, table(report)
    assert report["recovery"]["recovered"], f"{table(report)}\n{pair.describe()}"
    golden = measured.golden.answers
    def good(r: dict[str, Any]) -> bool:
        expected = golden[r["index"] % len(golden)]  # None: not repeatable, not judged
        return bool(r["ok"]) and (expected is None or r["text"] == expected)

    stall_ms = report["recovery"]["stallTtftMs"]  # an answer this late to its first token is a stall (judge.py)
    bad = [r for r in records if r["sent_s"] >= fault_s
           and (not good(r) or (r["ttft_ms"] is not None and r["ttft_ms"] > stall_ms))]
    first_good = next(r for r in records if r["sent_s"] > bad[-1]["sent_s"])
    assert report["recovery"]["timeToRecoverS"] == first_good["sent_s"] - fault_s
    print(f"measured: {len(failed)} failed request(s) of {len(records)} "
          f"({requests['failed-before-first-token']} before the first token), recovered "
          f"{report['recovery']['timeToRecoverS']:.1f} s after the SIGKILL, {requests['wrong']} wrong; "
          f"KV change {report['kv']['change']}")


def test_a_decode_held_past_the_lease_shows_in_the_report_and_in_vllms_counters(real_pd_pair: PdPair) -> None:
    """What a lease expiry does on vLLM 0.32 (found here, not assumed): prefill reaps the blocks of a
    request whose decode has not come within the lease and counts `vllm:nixl_num_kv_expired_reqs`;
    the decode that comes later still reads those blocks (a one-sided NIXL read nothing refuses) and
    answers 200, and prefill logs "Potentially invalid KV blocks ... retrieved". Whether the answer
    is right depends on whether the freed blocks were reused meanwhile: the report judges every
    held answer against its golden one, and its KV counters show the expiries. Measured here: the
    late reads left more leases to expire than were held (requests decoded around them were not
    released as read), so the counter is at least, not exactly, the held count."""
    pair = real_pd_pair
    # the load outlasts the held legs (settle_s after the fault), so prefill steps and reaps meanwhile
    settings = Settings(rate=1.0, duration_s=240.0, fault_at_s=5.0, timeout_s=HELD_S + 120.0,
                        settle_s=HELD_S + 15.0)
    with HoldingProxy(pair, pair.log_dir / "holding-proxy.log") as proxy:
        fault = HeldDecode(proxy, HELD_S, HELD_REQUESTS)
        try:
            measured = measure(proxy.url, pair.model_id, fault, PairTarget(pair), settings, WORKLOAD,
                               connection=PATIENT)
        finally:
            fault.restore()
        held = proxy.held()
    _keep(pair, "lease-expiry", measured.records)
    report = build_report(measured, settings)
    print(table(report))
    print("measured report:", json.dumps({k: report[k] for k in ("requests", "recovery", "kv")}))
    assert len(held) == HELD_REQUESTS, held
    held_ids = [params["remote_request_id"] for params in held]
    change = report["kv"]["change"]
    assert change is not None, f"the KV counters could not be read: {report['kv']}\n{pair.describe()}"
    prefill_log = pair.prefill.output()
    expired = [line for line in prefill_log.splitlines() if "Releasing expired KV blocks for request" in line]
    late_reads = [line for line in prefill_log.splitlines() if "Potentially invalid KV blocks" in line]
    for request_id in held_ids:  # prefill reaped each held request's blocks, and decode read them after
        assert any(request_id in line for line in expired), f"{request_id} did not expire:\n{prefill_log[-3000:]}"
        assert any(request_id in line for line in late_reads), f"{request_id} not read late:\n{prefill_log[-3000:]}"
    # the report's KV counters (vLLM's vllm:nixl_num_kv_expired_reqs) count every expiry the log shows
    assert change["expiredLeases"] >= HELD_REQUESTS, table(report)
    assert next(c for c in report["checks"] if c["id"] == "kv-transfer")["status"] == "fail", table(report)
    # every request the load generator sent is accounted for: answered right, wrong, or failed
    requests_ = report["requests"]
    assert requests_["sent"] == len(measured.records)
    failed = requests_["failed-before-first-token"] + requests_["failed-after-first-token"]
    print(f"measured: {HELD_REQUESTS} decode legs held {HELD_S:g} s past NIXL's {NIXL_DEFAULT_LEASE_S:g} s lease: "
          f"{change['expiredLeases']:g} expired lease(s) counted ({len(expired)} in prefill's log), "
          f"{change['failedTransfers']:g} failed transfer(s), "
          f"{requests_['wrong']} wrong and {failed} failed of {requests_['sent']}; prefill logged "
          f"{len(late_reads)} 'Potentially invalid KV blocks' line(s)")
