"""`python -m serve.benchmark run|compare ...` (Contract 6).

    run (--endpoint URL --model ID | --outputs FILE|-) (--rate R[,R...] | --concurrency N) --requests N
        [--input-tokens N] [--output-tokens N] [--slo-ttft-ms X --slo-tpot-ms Y] --out DIR [--json]
    compare DIR_A DIR_B [...] --out REPORT_DIR [--region REGION]
    job --outputs FILE|- [--name NAME] -- RUN ARGS     (prints the in-cluster Job: kubectl apply -f -)
    job --outputs FILE|- [--name NAME] --out DIR -- RUN ARGS   (runs it now and brings the results back)

Exit 0 ok; 1 when the run could not be done (every request failed to connect); 2 on invalid
arguments (one line on stderr, naming the argument, no traceback).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import sys
from pathlib import Path
from typing import Any, NoReturn, Optional, Sequence
from urllib.parse import quote, urlparse

from serve.benchmark.events import ProgressReporter, write_result
from serve.benchmark.loadgen import APIS, LoadConfig, run_load
from serve.benchmark.runfiles import dumps, write_run
from serve.benchmark.summary import CompareError, goodput, summarize
from serve.benchmark.table import table
from serve.benchmark.workload import (
    DISTRIBUTIONS,
    MAX_PROMPT_WORDS,
    PRESETS,
    RequestSpec,
    WorkloadError,
    file_workload,
    synthetic_workload,
)

EXIT_OK, EXIT_RUN_FAILED, EXIT_INVALID = 0, 1, 2
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


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m serve.benchmark", description=(__doc__ or "").split("\n\n")[0])
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
    run.add_argument("--requests", required=True, type=_positive_int("--requests", MAX_REQUESTS),
                     help="requests per (sub-)run")
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


def _job(args: argparse.Namespace) -> int:
    # Imported here: the in-cluster `run` has only RUN_FILES (no job.py, no PyYAML).
    from serve.benchmark.job import JobError, package_sources, render_benchmark_job
    from serve.benchmark.yaml_out import dump_all

    outputs = _read_outputs(args.outputs)
    run_args = [arg for arg in args.run_args if arg != "--"]
    try:
        manifests = render_benchmark_job(outputs, args.name, run_args, package_sources())
    except JobError as exc:
        raise UsageError(str(exc)) from None
    if args.out is None:
        print(dump_all(manifests), end="")
        return EXIT_OK
    return _job_in_cluster(args, outputs, run_args)


def _job_in_cluster(args: argparse.Namespace, outputs: dict[str, Any], run_args: list[str]) -> int:
    """Create the Job, print its progress on stderr, write requests.jsonl and summary.json to --out."""
    # Imported here: the in-cluster `run` has only RUN_FILES (no incluster.py, no serve.kube).
    from serve.benchmark.events import progress_words
    from serve.benchmark.incluster import BenchmarkFailed, InClusterRun, expected_seconds

    # The run arguments, checked here before anything is created in the cluster.
    load = _parser().parse_args(["run", "--endpoint", "http://in-cluster.invalid", "--model", "m", *run_args,
                                 "--out", str(args.out)])
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out: {args.out} exists and is not a directory")
    client = _kube_client(outputs, args.kubeconfig)
    seconds = expected_seconds(load.requests, load.rate or [], load.concurrency, load.timeout, load.duration)
    run = InClusterRun(client, outputs, args.name, run_args, run_seconds=seconds)
    print(f"benchmark: Job {args.name} created in {run.paths.namespace}; waiting for its pod", file=sys.stderr)
    try:
        result = run.run(lambda progress: print(progress_words(progress), file=sys.stderr, flush=True),
                         lambda: False)
    except BenchmarkFailed as exc:
        print(f"benchmark: {exc}", file=sys.stderr)
        return EXIT_RUN_FAILED
    except KeyboardInterrupt:  # run() deleted the Job and its ConfigMap on the way out
        print("benchmark: interrupted; the Job and its ConfigMap were deleted", file=sys.stderr)
        return 130
    write_run(args.out, result.records, result.summary)
    print(dumps(result.summary, indent=2))
    return EXIT_OK


def _specs(args: argparse.Namespace) -> list[RequestSpec]:
    preset = PRESETS.get(args.preset or "chat", PRESETS["chat"])
    output_tokens = args.output_tokens or preset["output_tokens"]
    if args.prompts is not None:
        return file_workload(args.prompts, args.requests, output_tokens, seed=args.seed, output_dist=args.output_dist)
    input_tokens = args.input_tokens or preset["input_tokens"]
    prefix = min(preset["shared_prefix_tokens"], input_tokens - 1) if args.preset == "agentic" else 0
    return synthetic_workload(args.requests, input_tokens, output_tokens, seed=args.seed,
                              input_dist=args.input_dist, output_dist=args.output_dist, shared_prefix_tokens=prefix)


def _to_the_microsecond(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Inter-token gaps rounded to 1 us once the run is over (not while it times): a quarter of
    the bytes in requests.jsonl and in the event stream, and no precision a clock here has."""
    for record in records:
        record["itl_ms"] = [round(gap, 3) for gap in record["itl_ms"]]
    return records


def _unreachable(records: Sequence[dict[str, Any]]) -> bool:
    return bool(records) and all(r.get("error_kind") == "connect" for r in records)


def _read_outputs(source: str) -> dict[str, Any]:
    """The stack outputs from stdin or a file, read as every file a raypd CLI reads
    (components.config.safe_documents: a regular file, bounded, JSON nested at most MAX_DEPTH)."""
    try:
        # Imported here: a pod running `run` has only job.RUN_FILES (and is given no --outputs).
        from components.config.safe_documents import DocumentError, FileRefused, load_json, read_file, shown_name
        from serve.evidence import MAX_OUTPUTS_BYTES
    except ImportError:
        raise UsageError("--outputs needs the raypd checkout; in a pod, use --endpoint") from None
    try:
        data = (sys.stdin.buffer.read(MAX_OUTPUTS_BYTES + 1) if source == "-"
                else read_file(source, MAX_OUTPUTS_BYTES))
        outputs = load_json(data, max_bytes=MAX_OUTPUTS_BYTES)
    except FileRefused as exc:
        raise UsageError(f"--outputs: {exc.about(shown_name(source))}") from None
    except DocumentError as exc:
        raise UsageError(f"--outputs: {'stdin' if source == '-' else shown_name(source)} {exc} "
                         "(give `pulumi stack output --json`)") from None
    if not isinstance(outputs, dict):
        raise UsageError("--outputs: must be a JSON object of stack outputs")
    return outputs


def _kube_client(outputs: dict[str, Any], kubeconfig: Optional[Path]) -> Any:
    """A serve.kube client from --kubeconfig or the outputs' own kubeconfig (imported here: the
    in-cluster run has only job.RUN_FILES)."""
    try:
        from serve.kube import KubeError, client_from_kubeconfig, read_kubeconfig_file  # not in RUN_FILES
    except ImportError:
        raise UsageError("--outputs needs the raypd checkout (serve.kube); in a pod, use --endpoint") from None
    try:
        text = read_kubeconfig_file(str(kubeconfig)) if kubeconfig else outputs.get("kubeconfig")
        if not isinstance(text, str) or not text.strip() or text.strip() == "[secret]":
            raise UsageError("--outputs: no kubeconfig in them (use --show-secrets, or pass --kubeconfig)")
        region = outputs.get("region")
        return client_from_kubeconfig(text, region_hint=region if isinstance(region, str) else None)
    except KubeError as exc:
        raise UsageError(f"--kubeconfig: {exc}") from None


def _through_the_api_server(args: argparse.Namespace) -> dict[str, Any]:
    """LoadConfig fields for the Serve Service behind the API server's service proxy (no port-forward;
    the proxy's own latency is in the numbers: for the endpoint's own, run `job` in the cluster)."""
    outputs = _read_outputs(args.outputs)
    namespace, service, base = outputs.get("namespace"), outputs.get("serveService"), outputs.get("openaiBaseUrl")
    if not all(isinstance(v, str) and v for v in (namespace, service, base)):
        raise UsageError("--outputs: needs namespace, serveService and openaiBaseUrl (raypd stack outputs)")
    client = _kube_client(outputs, args.kubeconfig)
    from serve.kube import KubeError  # importable: _kube_client said so

    try:
        client.auth_headers()  # mint the token now: a credential problem is a usage error, not 200 failures
    except KubeError as exc:
        raise UsageError(f"--kubeconfig: {exc}") from None
    port = urlparse(str(base)).port or 8000
    endpoint = (f"{client.server}/api/v1/namespaces/{quote(str(namespace), safe='')}/services/"
                f"{quote(str(service), safe='')}:{port}/proxy")
    return {"endpoint": endpoint, "model": args.model or str(outputs.get("modelId") or ""),
            "headers": client.auth_headers, "ssl_context": client.ssl_context}


def _run(args: argparse.Namespace) -> int:
    via = _target(args)
    args.endpoint, args.model = via["endpoint"], via["model"]
    _check_run_args(args)
    specs = _specs(args)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out: cannot create {args.out}: {exc.strerror or exc}") from exc
    loads = [{"rate": rate} for rate in args.rate] if args.rate else [{"concurrency": args.concurrency}]
    progress = (ProgressReporter(lambda line: print(line, flush=True), len(specs) * len(loads), len(loads))
                if args.events else None)
    all_records, summary = _send_loads(args, via, specs, loads, progress)
    write_run(args.out, all_records, summary)
    code = EXIT_RUN_FAILED if _unreachable(all_records) else EXIT_OK
    if progress is not None:
        progress.flush()
        write_result(sys.stdout, summary, all_records, code)
    else:
        print(dumps(summary, indent=2) if args.json else table(summary, args.usd_per_hour))
    if code == EXIT_RUN_FAILED:
        print(f"benchmark: {args.endpoint} was unreachable for every request", file=sys.stderr)
    return code


def _target(args: argparse.Namespace) -> dict[str, Any]:
    """Where the requests go: --endpoint as given, or the Serve Service behind the API server (--outputs)."""
    via: dict[str, Any] = {"endpoint": args.endpoint, "model": args.model, "headers": None, "ssl_context": None}
    if args.outputs is not None:
        via = _through_the_api_server(args)
    elif args.kubeconfig is not None:
        raise UsageError("--kubeconfig goes with --outputs")
    if not via["model"]:
        raise UsageError("--model is required (with --outputs it defaults to the outputs' modelId)")
    return via


def _check_run_args(args: argparse.Namespace) -> None:
    """The checks across arguments argparse cannot make, before anything is sent or written."""
    if (args.slo_ttft_ms is None) != (args.slo_tpot_ms is None):
        raise UsageError("--slo-ttft-ms and --slo-tpot-ms go together")
    if args.prompts is not None and (args.input_tokens or args.preset):
        raise UsageError("--prompts cannot be combined with --input-tokens or --preset")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out: {args.out} exists and is not a directory")
    input_tokens = args.input_tokens or PRESETS[args.preset or "chat"]["input_tokens"]
    if args.prompts is None and args.requests * input_tokens > MAX_PROMPT_WORDS:
        raise UsageError(f"--requests x --input-tokens is {args.requests * input_tokens}, more than "
                         f"{MAX_PROMPT_WORDS} prompt words")
    if args.rate and args.duration is None and args.requests / min(args.rate) > MAX_SCHEDULE_S:
        raise UsageError(f"--rate {min(args.rate):g} with --requests {args.requests} would send for more than "
                         f"{MAX_SCHEDULE_S:g} s; pass --duration")


def _send_loads(args: argparse.Namespace, via: dict[str, Any], specs: list[RequestSpec],
                loads: list[dict[str, Any]], progress: Optional[ProgressReporter]
                ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Each load in turn (one, or one per swept rate, each written to its rate-R/ directory); the
    records of all and their summary (a sweep's pooled, with its goodput and a line per rate)."""
    slo = {"slo_ttft_ms": args.slo_ttft_ms, "slo_tpot_ms": args.slo_tpot_ms, "usd_per_hour": args.usd_per_hour}
    workload = {"model": args.model, "endpoint": args.endpoint, "api": args.api, "preset": args.preset,
                "prompts": str(args.prompts) if args.prompts else None, "requests": args.requests,
                "input_tokens": None if args.prompts else (specs[0].input_tokens if args.input_dist == "fixed"
                                                           else args.input_tokens),
                "output_tokens": specs[0].max_tokens if args.output_dist == "fixed" else args.output_tokens,
                "input_dist": args.input_dist, "output_dist": args.output_dist, "seed": args.seed}
    all_records: list[dict[str, Any]] = []
    sweep: list[tuple[float, dict[str, Any]]] = []
    wall = 0.0
    for number, load in enumerate(loads, start=1):
        config = LoadConfig(endpoint=args.endpoint, model=args.model, api=args.api, duration_s=args.duration,
                            timeout_s=args.timeout, seed=args.seed, ignore_eos=args.ignore_eos,
                            headers=via["headers"], ssl_context=via["ssl_context"], **load)
        if progress is not None:
            progress.start_subrun(number)
        records = _to_the_microsecond(asyncio.run(run_load(config, specs, on_record=progress)))
        summary = summarize(records, **slo)
        summary["load"], summary["workload"] = load, workload
        if len(loads) > 1:
            rate = load["rate"]
            write_run(args.out / f"rate-{rate:g}", records, summary)
            sweep.append((rate, summary))
            all_records.extend({**r, "rate": rate} for r in records)
            wall += summary["wall_s"]
        else:
            all_records = records
    if len(loads) > 1:
        summary = summarize(all_records, wall_s=wall, **slo)
        summary["load"], summary["workload"] = {"rates": args.rate}, workload
        summary["goodput"] = goodput(sweep)
        summary["sweep"] = [{"rate": rate, "dir": f"rate-{rate:g}", **{k: s[k] for k in ("requests", "slo")},
                             "request_rate": s["request_rate"], "ttft_ms": s["ttft_ms"], "tpot_ms": s["tpot_ms"]}
                            for rate, s in sweep]
    return all_records, summary


def main(argv: Optional[Sequence[str]] = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        args = _parser().parse_args(argv)
        if args.command == "compare":
            # Imported here: `run` must work where matplotlib is not installed (a serving image).
            from serve.benchmark.compare import compare_runs

            print(compare_runs(args.runs, args.out, args.region))
            return EXIT_OK
        if args.command == "job":
            return _job(args)
        return _run(args)
    except (UsageError, WorkloadError, CompareError) as exc:
        print(f"benchmark: {exc}", file=sys.stderr)
        return EXIT_INVALID


if __name__ == "__main__":
    sys.exit(main())
