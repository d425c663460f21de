"""What vLLM, NIXL and Ray emit about KV transfers, and how verify reads it: pure parsing, no I/O.

The formats, as their sources define them and as a real prefill/decode pair on CPU emitted them
(tests/fixtures/real/ holds captures):
- NIXL logs `<date> NIXL INFO    _api.py:<line> Backend <NAME> was instantiated` once per agent,
  with its own logger to stdout (nixl `src/api/python/_api.py` and `logging.py`: a StreamHandler on
  sys.stdout), so under Ray it lands in the `.out` file of the worker process that made the agent.
- vLLM's metrics (`vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py`,
  `vllm/v1/metrics/loggers.py`): `vllm:nixl_xfer_time_seconds` (histogram: `_count` is the
  number of transfers), `vllm:nixl_bytes_transferred` (histogram), `vllm:nixl_num_failed_transfers`
  (counter, "including handshake and notification failures"), `vllm:nixl_num_kv_expired_reqs`
  (counter: requests whose KV lease ran out before decode read them; serve.resilience reports it), and
  `vllm:prompt_tokens_by_source{source="external_kv_transfer"|"local_compute"|"local_cache_hit"}`.
  Under Ray Serve LLM the same series come from Ray's metrics agent
  (`vllm/v1/metrics/ray_wrappers.py`): the name sanitized (":" -> "_") and prefixed `ray_`, so
  `ray_vllm_nixl_...` (older Ray kept the colon: `ray_vllm:nixl_...`), every series tagged with the
  Serve replica's id (`ReplicaId`, the `replica_id` of the dashboard's Serve API), and a counter
  whose increment is 0 is never exported: the failure counter does not exist until a transfer fails.
- Plain vLLM logs `KV Transfer metrics: Num successful transfers=N, ..., Num failed transfers=M, ...`
  from the API server process, at DEBUG when the engine was idle in the interval (a failure-only
  interval is invisible at INFO); under Ray Serve LLM the line is never printed (Ray's stat logger
  replaces vLLM's). With `kv_load_failure_policy: fail` decode logs `Failing N request(s) due to KV
  load failure (failure_policy=fail, ...)` and the request answers HTTP 500; its NIXL worker logs
  `NIXL transfer failure: handshake_setup_failed | Context: ...` for each failed attempt.
- A backend NIXL cannot load is no silent fallback (NIXL 1.5): `createBackend: unsupported backend
  'LIBFABRIC'`, then NIXL_ERR_NOT_FOUND and the engine exits.

Counters are lifetime totals, so a reading is only evidence compared with an earlier one of the
SAME series: `KvSeries` keeps every sample under its identity (name and every label: ReplicaId,
engine, WorkerId, source...), and `KvChange.between` adds up the per-series increases.
`KvReading` is one reading of the decode engines (each page and log read, by where it was read;
serve/verify/kv_transfer.py makes them), and `compare_readings` compares two over only what was
read both times.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Callable, Iterable, Mapping, Optional

from prometheus_client.parser import text_string_to_metric_families

# Longest first: "ray_vllm:" must not be read as "ray_vllm_"'s neighbour.
METRIC_PREFIXES = ("ray_vllm:", "ray_vllm_", "vllm:")
REPLICA_LABEL = "ReplicaId"
NIXL_BACKEND_LINE = re.compile(r"Backend (\w+) was instantiated")
KV_METRICS_LINE = re.compile(r"KV Transfer metrics: (.*)$")
KV_LOAD_FAILURE_LINE = re.compile(r"Failing (\d+) request\(s\) due to KV load failure")
NIXL_FAILURE_LINE = re.compile(r"NIXL transfer failure: (\w+)")
# NIXL's C++ agent when a backend's plugin cannot load (nixl_agent.cpp); vLLM's worker then dies.
NIXL_UNSUPPORTED_LINE = re.compile(r"createBackend: unsupported backend '(\w+)'")


@dataclass(frozen=True)
class Sample:
    """One vLLM series sample: the name without its vLLM/Ray prefix (e.g. `nixl_xfer_time_seconds_count`)."""

    name: str
    labels: Mapping[str, str]
    value: float


def vllm_name(sample_name: str) -> Optional[str]:
    """`vllm:x`, `ray_vllm_x`, `ray_vllm:x` -> `x`; None for any other metric."""
    for prefix in METRIC_PREFIXES:
        if sample_name.startswith(prefix):
            return sample_name[len(prefix):]
    return None


def parse_vllm_samples(text: str) -> list[Sample]:
    """The vLLM samples of a Prometheus text page, whatever Ray version spelled them.

    Parsed line by line with prometheus_client's parser, so one line it cannot read (a torn page,
    an exporter bug) costs that line, not the page."""
    samples: list[Sample] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "vllm" not in line.split("{", 1)[0]:
            continue
        try:
            families = list(text_string_to_metric_families(line + "\n"))
        except (ValueError, IndexError, KeyError, TypeError):
            continue
        for family in families:
            for sample in family.samples:
                name = vllm_name(sample.name)
                if name is not None:
                    samples.append(Sample(name, dict(sample.labels), float(sample.value)))
    return samples


@dataclass(frozen=True)
class KvCounters:
    """The decode engines' counters that tell whether the KV cache came over NIXL.

    None means the series was absent. Counters exist only once non-zero under Ray, so a reader
    treats an absent counter of a page that has vLLM series (`engines > 0`) as 0."""

    engines: int = 0                          # series sets (engine x replica) seen
    transfers: Optional[float] = None         # nixl_xfer_time_seconds_count
    failed: Optional[float] = None            # nixl_num_failed_transfers_total
    bytes_moved: Optional[float] = None       # nixl_bytes_transferred_sum
    external_tokens: Optional[float] = None   # prompt_tokens_by_source{source=external_kv_transfer}
    local_tokens: Optional[float] = None      # prompt_tokens_by_source{source=local_compute}
    cached_tokens: Optional[float] = None     # prompt_tokens_by_source{source=local_cache_hit}
    generated: Optional[float] = None         # generation_tokens_total: did decode work at all?
    expired: Optional[float] = None           # nixl_num_kv_expired_reqs_total: leases that ran out

    def __add__(self, other: "KvCounters") -> "KvCounters":
        def plus(a: Optional[float], b: Optional[float]) -> Optional[float]:
            return None if a is None and b is None else (a or 0.0) + (b or 0.0)
        return KvCounters(self.engines + other.engines, *(
            plus(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)[1:]))


_SOURCE_FIELDS = {"external_kv_transfer": "external_tokens", "local_compute": "local_tokens",
                  "local_cache_hit": "cached_tokens"}
_NAME_FIELDS = {"nixl_xfer_time_seconds_count": "transfers",
                "nixl_num_failed_transfers_total": "failed",
                "nixl_num_failed_transfers": "failed",  # an exporter that keeps the bare name
                "nixl_bytes_transferred_sum": "bytes_moved",
                "generation_tokens_total": "generated",
                "nixl_num_kv_expired_reqs_total": "expired",
                "nixl_num_kv_expired_reqs": "expired"}


# One series: the KvCounters field it feeds and every label of the sample, sorted.
SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class KvSeries:
    """The KV series of one metrics page, each under its identity, and the engines (engine x
    replica) that had any vLLM series on it. Pure data: `totals` sums it, `KvChange.between`
    compares two readings of the same page series by series."""

    values: Mapping[SeriesKey, float]
    engines: frozenset[tuple[str, str]] = frozenset()

    @property
    def totals(self) -> KvCounters:
        sums: dict[str, float] = {}
        for (field_name, _labels), value in self.values.items():
            sums[field_name] = sums.get(field_name, 0.0) + value
        return KvCounters(engines=len(self.engines), **sums)


def _field_of(sample: Sample) -> Optional[str]:
    if sample.name == "prompt_tokens_by_source_total":
        return _SOURCE_FIELDS.get(sample.labels.get("source", ""))
    return _NAME_FIELDS.get(sample.name)


def kv_series(samples: Iterable[Sample],
              keep: Callable[[Mapping[str, str]], bool] = lambda labels: True) -> KvSeries:
    """The KV series among the samples whose labels `keep` accepts (e.g. only the decode replicas')."""
    values: dict[SeriesKey, float] = {}
    engines: set[tuple[str, str]] = set()
    for sample in samples:
        if not keep(sample.labels):
            continue
        engines.add((sample.labels.get("engine", ""), sample.labels.get(REPLICA_LABEL, "")))
        field_name = _field_of(sample)
        if field_name is not None:
            key = (field_name, tuple(sorted(sample.labels.items())))
            values[key] = values.get(key, 0.0) + sample.value
    return KvSeries(values, frozenset(engines))


def expired_only(samples: Iterable[Sample]) -> list[Sample]:
    """The expired-lease samples alone: the producer (prefill) counts the leases that ran out,
    while its other KV series (its own local_compute prompt tokens) are not decode's."""
    return [sample for sample in samples if _NAME_FIELDS.get(sample.name) == "expired"]


def kv_counters(samples: Iterable[Sample],
                keep: Callable[[Mapping[str, str]], bool] = lambda labels: True) -> KvCounters:
    """The sums of the samples whose labels `keep` accepts: one page's totals, for reading, never
    for comparing (see KvChange.between)."""
    return kv_series(samples, keep).totals


def replica_filter(replica_ids: Iterable[str]) -> Callable[[Mapping[str, str]], bool]:
    """Keep the series of these Serve replicas; series without a ReplicaId (plain vLLM, or a Ray
    exporter outside Serve) are kept, as the page they are on was chosen for its engine."""
    wanted = {str(r) for r in replica_ids if r}

    def keep(labels: Mapping[str, str]) -> bool:
        replica = labels.get(REPLICA_LABEL)
        return not replica or not wanted or replica in wanted
    return keep


@dataclass(frozen=True)
class KvChange:
    """How the decode's counters moved between two readings of the same page."""

    transfers: float
    failed: float
    bytes_moved: float
    external_tokens: float
    local_tokens: float
    cached_tokens: float
    generated: float
    expired: float = 0.0  # requests whose NIXL KV lease ran out (prefill freed their blocks)

    @classmethod
    def between(cls, before: KvSeries, after: KvSeries) -> "KvChange":
        """The increase of each series from `before` to `after`, added up per field.

        Both must be readings of ONE page that answered both times: a series absent before counts
        from 0 (Ray exports a series on first use, the failure counter once a transfer failed), a
        series that went down restarted (its process did) and counts from 0 too, as Prometheus's
        increase() reads a counter reset, and a series gone after adds nothing. Summing pages
        first would let one page's lifetime totals, or another's reset, pass for this request's."""
        moved = dict.fromkeys((f.name for f in fields(cls)), 0.0)
        for key, value in after.values.items():
            field_name = key[0]
            prior = before.values.get(key, 0.0)
            moved[field_name] += value - prior if value >= prior else value
        return cls(**moved)

    @property
    def anything(self) -> bool:
        return any(getattr(self, f.name) > 0 for f in fields(self))


# ---- log lines ----

def backends_in(text: str) -> set[str]:
    """The NIXL backends a log says were instantiated."""
    return set(NIXL_BACKEND_LINE.findall(text))


def unsupported_backends_in(text: str) -> set[str]:
    """The NIXL backends a log says could not be created."""
    return set(NIXL_UNSUPPORTED_LINE.findall(text))


def is_kv_line(line: str) -> bool:
    """A log line that tells about one KV transfer interval, failure or failed request."""
    return bool(KV_METRICS_LINE.search(line) or KV_LOAD_FAILURE_LINE.search(line)
                or NIXL_FAILURE_LINE.search(line))


def nixl_failures(lines: Iterable[str]) -> int:
    return sum(1 for line in lines if NIXL_FAILURE_LINE.search(line))


def kv_metrics_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if KV_METRICS_LINE.search(line)]


def kv_log_counts(lines: Iterable[str]) -> tuple[int, int]:
    """(successful, failed) transfers summed over `KV Transfer metrics:` lines."""
    successes = failures = 0
    for line in lines:
        match = KV_METRICS_LINE.search(line)
        if not match:
            continue
        values = dict(part.split("=", 1) for part in match.group(1).split(", ") if "=" in part)
        try:
            successes += int(float(values.get("Num successful transfers", "0")))
            failures += int(float(values.get("Num failed transfers", "0")))
        except ValueError:
            continue
    return successes, failures


def kv_load_failures(text: str) -> int:
    """Requests decode failed because their KV cache could not be loaded (policy `fail`)."""
    return sum(int(n) for n in KV_LOAD_FAILURE_LINE.findall(text))


# ---- two readings of the decode, compared over what was read both times ----

@dataclass(frozen=True)
class KvReading:
    """One reading of the decode engines: each metrics page that answered, keyed by where it was
    read (a page that did not answer is absent; one that answered without vLLM series holds none,
    i.e. zeros), and the KV lines (`KV Transfer metrics: ...`, `Failing N request(s) ...`, `NIXL
    transfer failure: ...`) of each log that could be read, keyed the same way. Only what was read
    both times is compared (KvComparison): a page or log read once is missing evidence.

    `decode_known` is False when the decode replicas could not be told apart (the Serve API did not
    answer): the pages are then every pod of the decode's worker group, which may host prefill too,
    so local_compute and generated tokens there are not decode's."""

    metrics_source: str
    pages: Mapping[str, KvSeries]
    log_source: str
    logs: Mapping[str, frozenset[str]]
    decode_known: bool = True

    @property
    def counters(self) -> Optional[KvCounters]:
        """The totals of the pages read (None: none answered), for people and tests to look at."""
        totals = [page.totals for page in self.pages.values()]
        return sum(totals[1:], totals[0]) if totals else None

    @classmethod
    def of_engine(cls, name: str, metrics_page: Optional[str], log_text: str) -> "KvReading":
        """A reading of one engine read directly (its /metrics text, None if it did not answer,
        and its log), as tests and tools read a plain vLLM engine."""
        pages = {} if metrics_page is None else {name: kv_series(parse_vllm_samples(metrics_page))}
        lines = frozenset(line for line in log_text.splitlines() if is_kv_line(line))
        return cls(f"{name} /metrics", pages, f"{name} log", {name: lines})


@dataclass(frozen=True)
class KvComparison:
    """What moved between two readings, over what was read both times."""

    change: Optional[KvChange]   # over the pages read both times; None when there is none
    new_lines: list[str]         # log lines new in the logs read both times
    once: list[str]              # pages and logs read only once: not compared, missing evidence

    @property
    def moved(self) -> bool:
        return bool(self.new_lines) or (self.change is not None and self.change.anything)


def compare_readings(before: KvReading, after: KvReading) -> KvComparison:
    shared = sorted(set(before.pages) & set(after.pages))
    change = None
    if shared:
        parts = [KvChange.between(before.pages[key], after.pages[key]) for key in shared]
        change = KvChange(*(sum(getattr(part, f.name) for part in parts) for f in fields(KvChange)))
    logs = sorted(set(before.logs) & set(after.logs))
    new_lines = sorted({line for key in logs for line in after.logs[key] - before.logs[key]})
    once = sorted((set(before.pages) ^ set(after.pages)) | (set(before.logs) ^ set(after.logs)))
    return KvComparison(change, new_lines, once)
