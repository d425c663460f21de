"""Verify check `metrics-flowing`: every engine reports to Prometheus, and under its phase.

The dashboards and alerts (issue 18) read only the phase-labelled copies of vLLM's series that the
recording rules make (components.render.observability_rules): `replica:raypd_phase:info` per Serve
replica, from Ray Serve's own per-replica series, and `engine:<metric>:phase`, vLLM's series
joined to it on `ReplicaId`. A PodMonitor that misses the worker pods, a renamed label or a rule
that never loaded leaves every panel empty and every alert silent, with nothing red anywhere. This
check asks the deployment's Prometheus (serve.prometheus_api, through the Kubernetes API) for:

- the phase of every Serve replica of the prefill/decode (or colocated) deployments, as the Serve
  API lists them: each needs its `replica:raypd_phase:info` series with the right phase;
- every engine that exported its series needs the phased copy. The engine's presence is read from
  a counter (observability_rules.ENGINE_PRESENCE), not a gauge: Ray exports vLLM's gauges only
  while the engine is busy, so an idle engine has none;
- at least one engine per phase with series. Under Ray an engine exports nothing before its first
  request (tests/fixtures/real/ray/metrics-export-idle.txt), so this runs after verify's chat, and
  waits: the chat's series reach Prometheus after Ray's export round (~10 s), a scrape (15 s) and
  a rule evaluation (30 s). Idle replicas beyond the first are counted, not failed.
The wait also goes on while an engine of a replica the Serve API lists has its raw series but not
yet the phased copy: the raw series arrive with a scrape, the copy only with the next rule
evaluation, so with two replicas per phase the second often looks unphased for one evaluation
(`_Reading.settled`). How engines the Serve API does not list are judged: `_Reading.never_phased`.
A stack without the metrics stack (`raypd:observability.enabled: false`) is skipped.
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Optional

from components.config.checks import Check
from components.render import metric_names as m
from components.render import observability_names
from components.render.observability_rules import ENGINE_PRESENCE, PHASE_INFO, phased
from components.render.outputs import OBSERVABILITY_KEY
from serve.evidence import Evidence
from serve.prometheus_api import PrometheusApi, PrometheusError, prometheus_for

CHECK_ID = "metrics-flowing"
TITLE = "every engine's metrics reach Prometheus with their phase"
WAIT_SECONDS = 75.0    # Ray's export round + a scrape + a rule evaluation, with room
POLL_SECONDS = 5.0
# Ray Serve's and vLLM's series can miss a scrape (a busy node's export answering late): a look
# back over a few scrapes keeps one missed scrape from reading as a missing engine.
LOOKBACK = "2m"
REMEDY_PROMETHEUS = (f"check the metrics stack: kubectl -n {observability_names.NAMESPACE} get pods "
                     "(Prometheus, its operator); see docs/observability.md")


def _by_replica(api: PrometheusApi, expr: str) -> dict[str, dict[str, str]]:
    return {s.labels.get(m.REPLICA_ID_LABEL, ""): s.labels for s in api.query(expr)}


class _Reading:
    """One look at Prometheus: phases of the replicas, engines that export, engines phased."""

    def __init__(self, api: PrometheusApi):
        by = f"{m.REPLICA_ID_LABEL}, {m.PHASE_LABEL}"
        self.info = _by_replica(api, f"max by ({by}) (last_over_time({PHASE_INFO}[{LOOKBACK}]))")
        self.raw = _by_replica(api, f"count by ({m.REPLICA_ID_LABEL}) "
                                    f"(last_over_time({ENGINE_PRESENCE}[{LOOKBACK}]))")
        self.phased = _by_replica(api, f"count by ({by}) (last_over_time({phased(ENGINE_PRESENCE)}[{LOOKBACK}]))")

    def reporting(self, replicas: list[str]) -> list[str]:
        return [r for r in replicas if r in self.phased]

    def unphased(self) -> set[str]:
        """Engines with raw series and no phased copy (yet, or ever)."""
        return set(self.raw) - set(self.phased)

    def settled(self, replicas: Mapping[str, list[str]]) -> bool:
        """Every phase has an engine reporting under its phase, and no engine of a replica the Serve
        API lists is still waiting for its phased copy. A second replica's raw series reach
        Prometheus a rule evaluation before the copy the rule `engine:<metric>:phase` joins from
        them; stopping at the first phased engine per phase judged the second "without a phase".
        Engines of replicas the Serve API does not list do not hold the wait: the check cannot know
        whether they are coming or going (see `never_phased`)."""
        return all(self.reporting(ids) for ids in replicas.values()) and not (self.unphased() & _listed(replicas))

    def never_phased(self, replicas: Mapping[str, list[str]]) -> list[str]:
        """The unphased engines the check fails on, once the wait is over:
        - an engine of a listed replica: the wait gave the rule its evaluations, so the join is broken;
        - an engine the Serve API does not list, whose ReplicaId has no `replica:raypd_phase:info`
          series: no Serve replica series carries that id, so no evaluation will ever phase it (the
          join of vLLM's ReplicaId to Ray Serve's `replica` label is broken for it).
        Not failed: an engine the Serve API does not list whose ReplicaId has its phase info. Its
        copy comes with the next rule evaluation (the info and the copies are recorded by the same
        group, in order), so it is the race above for a replica that served its first request after
        verify read the Serve API (an autoscaled replica started under load); failing it would fail
        a healthy deployment, and waiting for it would hold verify for replicas it never listed."""
        listed = _listed(replicas)
        return sorted(rid for rid in self.unphased() if rid in listed or rid not in self.info)


def _listed(replicas: Mapping[str, list[str]]) -> set[str]:
    """Every replica id the Serve API listed, whatever its phase."""
    return {rid for ids in replicas.values() for rid in ids}


def check_metrics_flowing(ev: Evidence, outputs: Mapping[str, Any], *, wait_seconds: float = WAIT_SECONDS,
                          poll_seconds: float = POLL_SECONDS, timeout: Optional[float] = None) -> Check:
    if outputs.get(OBSERVABILITY_KEY) is None:
        return Check.skipped(CHECK_ID, TITLE, "the stack has no metrics stack (raypd:observability.enabled "
                             "is false): nothing collects metrics")
    api = prometheus_for(ev.live_client(), outputs, timeout)
    assert api is not None
    replicas = {phase: [str(r.get("replica_id")) for r in found if r.get("replica_id")]
                for phase, found in ev.engine_replicas().items()}
    if not any(replicas.values()):
        return Check.warned(CHECK_ID, TITLE, "the Serve API lists no engine replica: no engine to look "
                            "for in Prometheus (see serve-app-running)")
    deadline = time.monotonic() + max(0.0, wait_seconds)
    try:
        while True:  # bounded by the deadline; ends at once when the listed engines are phased
            reading = _Reading(api)
            if reading.settled(replicas) or time.monotonic() + poll_seconds > deadline:
                break
            time.sleep(poll_seconds)
    except PrometheusError as exc:
        return Check.failed(CHECK_ID, TITLE, f"{exc}: no metric of this deployment is collected",
                            REMEDY_PROMETHEUS)
    return _judge(replicas, reading, wait_seconds)


def _judge(replicas: dict[str, list[str]], reading: _Reading, waited: float) -> Check:
    wrong = [f"{rid} ({phase}: Prometheus has {reading.info[rid].get(m.PHASE_LABEL) or 'no phase'})"
             for phase, ids in replicas.items() for rid in ids
             if rid in reading.info and reading.info[rid].get(m.PHASE_LABEL) != phase]
    if wrong:
        return Check.failed(CHECK_ID, TITLE, f"replicas labelled with the wrong phase: {', '.join(wrong)}",
                            "the recording rule's deployment names do not match the Serve deployments: "
                            "run `pulumi up` so the PrometheusRule matches the deployed model")
    unknown = [f"{rid} ({phase})" for phase, ids in replicas.items() for rid in ids if rid not in reading.info]
    known = _listed(replicas)
    strangers = sorted(rid for rid in reading.info if rid not in known)
    if unknown and strangers:
        return Check.failed(
            CHECK_ID, TITLE, f"Prometheus has the phase of replicas {', '.join(strangers[:6])}, but the "
            f"Serve API lists {', '.join(unknown)}: Ray Serve's `{m.SERVE_REPLICA_LABEL}` label does not "
            f"carry the replica id vLLM tags its series with ({m.REPLICA_ID_LABEL}), so no engine series "
            "gets a phase", "compare the two labels in Prometheus; see docs/observability.md")
    if unknown:
        return Check.failed(
            CHECK_ID, TITLE, f"no {PHASE_INFO} series for the Serve replicas {', '.join(unknown)}: Prometheus "
            f"does not scrape their worker pods (Ray Serve's {m.SERVE_REPLICA_STARTS} is missing), or the "
            "raypd recording rules are not loaded",
            "kubectl get podmonitors,prometheusrules -A; check the Prometheus targets page for the worker "
            "pods (port 8080)")
    unphased = reading.never_phased(replicas)
    if unphased:
        return Check.failed(
            CHECK_ID, TITLE, f"engine series without a phase for ReplicaId {', '.join(unphased)}: the join "
            f"of vLLM's {m.REPLICA_ID_LABEL} to Ray Serve's `{m.SERVE_REPLICA_LABEL}` found no replica",
            "compare the labels of the two series in Prometheus; see docs/observability.md")
    silent = [phase for phase, ids in replicas.items() if ids and not reading.reporting(ids)]
    if silent:
        return Check.failed(
            CHECK_ID, TITLE, f"no {' or '.join(silent)} engine has series in Prometheus after "
            f"{waited:g} s (Ray exports an engine's series after its first request, which verify's chat "
            "sent)", "if the chat failed, fix that first; else check the worker pods' scrape targets")
    parts, idle = [], 0
    for phase, ids in replicas.items():
        if not ids:
            continue
        live = reading.reporting(ids)
        idle += len(ids) - len(live)
        parts.append(f"{phase} {len(live)} of {len(ids)} ({', '.join(live)})")
    note = (f"; {idle} replica(s) have served nothing yet, so Ray exported no series for them "
            "(their phase is known)") if idle else ""
    coming = sorted(reading.unphased())  # the never-phased ones failed the check above
    if coming:
        note += (f"; engine(s) {', '.join(coming[:6])}, of replicas the Serve API did not list when "
                 "verify asked it, have their phase but not yet the phased copy of their series "
                 "(the next rule evaluation makes it)")
    return Check.passed(CHECK_ID, TITLE, f"engines reporting under their phase: {'; '.join(parts)}{note}")
