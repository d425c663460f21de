"""The `python -m serve.benchmark` command line: its arguments and their checks (argparse's part).

One of job.RUN_FILES (the in-cluster `run` parses with it); what the commands do is __main__.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlparse

from serve.benchmark import varying
from serve.benchmark.loadgen import APIS
from serve.benchmark.workload import DISTRIBUTIONS, PRESETS

MAX_REQUESTS = 100_000
MAX_TOKENS = 1_000_000
MAX_RATES = 32
MAX_SCHEDULE_S = 86_400.0  # an open-loop schedule longer than a day without --duration is a typo


class UsageError(Exception):
    """Invalid arguments: reported as one line on stderr with exit 2."""


class _Parser(argparse.ArgumentParser):
    """argparse prints the usage and exits 2 on its own; make that one readable line instead."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _positive_int(name: str, limit: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {text!r}") from None
        if not 1 <= value <= limit:
            raise argparse.ArgumentTypeError(f"{name} must be between 1 and {limit}, got {value}")
        return value
    return parse


def _positive_float(name: str, allow_zero: bool = False) -> Any:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
            raise argparse.ArgumentTypeError(f"{name} must be a positive number, got {text}")
        return value
    return parse


def _rates(text: str) -> list[float]:
    parts = [p for p in text.split(",") if p.strip()]
    if not parts or len(parts) > MAX_RATES:
        raise argparse.ArgumentTypeError(f"--rate takes 1 to {MAX_RATES} comma-separated rates, got {text!r}")
    rates = [_positive_float("--rate")(p.strip()) for p in parts]
    if len(set(rates)) != len(rates):
        raise argparse.ArgumentTypeError(f"--rate has a repeated rate: {text!r}")
    return sorted(rates)


def _endpoint(text: str) -> str:
    parsed = urlparse(text)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise argparse.ArgumentTypeError(f"--endpoint must be an http(s) URL, got {text!r}")
    return text


def parser(description: str) -> argparse.ArgumentParser:
    """The whole command line; `description` is the help's first line."""
    parser = _Parser(prog="python -m serve.benchmark", description=description)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = commands.add_parser("run", help="send a workload and write requests.jsonl and summary.json")
    target = run.add_mutually_exclusive_group(required=True)
    target.add_argument("--endpoint", type=_endpoint, help="server root or its /v1 base URL")
    target.add_argument("--outputs", help="a raypd stack's outputs JSON (or -): through the Kubernetes API "
                                          "server's service proxy, with the outputs' kubeconfig")
    run.add_argument("--kubeconfig", type=Path, help="with --outputs: this kubeconfig instead of the outputs' own")
    run.add_argument("--model", help="the model id the endpoint serves (default with --outputs: its modelId)")
    run.add_argument("--api", choices=APIS, default="chat", help="chat: /v1/chat/completions; completions")
    load = run.add_mutually_exclusive_group(required=True)
    load.add_argument("--rate", type=_rates, help="open-loop Poisson rate(s), requests/s; R1,R2,... sweeps")
    load.add_argument("--concurrency", type=_positive_int("--concurrency", 10_000), help="requests in flight")
    varying.add_arguments(run, load, _positive_float, _positive_int, _endpoint)
    run.add_argument("--requests", type=_positive_int("--requests", MAX_REQUESTS),
                     help="requests per (sub-)run; with a schedule or trace, the most to send")
    run.add_argument("--duration", type=_positive_float("--duration"), help="stop sending after this many s")
    run.add_argument("--timeout", type=_positive_float("--timeout"), default=60.0, help="per request, s")
    run.add_argument("--input-tokens", type=_positive_int("--input-tokens", MAX_TOKENS),
                     help="prompt length in words (approximately tokens); default 1024 or the preset's")
    run.add_argument("--output-tokens", type=_positive_int("--output-tokens", MAX_TOKENS),
                     help="max_tokens; default 256 or the preset's")
    run.add_argument("--input-dist", choices=DISTRIBUTIONS, default="fixed")
    run.add_argument("--output-dist", choices=DISTRIBUTIONS, default="fixed")
    run.add_argument("--preset", choices=sorted(PRESETS), help="chat 1k/256, rag 8k/256, agentic shared prefix")
    run.add_argument("--prompts", type=Path, help='JSONL file of {"prompt": ..., "max_tokens"?: ...}')
    run.add_argument("--ignore-eos", action="store_true", help="send vLLM's ignore_eos: exactly max_tokens")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--slo-ttft-ms", type=_positive_float("--slo-ttft-ms"))
    run.add_argument("--slo-tpot-ms", type=_positive_float("--slo-tpot-ms"))
    run.add_argument("--usd-per-hour", type=_positive_float("--usd-per-hour", allow_zero=True),
                     help="cost of the deployment, for usd_per_million_output_tokens")
    run.add_argument("--out", required=True, type=Path)
    shown = run.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print summary.json instead of a table")
    shown.add_argument("--events", action="store_true",
                       help="stdout is JSON lines for a program: progress, then the summary and the records")
    compare = commands.add_parser("compare", help="side-by-side report of 2+ run directories")
    compare.add_argument("runs", nargs="+", type=Path)
    compare.add_argument("--out", required=True, type=Path)
    compare.add_argument("--region", help="the stacks' AWS region, when the runs' --usd-per-hour was raypd's "
                                          "estimate (estimatedUsdPerHour): the costs then name the catalogue's "
                                          "price basis for it")
    job = commands.add_parser("job", help="print the in-cluster Job (for kubectl apply -f -) that runs "
                                          "`run` next to the endpoint; RUN ARGS after --")
    job.add_argument("--outputs", required=True, help="stack outputs JSON (pulumi stack output --json), or -")
    job.add_argument("--name", default="raypd-benchmark", help="Job name (DNS-1123, at most 52 characters)")
    job.add_argument("--out", type=Path, help="run the Job now through the Kubernetes API (the outputs' "
                                              "kubeconfig), follow it, and write its results here")
    job.add_argument("--kubeconfig", type=Path, help="with --out: this kubeconfig instead of the outputs' own")
    job.add_argument("run_args", nargs=argparse.REMAINDER, help="-- then the run command's load and workload")
    return parser
