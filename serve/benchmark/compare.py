"""Side-by-side report of two or more run directories: a text table, PNG plots, report.html, a verdict.

Plots are drawn with matplotlib's Agg backend (no display needed) and embedded in report.html as
base64 PNGs, so the report is one self-contained file; the PNGs are also written next to it. The
verdict compares the first run with each other run under the conditions both were measured in
(workload, load, SLOs) and says so, since a ratio without its conditions misleads; every cost
figure says what it is priced at (serve.benchmark.prices), since a price without its basis does too.
"""

from __future__ import annotations

import base64
import html
import io
import logging
import math
from pathlib import Path
from typing import Any, Optional, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (the backend must be chosen first)

from serve.benchmark.prices import COST_ROW, PriceRegionError, basis_for_region, price_notes, said  # noqa: E402
from serve.benchmark.runfiles import read_run  # noqa: E402
from serve.benchmark.summary import CompareError, tpot_ms  # noqa: E402

log = logging.getLogger(__name__)
TABLE_ROWS = (
    ("requests completed", lambda s: s["requests"]["completed"], "{:d}"),
    ("requests failed", lambda s: s["requests"]["failed"], "{:d}"),
    ("TTFT p50 ms", lambda s: s["ttft_ms"]["p50"], "{:.1f}"),
    ("TTFT p90 ms", lambda s: s["ttft_ms"]["p90"], "{:.1f}"),
    ("TTFT p99 ms", lambda s: s["ttft_ms"]["p99"], "{:.1f}"),
    ("TPOT p50 ms", lambda s: s["tpot_ms"]["p50"], "{:.2f}"),
    ("TPOT p90 ms", lambda s: s["tpot_ms"]["p90"], "{:.2f}"),
    ("TPOT p99 ms", lambda s: s["tpot_ms"]["p99"], "{:.2f}"),
    ("ITL p99 ms", lambda s: s["itl_ms"]["p99"], "{:.2f}"),
    ("E2E p90 ms", lambda s: s["e2e_ms"]["p90"], "{:.0f}"),
    ("request rate /s", lambda s: s["request_rate"], "{:.2f}"),
    ("output tokens/s", lambda s: s["output_tokens_per_s"], "{:.1f}"),
    ("SLO attained", lambda s: s["slo"]["attained"], "{:.1%}"),
    ("goodput req/s", lambda s: (s.get("goodput") or {}).get("rate"), "{:g}"),
    (COST_ROW, lambda s: s["usd_per_million_output_tokens"], "{:.4f}"),
)




class Run:
    """One run: a label, its Contract 6 summary, its per-request records, and what its cost is
    priced at (`price_basis`, e.g. catalogue.price_basis(region); None: the --usd-per-hour given)."""

    def __init__(self, label: str, summary: dict[str, Any], records: list[dict[str, Any]],
                 price_basis: Optional[str] = None):
        self.label, self.summary, self.records, self.price_basis = label, summary, records, price_basis
        try:
            summary["requests"]["completed"]  # noqa: B018 (a shape check: a Contract 6 summary)
            summary["ttft_ms"]["p90"]  # noqa: B018
        except (KeyError, TypeError) as exc:
            raise CompareError(f"{label} is not a benchmark run: its summary lacks {exc}") from None

    @classmethod
    def load(cls, directory: Path) -> "Run":
        """A run directory: summary.json and requests.jsonl, checked (serve.benchmark.runfiles)."""
        summary, records = read_run(directory)
        return cls(directory.resolve().name or str(directory), summary, records)


def _cell(value: Any, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def table_rows(runs: Sequence[Run]) -> list[list[str]]:
    """Header and rows of the side-by-side table (metric, then one column per run)."""
    rows = [["metric"] + [run.label for run in runs]]
    for name, get, fmt in TABLE_ROWS:
        rows.append([name] + [_cell(get(run.summary), fmt) for run in runs])
    return rows


def cost_notes(runs: Sequence[Run]) -> list[str]:
    """What the cost row's figures are priced at (only for the runs that have a cost)."""
    return price_notes([(run.label, run.price_basis) for run in runs
                        if run.summary.get("usd_per_million_output_tokens") is not None])


def format_table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i])
                               for i, cell in enumerate(row)) for row in rows)


def _conditions(summary: dict[str, Any]) -> str:
    w, load = summary.get("workload") or {}, summary.get("load") or {}
    parts = []
    if w:
        parts.append(f"{w.get('api', 'chat')} API, ~{w.get('input_tokens')} input / {w.get('output_tokens')} output "
                     f"tokens" + (f" ({w['preset']} preset)" if w.get("preset") else ""))
    if "rate" in load:
        parts.append(f"Poisson {load['rate']:g} req/s")
    elif "rates" in load:
        parts.append("rates " + ",".join(f"{r:g}" for r in load["rates"]) + " req/s")
    elif "concurrency" in load:
        parts.append(f"concurrency {load['concurrency']}")
    slo = summary["slo"]
    if slo["ttft_ms"] is not None:
        parts.append(f"SLO TTFT <= {slo['ttft_ms']:g} ms and TPOT <= {slo['tpot_ms']:g} ms")
    return "; ".join(parts) or "the recorded conditions"


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    """a / b, or None when either is absent, b is not positive, or the quotient is not finite."""
    if a is None or b is None or not b > 0:
        return None
    try:
        ratio = a / b
    except OverflowError:  # an integer quotient beyond a float
        return None
    return ratio if math.isfinite(ratio) else None


def _latency_facts(a: Run, b: Run) -> str:
    """"; A has 0.9x the p90 TTFT, ... of B" (over each run's completed requests), or ""."""
    sa, sb = a.summary, b.summary
    facts = []
    for name, ratio in (("p90 TTFT", _ratio(sa["ttft_ms"]["p90"], sb["ttft_ms"]["p90"])),
                        ("p90 TPOT", _ratio(sa["tpot_ms"]["p90"], sb["tpot_ms"]["p90"])),
                        ("output tokens/s", _ratio(sa["output_tokens_per_s"], sb["output_tokens_per_s"]))):
        if ratio is not None:
            facts.append(f"{ratio:.2g}x the {name}")
    return f"; {a.label} has " + ", ".join(facts) + f" of {b.label}" if facts else ""


def _cost_fact(a: Run, b: Run) -> str:
    """"; at 1.3x the cost per output token" from each run's USD per million output tokens, or ""."""
    ca, cb = a.summary.get("usd_per_million_output_tokens"), b.summary.get("usd_per_million_output_tokens")
    ratio = _ratio(ca, cb)
    if ratio is None:
        return ""
    priced = (f"both from {said(a.price_basis)}" if a.price_basis == b.price_basis
              else f"{a.label}'s from {said(a.price_basis)}, {b.label}'s from {said(b.price_basis)}")
    return (f"; {a.label} at {ratio:.2g}x the cost per output token of {b.label} ({ca:.4g} vs {cb:.4g} USD per "
            f"million, {priced})")


def verdict(a: Run, b: Run) -> str:
    """One plain sentence comparing run a with run b, with the conditions it holds for."""
    sa, sb = a.summary, b.summary
    cost = _cost_fact(a, b)
    same_slo = sa["slo"]["ttft_ms"] == sb["slo"]["ttft_ms"] and sa["slo"]["tpot_ms"] == sb["slo"]["tpot_ms"]
    ga, gb = (sa.get("goodput") or {}).get("rate"), (sb.get("goodput") or {}).get("rate")
    with_slo = sa["slo"]["ttft_ms"] is not None
    if "goodput" in sa and "goodput" in sb and same_slo and with_slo:  # no SLOs: no goodput to compare
        if ga is None and gb is None:
            return (f"Neither {a.label} nor {b.label} meets the SLOs for 90% of requests at any swept rate"
                    f"{cost} ({_conditions(sa)}).")
        if gb is None or ga is None:
            best, other = (a, b) if gb is None else (b, a)
            rate = ga if gb is None else gb
            return (f"{best.label} meets the SLOs for 90% of requests up to {rate:g} req/s; {other.label} at no swept "
                    f"rate{cost} ({_conditions(sa)}).")
        ceiling = ""
        top = min(max((s.get("load") or {}).get("rates") or [0]) for s in (sa, sb))
        if max(ga, gb) >= top:
            ceiling = "; the highest swept rate, so the true goodput may be higher: sweep further"
        if ga == gb:
            return (f"{a.label} and {b.label} both meet the SLOs for 90% of requests up to {ga:g} req/s"
                    f"{ceiling}{_latency_facts(a, b)}{cost} ({_conditions(sa)}).")
        return (f"{a.label} meets the SLOs for 90% of requests at {ga / gb:.2g}x the rate of {b.label} "
                f"({ga:g} vs {gb:g} req/s{ceiling}){cost} ({_conditions(sa)}).")
    if sa["slo"]["attained"] is not None and sb["slo"]["attained"] is not None and same_slo:
        lead = f"{a.label} meets the SLOs for {sa['slo']['attained']:.0%} of requests, {b.label} for " \
               f"{sb['slo']['attained']:.0%}"
    else:
        lead = f"{a.label} vs {b.label}"
    detail = _latency_facts(a, b)
    conditions = _conditions(sa)
    if _conditions(sb) != conditions:
        conditions = f"{a.label}: {conditions}; {b.label}: {_conditions(sb)} (not the same conditions)"
    return f"{lead}{detail}{cost} ({conditions})."


def _cdf_plot(runs: Sequence[Run], metric: str) -> bytes:
    figure, axes = plt.subplots(figsize=(6.4, 4))
    for run in runs:
        ok = [r for r in run.records if r.get("ok")]
        values = sorted(v for v in ((tpot_ms(r) if metric == "tpot_ms" else r.get(metric)) for r in ok)
                        if v is not None)
        if values:
            axes.step(values, [(i + 1) / len(values) for i in range(len(values))], where="post", label=run.label)
    axes.set_xlabel(metric.replace("_ms", " (ms)").upper())
    axes.set_ylabel("share of completed requests")
    axes.set_title(f"{metric.replace('_ms', '').upper()} CDF")
    axes.grid(alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend()
    return _png(figure)


def _sweep_plot(runs: Sequence[Run]) -> Optional[bytes]:
    swept = [run for run in runs if run.summary.get("sweep")]
    if not swept:
        return None
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for number, run in enumerate(swept):
        rates = [point["rate"] for point in run.summary["sweep"]]
        for q, style in (("p50", "-"), ("p90", "--"), ("p99", ":")):
            for axes, key in ((left, "ttft_ms"), (right, "tpot_ms")):
                axes.plot(rates, [p[key][q] for p in run.summary["sweep"]], style, marker="o", color=f"C{number}",
                          label=f"{run.label} {q}")
    for axes, name in ((left, "TTFT (ms)"), (right, "TPOT (ms)")):
        axes.set_xlabel("offered rate (req/s)")
        axes.set_ylabel(name)
        axes.grid(alpha=0.3)
        axes.legend(fontsize="small")
    return _png(figure)


def distinct_labels(runs: list[Run]) -> list[Run]:
    """Two runs named alike are numbered (A:, B:, ...), so the table and the legends tell them apart."""
    labels = [run.label for run in runs]
    if len(set(labels)) != len(labels):
        for i, run in enumerate(runs):
            run.label = f"{chr(ord('A') + i) if i < 26 else i}:{run.label}"
    return runs


PLOT_NAMES = ("ttft_cdf.png", "tpot_cdf.png", "percentiles_vs_rate.png")


def plot(name: str, runs: Sequence[Run]) -> Optional[bytes]:
    """One of the report's PNGs (PLOT_NAMES); None for the rate plot when no run is a sweep."""
    if name == "percentiles_vs_rate.png":
        return _sweep_plot(runs)
    if name in ("ttft_cdf.png", "tpot_cdf.png"):
        return _cdf_plot(runs, name.replace("_cdf.png", "_ms"))
    raise ValueError(f"no plot named {name}")


def plots(runs: Sequence[Run]) -> dict[str, bytes]:
    """The report's PNGs by file name (the rate plot only when a run is a sweep); one run works too."""
    drawn = {name: plot(name, runs) for name in PLOT_NAMES}
    return {name: image for name, image in drawn.items() if image is not None}


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()


def _html(rows: Sequence[Sequence[str]], notes: Sequence[str], verdicts: Sequence[str],
          images: dict[str, bytes]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows[1:])
    pictures = "".join(f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,'
                       f'{base64.b64encode(data).decode("ascii")}"><figcaption>{html.escape(name)}</figcaption></figure>'
                       for name, data in images.items())
    sentences = "".join(f"<p class=verdict>{html.escape(v)}</p>" for v in verdicts)
    basis = "".join(f"<p class=basis>{html.escape(note)}</p>" for note in notes)
    return ("<!doctype html><html><head><meta charset=utf-8><title>raypd benchmark comparison</title><style>"
            "body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}td:first-child,th:first-child"
            "{text-align:left}.verdict{font-weight:600}img{max-width:100%}figure{margin:1em 0}</style></head>"
            f"<body><h1>Benchmark comparison</h1>{sentences}<table><tr>{head}</tr>{body}</table>{basis}{pictures}"
            "</body></html>\n")


def compare_runs(directories: Sequence[Path], out: Path, region: Optional[str] = None) -> str:
    """Write out/report.html and the PNGs; return the text table and verdicts for the CLI to print.

    `region`: the stacks' AWS region when the runs' --usd-per-hour was raypd's estimate, so the cost
    figures name the catalogue's basis for it; without it they say they are the price each run was given.
    """
    if len(directories) < 2:
        raise CompareError("compare needs at least two run directories")
    try:
        basis = None if region is None else basis_for_region(region)
    except PriceRegionError as exc:
        raise CompareError(f"--region: {exc}") from None
    runs = distinct_labels([Run.load(d) for d in directories])
    for run in runs:
        run.price_basis = basis
    rows = table_rows(runs)
    notes = cost_notes(runs)
    verdicts = [verdict(runs[0], other) for other in runs[1:]]
    images = plots(runs)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, data in images.items():
            (out / name).write_bytes(data)
        (out / "report.html").write_text(_html(rows, notes, verdicts, images), encoding="utf-8")
    except OSError as exc:
        raise CompareError(f"--out: cannot write {out}: {exc}") from exc
    log.info("wrote %s", out / "report.html")
    return "\n".join([format_table(rows), *notes]) + "\n\n" + "\n".join(verdicts)
