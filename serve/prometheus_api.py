"""The deployment's Prometheus, asked through the Kubernetes API's service proxy (as verify asks Ray).

No port-forward and no second credential: the stack's kubeconfig reaches the in-cluster Service
`raypd-prometheus:9090` in the metrics namespace (components.render.observability_names) at
`/api/v1/namespaces/<ns>/services/<svc>:9090/proxy/api/v1/...`. The answers are Prometheus's HTTP
API v1 (prometheus/web/api/v1/api.go, the same in 2.x and 3.x):
- every answer is `{"status": "success"|"error", "data": ..., "errorType": ..., "error": ...}`;
  a bad expression is HTTP 400 (`bad_data`), a query that timed out 503, an engine error 422;
- `GET /api/v1/query?query=EXPR` -> `data: {"resultType": "vector", "result": [{"metric": {...},
  "value": [<unix seconds>, "<sample as a string: '1', 'NaN', '+Inf'>"]}]}`;
- `GET /api/v1/alerts` -> `data: {"alerts": [{"labels", "annotations", "state": "pending"|"firing",
  "activeAt", "value"}]}` (the rule manager's active alerts; inactive ones are not listed).
When the Service has no ready pod the API server itself answers 503 with a Kubernetes Status
(`no endpoints available for service ...`); that and any transport failure are PrometheusError.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional
from urllib.parse import urlsplit

from components.config import defaults
from components.render import observability_names
from components.render.outputs import OBSERVABILITY_KEY
from serve.kube import KubeClient, KubeError

MAX_ANSWER_BYTES = 4 * 1024 * 1024


class PrometheusError(Exception):
    """Prometheus could not be asked or refused the question: one readable line, no secret."""


@dataclass(frozen=True)
class Sample:
    labels: dict[str, str]
    value: float   # may be NaN or infinite, as Prometheus computed it


@dataclass(frozen=True)
class Alert:
    name: str
    state: str        # "firing" or "pending"
    severity: str
    summary: str
    runbook: str
    active_at: str
    labels: dict[str, str]


def _parse_value(raw: Any) -> float:
    """`[ts, "1.5"]` -> 1.5; Prometheus writes NaN and +Inf/-Inf as strings, which float() reads."""
    if not isinstance(raw, list) or len(raw) != 2 or not isinstance(raw[1], str):
        raise PrometheusError(f"Prometheus answered a sample that is not [time, \"value\"]: {str(raw)[:80]}")
    try:
        return float(raw[1])
    except ValueError:
        raise PrometheusError(f"Prometheus answered a sample value that is not a number: {raw[1][:40]!r}") from None


def _labels(raw: Any) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): str(v) for k, v in raw.items()}


@dataclass
class PrometheusApi:
    """Instant queries and active alerts of the in-cluster Prometheus; every call bounded by `timeout`."""

    client: KubeClient
    namespace: str = observability_names.NAMESPACE
    service: str = observability_names.PROMETHEUS_SERVICE
    port: int = defaults.PROMETHEUS_PORT
    timeout: Optional[float] = None

    def _get(self, path: str, query: Optional[Mapping[str, str]] = None) -> Any:
        where = f"Prometheus ({self.namespace}/{self.service}:{self.port})"
        try:
            response = self.client.service_proxy(self.namespace, self.service, self.port, path,
                                                 query=query, timeout=self.timeout)
        except KubeError as exc:
            raise PrometheusError(f"cannot ask {where}: {exc}") from None
        try:
            document = response.json() if len(response.body) <= MAX_ANSWER_BYTES else None
        except (ValueError, UnicodeDecodeError):
            document = None
        if isinstance(document, Mapping) and document.get("status") == "error":
            raise PrometheusError(f"{where} refused the query (HTTP {response.status}, "
                                  f"{document.get('errorType')}): {str(document.get('error'))[:300]}")
        if response.status != 200 or not isinstance(document, Mapping) or document.get("status") != "success":
            message = document.get("message") if isinstance(document, Mapping) else None
            reason = f": {self.client.scrub(str(message))[:300]}" if message else ""
            raise PrometheusError(f"{where} did not answer through the Kubernetes API proxy "
                                  f"(HTTP {response.status}{reason})")
        return document.get("data")

    def query(self, expr: str) -> list[Sample]:
        """An instant query's vector (a scalar answer becomes one sample without labels)."""
        data = self._get("api/v1/query", {"query": expr})
        if not isinstance(data, Mapping):
            raise PrometheusError("Prometheus answered a query without data")
        kind, result = data.get("resultType"), data.get("result")
        if kind == "scalar":
            return [Sample({}, _parse_value(result))]
        if kind != "vector" or not isinstance(result, list):
            raise PrometheusError(f"Prometheus answered a {kind} where an instant vector was asked")
        return [Sample(_labels(item.get("metric")), _parse_value(item.get("value")))
                for item in result if isinstance(item, Mapping)]

    def alerts(self) -> list[Alert]:
        """The active (pending or firing) alerts, firing first."""
        data = self._get("api/v1/alerts")
        raw = data.get("alerts") if isinstance(data, Mapping) else None
        if not isinstance(raw, list):
            raise PrometheusError("Prometheus answered the alerts without a list")
        found = []
        for item in raw:
            if not isinstance(item, Mapping):
                continue
            labels, notes = _labels(item.get("labels")), _labels(item.get("annotations"))
            found.append(Alert(name=labels.get("alertname", "?"), state=str(item.get("state", "")),
                               severity=labels.get("severity", ""), summary=notes.get("summary", ""),
                               runbook=notes.get("runbook_url", ""), active_at=str(item.get("activeAt", "")),
                               labels=labels))
        return sorted(found, key=lambda a: (a.state != "firing", a.name))


def finite(value: float) -> Optional[float]:
    """A sample for JSON: NaN and infinities (no observation, an empty ratio) are "no value"."""
    return value if math.isfinite(value) else None


def prometheus_for(client: KubeClient, outputs: Mapping[str, Any],
                   timeout: Optional[float] = None) -> Optional[PrometheusApi]:
    """The stack's Prometheus from outputs `observability.prometheusUrl` (`http://<svc>.<ns>.svc...
    :<port>`), or None when the stack has no metrics stack."""
    section = outputs.get(OBSERVABILITY_KEY)
    if not isinstance(section, Mapping) or not section.get("prometheusUrl"):
        return None
    url = urlsplit(str(section["prometheusUrl"]))
    parts = (url.hostname or "").split(".")
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise PrometheusError(f"outputs observability.prometheusUrl is not a Service URL: {url.geturl()[:120]}")
    return PrometheusApi(client, namespace=parts[1], service=parts[0], port=url.port or 80, timeout=timeout)
