"""`python -m serve.benchmark run|compare ...` (Contract 6).

    run (--endpoint URL --model ID | --outputs FILE|-) (--rate R[,R...] | --concurrency N) --requests N
        [--input-tokens N] [--output-tokens N] [--slo-ttft-ms X --slo-tpot-ms Y] --out DIR [--json]
    run ... (--schedule 0s:1,60s:8,180s:end | --schedule-file F | --trace F.jsonl) [--dashboard URL] ...
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
import sys
from pathlib import Path
from typing import Any, Optional, Sequence
from urllib.parse import quote, urlparse

from serve.benchmark import varying
from serve.benchmark.cli_args import MAX_REQUESTS, MAX_SCHEDULE_S, UsageError, parser
from serve.benchmark.events import ProgressReporter, write_result
from serve.benchmark.loadgen import LoadConfig, run_load
from serve.benchmark.runfiles import dumps, write_run
from serve.benchmark.schedule import ScheduleError
from serve.benchmark.summary import CompareError, goodput, summarize
from serve.benchmark.table import table
from serve.benchmark.workload import (
    MAX_PROMPT_WORDS,
    PRESETS,
    RequestSpec,
    WorkloadError,
    file_workload,
    synthetic_workload,
)

EXIT_OK, EXIT_RUN_FAILED, EXIT_INVALID = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    return parser((__doc__ or "").split("\n\n")[0])


def _job(args: argparse.Namespace) -> int:
    # Imported here: the in-cluster `run` has only RUN_FILES (no job.py, no PyYAML).
    from serve.benchmark.job import JobError, package_sources, render_benchmark_job
    from serve.benchmark.yaml_out import dump_all

    outputs = _read_outputs(args.outputs)
    run_args = _inline_schedule([arg for arg in args.run_args if arg != "--"])
    try:
        manifests = render_benchmark_job(outputs, args.name, run_args, package_sources())
    except JobError as exc:
        raise UsageError(str(exc)) from None
    if args.out is None:
        print(dump_all(manifests), end="")
        return EXIT_OK
    return _job_in_cluster(args, outputs, run_args)


def _inline_schedule(run_args: list[str]) -> list[str]:
    """`--schedule-file F` read here and sent as `--schedule INLINE`: the pod has no files of ours."""
    if "--schedule-file" not in run_args or run_args.index("--schedule-file") + 1 >= len(run_args):
        return run_args
    at = run_args.index("--schedule-file")
    schedule = varying.schedule_of(_parser().parse_args(["run", "--endpoint", "http://x.invalid", "--model", "m",
                                                         *run_args, "--out", "/nonexistent"]))
    assert schedule is not None
    return [*run_args[:at], "--schedule", schedule.inline(), *run_args[at + 2:]]


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
    schedule = varying.schedule_of(load)
    seconds = (expected_seconds(load.requests, load.rate or [], load.concurrency, load.timeout, load.duration)
               if schedule is None else schedule.end + load.timeout + 10)
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


def _specs(args: argparse.Namespace, count: Optional[int] = None) -> list[RequestSpec]:
    preset = PRESETS.get(args.preset or "chat", PRESETS["chat"])
    output_tokens = args.output_tokens or preset["output_tokens"]
    count = args.requests if count is None else count
    if args.prompts is not None:
        return file_workload(args.prompts, count, output_tokens, seed=args.seed, output_dist=args.output_dist)
    input_tokens = args.input_tokens or preset["input_tokens"]
    if count * input_tokens > MAX_PROMPT_WORDS:  # a schedule's count is known only once it is planned
        raise UsageError(f"{count} requests x {input_tokens} input tokens is more than {MAX_PROMPT_WORDS} prompt "
                         "words; cap the requests with --requests")
    prefix = min(preset["shared_prefix_tokens"], input_tokens - 1) if args.preset == "agentic" else 0
    return synthetic_workload(count, input_tokens, output_tokens, seed=args.seed,
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
    from components.config.defaults import DASHBOARD_PORT  # importable too: the checkout is here
    from serve.kube import KubeError  # importable: _kube_client said so

    try:
        client.auth_headers()  # mint the token now: a credential problem is a usage error, not 200 failures
    except KubeError as exc:
        raise UsageError(f"--kubeconfig: {exc}") from None
    port = urlparse(str(base)).port or 8000
    proxy = f"{client.server}/api/v1/namespaces/{quote(str(namespace), safe='')}/services/"
    dashboard = outputs.get("dashboardService")  # the Ray head's Service (docs/outputs.md)
    return {"endpoint": f"{proxy}{quote(str(service), safe='')}:{port}/proxy",
            "model": args.model or str(outputs.get("modelId") or ""),
            "headers": client.auth_headers, "ssl_context": client.ssl_context,
            "dashboard": (f"{proxy}{quote(dashboard, safe='')}:{DASHBOARD_PORT}/proxy"
                          if isinstance(dashboard, str) else None)}


def _run(args: argparse.Namespace) -> int:
    via = _target(args)
    args.endpoint, args.model = via["endpoint"], via["model"]
    _check_run_args(args, via)
    if varying.requested(args):
        loads: list[dict[str, Any]] = [{}]
        planned = varying.plan(args, lambda count: _specs(args, count), MAX_REQUESTS)
        specs = planned[2]
    else:
        loads = [{"rate": rate} for rate in args.rate] if args.rate else [{"concurrency": args.concurrency}]
        specs = _specs(args)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out: cannot create {args.out}: {exc.strerror or exc}") from exc
    progress = (ProgressReporter(lambda line: print(line, flush=True), len(specs) * len(loads), len(loads))
                if args.events else None)
    if varying.requested(args):
        all_records, summary = varying.send(args, via, planned, lambda specs: _workload(args, specs), progress)
    else:
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


def _check_run_args(args: argparse.Namespace, via: dict[str, Any]) -> None:
    """The checks across arguments argparse cannot make, before anything is sent or written."""
    varying.check(args, via)
    if args.requests is None and not varying.requested(args):
        raise UsageError("--requests is required with --rate and --concurrency")
    if (args.slo_ttft_ms is None) != (args.slo_tpot_ms is None):
        raise UsageError("--slo-ttft-ms and --slo-tpot-ms go together")
    if args.prompts is not None and (args.input_tokens or args.preset):
        raise UsageError("--prompts cannot be combined with --input-tokens or --preset")
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out: {args.out} exists and is not a directory")
    input_tokens = args.input_tokens or PRESETS[args.preset or "chat"]["input_tokens"]
    if args.prompts is None and (args.requests or 0) * input_tokens > MAX_PROMPT_WORDS:
        raise UsageError(f"--requests x --input-tokens is {args.requests * input_tokens}, more than "
                         f"{MAX_PROMPT_WORDS} prompt words")
    if args.rate and args.duration is None and args.requests / min(args.rate) > MAX_SCHEDULE_S:
        raise UsageError(f"--rate {min(args.rate):g} with --requests {args.requests} would send for more than "
                         f"{MAX_SCHEDULE_S:g} s; pass --duration")


def _workload(args: argparse.Namespace, specs: list[RequestSpec]) -> dict[str, Any]:
    """summary.json's `workload`: what was asked for (a trace's lengths are per request: null here)."""
    fixed = args.trace is None and bool(specs)
    return {"model": args.model, "endpoint": args.endpoint, "api": args.api, "preset": args.preset,
            "prompts": str(args.prompts) if args.prompts else None, "requests": args.requests or len(specs),
            "input_tokens": None if args.prompts or not fixed else (specs[0].input_tokens if args.input_dist == "fixed"
                                                                   else args.input_tokens),
            "output_tokens": (specs[0].max_tokens if args.output_dist == "fixed" else args.output_tokens) if fixed
            else None, "input_dist": args.input_dist, "output_dist": args.output_dist, "seed": args.seed}


def _send_loads(args: argparse.Namespace, via: dict[str, Any], specs: list[RequestSpec],
                loads: list[dict[str, Any]], progress: Optional[ProgressReporter]
                ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Each load in turn (one, or one per swept rate, each written to its rate-R/ directory); the
    records of all and their summary (a sweep's pooled, with its goodput and a line per rate)."""
    slo = {"slo_ttft_ms": args.slo_ttft_ms, "slo_tpot_ms": args.slo_tpot_ms, "usd_per_hour": args.usd_per_hour}
    workload = _workload(args, specs)
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
    except (UsageError, WorkloadError, CompareError, ScheduleError) as exc:
        print(f"benchmark: {exc}", file=sys.stderr)
        return EXIT_INVALID


if __name__ == "__main__":
    sys.exit(main())
