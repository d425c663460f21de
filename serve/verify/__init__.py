"""Post-deploy verification (Contract 5, kind "verify"): `python -m serve.verify` (serve/verify/__main__.py).

Everything goes through the Kubernetes API only: no kubectl, no exec into pods, no port-forward.
Everything is read from the API server (nodes, the RayService, pods, container logs) or through its
service and pod proxies (the Ray dashboard's Serve and log APIs on the head Service, the OpenAI
endpoint on the Serve Service, Ray's metrics on the worker pods). Each check says where its
evidence came from; a check that could not get evidence is warn or skip, never pass.

One module per group of checks, in the order the report lists them (components.config.checks VERIFY_IDS):
nodes (gpu-nodes, efa-devices, one-zone), serve_app (rayservice-ready, serve-app-running,
replica-placement), nixl (nixl-backend), endpoint (endpoint-models, endpoint-chat), kv_transfer
(kv-transfer), api_parity (api-parity: serve.conformance's subset), external (endpoint-external,
endpoint-auth), exposure (dashboard-exposure),
metrics_flowing (metrics-flowing); run (`run_verify`: all of them, in order) and report (titles,
the guard that turns a crash into a warning). The evidence they read is outside the package, as the
web app's live status reads it too: serve/evidence/ (Kubernetes, the Ray dashboard's Serve, State
and log APIs) and serve/kv_evidence.py (NIXL's and vLLM's log lines, vLLM's metrics under their
vLLM and Ray names, and two readings of the decode compared). What is checked and how is in
docs/troubleshooting.md.
"""

from __future__ import annotations

from serve.evidence import VerifyInputError
from serve.kv_evidence import KvReading, compare_readings
from serve.live_status import cluster_status
from serve.verify.endpoint import ChatOutcome, check_endpoint_chat
from serve.verify.kv_transfer import check_kv_transfer
from serve.verify.run import run_verify

__all__ = ["ChatOutcome", "KvReading", "VerifyInputError", "check_endpoint_chat", "check_kv_transfer",
           "cluster_status", "compare_readings", "run_verify"]

