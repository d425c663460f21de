"""The timeline plot: good share and TTFT over time, the fault and the recovery marked (PNG).

Drawn with matplotlib's Agg backend as serve.benchmark's compare report draws its plots (no
display needed); a pure function of the report's `timeline`, `fault` and `recovery`.
"""

from __future__ import annotations

import io
from typing import Any, Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (the backend must be chosen first)

PLOT_NAME = "timeline.png"


def timeline_png(report: Mapping[str, Any]) -> bytes:
    buckets = report["timeline"]
    width = float(report["judging"]["bucketS"])
    figure, (share, ttft) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True)
    mids = [b["startS"] + width / 2 for b in buckets]
    share.plot([m for m, b in zip(mids, buckets, strict=True) if b["goodShare"] is not None],
               [b["goodShare"] for b in buckets if b["goodShare"] is not None], marker="o", color="C0")
    share.set_ylabel("good answers (share)")
    share.set_ylim(-0.05, 1.05)
    ttft.plot([m for m, b in zip(mids, buckets, strict=True) if b["ttftP50Ms"] is not None],
              [b["ttftP50Ms"] for b in buckets if b["ttftP50Ms"] is not None], marker=".", color="C1")
    ttft.set_ylabel("TTFT p50 (ms)")
    ttft.set_xlabel("seconds since the load started (by send time)")
    for axes in (share, ttft):
        axes.axvline(report["fault"]["atS"], color="red", linestyle="--", label=f"fault: {report['fault']['name']}")
        if report["recovery"]["recoveredAtS"] is not None:
            axes.axvline(report["recovery"]["recoveredAtS"], color="green", linestyle=":", label="recovered")
        axes.grid(alpha=0.3)
    share.legend(fontsize="small")
    share.set_title("resilience check")
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()
