"""The real captures (tests/fixtures/real/) as Prometheus would scrape them from Ray Serve LLM.

- `ray/metrics-export-after-transfers.txt`: Ray's metrics export after 3 chats, served as it is.
- The pair's `vllm:` pages (plain `vllm serve` engines): the families the Ray capture was cut
  without (ITL, KV cache usage, NIXL's failure and expiry counters) come only from there. They
  are given the form Ray's metrics agent gives every vLLM series (`vllm/v1/metrics/ray_wrappers.py`:
  ":" -> "_", prefix `ray_`, a `ReplicaId` tag), with the ReplicaId of the real Prefill / Decode
  replica, and nothing else changed (values, le buckets and labels are the capture's).
- The LLM capture has no `ray_serve_*` family. `ray/serve-metrics-probe.txt` is Ray 2.60's own
  Serve page for a replica named like Ray Serve LLM's (tests/real/capture_serve_metrics.py): the
  series the phase join reads (`metric_names.SERVE_REPLICA_STARTS`) is that real series with its
  `deployment` and `replica` set to the LLM capture's replicas, as the real Serve API document
  `ray/serve-applications.json` names them.
- `engine/metrics-*.txt`: one real engine of the same harness (tests/real/capture_engine_metrics.py)
  with the families only the dashboard reads (queue and prefill time, TPOT, preemptions, prefix
  cache); it is given the form Ray gives it, once with each phase's ReplicaId, so both columns'
  panels read real series.
Parsed with prometheus_client's parser as tests/real/prom.py does: no metric name is typed here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from prometheus_client.parser import text_string_to_metric_families

from components.render import metric_names as m
from components.render.serve_config import APP_NAME

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
RAY_EXPORT = REAL / "ray" / "metrics-export-after-transfers.txt"
SERVE_PROBE = REAL / "ray" / "serve-metrics-probe.txt"


@dataclass(frozen=True)
class Series:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def selector(self) -> str:
        """`name{a="x",...}` (promtool's input_series form and the exposition format's)."""
        def esc(v: str) -> str:
            return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        inner = ",".join(f'{k}="{esc(v)}"' for k, v in self.labels)
        return f"{self.name}{{{inner}}}"

    def label(self, key: str) -> str:
        return dict(self.labels).get(key, "")


def parse(text: str) -> list[Series]:
    found: list[Series] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue  # prometheus_client's creation timestamps: not data a rule reads
            found.append(Series(sample.name, tuple(sorted(sample.labels.items())), float(sample.value)))
    return found


def replicas() -> dict[str, str]:
    """Serve deployment name -> its (one) replica id, from the real Serve API answer."""
    doc = json.loads((REAL / "ray" / "serve-applications.json").read_text())
    deployments = doc["applications"][APP_NAME]["deployments"]
    return {name: d["replicas"][0]["replica_id"] for name, d in deployments.items()}


def serve_probe() -> list[Series]:
    return parse(SERVE_PROBE.read_text())


def serve_replica_series(name: str = m.SERVE_REPLICA_STARTS) -> list[Series]:
    """The probe's real per-replica series `name`, once per replica of the LLM capture."""
    (template,) = only(serve_probe(), name)
    out = []
    for deployment, replica in replicas().items():
        labels = dict(template.labels)
        labels.update({m.SERVE_DEPLOYMENT_LABEL: deployment, m.SERVE_REPLICA_LABEL: replica})
        out.append(Series(template.name, tuple(sorted(labels.items())), template.value))
    return out


def as_ray(series: Iterable[Series], replica_id: str) -> list[Series]:
    """Plain vLLM series in the form Ray Serve LLM exports them for that replica."""
    out = []
    for s in series:
        if not s.name.startswith("vllm:"):
            continue
        labels = dict(s.labels)
        labels[m.REPLICA_ID_LABEL] = replica_id
        out.append(Series(m.ray_vllm(s.name[len("vllm:"):]), tuple(sorted(labels.items())), s.value))
    return out


def pair_page(phase: str, moment: str, deployment: str) -> list[Series]:
    """e.g. ("decode", "after-transfers", "Decode:tiny")."""
    text = (REAL / "pair" / f"{phase}-metrics-{moment}.txt").read_text()
    return as_ray(parse(text), replicas()[deployment])


def engine_page(moment: str, deployment: str) -> list[Series]:
    """e.g. ("after-chats", "Decode:tiny")."""
    text = (REAL / "engine" / f"metrics-{moment}.txt").read_text()
    return as_ray(parse(text), replicas()[deployment])


IDLE_SCRAPES = 2


def scrape_pages(deployments: Mapping[str, str] | None = None,
                 decode_after: str = "after-transfers") -> dict[str, tuple[str, ...]]:
    """Scrape path -> its pages: idle for the first IDLE_SCRAPES scrapes, then after the transfers,
    so rates and quantiles have real movement to read. `deployments` renames the captured Serve
    deployments ("Prefill:tiny" -> another stack's name) in Ray Serve's series, which the phase
    join reads; the engines keep the captured ReplicaIds. `decode_after="after-failed-load"` is the
    real decode after a KV load that failed (its NIXL failure counter moved)."""
    rename = dict(deployments or {})

    def renamed(series: list[Series]) -> list[Series]:
        out = []
        for s in series:
            labels = dict(s.labels)
            if labels.get(m.SERVE_DEPLOYMENT_LABEL) in rename:
                labels[m.SERVE_DEPLOYMENT_LABEL] = rename[labels[m.SERVE_DEPLOYMENT_LABEL]]
            out.append(Series(s.name, tuple(sorted(labels.items())), s.value))
        return out

    def twice(idle: list[Series], after: list[Series]) -> tuple[str, ...]:
        return (exposition(renamed(idle)),) * IDLE_SCRAPES + (exposition(renamed(after)),)

    # Every replica's per-replica Serve series, as each replica exports them (the Scaling row reads
    # the healthy and processing gauges per phase).
    serve = [s for name in (m.SERVE_REPLICA_STARTS, m.SERVE_REPLICA_HEALTHY, m.SERVE_REPLICA_QUERIES)
             for s in serve_replica_series(name)]
    probe = serve_probe()
    return {
        "/ray": twice(parse((REAL / "ray" / "metrics-export-idle.txt").read_text()), ray_export()),
        "/serve": twice(serve, serve),
        "/serve-probe": twice(probe, probe),
        "/prefill": twice(pair_page("prefill", "idle", "Prefill:tiny"),
                          pair_page("prefill", "after-transfers", "Prefill:tiny")),
        "/decode": twice(pair_page("decode", "idle", "Decode:tiny"),
                         pair_page("decode", decode_after, "Decode:tiny")),
        # One real engine's dashboard-only families (queue time, TPOT, prefix cache...), once per
        # phase's replica, so both columns read them.
        **{f"/engine-{phase}": twice(engine_page("idle", deployment), engine_page("after-chats", deployment))
           for phase, deployment in (("prefill", "Prefill:tiny"), ("decode", "Decode:tiny"))},
    }


def ray_export() -> list[Series]:
    return parse(RAY_EXPORT.read_text())


def exposition(series: Iterable[Series]) -> str:
    """Prometheus text format, untyped: Prometheus stores the samples as they are."""
    return "".join(f"{s.selector()} {s.value!r}\n" for s in series)


def names(series: Iterable[Series]) -> set[str]:
    return {s.name for s in series}


def only(series: Iterable[Series], name: str, **labels: str) -> list[Series]:
    return [s for s in series if s.name == name and all(s.label(k) == v for k, v in labels.items())]


def where(series: Iterable[Series], labels: Mapping[str, str]) -> list[Series]:
    return [s for s in series if all(s.label(k) == v for k, v in labels.items())]
