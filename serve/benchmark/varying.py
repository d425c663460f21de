"""`run --schedule | --schedule-file | --trace`: a load that changes over time, with Serve's replica counts beside it.

Why a module of its own: the rate/concurrency runs (and sweeps) of __main__ send a fixed load;
these send at times planned up front (serve.benchmark.schedule, serve.benchmark.trace), cap the
requests in flight, and sample each phase's replicas from the Serve REST API while they run
(serve.benchmark.replicas), so a scale-up can be timed from the load step that caused it.
One of job.RUN_FILES: the in-cluster Job runs it (with an inline --schedule; files stay here).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from serve.benchmark.loadgen import LoadConfig, run_load
from serve.benchmark.replicas import (
    SAMPLE_EVERY_S,
    ReplicaRecorder,
    ReplicaSampler,
    SampleError,
    raypd_deployments,
    replicas_summary,
)
from serve.benchmark.schedule import ARRIVALS, Schedule, ScheduleError, arrivals, from_document, parse_inline
from serve.benchmark.summary import step_stats, summarize
from serve.benchmark.trace import read_trace, trace_workload
from serve.benchmark.workload import RequestSpec, WorkloadError

DEFAULT_MAX_IN_FLIGHT = 512  # under the usual 1024 open files, with room for the rest of the client
MAX_SCHEDULE_FILE_BYTES = 1024 * 1024
FLAGS = ("--schedule", "--schedule-file", "--trace")
SAMPLING_FLAGS = ("--dashboard", "--serve-deployments", "--sample-every")
# What `plan` gives `send`: (schedule or None for a trace, send offsets, specs, trace ids).
Planned = tuple[Optional[Schedule], list[float], list[RequestSpec], list[Optional[str]]]


def add_arguments(run: argparse.ArgumentParser, load: Any, number: Callable[[str], Any],
                  count: Callable[[str, int], Any], url: Callable[[str], Any]) -> None:
    """The options of a varying load; `load` is run's group of mutually exclusive loads."""
    load.add_argument("--schedule", help="rate steps and ramps, e.g. 0s:1,60s:8,180s:1->4,300s:end (requests/s)")
    load.add_argument("--schedule-file", type=Path, help="the schedule as YAML/JSON: {steps: [{at, rate, to?}], end}")
    load.add_argument("--trace", type=Path, help='JSONL, one {"at_s", "input_tokens", "output_tokens"} per line')
    run.add_argument("--arrivals", choices=ARRIVALS, default="poisson", help="with a schedule: how sends are spaced")
    run.add_argument("--max-in-flight", type=count("--max-in-flight", 100_000),
                     help=f"open loop: most requests in flight (default {DEFAULT_MAX_IN_FLIGHT} with a schedule "
                          "or trace, none with --rate); a due request waits for a slot")
    run.add_argument("--dashboard", type=url, help="Ray dashboard URL (port 8265): sample each phase's replicas")
    run.add_argument("--serve-deployments", help='JSON {phase: Serve deployment name} (default: from --model)')
    run.add_argument("--sample-every", type=number("--sample-every"),
                     help=f"s between samples (default {SAMPLE_EVERY_S:g})")


def requested(args: argparse.Namespace) -> bool:
    return any(getattr(args, flag[2:].replace("-", "_")) is not None for flag in FLAGS)


def check(args: argparse.Namespace, via: Mapping[str, Any]) -> None:
    """Cross-argument rules (argparse cannot make them); WorkloadError is exit 2 in the CLI."""
    given = [flag for flag in SAMPLING_FLAGS if getattr(args, flag[2:].replace("-", "_")) is not None]
    if not requested(args):
        if given:
            raise WorkloadError(f"{given[0]} goes with --schedule, --schedule-file or --trace")
        return
    if args.trace is not None and (args.prompts or args.preset or args.input_tokens or args.output_tokens):
        raise WorkloadError("--trace gives each request's lengths: leave out --prompts, --preset, --input-tokens "
                            "and --output-tokens")
    if args.serve_deployments is not None and args.dashboard is None and not via.get("dashboard"):
        raise WorkloadError("--serve-deployments goes with --dashboard")


def schedule_of(args: argparse.Namespace) -> Optional[Schedule]:
    """The --schedule or --schedule-file, cut at --duration; None for a trace."""
    if args.schedule is not None:
        schedule = parse_inline(args.schedule, end=args.duration)
    elif args.schedule_file is not None:
        schedule = from_document(_read_schedule_file(args.schedule_file), f"--schedule-file {args.schedule_file}",
                                 end=args.duration)
    else:
        return None
    return schedule.until(args.duration) if args.duration is not None else schedule


def _read_schedule_file(path: Path) -> Any:
    try:
        # Imported here: the pod (job.RUN_FILES) has no checkout; the Job sends the inline form instead.
        from components.config.safe_documents import DocumentError, FileRefused, load_yaml, read_text_file
    except ImportError:
        raise ScheduleError("--schedule-file needs the raypd checkout; in a pod, use --schedule") from None
    try:
        return load_yaml(read_text_file(path, MAX_SCHEDULE_FILE_BYTES), MAX_SCHEDULE_FILE_BYTES)
    except FileRefused as exc:
        raise ScheduleError(f"--schedule-file: {exc.about(str(path))}") from None
    except DocumentError as exc:
        raise ScheduleError(f"--schedule-file {path}: {exc}") from None


def plan(args: argparse.Namespace, specs_for: Callable[[int], list[RequestSpec]], most: int) -> Planned:
    """(schedule, send offsets, specs, trace ids) of the run; at most --requests (or `most`) requests."""
    limit = args.requests or most
    schedule = schedule_of(args)
    if schedule is not None:
        offsets = arrivals(schedule, args.arrivals, args.seed, limit=limit + 1)
        if len(offsets) > limit and args.requests is None:
            raise ScheduleError(f"--schedule would send more than {most} requests; cap it with --requests")
        offsets = offsets[:limit]
        return schedule, offsets, specs_for(len(offsets)), [None] * len(offsets)
    trace = read_trace(args.trace)
    if args.duration is not None:
        trace = [request for request in trace if request.at_s <= args.duration]
    trace = trace[:limit]
    offsets, specs = trace_workload(trace, args.seed)
    return None, offsets, specs, [request.trace_id for request in trace]


def recorder_for(args: argparse.Namespace, via: Mapping[str, Any]) -> tuple[Optional[ReplicaRecorder], str]:
    """The replica recorder, or None and why nothing is sampled."""
    dashboard = args.dashboard or via.get("dashboard")
    if not dashboard:
        return None, "no --dashboard given"
    deployments = _deployments(args, via)
    sampler = ReplicaSampler(dashboard, deployments, headers=None if args.dashboard else via.get("headers"),
                             ssl_context=None if args.dashboard else via.get("ssl_context"))
    return ReplicaRecorder(sampler, args.sample_every or SAMPLE_EVERY_S), ""


def _deployments(args: argparse.Namespace, via: Mapping[str, Any]) -> dict[str, str]:
    if args.serve_deployments is not None:
        try:
            deployments = json.loads(args.serve_deployments)
        except ValueError:
            deployments = None
        if not isinstance(deployments, dict) or not deployments or not all(
                isinstance(k, str) and isinstance(v, str) and v for k, v in deployments.items()):
            raise WorkloadError('--serve-deployments must be a JSON object {"phase": "deployment name"}')
        return deployments
    if via.get("deployments"):
        return dict(via["deployments"])
    try:
        return raypd_deployments(args.model)
    except SampleError:
        raise WorkloadError("--dashboard needs --serve-deployments here (no raypd checkout)") from None


def send(args: argparse.Namespace, via: Mapping[str, Any], planned: Planned,
         workload_for: Callable[[list[RequestSpec]], dict[str, Any]],
         on_record: Any = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Send and summarise one varying run (`plan`'s result): (records, summary.json)."""
    schedule, offsets, specs, trace_ids = planned
    recorder, why_not = recorder_for(args, via)
    cap = args.max_in_flight or DEFAULT_MAX_IN_FLIGHT
    config = LoadConfig(endpoint=args.endpoint, model=args.model, api=args.api, duration_s=args.duration,
                        timeout_s=args.timeout, seed=args.seed, ignore_eos=args.ignore_eos, max_in_flight=cap,
                        headers=via.get("headers"), ssl_context=via.get("ssl_context"))
    records = asyncio.run(run_load(config, specs, on_record=on_record, offsets=offsets, replicas=recorder))
    for record in records:
        if trace_ids[record["index"]] is not None:
            record["trace_id"] = trace_ids[record["index"]]
    summary = summarize(records, slo_ttft_ms=args.slo_ttft_ms, slo_tpot_ms=args.slo_tpot_ms,
                        usd_per_hour=args.usd_per_hour)
    load: dict[str, Any] = {"max_in_flight": cap}
    if schedule is not None:
        load.update(schedule=schedule.inline(), arrivals=args.arrivals)
        summary["schedule"] = {"steps": step_stats(records, schedule)}
    else:
        load.update(trace=str(args.trace), requests=len(specs), span_s=offsets[-1] if offsets else 0.0)
    summary["load"], summary["workload"] = load, workload_for(specs)
    summary["replicas"] = replicas_summary(recorder, schedule, why_not)
    return records, summary
