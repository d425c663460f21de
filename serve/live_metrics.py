"""The SLO strip's numbers and the firing alerts, live, for the web app's Status panel.

The numbers are the raypd dashboard's SLO strip (components.render.observability_dashboards
`strip_numbers`: one expression each, shared with the Grafana panels), asked of the deployment's
Prometheus in one instant query through the Kubernetes API (serve.prometheus_api): each number is
tagged with its key by `label_replace`, so one round trip answers the strip at one evaluation time.
The alerts are Prometheus's active ones from raypd's rules (label `raypd_alert`). Never raises:
what could not be read is `{"available": false, "reason": ...}`.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Optional

from components.plan.slo import Slo
from components.render import observability_names
from components.render.observability_dashboards import StripNumber, dashboard_uid, strip_numbers
from serve.kube import KubeClient
from serve.prometheus_api import PrometheusApi, PrometheusError, finite, prometheus_for

log = logging.getLogger(__name__)

KEY_LABEL = "raypd_number"
ALERT_LABEL = "raypd_alert"   # components/render/observability_rules.py `_alert`
MAX_ALERTS = 20


def strip_query(numbers: list[StripNumber]) -> str:
    return " or ".join(f'label_replace(({n.expr}), "{KEY_LABEL}", "{n.key}", "", "")' for n in numbers)


def _breached(number: StripNumber, value: Optional[float]) -> bool:
    if value is None or number.slo is None:
        return False
    return value > number.slo


def read_strip(api: PrometheusApi, slo: Slo) -> list[dict[str, Any]]:
    numbers = strip_numbers(slo)
    values: dict[str, Optional[float]] = {}
    for sample in api.query(strip_query(numbers)):
        key = sample.labels.get(KEY_LABEL)
        if key is not None and values.get(key) is None:
            values[key] = finite(sample.value)
    return [{"key": n.key, "label": n.label, "unit": n.unit, "value": values.get(n.key), "slo": n.slo,
             "breached": _breached(n, values.get(n.key))} for n in numbers]


def read_alerts(api: PrometheusApi) -> list[dict[str, Any]]:
    return [{"name": a.name, "state": a.state, "severity": a.severity, "summary": a.summary[:300],
             "runbook": a.runbook[:200], "activeAt": a.active_at[:40]}
            for a in api.alerts() if a.labels.get(ALERT_LABEL) == "true"][:MAX_ALERTS]


def live_metrics(client: KubeClient, outputs: Mapping[str, Any], timeout: Optional[float] = None) -> dict[str, Any]:
    """`{"available": true, "strip": [...], "alerts": [...]}` or `{"available": false, "reason"}`.

    The SLOs are components.plan.slo's (Contract 1 has no SLO keys yet, so `slo_for` gives every
    deployment these defaults)."""
    try:
        api = prometheus_for(client, outputs, timeout)
        if api is None:
            return {"available": False, "reason": "the stack has no metrics stack "
                    "(raypd:observability.enabled is false): nothing collects metrics"}
        return {"available": True, "strip": read_strip(api, Slo()), "alerts": read_alerts(api)}
    except PrometheusError as exc:
        return {"available": False, "reason": str(exc)}
    except Exception as exc:  # noqa: BLE001 - the Status panel must render whatever Prometheus says
        log.debug("live metrics failed", exc_info=True)
        return {"available": False, "reason": f"cannot read the metrics: {type(exc).__name__}"}


def dashboard_links(stack: str) -> dict[str, Any]:
    """Where the user's browser opens the deployment's Grafana dashboard: Grafana is in-cluster
    only (outputs observability.grafanaUrl), so through the port-forward the command starts."""
    base = f"http://127.0.0.1:{observability_names.GRAFANA_LOCAL_PORT}"
    uid = dashboard_uid(stack)
    return {"portForward": observability_names.grafana_port_forward_command(),
            "links": [{"title": f"raypd {stack}: SLO, prefill, KV handoff, decode, capacity",
                       "url": f"{base}/d/{uid}?orgId=1&from=now-1h&to=now"},
                      {"title": "Grafana alert list (Prometheus's alerts)",
                       "url": f"{base}/alerting/list?view=state"}]}
