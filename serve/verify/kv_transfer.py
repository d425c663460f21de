"""Verify check `kv-transfer`: did the verify chat's KV cache come from prefill over NIXL?

The decode's own counters are read before and after the chat request (`read_kv`: the metrics
page of each pod hosting a decode replica, filtered to its replicas' series, and the KV lines of
its logs) and compared (serve/kv_evidence.py `compare_readings`): transfers and
external_kv_transfer prompt tokens must rise while local_compute does not.
"""

from __future__ import annotations

from typing import Any, Optional

from components.config import defaults
from components.config.checks import Check
from components.render.serve_config import KV_LOAD_FAILURE_POLICY
from serve.evidence import RAY_GROUP_LABEL, Evidence, labels_of, name_list, name_of
from serve.kube import KubeError
from serve.kv_evidence import (
    KvChange,
    KvComparison,
    KvReading,
    KvSeries,
    compare_readings,
    is_kv_line,
    kv_load_failures,
    kv_log_counts,
    kv_series,
    nixl_failures,
    parse_vllm_samples,
    replica_filter,
)
from serve.verify.endpoint import ChatOutcome
from serve.verify.report import TITLES

CID = "kv-transfer"
REMEDY_NONE = ("look at the decode's vLLM metrics (nixl_xfer_time_seconds_count, "
               "prompt_tokens_by_source) on its Ray metrics port, and for 'KV Transfer metrics' "
               "in the decode replica's log")
REMEDY_FAILED = ("check the NIXL side channel between the pods (VLLM_HOST_IP, a security group "
                 "that allows all traffic between the GPU nodes), nixl-backend and efa-devices, "
                 "and that both phases use the same model and parallel layout")
UNIDENTIFIED = ("; the decode replicas could not be identified (the Ray dashboard's Serve API did not "
                "answer), so every pod of the decode's worker group was read, prefill's too: "
                "local_compute and generated tokens there were not judged")


def _decode_targets(ev: Evidence) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """(decode replicas, the worker pods that host them, their replica ids); without the Serve API,
    every pod of the decode phase's worker group (and no replica ids)."""
    phase = "decode" if "decode" in ev.plan.phases else next(iter(ev.plan.phases))
    pods = ev.worker_pods()
    try:
        replicas = [r for r in ev.engine_replicas().get(phase, []) if r.get("state") == "RUNNING"]
    except KubeError:
        replicas = []
    ips = {str(r.get("node_ip")) for r in replicas}
    hosting = [p for p in pods if str((p.get("status") or {}).get("podIP")) in ips]
    if not hosting:
        group = ev.plan.phases[phase].group
        hosting = [p for p in pods if labels_of(p).get(RAY_GROUP_LABEL) == group]
    # One Ray node, one metrics page: pods that share an IP (host networking) are read once, or
    # every counter would count twice. Sorted, so that each reading picks the same pod.
    by_ip: dict[str, dict[str, Any]] = {}
    for pod in sorted(hosting, key=name_of):
        by_ip.setdefault(str((pod.get("status") or {}).get("podIP") or name_of(pod)), pod)
    return replicas, list(by_ip.values()), [str(r.get("replica_id") or "") for r in replicas]


def read_kv(ev: Evidence) -> KvReading:
    replicas, pods, replica_ids = _decode_targets(ev)
    keep = replica_filter(replica_ids)
    # A page that answers without vLLM series is zeros, not "unreadable": Ray exports a series only
    # once it was used, so a fresh deployment's page has none before the first request.
    pages: dict[str, KvSeries] = {}
    for pod in pods:
        try:
            pages[f"pod {name_of(pod)} metrics"] = kv_series(parse_vllm_samples(ev.metrics_page(pod)), keep)
        except KubeError:
            continue
    metrics_source = (f"decode's vLLM metrics on {name_list([name_of(p) for p in pods], 3)} port "
                      f"{defaults.RAY_METRICS_PORT} (Ray's export)")
    logs: dict[str, str] = {}
    log_source = "decode replicas' logs (Ray log API)"
    for replica in replicas:
        try:
            logs[f"replica {replica.get('replica_id', '?')} log"] = ev.replica_log(replica)
        except KubeError:
            continue
    if not logs:
        log_source = "decode worker pods' container logs"
        for pod in pods:
            try:
                logs[f"pod {name_of(pod)} log"] = ev.pod_log(pod)
            except KubeError:
                continue
    lines = {key: frozenset(line for line in text.splitlines() if is_kv_line(line))
             for key, text in logs.items()}
    return KvReading(metrics_source, pages, log_source, lines, decode_known=any(replica_ids))


def _count(value: float, what: str) -> str:
    number = int(value) if float(value).is_integer() else round(value, 1)
    return f"{number} {what}"


def _not_compared(comparison: KvComparison) -> str:
    """"; not compared: ..." for the pages and logs that answered only once, or ""."""
    if not comparison.once:
        return ""
    return (f"; read only once, so not compared (missing evidence): {name_list(comparison.once, 4)}")


def check_kv_transfer(kv_backend: Optional[str], before: Optional[KvReading],
                      after: Optional[KvReading], chat: ChatOutcome, waited: float) -> Check:
    """Did this request's KV cache come over NIXL? The decode's counters decide (transfers and
    external_kv_transfer prompt tokens up, local_compute not, no failures); the log lines are the
    fallback where no metrics are exported. Only pages and logs read both before and after the
    request are compared: one read once gives lifetime totals, never this request's. No movement at
    all is no evidence; movement without a transfer is evidence of recompute, a failure, unless the
    decode replicas could not be identified (then prefill's own work may be on the pages read)."""
    title = TITLES[CID]
    if kv_backend is None:
        return Check.skipped(CID, title, "colocated mode: no KV cache moves between engines")
    if chat.status is None:
        return Check.skipped(CID, title, "the chat request got no answer (see endpoint-chat)")
    if before is None or after is None:
        if chat.status != 200:
            return Check.skipped(CID, title, "the chat request failed (see endpoint-chat) and the "
                                 "decode's counters could not be read")
        return Check.warned(CID, title, "no KV transfer evidence: neither the decode's metrics nor "
                            "its logs could be read; a 200 alone is not proof", REMEDY_NONE)
    comparison = compare_readings(before, after)
    unread = _not_compared(comparison)
    failed = _failed_transfers(comparison, after, chat.status, unread)
    if failed is not None:
        return failed
    change = comparison.change
    if chat.status != 200:
        source = after.metrics_source if change is not None else after.log_source
        return Check.skipped(CID, title, f"the chat request answered HTTP {chat.status} (see "
                             f"endpoint-chat) and no failed transfer was recorded; source: {source}{unread}")
    if change is not None:
        identified = before.decode_known and after.decode_known
        return _judge_counters(change, identified, after.metrics_source, waited, unread)
    return _judge_log_lines(comparison.new_lines, before, after, unread)


def _failed_transfers(comparison: KvComparison, after: KvReading, status: int, unread: str) -> Optional[Check]:
    """A failed NIXL transfer (the decode's counter, or its log lines) or a request decode failed
    for a KV load failure fails the check, whatever the request answered; None when there was none."""
    new_lines = comparison.new_lines
    log_failed = max(kv_log_counts(new_lines)[1], nixl_failures(new_lines))  # the same failures, told twice
    load_failures = kv_load_failures("\n".join(new_lines))
    change = comparison.change
    failed = (change.failed if change else 0.0) + log_failed
    if failed <= 0 and load_failures <= 0:
        return None
    parts = []
    if failed > 0:
        parts.append(_count(failed, "NIXL transfer(s) failed (handshakes and notifications count)"))
    if load_failures > 0:
        parts.append(f"decode failed {load_failures} request(s) for a KV load failure")
    outcome = (f"the request answered HTTP {status}, as kv_load_failure_policy: "
               f"{KV_LOAD_FAILURE_POLICY} makes it" if status != 200 else
               "the request still answered 200, so decode recomputed the prompt (is "
               "kv_load_failure_policy set to recompute?)")
    source = after.metrics_source if change is not None and change.failed else after.log_source
    return Check.failed(CID, TITLES[CID], f"{'; '.join(parts)} during the chat request: {outcome}; "
                        f"source: {source}{unread}", REMEDY_FAILED)


def _judge_counters(change: KvChange, identified: bool, source: str, waited: float, unread: str) -> Check:
    """The verdict of the decode's counters over the chat request (no transfer failed). Without the
    decode's replica ids (`identified` False) local_compute and generated tokens are not judged."""
    title = TITLES[CID]
    unidentified = "" if identified else UNIDENTIFIED
    moved = (f"{_count(change.transfers, 'NIXL transfer(s)')}, "
             f"{_count(change.external_tokens, 'prompt token(s) from external_kv_transfer')}"
             + (f", local_compute +{_count(change.local_tokens, '')}".rstrip() if identified else ""))
    if identified and change.local_tokens > 0:
        return Check.failed(CID, title, f"decode computed {_count(change.local_tokens, 'prompt token(s)')} "
                            f"itself during the chat request ({moved}): the KV cache did not (all) "
                            f"come from prefill, PD's gain is gone; source: {source}{unread}", REMEDY_FAILED)
    if change.transfers > 0 or change.external_tokens > 0:
        return Check.passed(CID, title, f"during the chat request: {moved}, none failed"
                            + (f", {_count(change.bytes_moved, 'bytes')} moved" if change.bytes_moved else "")
                            + f"; source: {source}{unidentified}{unread}")
    if identified and change.generated > 0:
        return Check.failed(CID, title, f"decode generated {_count(change.generated, 'token(s)')} "
                            "for the chat request but recorded no KV transfer and no "
                            f"external_kv_transfer prompt tokens: it did the prefill work again; "
                            f"source: {source}{unread}", REMEDY_FAILED)
    if identified and change.cached_tokens > 0:
        return Check.warned(CID, title, "decode served the prompt from its own prefix cache "
                            f"({_count(change.cached_tokens, 'token(s)')}): no transfer was needed, "
                            f"so none is proven; source: {source}{unread}", REMEDY_NONE)
    if not identified:
        return Check.warned(CID, title, f"no NIXL transfer and no external_kv_transfer prompt tokens "
                            f"within {waited:g} s of the chat request: no evidence either way; "
                            f"source: {source}{unidentified}{unread}",
                            "check that the Ray head pod's dashboard (8265) answers, then run verify again")
    return Check.warned(CID, title, f"the decode's counters did not move within {waited:g} s of "
                        "the chat request (Ray exports metrics every ~10 s, or the request went to "
                        f"an engine not read): no evidence either way; source: {source}{unread}", REMEDY_NONE)


def _judge_log_lines(new_lines: list[str], before: KvReading, after: KvReading, unread: str) -> Check:
    """The verdict where no metrics page was read both times: the decode's 'KV Transfer metrics'
    lines (plain vLLM prints them; Ray Serve LLM never does)."""
    title = TITLES[CID]
    log_ok = kv_log_counts(new_lines)[0]
    if log_ok > 0:
        return Check.passed(CID, title, f"{log_ok} successful NIXL transfer(s), none failed, during "
                            f"the chat request ('KV Transfer metrics' lines in the {after.log_source}){unread}")
    if before.pages or after.pages:
        return Check.warned(CID, title, "no decode metrics page answered both before and after the chat "
                            f"request, and no new 'KV Transfer metrics' line in the {after.log_source}: "
                            f"no evidence either way{unread}", REMEDY_NONE)
    return Check.warned(CID, title, f"no decode metrics to read, and no new 'KV Transfer metrics' line "
                        f"in the {after.log_source} (vLLM prints it at INFO only for busy intervals, "
                        f"and never under Ray Serve LLM); a 200 alone is not proof{unread}", REMEDY_NONE)
