"""`python -m serve.resilience --outputs FILE|- [--kubeconfig F] --fault prefill-pod|decode-pod|head-pod|node
[--rate R] [--duration S] [--fault-at S] [--endpoint URL] [--json] --out DIR`.

Golden answers, then a steady load at `--rate` requests/s with the fault injected `--fault-at`
seconds in, kept up until the deployment has recovered (and stayed so for 10 s) or for at most
`--duration` seconds, then the report (Contract 8): printed as a table (or with
--json as the JSON document) and written to DIR (report.json, report.txt, timeline.png,
requests.jsonl). The load goes to the Serve Service through the Kubernetes API's service proxy
(as `serve.benchmark run --outputs` sends it), or to --endpoint. It DELETES A POD (or cordons and
drains a node) of a live deployment: run it where a short outage is acceptable.

Exit 0 when no check failed, 1 when one did (the fault cost something), 2 on invalid input or a
refused fault (RBAC: it needs the verbs faults.RBAC_NEEDED names), 130 when interrupted. A node
cordoned by this run is uncordoned on every exit, Ctrl-C and SIGTERM included.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn, Optional, Sequence
from urllib.parse import urlparse

from components.config.safe_documents import FileRefused, read_file, shown_name
from serve.evidence import MAX_OUTPUTS_BYTES, VerifyInputError, VerifyPlan, check_outputs, parse_outputs_text
from serve.evidence import resolve_kubeconfig as outputs_kubeconfig
from serve.kube import KubeClient, KubeConfigError, KubeError, client_from_kubeconfig, read_kubeconfig_file
from serve.resilience.faults import KubeDeployment, KubeFault, serve_proxy
from serve.resilience.limits import (
    DEFAULT_DURATION_S,
    DEFAULT_FAULT_AT_S,
    DEFAULT_RATE,
    DEFAULT_TIMEOUT_S,
    FAULTS,
    MAX_DURATION_S,
    MAX_RATE,
    MAX_TIMEOUT_S,
    fault_timing_problem,
)
from serve.resilience.plot import PLOT_NAME, timeline_png
from serve.resilience.report import Settings, build_report, table
from serve.resilience.run import FaultRefused, measure

EXIT_OK, EXIT_FINDINGS, EXIT_INVALID, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """Invalid input: one line on stderr naming the flag, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _number(flag: str, low: float, high: float) -> Any:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be a number, got {ascii(text)[:40]}") from None
        if not math.isfinite(value) or not low < value <= high:
            raise argparse.ArgumentTypeError(f"{flag} must be above {low:g} and at most {high:g}, got {text[:40]}")
        return value
    return parse


def _fault(text: str) -> str:
    if text not in FAULTS:
        raise argparse.ArgumentTypeError(f"--fault must be one of {', '.join(FAULTS)}, got {ascii(text)[:40]}")
    return text


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m serve.resilience", description=(__doc__ or "").split("\n\n")[1])
    parser.add_argument("--outputs", required=True, help="stack outputs JSON (`pulumi stack output --json "
                                                         "--show-secrets`), or - for stdin")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: the outputs' kubeconfig)")
    parser.add_argument("--fault", required=True, type=_fault, help=" | ".join(FAULTS))
    parser.add_argument("--rate", type=_number("--rate", 0, MAX_RATE), default=DEFAULT_RATE,
                        help=f"requests/s (default {DEFAULT_RATE:g})")
    parser.add_argument("--duration", type=_number("--duration", 0, MAX_DURATION_S), default=DEFAULT_DURATION_S,
                        help=f"the most seconds of load: it stops once recovered (default {DEFAULT_DURATION_S:g})")
    parser.add_argument("--fault-at", type=_number("--fault-at", 0, MAX_DURATION_S), default=DEFAULT_FAULT_AT_S,
                        help=f"seconds into the load the fault is injected (default {DEFAULT_FAULT_AT_S:g})")
    parser.add_argument("--timeout", type=_number("--timeout", 0, MAX_TIMEOUT_S), default=DEFAULT_TIMEOUT_S,
                        help="per request, s")
    parser.add_argument("--endpoint", help="an OpenAI base URL to load instead of the Serve Service proxy")
    parser.add_argument("--json", action="store_true", help="print the report as JSON (Contract 8)")
    parser.add_argument("--out", required=True, type=Path, help="directory for the report and plot")
    return parser


def _outputs(source: str) -> dict[str, Any]:
    name = "the outputs on stdin" if source == "-" else f"the outputs file {shown_name(source)}"
    try:
        text = (sys.stdin.read(MAX_OUTPUTS_BYTES + 1) if source == "-"
                else read_file(source, MAX_OUTPUTS_BYTES).decode("utf-8", errors="replace"))
    except FileRefused as exc:
        raise UsageError(f"--outputs: {exc.about(name)}") from None
    try:
        outputs = parse_outputs_text(text, name)
    except VerifyInputError as exc:
        raise UsageError(f"--outputs: {exc}") from None
    return outputs


def _client(outputs: dict[str, Any], kubeconfig: Optional[str]) -> KubeClient:
    try:
        text = read_kubeconfig_file(kubeconfig) if kubeconfig else None
        check_outputs(outputs, have_kubeconfig=text is not None)
        return client_from_kubeconfig(outputs_kubeconfig(outputs, text), region_hint=outputs.get("region"))
    except KubeConfigError as exc:
        raise UsageError(f"--kubeconfig: {exc}") from None
    except VerifyInputError as exc:
        raise UsageError(f"--outputs: {exc}") from None


def _endpoint(args: argparse.Namespace, client: KubeClient, plan: VerifyPlan) -> tuple[str, dict[str, Any]]:
    """The OpenAI server to load and how to reach it: --endpoint as given, or the Serve Service
    behind the API server's service proxy with the kubeconfig's TLS and credentials."""
    if args.endpoint is not None:
        parsed = urlparse(args.endpoint)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise UsageError(f"--endpoint must be an http(s) URL, got {ascii(args.endpoint)[:80]}")
        return args.endpoint, {}
    try:
        return serve_proxy(client, plan)
    except KubeError as exc:
        raise UsageError(f"--kubeconfig: {exc}") from None


def _write(out: Path, report: dict[str, Any], records: list[dict[str, Any]]) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        (out / "report.txt").write_text(table(report) + "\n")
        (out / PLOT_NAME).write_bytes(timeline_png(report))
        (out / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    except OSError as exc:
        raise UsageError(f"--out: cannot write to {out}: {exc.strerror or exc}") from None


def _run(args: argparse.Namespace) -> int:
    if fault_timing_problem(args.fault_at, args.duration):
        raise UsageError(f"--fault-at ({args.fault_at:g} s) must come before the end of --duration "
                         f"({args.duration:g} s)")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out: {shown_name(str(args.out))} exists and is not a directory")
    outputs = _outputs(args.outputs)
    client = _client(outputs, args.kubeconfig)
    plan = VerifyPlan.from_outputs(outputs)
    endpoint, connection = _endpoint(args, client, plan)
    fault = KubeFault(args.fault, KubeDeployment(client, plan))
    settings = Settings(args.rate, args.duration, args.fault_at, args.timeout)

    def interrupted(signum: int, frame: Any) -> None:
        fault.interrupt()  # the drain stops retrying, and no cordon lands after this
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupted) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        measured = measure(endpoint, plan.model_id, fault, KubeDeployment(client, plan), settings,
                           connection=connection)
    except KeyboardInterrupt:
        print("resilience: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except FaultRefused as exc:
        print(f"resilience: {client.scrub(str(exc))}", file=sys.stderr)
        return EXIT_INVALID
    finally:
        try:
            fault.restore()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    report = build_report(measured, settings)
    _write(args.out, report, measured.records)
    print(json.dumps(report, indent=2) if args.json else table(report))
    return EXIT_OK if report["ok"] else EXIT_FINDINGS


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        return _run(_parser().parse_args(argv))
    except (UsageError, FaultRefused) as exc:
        print(f"resilience: {exc}", file=sys.stderr)
        return EXIT_INVALID


if __name__ == "__main__":
    sys.exit(main())
