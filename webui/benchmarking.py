"""The Benchmark tab's work: a benchmark of a running deployment as a job, its runs kept and compared.

A run goes to the cluster as a Kubernetes Job next to the endpoint (serve.benchmark.incluster), so
the latencies are the endpoint's own and not a tunnel's; its progress events become the job's
events (requests done of total, the current rate, the live p50 TTFT), and its summary and every
request's record come back into the store. Plots and comparisons are drawn from the stored
records by serve.benchmark.compare, the same code as the CLI's `compare`.

Only a real deployment can be measured: an offline plan has no endpoint, and the tab says so
rather than inventing numbers. The kubeconfig is read from the stack for the run and dropped.
"""

from __future__ import annotations

import gzip
import json
import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

from components.config.errors import FieldError
from components.config.spec import DeploymentSpec
from components.plan.topology import estimate_cost
from serve.benchmark.events import RunResult, progress_words
from serve.benchmark.incluster import BenchmarkCancelled, BenchmarkFailed, InClusterRun, expected_seconds
from serve.benchmark.job import JobError, job_name_for
from serve.benchmark.prices import estimate_basis, price_notes
from serve.benchmark.workload import PRESETS
from serve.evidence import VerifyInputError, resolve_kubeconfig
from serve.kube import KubeError, client_from_kubeconfig
from webui.api_models import (
    MAX_BENCHMARK_REQUESTS,
    BenchmarkRequest,
    BenchmarkRun,
    BenchmarkRuns,
    BodyRefused,
    dump,
    parse,
)
from webui.deployments.commands import Deployments
from webui.deployments.errors import Conflict, NotFound
from webui.deployments.views import iso_time
from webui.engines.base import OFFLINE_NOTICE, JobContext, OperationCancelled, OperationFailed, OperationResult
from webui.forms import Field, parse_form_float, parse_form_int
from webui.status import Operation
from webui.store import STORE_ERRORS, error_text

logger = logging.getLogger(__name__)

NEEDS_A_RUNNING_DEPLOYMENT = (
    f"{OFFLINE_NOTICE}: nothing is serving, so there is nothing to measure. A benchmark sends real "
    "requests to a running deployment's endpoint: create one with the Pulumi engine and Deploy it"
)
MAX_COMPARED = 6

OnProgress = Callable[[dict[str, Any]], None]
# (outputs, kubeconfig, Job name, run arguments, run seconds, on_progress, cancelled) -> result
RunFn = Callable[[dict[str, Any], Optional[str], str, list[str], float, OnProgress, Callable[[], bool]], RunResult]


# The tab's form, in the deployment form's own Field (webui/forms.py) so the same macros draw it.
FORM_FIELDS = (
    Field("preset", "Workload", "select", help="what the prompts look like", choices=tuple(
        (name, f"{name}: {p['input_tokens']} in / {p['output_tokens']} out"
               + (f" ({p['shared_prefix_tokens']} shared)" if p["shared_prefix_tokens"] else ""))
        for name, p in sorted(PRESETS.items()))),
    Field("rates", "Request rates (req/s)", "list", help="one rate, or several separated by commas for a sweep"),
    Field("requests", "Requests per rate", "int", help=f"1 to {MAX_BENCHMARK_REQUESTS}"),
    Field("inputTokens", "Input tokens", "int", help="blank: the workload's", optional=True),
    Field("outputTokens", "Output tokens", "int", help="blank: the workload's", optional=True),
    Field("sloTtftMs", "SLO: TTFT (ms)", "float", help="with the TPOT SLO: SLO attainment and goodput",
          optional=True),
    Field("sloTpotMs", "SLO: TPOT (ms)", "float", help="time per output token after the first", optional=True),
    Field("api", "API", "select", help="the OpenAI route to call",
          choices=(("chat", "/v1/chat/completions"), ("completions", "/v1/completions"))),
    Field("timeoutS", "Timeout per request (s)", "float", help="a request slower than this counts as failed"),
    Field("ignoreEos", "Fixed output length (vLLM's ignore_eos: every answer is exactly the output tokens)",
          "bool"),
)
FORM_FIELDS_BY_KEY = {field.key: field for field in FORM_FIELDS}
FORM_DEFAULTS = {"preset": "chat", "rates": "1, 2, 4", "requests": "100", "api": "chat", "timeoutS": "60"}
MAX_FORM_TEXT = 200


def request_from_form(form: Mapping[str, str]) -> BenchmarkRequest:
    """The form's text as a BenchmarkRequest; BodyRefused names each field that is wrong."""
    body: dict[str, Any] = {}
    problems: list[FieldError] = []
    for field in FORM_FIELDS:
        text = str(form.get(field.key, "") or "").strip()
        if field.kind == "bool":
            body[field.key] = text == "on"
            continue
        if not text:
            continue
        if len(text) > MAX_FORM_TEXT:
            problems.append(FieldError(field.key, f"is longer than {MAX_FORM_TEXT} characters"))
            continue
        try:
            if field.kind == "int":
                body[field.key] = parse_form_int(text)
            elif field.kind == "float":
                body[field.key] = parse_form_float(text)
            elif field.kind == "list":
                body[field.key] = [parse_form_float(part) for part in text.split(",") if part.strip()]
            else:
                body[field.key] = text
        except ValueError:
            what = {"int": "a whole number", "float": "a number", "list": "numbers separated by commas"}[field.kind]
            problems.append(FieldError(field.key, f"must be {what}, got {text[:40]!r}"))
    if "rates" not in body and not problems:
        problems.append(FieldError("rates", "give at least one request rate"))
    if problems:
        raise BodyRefused(problems)
    return parse(BenchmarkRequest, body)


def values_from_settings(settings: Mapping[str, Any]) -> dict[str, str]:
    """The form filled as a stored run was asked (the next run is usually a variation of the last)."""
    values = dict(FORM_DEFAULTS)
    for field in FORM_FIELDS:
        value = settings.get(field.key)
        if value is None:
            continue
        if field.kind == "list" and isinstance(value, list):
            values[field.key] = ", ".join(f"{rate:g}" for rate in value if isinstance(rate, (int, float)))
        elif field.kind == "bool":
            values[field.key] = "on" if value is True else ""
        else:
            values[field.key] = f"{value:g}" if isinstance(value, float) else str(value)
    return values


def form_values(form: Mapping[str, str]) -> dict[str, str]:
    """What the form shows again after a refusal: the text as typed, bounded."""
    return {field.key: str(form.get(field.key, "") or "")[:MAX_FORM_TEXT] for field in FORM_FIELDS}


def run_args(request: BenchmarkRequest, usd_per_hour: Optional[float]) -> list[str]:
    """The `serve.benchmark run` arguments for a request (the Job adds endpoint, model and output)."""
    args = ["--api", request.api, "--preset", request.preset,
            "--rate", ",".join(f"{rate:g}" for rate in request.rates),
            "--requests", str(request.requests), "--timeout", f"{request.timeoutS:g}"]
    if request.inputTokens is not None:
        args += ["--input-tokens", str(request.inputTokens)]
    if request.outputTokens is not None:
        args += ["--output-tokens", str(request.outputTokens)]
    if request.sloTtftMs is not None and request.sloTpotMs is not None:
        args += ["--slo-ttft-ms", f"{request.sloTtftMs:g}", "--slo-tpot-ms", f"{request.sloTpotMs:g}"]
    if request.ignoreEos:
        args.append("--ignore-eos")
    if usd_per_hour is not None:
        args += ["--usd-per-hour", f"{usd_per_hour:g}"]
    return args


def run_seconds(request: BenchmarkRequest) -> float:
    return expected_seconds(request.requests, request.rates, None, request.timeoutS)


def run_label(deployment: str, mode: Optional[str], job_id: str) -> str:
    """How a run is named in tables and legends: which deployment, which shape, which run."""
    return f"{deployment} ({mode or 'unknown mode'}) #{job_id[:6]}"


def progress_event(progress: Mapping[str, Any]) -> dict[str, Any]:
    """A job event from a progress line of the run: done/total drive the bar, the rest the live line."""
    rate, p50 = progress.get("rate"), progress.get("p50_ttft_ms")
    return {"kind": "benchmark", "done": int(progress.get("done") or 0), "total": int(progress.get("total") or 0),
            "rate": rate if isinstance(rate, (int, float)) else None,
            "p50TtftMs": p50 if isinstance(p50, (int, float)) else None,
            "message": progress_words(progress)}


def _run_in_cluster(outputs: dict[str, Any], kubeconfig: Optional[str], name: str, args: list[str],
                    seconds: float, on_progress: OnProgress, cancelled: Callable[[], bool]) -> RunResult:
    region = outputs.get("region")
    client = client_from_kubeconfig(resolve_kubeconfig(outputs, kubeconfig),
                                    region_hint=region if isinstance(region, str) else None)
    return InClusterRun(client, outputs, name, args, run_seconds=seconds).run(on_progress, cancelled)


@dataclass
class Benchmarker:
    """Runs a benchmark job's work; `run_fn` is the seam tests replace (default: in the cluster)."""

    run_fn: RunFn = _run_in_cluster

    def run(self, ctx: JobContext, outputs: dict[str, Any], spec: Optional[DeploymentSpec],
            request: BenchmarkRequest) -> RunResult:
        usd = estimate_cost(spec).usd_per_hour if spec is not None else None
        args = run_args(request, usd)
        total = request.requests * len(request.rates)
        ctx.emit({"kind": "benchmark", "done": 0, "total": total, "message": (
            f"benchmark: {total} requests ({request.preset} preset, rates "
            f"{', '.join(f'{r:g}' for r in request.rates)} req/s) from a Job in the cluster; "
            "starting its pod (pulling the serving image can take minutes)")})
        try:
            return self.run_fn(outputs, None, job_name_for(ctx.job_id), args, run_seconds(request),
                               lambda progress: ctx.emit(progress_event(progress)), lambda: ctx.cancelled)
        except BenchmarkCancelled:
            raise OperationCancelled() from None
        except JobError as exc:  # outputs of an older raypd, say, without openaiBaseUrl
            raise OperationFailed(f"cannot benchmark from the stack's outputs: {exc}; run Refresh or Deploy "
                                  "to bring them up to date") from None
        except (BenchmarkFailed, VerifyInputError, KubeError) as exc:
            raise OperationFailed(str(exc)) from None


def settings_of(request: BenchmarkRequest, spec: Optional[DeploymentSpec]) -> dict[str, Any]:
    """What a run remembers of its conditions: the request, the deployment's shape and its cost,
    with the stack's region the cost is estimated for (its price basis is said wherever the cost
    shows, also after the stack is gone)."""
    settings = request.model_dump(mode="json", exclude_none=True)
    if spec is not None:
        settings["mode"] = spec.mode
        settings["usdPerHour"] = estimate_cost(spec).usd_per_hour
        settings["region"] = spec.region
    return settings


def price_basis_of(run: Mapping[str, Any]) -> Optional[str]:
    """What a stored run's USD / M output tokens is priced at: raypd's estimate for its stack's
    region (catalogue.price_basis); None for a run that was given no price."""
    settings = run.get("settings") or {}
    if settings.get("usdPerHour") is None:
        return None
    return estimate_basis(settings.get("region"))


def cost_notes_of(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The lines under a table of stored runs saying what their costs are priced at."""
    return price_notes([(run["label"], price_basis_of(run)) for run in runs
                        if (run.get("summary") or {}).get("usd_per_million_output_tokens") is not None])


class BenchmarkService:
    """Start benchmarks and read their runs; pages and the API call only this for the tab."""

    def __init__(self, deployments: Deployments, benchmarker: Optional[Benchmarker] = None):
        self.deployments = deployments
        self.store = deployments.store
        self.benchmarker = benchmarker or Benchmarker()

    def available(self, record: Mapping[str, Any]) -> Optional[str]:
        """Why this deployment cannot be benchmarked now, or None when it can."""
        engine = self.deployments.engines.get(record["engine"])
        if engine is None:
            return f"the {record['engine']} engine is not available on this server"
        if not engine.real:
            return NEEDS_A_RUNNING_DEPLOYMENT
        if not self.deployments.serving(record):
            return (f"{record['name']} is {record['status']}, not deployed: a benchmark needs its endpoint "
                    "serving; Deploy it first")
        return None  # (a check or a benchmark running now is not a reason: the deployment stays up)

    def start(self, name: str, request: BenchmarkRequest, actor: str) -> str:
        record = self.deployments.record(name)
        engine = self.deployments.engine_of(name, record)
        why_not = self.available(record)
        if why_not is not None:
            raise Conflict(why_not, field="deployment")
        # A benchmark measures what runs: its mode and cost are the deployed settings', not the
        # pending ones a change saved since.
        spec = self.deployments.deployed_spec(name)

        def work(ctx: JobContext) -> OperationResult:
            outputs = engine.live_outputs(name)
            if not outputs:
                raise OperationFailed("the stack has no outputs: run Deploy first")
            result = self.benchmarker.run(ctx, outputs, spec, request)
            label = run_label(name, spec.mode if spec is not None else None, ctx.job_id)
            try:
                self.store.save_benchmark(ctx.job_id, name, label, actor, settings_of(request, spec),
                                          result.summary, result.records)
            except STORE_ERRORS as exc:
                raise OperationFailed("the benchmark finished but its results could not be stored "
                                      f"({error_text(exc)})") from None
            sent = result.summary.get("requests") or {}
            ctx.emit({"kind": "benchmark", "message": (
                f"benchmark done: {sent.get('completed')} of {sent.get('sent')} requests completed; "
                "the run is on the Benchmark tab")})
            ctx.findings["benchmark"] = {"run": ctx.job_id, "requests": sent,
                                         "goodput": result.summary.get("goodput")}
            return OperationResult()

        return self.deployments.submit(name, Operation.BENCHMARK.value, engine, actor, work)

    def _view(self, run: Mapping[str, Any]) -> dict[str, Any]:
        return dump(BenchmarkRun(
            id=run["id"], deployment=run["deployment"], label=run["label"], createdAt=iso_time(run["createdAt"]),
            actor=run["actor"], settings=run["settings"], summary=run["summary"],
            requestsUrl=f"/api/v1/benchmarks/{run['id']}/requests.jsonl"))

    def runs(self, deployment: Optional[str] = None) -> dict[str, Any]:
        """Runs newest first: one deployment's (which must exist) or everyone's."""
        if deployment is not None:
            self.deployments.record(deployment)
        return dump(BenchmarkRuns(runs=[BenchmarkRun.model_validate(self._view(run))
                                        for run in self.store.benchmark_runs(deployment)]))

    def run(self, run_id: str) -> dict[str, Any]:
        found = self.store.benchmark_run(run_id)
        if found is None:
            raise NotFound(f"no benchmark run with id {run_id}")
        return self._view(found)

    def records_jsonl(self, run_id: str) -> bytes:
        packed = self.store.benchmark_records(run_id)
        if packed is None:
            raise NotFound(f"no benchmark run with id {run_id}")
        return gzip.decompress(packed)

    def _loaded(self, run_ids: Sequence[str], with_records: bool
                ) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
        """The runs asked for, and their records when a plot needs them (the table does not)."""
        if not 1 <= len(run_ids) <= MAX_COMPARED:
            raise NotFound(f"choose 1 to {MAX_COMPARED} runs")
        runs, records = [], []
        for run_id in dict.fromkeys(run_ids):  # the same run twice is one run
            found = self.store.benchmark_run(run_id)
            packed = self.store.benchmark_records(run_id) if with_records else b""
            if found is None or packed is None:
                raise NotFound(f"no benchmark run with id {run_id}")
            runs.append(found)
            records.append([json.loads(line) for line in gzip.decompress(packed).decode("utf-8").splitlines()
                            if line.strip()] if with_records else [])
        return runs, records

    def comparison(self, run_ids: Sequence[str]) -> dict[str, Any]:
        """The compare report's parts for the page: runs, table rows, what the costs are priced at,
        verdicts (first vs each other)."""
        from serve.benchmark.compare import cost_notes, table_rows, verdict  # matplotlib: ~1.7 s, so at first use

        runs, records = self._loaded(run_ids, with_records=False)
        loaded = _compare_runs(runs, records)
        return {"runs": [self._view(run) for run in runs], "rows": table_rows(loaded),
                "priceNotes": cost_notes(loaded), "verdicts": [verdict(loaded[0], other) for other in loaded[1:]]}

    def plot(self, name: str, run_ids: Sequence[str]) -> bytes:
        from serve.benchmark.compare import PLOT_NAMES, plot  # matplotlib: ~1.7 s, so at first use

        if name not in PLOT_NAMES:
            raise NotFound(f"no plot named {name}")
        runs, records = self._loaded(run_ids, with_records=name != "percentiles_vs_rate.png")
        image = plot(name, _compare_runs(runs, records))
        if image is None:
            raise NotFound(f"{name} needs a run that swept several rates")
        return image


def _compare_runs(runs: Sequence[Mapping[str, Any]], records: Sequence[list[dict[str, Any]]]) -> list[Any]:
    from serve.benchmark.compare import Run, distinct_labels  # matplotlib: ~1.7 s, so at first use

    return distinct_labels([Run(run["label"], dict(run["summary"]), recs, price_basis=price_basis_of(run))
                            for run, recs in zip(runs, records, strict=True)])
