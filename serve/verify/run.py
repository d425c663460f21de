"""`run_verify`: every verify check against a deployed stack, in the order of Contract 5.

The evidence is fetched once (serve/evidence/cluster.py `Evidence`) and shared by the checks; the chat
request is sent between two readings of the decode's KV counters, which are re-read until they
move or the wait ends.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any, Mapping, Optional

from components.config.checks import Report
from serve.evidence import (
    LOG_LINES,
    Evidence,
    VerifyInputError,
    VerifyPlan,
    check_outputs,
    resolve_kubeconfig,
)
from serve.kube import DEFAULT_TIMEOUT, KubeClient, KubeConfigError, client_from_kubeconfig
from serve.kv_evidence import KvReading, compare_readings
from serve.verify import api_parity, exposure, metrics_flowing
from serve.verify.endpoint import (
    ChatOutcome,
    check_endpoint_chat,
    check_endpoint_models,
    direct_endpoint,
    proxied_endpoint,
    send_chat,
)
from serve.verify.external import endpoint_checks, key_for_endpoint
from serve.verify.kv_transfer import check_kv_transfer, read_kv
from serve.verify.nixl import check_nixl_backend
from serve.verify.nodes import check_efa_devices, check_gpu_nodes, check_one_zone
from serve.verify.report import ApiGate, guarded, nothing_checked_fails
from serve.verify.serve_app import check_rayservice_ready, check_replica_placement, check_serve_app

log = logging.getLogger(__name__)

CHAT_TIMEOUT = 60.0
KV_WAIT_SECONDS = 20.0  # Ray exports metrics every ~10 s: wait up to two rounds for the counters
KV_POLL_SECONDS = 5.0


def run_verify(
    outputs: Mapping[str, Any],
    kubeconfig: Optional[str] = None,
    endpoint: Optional[str] = None,
    *,
    client: Optional[KubeClient] = None,
    timeout: float = DEFAULT_TIMEOUT,
    chat_timeout: float = CHAT_TIMEOUT,
    kv_wait_seconds: float = KV_WAIT_SECONDS,
    kv_poll_seconds: float = KV_POLL_SECONDS,
    log_lines: int = LOG_LINES,
    aws_session: Any = None,
    api_key: Optional[str] = None,
    metrics_wait_seconds: float = metrics_flowing.WAIT_SECONDS,
    metrics_poll_seconds: float = metrics_flowing.POLL_SECONDS,
    parity_budget_seconds: float = api_parity.BUDGET_SECONDS,
) -> Report:
    """Every verify check against a deployed stack; raises VerifyInputError on unusable input.

    `kubeconfig` is kubeconfig text (default: the outputs' own); `endpoint` an OpenAI base URL to
    use instead of the Serve Service proxy. Every API call is bounded by `timeout` seconds, the
    chat by `chat_timeout`; after the chat the KV counters are re-read for up to `kv_wait_seconds`.
    `api_key` is the key endpoint-external sends to outputs endpoint.url (default: the outputs'
    apiKey, as the web app's verify job has them), and the checks' requests to `endpoint` carry
    (external.py `key_for_endpoint`); it never appears in the report. After the
    chat, metrics-flowing waits up to `metrics_wait_seconds` for its series to reach Prometheus.
    api-parity's requests (each bounded by `chat_timeout`) take at most `parity_budget_seconds`.
    """
    check_outputs(outputs, have_kubeconfig=kubeconfig is not None or client is not None)
    plan = VerifyPlan.from_outputs(outputs)
    if client is None:
        try:
            client = client_from_kubeconfig(resolve_kubeconfig(outputs, kubeconfig),
                                            region_hint=plan.region, timeout=timeout,
                                            session=aws_session)
        except KubeConfigError as exc:
            raise VerifyInputError(str(exc)) from None
    ev = Evidence(client, plan, log_lines=log_lines)
    target = direct_endpoint(endpoint, key_for_endpoint(outputs, api_key, endpoint)) if endpoint \
        else proxied_endpoint(ev)
    api = ApiGate(ev)  # the checks that need the Kubernetes API; an --endpoint is reached without it
    via_target = functools.partial(guarded, ev) if endpoint else api.check
    checks = [api.check("gpu-nodes", check_gpu_nodes, ev),
              api.check("efa-devices", check_efa_devices, ev),
              api.check("one-zone", check_one_zone, ev),
              api.check("rayservice-ready", check_rayservice_ready, ev),
              api.check("serve-app-running", check_serve_app, ev),
              api.check("replica-placement", check_replica_placement, ev),
              api.check("nixl-backend", check_nixl_backend, ev),
              via_target("endpoint-models", check_endpoint_models, target, ev, timeout)]
    disaggregated = plan.kv_backend is not None
    before = _guarded_reading(ev) if disaggregated and ev.down is None else None
    started = time.monotonic()
    chat = send_chat(target, ev, chat_timeout) if endpoint or ev.down is None else None
    after = None
    if disaggregated and chat is not None and chat.status is not None and before is not None:
        deadline = started + max(0.0, kv_wait_seconds)
        while True:  # bounded: ends at the deadline, and at once when there is news
            after = _guarded_reading(ev)
            if (after is not None and compare_readings(before, after).moved) \
                    or time.monotonic() + kv_poll_seconds > deadline:
                break
            time.sleep(kv_poll_seconds)
    waited = time.monotonic() - started
    checks += [via_target("endpoint-chat", check_endpoint_chat, chat, target),
               api.check("kv-transfer", check_kv_transfer, plan.kv_backend, before, after, chat, waited)]
    scrub = ev.client.scrub if ev.client is not None else str
    checks.append(via_target(api_parity.CHECK_ID, functools.partial(
        api_parity.check_api_parity, budget_seconds=parity_budget_seconds, scrub=scrub),
        target, chat or ChatOutcome(None), plan.model_id, chat_timeout))
    checks += endpoint_checks(outputs, api_key, timeout)  # the public endpoint, never through the API
    checks.append(api.check(exposure.CHECK_ID, exposure.check_exposure, ev))
    checks.append(api.check(metrics_flowing.CHECK_ID, functools.partial(
        metrics_flowing.check_metrics_flowing, wait_seconds=metrics_wait_seconds,
        poll_seconds=metrics_poll_seconds, timeout=timeout), ev, outputs))
    return Report.of("verify", nothing_checked_fails(ev, checks, api.stopped))


def _guarded_reading(ev: Evidence) -> Optional[KvReading]:
    try:
        return read_kv(ev)
    except Exception:  # noqa: BLE001 - no counters is "no evidence", reported by kv-transfer
        log.debug("KV reading failed", exc_info=False)
        return None
