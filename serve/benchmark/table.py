"""The text `python -m serve.benchmark run` prints without --json: a run's summary as a table, then
a sweep's line per rate and its goodput (docs/benchmark.md explains every number)."""

from __future__ import annotations

from typing import Any, Optional


def table(summary: dict[str, Any], usd_per_hour: Optional[float] = None) -> str:
    def ms(value: Optional[float]) -> str:
        return "-" if value is None else f"{value:.1f}"

    r = summary["requests"]
    pooled = " (all rates pooled)" if summary.get("sweep") else ""
    lines = [f"requests{pooled}: {r['sent']} sent, {r['completed']} completed, {r['failed']} failed"
             + (f" {summary['errors']}" if summary["errors"] else "")]
    lines.append(f"{'':8}{'mean':>10}{'p50':>10}{'p90':>10}{'p95':>10}{'p99':>10}")
    for key in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        s = summary[key]
        lines.append(f"{key:8}" + "".join(f"{ms(s[k]):>10}" for k in ("mean", "p50", "p90", "p95", "p99")))
    lines.append(f"request_rate {summary['request_rate']:.2f}/s, input {summary['input_tokens_per_s']:.1f} tok/s, "
                 f"output {summary['output_tokens_per_s']:.1f} tok/s")
    if summary["slo"]["attained"] is not None:
        lines.append(f"SLO ttft<={summary['slo']['ttft_ms']:g} ms, tpot<={summary['slo']['tpot_ms']:g} ms: "
                     f"{summary['slo']['attained']:.1%} attained")
    if summary["usd_per_million_output_tokens"] is not None:
        # The summary does not keep the price (Contract 6 fixes its keys): say it here, with its source.
        priced = f" (at the --usd-per-hour given, {usd_per_hour:g}/h)" if usd_per_hour is not None else ""
        lines.append(f"USD per million output tokens: {summary['usd_per_million_output_tokens']:.4f}{priced}")
    lines.extend(_sweep_lines(summary))
    lines.extend(_varying_lines(summary))
    return "\n".join(lines)


def _varying_lines(summary: dict[str, Any]) -> list[str]:
    """A schedule's line per step, then the phases' replicas and each scale-up (docs/benchmark.md)."""
    lines = []
    for step in (summary.get("schedule") or {}).get("steps") or []:
        rate = f"{step['rate']:g}" + ("" if step["to"] is None else f"->{step['to']:g}")
        r, ttft = step["requests"], step["ttft_ms"]
        held = f", {step['held_by_cap']} held by --max-in-flight" if step["held_by_cap"] else ""
        p50 = "-" if ttft["p50"] is None else f"{ttft['p50']:.1f}"
        lines.append(f"step {step['step'] + 1} {step['at_s']:g}-{step['end_s']:g} s at {rate}/s: "
                     f"{r['completed']}/{r['sent']} completed (expected {step['expected']:g}), TTFT p50 {p50} ms{held}")
    replicas = summary.get("replicas")
    if replicas is None:
        return lines
    if not replicas["sampled"]:
        return [*lines, f"replicas: not sampled ({replicas['why']})"]
    most = ", ".join(f"{phase} {count}" for phase, count in replicas["max_running"].items())
    lines.append(f"replicas: most RUNNING {most} ({replicas['samples_taken']} samples, "
                 f"{replicas['failed_samples']} failed)")
    for up in replicas["scale_ups"]:
        since = "" if up["took_s"] is None else f"{up['took_s']:g} s after step {up['load_step'] + 1}, "
        lines.append(f"scale-up {up['phase']} {up['from']}->{up['to']}: serving at {up['serving_s']:g} s, "
                     f"{since}{up['target_to_serving_s']:g} s after Serve raised its target")
    return lines


def _sweep_lines(summary: dict[str, Any]) -> list[str]:
    """A sweep's line per rate (the table above pools every rate), then its goodput in words."""
    def ms(value: Optional[float]) -> str:
        return "-" if value is None else f"{value:.1f}"

    lines = []
    for point in summary.get("sweep") or []:
        r, slo = point["requests"], point["slo"]
        attained = "" if slo["attained"] is None else f", SLO {slo['attained']:.1%} attained"
        lines.append(f"rate {point['rate']:g}/s: {r['completed']}/{r['sent']} completed, "
                     f"{point['request_rate']:.2f}/s, TTFT p50/p90 {ms(point['ttft_ms']['p50'])}/"
                     f"{ms(point['ttft_ms']['p90'])} ms, TPOT p50/p90 {ms(point['tpot_ms']['p50'])}/"
                     f"{ms(point['tpot_ms']['p90'])} ms{attained} ({point['dir']}/)")
    if "goodput" in summary:
        rate = summary["goodput"]["rate"]
        share = f"{summary['goodput']['attainment_threshold']:.0%}"
        if summary["slo"]["attained"] is None:
            lines.append("goodput: n/a (no SLO given: pass --slo-ttft-ms and --slo-tpot-ms)")
        elif rate is None:
            lines.append(f"goodput: none (no swept rate met the SLOs for {share} of requests)")
        else:
            lines.append(f"goodput: {rate:g} requests/s (the highest swept rate meeting the SLOs for {share} "
                         "of requests)")
    return lines
