"""What a fault cost, from the load generator's records alone: pure functions, records in, numbers out.

A record is serve.benchmark.loadgen's (`sent_s`, `end_s`, `ttft_ms`, `ok`, `status`,
`error_kind`, and with `keep_text` the answer's `text` and `finish_reason`), on the run's clock
(seconds from the load's start); the fault time is on the same clock. Each request gets one
outcome (`outcome`):
- `ok`: answered completely, and its text equals the golden answer of its prompt (or the prompt
  has no stable golden answer, so its text cannot be judged);
- `wrong`: answered completely (HTTP 200, usage adding up) but its text differs from the golden
  answer: the silent failure (aws-do-eks PR #84: 8 of 42 answers built from freed KV blocks);
- `failed-before-first-token`: no content reached the client (connect error, HTTP 500/503, a
  timeout before the first token): a gateway could have retried it;
- `failed-after-first-token`: the stream started and then broke (reset, an error chunk, no
  [DONE], a timeout mid-answer): nothing can retry it safely.
A request is *good* when its outcome is `ok`.

Time to recover (`recovery`), precisely: let b be the share of good requests among those that
ENDED before the fault (the pre-fault rate; requests in flight at the fault are not in it). Take
the requests SENT at or after the fault, ordered by send time, r_1 ... r_n. Recovery is at the
first r_i from which on the requests succeed at the pre-fault rate: the smallest i such that the
bad requests among r_i ... r_n are at most floor((1 - b) x (n - i + 1)) and r_i itself is good.
Time to recover = sent_s(r_i) - fault time. With a clean baseline (b = 1) that is exactly the
send time of the first good request after the last bad one. It counts as recovered only when the
requests from r_i on span at least `settle_s` seconds of sending (else the load ended too soon
to tell); no request sent after the fault, or none good, is not recovered.

A request that succeeded but waited far longer than the pre-fault requests did (its TTFT over
`stall_ttft_ms`: STALL_FACTOR x the p95 TTFT of the requests that ended before the fault, at least
STALL_FLOOR_MS) is *stalled*, and counts as bad for the recovery (not in the outcome counts: it was
answered, and right). Ray Serve holds the requests for a deployment with no live replica until one
is back: killing the only decode replica of the real Ray Serve LLM stack failed no request, and
every request sent in the next 38 s waited for the replacement (tests/real/ray); by success alone
that read "recovered 1.3 s after the kill".

A wedge (smg#2382: a fleet answering errors with every pod Ready) is a stretch of at least
`wedge_s` seconds (60) of consecutive timeline buckets in which every bucket had requests, at
least `wedge_error_share` (half) of them bad, and every readiness sample taken in the bucket said
all of the deployment's pods were Ready (a bucket without a sample breaks the stretch: no
evidence is not Ready).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from serve.benchmark.summary import percentile

OUTCOMES = ("ok", "wrong", "failed-before-first-token", "failed-after-first-token")
BUCKET_S = 5.0
SETTLE_S = 10.0
WEDGE_S = 60.0
WEDGE_ERROR_SHARE = 0.5
STALL_FACTOR = 5.0
STALL_FLOOR_MS = 2000.0


def prompt_of(record: Mapping[str, Any], prompts: int) -> int:
    """The prompt a load request asked (the load cycles through the golden prompts by index)."""
    return int(record["index"]) % max(1, prompts)


def outcome(record: Mapping[str, Any], golden: Sequence[Optional[str]]) -> str:
    """One of OUTCOMES (see the module docstring); `golden[p]` is prompt p's answer, None when it
    was not reproducible (then the text is not judged)."""
    if not record.get("ok"):
        return "failed-before-first-token" if record.get("ttft_ms") is None else "failed-after-first-token"
    expected = golden[prompt_of(record, len(golden))] if golden else None
    if expected is not None and record.get("text") != expected:
        return "wrong"
    return "ok"


def judged(records: Sequence[Mapping[str, Any]], golden: Sequence[Optional[str]]) -> list[dict[str, Any]]:
    """The records in send order, each with its `outcome` (copies: the records are not changed)."""
    ordered = sorted(records, key=lambda r: (r.get("sent_s") is None, r.get("sent_s") or 0.0, r["index"]))
    return [{**record, "outcome": outcome(record, golden)} for record in ordered]


def counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many requests of each outcome, and how many were sent (every one has an outcome)."""
    tally = Counter(row["outcome"] for row in rows)
    return {"sent": len(rows), **{name: tally.get(name, 0) for name in OUTCOMES}}


def finish_reasons(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """`finish_reason` of every request that got HTTP 200 ("none" when the stream gave none):
    a failed generation answered 200 with finish_reason "error" is seen here (smg#2382)."""
    tally = Counter(str(row.get("finish_reason") or "none") for row in rows if row.get("status") == 200)
    return dict(sorted(tally.items()))


@dataclass(frozen=True)
class Phases:
    """The requests by where they stood at the fault: ended before it, in flight, sent after."""

    before: list[dict[str, Any]]
    in_flight: list[dict[str, Any]]
    after: list[dict[str, Any]]


def phases(rows: Sequence[dict[str, Any]], fault_s: float) -> Phases:
    before, in_flight, after = [], [], []
    for row in rows:
        sent, end = row.get("sent_s"), row.get("end_s")
        if sent is not None and sent >= fault_s:
            after.append(row)
        elif end is not None and end < fault_s:
            before.append(row)
        else:
            in_flight.append(row)
    return Phases(before, in_flight, after)


@dataclass(frozen=True)
class Recovery:
    baseline_good_share: Optional[float]  # b: None when no request ended before the fault
    recovered: bool
    time_to_recover_s: Optional[float]
    recovered_at_s: Optional[float]       # on the run's clock
    why: str                              # in words, for the table and the JSON
    stall_ttft_ms: Optional[float] = None  # a good request slower than this to its first token is stalled
    stalled: int = 0                       # requests sent after the fault that were stalled

    def as_json(self) -> dict[str, Any]:
        return {"baselineGoodShare": self.baseline_good_share, "recovered": self.recovered,
                "timeToRecoverS": self.time_to_recover_s, "recoveredAtS": self.recovered_at_s,
                "why": self.why, "stallTtftMs": self.stall_ttft_ms, "stalledAfterFault": self.stalled}


def stall_threshold_ms(before: Sequence[Mapping[str, Any]]) -> float:
    """STALL_FACTOR x the p95 TTFT of the good requests that ended before the fault, at least STALL_FLOOR_MS."""
    ttfts = [float(r["ttft_ms"]) for r in before if r["outcome"] == "ok" and r.get("ttft_ms") is not None]
    p95 = percentile(ttfts, 95)
    return STALL_FLOOR_MS if p95 is None else max(STALL_FLOOR_MS, STALL_FACTOR * p95)


def _bad_for_recovery(row: Mapping[str, Any], stall_ms: float) -> bool:
    ttft = row.get("ttft_ms")
    return row["outcome"] != "ok" or (ttft is not None and float(ttft) > stall_ms)


def recovery(rows: Sequence[dict[str, Any]], fault_s: float, settle_s: float = SETTLE_S) -> Recovery:
    """Time to recover as the module docstring defines it (rows: `judged` records)."""
    split = phases(rows, fault_s)
    if not split.before:
        return Recovery(None, False, None, None, "no request ended before the fault: no pre-fault rate to return to")
    baseline = sum(r["outcome"] == "ok" for r in split.before) / len(split.before)
    stall_ms = stall_threshold_ms(split.before)
    after = split.after
    if not after:
        return Recovery(baseline, False, None, None, "no request was sent after the fault", stall_ms)
    bad = [_bad_for_recovery(row, stall_ms) for row in after]
    stalled = sum(row["outcome"] == "ok" and is_bad for row, is_bad in zip(after, bad, strict=True))
    bad_from = [0] * (len(after) + 1)  # bad_from[i]: bad requests among after[i:]
    for i in range(len(after) - 1, -1, -1):
        bad_from[i] = bad_from[i + 1] + bad[i]
    for i, row in enumerate(after):
        allowed = math.floor((1 - baseline) * (len(after) - i) + 1e-9)
        if not bad[i] and bad_from[i] <= allowed:
            at = float(row["sent_s"])
            span = float(after[-1]["sent_s"]) - at
            if span < settle_s:
                return Recovery(baseline, False, None, None,
                                f"the last bad request was followed by only {span:.1f} s of load "
                                f"(at least {settle_s:g} s are needed to call it recovered)", stall_ms, stalled)
            waited = (f"; {stalled} answered request(s) before it waited over {stall_ms / 1000:.1f} s for "
                      "their first token" if stalled else "")
            return Recovery(baseline, True, at - fault_s, at,
                            f"from {at - fault_s:.1f} s after the fault on, requests succeeded at the "
                            f"pre-fault rate ({baseline:.0%} good) and first tokens came within "
                            f"{stall_ms / 1000:.1f} s until the load ended{waited}", stall_ms, stalled)
    return Recovery(baseline, False, None, None, "no request after the fault succeeded at the pre-fault rate "
                    f"with its first token within {stall_ms / 1000:.1f} s", stall_ms, stalled)


def timeline(rows: Sequence[Mapping[str, Any]], bucket_s: float = BUCKET_S) -> list[dict[str, Any]]:
    """Requests by send time in buckets of `bucket_s`: how many of each outcome, the good share,
    and the p50 TTFT of the answered ones (None when there are none)."""
    sent = [r for r in rows if r.get("sent_s") is not None]
    if not sent:
        return []
    last = max(float(r["sent_s"]) for r in sent)
    tallies: list[Counter[str]] = [Counter() for _ in range(int(last // bucket_s) + 1)]
    ttfts: list[list[float]] = [[] for _ in tallies]
    for row in sent:
        at = int(float(row["sent_s"]) // bucket_s)
        tallies[at]["sent"] += 1
        tallies[at][row["outcome"]] += 1
        if row.get("ttft_ms") is not None and row.get("ok"):
            ttfts[at].append(float(row["ttft_ms"]))
    buckets = []
    for number, (tally, times) in enumerate(zip(tallies, ttfts, strict=True)):
        buckets.append({"startS": number * bucket_s, "sent": tally["sent"],
                        **{name: tally[name] for name in OUTCOMES},
                        "goodShare": tally["ok"] / tally["sent"] if tally["sent"] else None,
                        "ttftP50Ms": percentile(times, 50)})
    return buckets


@dataclass(frozen=True)
class Wedge:
    detected: bool
    longest_s: float           # the longest stretch of failing-while-Ready buckets
    starts_at_s: Optional[float]
    evidence: str

    def as_json(self) -> dict[str, Any]:
        return {"detected": self.detected, "longestS": self.longest_s, "startsAtS": self.starts_at_s,
                "evidence": self.evidence}


def wedge(buckets: Sequence[Mapping[str, Any]], ready: Sequence[tuple[float, Optional[bool]]],
          bucket_s: float = BUCKET_S, wedge_s: float = WEDGE_S,
          error_share: float = WEDGE_ERROR_SHARE) -> Wedge:
    """A wedge as the module docstring defines it; `ready` is (time, all pods Ready?) samples on
    the run's clock, None where the readiness could not be read."""
    if not ready:
        return Wedge(False, 0.0, None, "not judged: the pods' readiness was not sampled")
    longest, start, run_start, run = 0.0, None, None, 0.0
    for bucket in buckets:
        begin = float(bucket["startS"])
        samples = [ok for t, ok in ready if begin <= t < begin + bucket_s]
        failing = bucket["sent"] > 0 and (bucket["sent"] - bucket["ok"]) / bucket["sent"] >= error_share
        if failing and samples and all(ok is True for ok in samples):
            run_start = begin if run == 0 else run_start
            run += bucket_s
            if run > longest:
                longest, start = run, run_start
        else:
            run = 0.0
    detected = longest >= wedge_s
    words = (f"{longest:g} s from {start:g} s with at least {error_share:.0%} of requests failing while every pod "
             "was Ready" if start is not None else "no stretch of failing requests with every pod Ready")
    return Wedge(detected, longest, start, words)
