"""What a resilience run may be asked: the faults, the limits and defaults of its settings.

One home for them: the CLI (serve/resilience/__main__.py) and the web app's Resilience tab
(webui/api_models ResilienceRequest, webui/resilience_runs.py) both read them from here, so the two
accept exactly the same runs. No heavy imports: the web app's request models load this at start.
"""

from __future__ import annotations

from typing import Optional

FAULTS = ("prefill-pod", "decode-pod", "head-pod", "node")
MAX_RATE = 1000.0
MAX_DURATION_S = 6 * 3600.0
MAX_TIMEOUT_S = 3600.0
DEFAULT_RATE = 2.0
DEFAULT_DURATION_S = 600.0
DEFAULT_FAULT_AT_S = 30.0
DEFAULT_TIMEOUT_S = 60.0


def fault_timing_problem(fault_at_s: float, duration_s: float) -> Optional[str]:
    """Why the fault would not come during the load (None when it does): a run that ends before its
    fault measures nothing."""
    if fault_at_s >= duration_s:
        return (f"the fault comes {fault_at_s:g} s into the load, so the load must last longer than that "
                f"(got {duration_s:g} s)")
    return None
