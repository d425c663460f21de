"""The deployment's serving SLOs, as the dashboards and alerts compare against them.

Contract 1 has no SLO keys yet (DeploymentSpec has none), so every deployment gets these defaults;
when the spec gains them, `slo_for` reads them and nothing else changes. The targets are bucket
boundaries of vLLM's histograms (`vllm/v1/metrics/loggers.py`: TTFT ... 1.0, 2.5, 5.0 ...; ITL
... 0.075, 0.1, 0.15 ...), so goodput can be read exactly from a bucket (`le="2.5"`) instead of
interpolated. Prometheus 2.x keeps `le` as the exporter wrote it, and both vLLM and Ray write
floats ("2.5", "1.0"): `bucket_label` formats the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.config.spec import DeploymentSpec


@dataclass(frozen=True)
class Slo:
    ttft_p95_seconds: float = 2.5   # time to first token, p95, at the ingress
    itl_p95_seconds: float = 0.1    # inter-token latency (TPOT), p95

    @staticmethod
    def bucket_label(seconds: float) -> str:
        return repr(float(seconds))


def slo_for(spec: DeploymentSpec) -> Slo:
    """The SLOs of this deployment (today the defaults: see the module docstring)."""
    del spec  # no SLO keys in Contract 1 yet
    return Slo()
