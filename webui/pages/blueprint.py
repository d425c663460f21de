"""The pages' one blueprint ("pages": every page's endpoint keeps its name, e.g. pages.deployment)
and the words its modules share."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint("pages", __name__)

OPERATION_LABELS = {"preview": "Preview", "up": "Deploy", "refresh": "Refresh", "destroy": "Tear down",
                    "preflight": "Preflight", "verify": "Verify", "benchmark": "Benchmark",
                    "clear-pending": "Clear pending operations", "resilience": "Resilience check",
                    "conformance": "Conformance"}
FORCE_FIELD = "force"  # the "launch anyway" box: launch despite a failed preflight
