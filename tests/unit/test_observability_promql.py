"""The observability PromQL, run for real: every recording rule, alert and dashboard query of
components/render/observability_rules.py and components/render/observability_dashboards.py against Debian's
Prometheus (promtool and the server, installed by scripts/ensure-prometheus), fed with the real
vLLM / NIXL / Ray captures of tests/fixtures/real (tests/unit/prom_captures.py). A metric renamed
in components/render/metric_names.py, or upstream, empties a query and fails here. Without promtool or
prometheus these tests fail too, naming the missing one (tests/required_tools.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from components.config.spec import DeploymentSpec
from components.render import metric_names as m
from components.render.observability_dashboards import dashboards, panel_queries
from components.render.observability_rules import PHASE_INFO, engine_series, phased, prometheus_rule_groups
from tests.prometheus_server import (
    Pages,
    answers,
    api,
    need_prometheus,
    need_promtool,
    page_jobs,
    page_server,
    query,
    running_prometheus,
)
from tests.real.stacks import small_stack_spec
from tests.unit import prom_captures as cap

# Metrics no capture holds (DCGM and kube-state-metrics do not run on this machine): their queries
# must parse, need not answer. Every other query must answer on the real captures.
NOT_CAPTURED = (m.DCGM_GPU_ACTIVE, m.KUBE_POD_PHASE, m.KUBE_NODE_LABELS, m.KUBE_NODE_CONDITION,
                m.KUBE_POD_UNSCHEDULABLE, m.SERVE_TARGET_REPLICAS, m.SERVE_QUEUED_QUERIES,
                m.SERVE_HEALTH_CHECK_FAILURES, m.KUBE_POD_RESTARTS, m.KUBE_POD_LABELS)
ALERTS = ("RaypdNixlTransferFailed", "RaypdKvExpired", "RaypdDecodeKvCacheFull",
          "RaypdDecodeRequestsWaiting", "RaypdTtftAboveSlo", "RaypdEngineStoppedReporting",
          "RaypdGpuNodeNotReady", "RaypdPodsPendingForNodes", "RaypdReplicaHealthCheckFailed",
          "RaypdHeadRestarted", "RaypdSystemNodeNotReady")


def _spec() -> Any:
    return small_stack_spec()  # the stack the captures were made with: Prefill:tiny, Decode:tiny


def _write_rules(directory: Path) -> Path:
    path = directory / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": prometheus_rule_groups(_spec())}, sort_keys=False))
    return path


# One bad scenario per alert (two for NIXL failures: a counter that moves, and Ray's born at 1).
SCENARIOS = ("failed-increase", "failed-born", "expired", "kv-full", "decode-waiting", "ttft",
             "engine-gone", "node-not-ready", "pending-for-nodes")


def _good_capture() -> list[cap.Series]:
    return (cap.ray_export() + cap.serve_replica_series()
            + cap.pair_page("prefill", "after-transfers", "Prefill:tiny")
            + cap.pair_page("decode", "after-transfers", "Decode:tiny"))


def test_serve_replica_label_is_the_replica_id_vllm_tags_its_series_with() -> None:
    """The join's premise, on real captures: Ray Serve's `replica` label is the replica's own
    `ReplicaID.unique_id` (the probe replica said so itself), and vLLM's `ReplicaId` under Ray
    is the `replica_id` Serve's API lists for the Prefill and Decode deployments."""
    probe = cap.serve_probe()
    said = cap.SERVE_PROBE.read_text().splitlines()[0].split("its id is ")[1].split(" ")[0]
    (starts,) = cap.only(probe, m.SERVE_REPLICA_STARTS)
    assert (starts.label(m.SERVE_REPLICA_LABEL), starts.label(m.SERVE_DEPLOYMENT_LABEL),
            starts.label(m.SERVE_APPLICATION_LABEL)) == (said, "Decode:tiny", "llm")
    engine_ids = {s.label(m.REPLICA_ID_LABEL) for s in cap.ray_export() if s.name == m.RUNNING}
    listed = cap.replicas()
    assert engine_ids == {listed["Prefill:tiny"], listed["Decode:tiny"]}


def test_captures_hold_what_the_rules_join() -> None:
    """The fixtures still have what the PromQL tests rely on (else they would pass vacuously)."""
    good = (cap.names(_good_capture()) | cap.names(cap.serve_probe())
            | cap.names(cap.engine_page("after-chats", "Prefill:tiny")))
    assert {m.RUNNING, m.KV_CACHE_USAGE, m.NIXL_FAILED_TRANSFERS, m.NIXL_KV_EXPIRED,
            m.TTFT + "_bucket", m.ITL + "_bucket", m.SERVE_REPLICA_STARTS, m.SERVE_HTTP_REQUESTS,
            m.SERVE_REPLICA_HEALTHY, m.SERVE_HTTP_ERRORS, m.QUEUE_TIME + "_bucket",
            m.PREFILL_TIME + "_bucket", m.TPOT + "_bucket", m.PREEMPTIONS, m.PREFIX_CACHE_HITS,
            m.PREFIX_CACHE_QUERIES} <= good
    for name in NOT_CAPTURED:  # the parse-only list stays honest: captured metrics must answer
        assert not any(n.startswith(name) for n in good), name


def test_promtool_checks_the_rendered_rules(tmp_path: Path) -> None:
    rules = _write_rules(tmp_path)
    done = subprocess.run([need_promtool(), "check", "rules", str(rules)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


# ---- promtool test rules: the alerts on realistic bad series, silent on the good capture ----

def _values(series: list[cap.Series], minutes: int = 40) -> dict[str, str]:
    """Every captured series held at its captured value for `minutes` (promtool's `vx40`)."""
    return {s.selector(): f"{s.value!r}x{minutes}" for s in series}


def _firing(alert: str) -> str:
    return f'count(ALERTS{{alertname="{alert}",alertstate="firing"}}) > bool 0 or vector(0)'


def _scenario(values: dict[str, str], firing: set[str], at: str = "20m") -> dict[str, Any]:
    return {
        "interval": "1m",
        "input_series": [{"series": k, "values": v} for k, v in values.items()],
        "promql_expr_test": [
            {"expr": _firing(alert), "eval_time": at,
             "exp_samples": [{"labels": "{}", "value": 1 if alert in firing else 0}]}
            for alert in ALERTS],
    }


def _one(series: list[cap.Series], name: str, **labels: str) -> str:
    found = cap.only(series, name, **labels)
    assert len(found) == 1, (name, labels, found)
    return found[0].selector()


def _bad_scenarios() -> dict[str, dict[str, Any]]:
    good = _good_capture()
    decode_id, prefill_id = cap.replicas()["Decode:tiny"], cap.replicas()["Prefill:tiny"]
    ray = cap.ray_export()
    scenarios: dict[str, dict[str, Any]] = {}

    # The counter alerts fire while a failure is inside their 5-minute window: read at 12m.
    # NIXL failures: the pair's decode counter went 0 -> 1 (decode-metrics-after-failed-load);
    # under Ray the counter is only exported once non-zero, so it is born at 1.
    failed = cap.only(cap.pair_page("decode", "after-failed-load", "Decode:tiny"),
                      m.NIXL_FAILED_TRANSFERS)[0]
    values = _values(good)
    values[failed.selector()] = f"0x10 {failed.value!r}x30"
    scenarios["failed-increase"] = _scenario(values, {"RaypdNixlTransferFailed"}, at="12m")
    values = _values([s for s in good if s.name != m.NIXL_FAILED_TRANSFERS])
    values[failed.selector()] = f"_x10 {failed.value!r}x30"
    scenarios["failed-born"] = _scenario(values, {"RaypdNixlTransferFailed"}, at="12m")

    # Prefill freed KV cache decode never read: its expiry counter moves.
    values = _values(good)
    values[_one(good, m.NIXL_KV_EXPIRED, ReplicaId=prefill_id)] = "0x10 1x30"
    scenarios["expired"] = _scenario(values, {"RaypdKvExpired"}, at="12m")

    # Decode's KV cache at 95 % from minute 5 on: fires after its 5 minutes.
    values = _values(good)
    values[_one(good, m.KV_CACHE_USAGE, ReplicaId=decode_id)] = "0.1x5 0.95x35"
    scenarios["kv-full"] = _scenario(values, {"RaypdDecodeKvCacheFull"})

    # Requests waiting on decode (Ray's own series) from minute 10: fires after 2 minutes.
    values = _values(good)
    values[_one(ray, m.WAITING, ReplicaId=decode_id)] = "0x10 3x30"
    scenarios["decode-waiting"] = _scenario(values, {"RaypdDecodeRequestsWaiting"})

    # Decode's first tokens slow: 10 per minute land above 2.5 s (in the le=5.0 bucket and up).
    values = _values(good)
    for s in cap.only(ray, m.TTFT + "_bucket", ReplicaId=decode_id):
        if float(s.label("le")) >= 5.0:
            values[s.selector()] = f"{s.value!r}+10x40"
    for suffix in ("_count", "_sum"):
        s = cap.only(ray, m.TTFT + suffix, ReplicaId=decode_id)[0]
        values[s.selector()] = f"{s.value!r}+{10 if suffix == '_count' else 40}x40"
    scenarios["ttft"] = _scenario(values, {"RaypdTtftAboveSlo"})

    # Ray's decode engine stops exporting at minute 10 (its replica died): every series of it.
    values = _values(good)
    for series in cap.where(good, {m.REPLICA_ID_LABEL: decode_id}):
        values[series.selector()] = f"{series.value!r}x10 stale"
    scenarios["engine-gone"] = _scenario(values, {"RaypdEngineStoppedReporting"})

    # A GPU node NotReady (kube-state-metrics is not in the captures: its series are typed here).
    values = _values(good)
    node = 'node="ip-10-0-1-5.us-east-2.compute.internal"'
    values[f'{m.KUBE_NODE_CONDITION}{{condition="Ready",status="true",{node}}}'] = "1x5 0x35"
    values[f'{m.KUBE_NODE_LABELS}{{label_role="gpu-worker",{node}}}'] = "1x40"
    scenarios["node-not-ready"] = _scenario(values, {"RaypdGpuNodeNotReady"})

    # A decode worker pod fits no node from minute 5 on (no GPU node came: quota, capacity).
    values = _values(good)
    values[_unschedulable(_spec().namespace, "ray-llm-raycluster-7xk2q-decode-worker-4t9zp")] = "_x5 1x35"
    scenarios["pending-for-nodes"] = _scenario(values, {"RaypdPodsPendingForNodes"})
    return scenarios


def _unschedulable(namespace: str, pod: str) -> str:
    """kube_pod_status_unschedulable as kube-state-metrics exports it (labels namespace, pod, uid;
    internal/store/pod.go) and kube-prometheus-stack's ServiceMonitor scrapes it (honorLabels, so
    namespace and pod are the pod's; the target's job, instance, service and container beside)."""
    return (f'kube_pod_status_unschedulable{{namespace="{namespace}",pod="{pod}",'
            f'uid="0f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b",job="kube-state-metrics",'
            f'instance="10.0.1.23:8080",container="kube-state-metrics",endpoint="http",'
            f'service="kube-prometheus-stack-kube-state-metrics"}}')


def _promtool_test(tmp_path: Path, tests: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    rules = _write_rules(tmp_path)
    unit = tmp_path / "unit.yml"
    unit.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "1m",
                                    "tests": tests}, sort_keys=False))
    return subprocess.run([need_promtool(), "test", "rules", str(unit)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


def test_recording_rules_put_the_phase_on_every_engine_series(tmp_path: Path) -> None:
    good = _good_capture()
    decode_id, prefill_id = cap.replicas()["Decode:tiny"], cap.replicas()["Prefill:tiny"]
    checks: list[dict[str, Any]] = [
        {"expr": f"count by (phase, deployment, ReplicaId) ({PHASE_INFO})", "eval_time": "5m",
         "exp_samples": [
             {"labels": f'{{phase="prefill",deployment="Prefill:tiny",ReplicaId="{prefill_id}"}}',
              "value": 1},
             {"labels": f'{{phase="decode",deployment="Decode:tiny",ReplicaId="{decode_id}"}}',
              "value": 1}]},
        {"expr": f"count by (phase) ({phased(m.NIXL_XFER_TIME + '_count')})", "eval_time": "5m",
         # Ray's decode series plus the pair's two engines (prefill reports NIXL at 0: pull mode).
         "exp_samples": [{"labels": '{phase="decode"}', "value": 2},
                         {"labels": '{phase="prefill"}', "value": 1}]},
    ]
    # Every captured engine series the rules name comes out once more, with a phase.
    for name in engine_series():
        count = len(cap.only(good, name))
        if count:
            checks.append({"expr": f'count({phased(name)}{{phase=~"prefill|decode"}})',
                           "eval_time": "5m", "exp_samples": [{"labels": "{}", "value": count}]})
    scenario = {"interval": "1m",
                "input_series": [{"series": k, "values": v} for k, v in _values(good).items()],
                "promql_expr_test": checks}
    done = _promtool_test(tmp_path, [scenario])
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_phase_join_also_reads_the_replicas_processing_queries_gauge(tmp_path: Path) -> None:
    """A Ray that does not export the replica-starts counter loses no phase."""
    series = ([s for s in _good_capture() if s.name != m.SERVE_REPLICA_STARTS]
              + cap.serve_replica_series(m.SERVE_REPLICA_QUERIES))
    check = {"expr": f"count by (phase) ({phased(m.RUNNING)})", "eval_time": "5m",
             "exp_samples": [{"labels": '{phase="decode"}', "value": 2},
                             {"labels": '{phase="prefill"}', "value": 2}]}
    scenario = {"interval": "1m",
                "input_series": [{"series": k, "values": v} for k, v in _values(series).items()],
                "promql_expr_test": [check]}
    done = _promtool_test(tmp_path, [scenario])
    assert done.returncode == 0, done.stdout + done.stderr


def _panel_expr(title: str) -> str:
    ((expr,),) = [[e for t, e in panel_queries(board) if t == title]
                  for board in dashboards(_spec()).values()]
    return expr


def test_gpu_panels_show_each_phase_on_the_reference_layout(tmp_path: Path) -> None:
    """The reference layout: both phases on one shared GPU node group, so no node carries
    raypd.io/phase and only Ray knows which pod prefills. Each replica's Serve series come from
    its Ray pod (the PodMonitor's `namespace`/`pod` target labels), DCGM labels each GPU with the
    pod holding it: the panels must show prefill's and decode's GPU, each once."""
    namespace = _spec().namespace
    pods = {"Prefill:tiny": "ray-llm-abc12-gpu-worker-x7k2p", "Decode:tiny": "ray-llm-abc12-gpu-worker-q9m4z",
            "OpenAiIngress": "ray-llm-abc12-head-8w2xd"}
    values = _values([s for s in _good_capture() if s.name != m.SERVE_REPLICA_STARTS])
    for series in cap.serve_replica_series():  # as the PodMonitor scrapes them
        labels = dict(series.labels, namespace=namespace,
                      pod=pods[series.label(m.SERVE_DEPLOYMENT_LABEL)])
        values[cap.Series(series.name, tuple(sorted(labels.items())), series.value).selector()] = (
            f"{series.value!r}x40")
    for index, (node, pod, active) in enumerate((("ip-10-0-1-5", pods["Prefill:tiny"], "0.8"),
                                                 ("ip-10-0-7-9", pods["Decode:tiny"], "0.3"))):
        values[f'{m.DCGM_GPU_ACTIVE}{{gpu="0",UUID="GPU-{index}",modelName="NVIDIA L4",'
               f'Hostname="{node}",container="ray-worker",namespace="{namespace}",pod="{pod}"}}'] = (
            f"{active}x40")
        # kube-state-metrics as the shared group's nodes are labelled: no phase.
        values[f'{m.KUBE_NODE_LABELS}{{label_role="gpu-worker",node="{node}"}}'] = "1x40"
    # A GPU no pod holds: dcgm-exporter leaves its own pod's target labels on it.
    values[f'{m.DCGM_GPU_ACTIVE}{{gpu="0",UUID="GPU-9",Hostname="ip-10-0-3-3",'
           f'namespace="monitoring",pod="dcgm-exporter-5k2lq"}}'] = "0x40"
    checks = [
        {"expr": _panel_expr(title), "eval_time": "10m", "exp_samples": [
            {"labels": f'{{phase="{phase}",pod="{pods[deployment]}"}}', "value": active}]}
        for title, phase, deployment, active in (
            ("Prefill GPU engine active", "prefill", "Prefill:tiny", 0.8),
            ("Decode GPU engine active", "decode", "Decode:tiny", 0.3))]
    scenario = {"interval": "1m",
                "input_series": [{"series": k, "values": v} for k, v in values.items()],
                "promql_expr_test": checks}
    done = _promtool_test(tmp_path, [scenario])
    assert done.returncode == 0, done.stdout + done.stderr


def test_alerts_stay_silent_on_the_good_capture(tmp_path: Path) -> None:
    done = _promtool_test(tmp_path, [_scenario(_values(_good_capture()), set())])
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_idle_engine_whose_gauges_ray_stopped_exporting_raises_no_alert(tmp_path: Path) -> None:
    """Ray exports vLLM's gauges only while an engine sets them (busy): idle from minute 10 on,
    both engines keep their counters and lose running/waiting/KV-usage. Nothing may fire."""
    good = _good_capture()
    values = _values(good)
    gauges = {m.RUNNING, m.WAITING, m.KV_CACHE_USAGE}
    idle = [s for s in good if s.name in gauges and s.label(m.REPLICA_ID_LABEL)]
    engines = {cap.replicas()["Prefill:tiny"], cap.replicas()["Decode:tiny"]}
    assert engines <= {s.label(m.REPLICA_ID_LABEL) for s in idle}
    for series in idle:
        values[series.selector()] = f"{series.value!r}x10 stale"
    done = _promtool_test(tmp_path, [_scenario(values, set(), at="30m")])
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_pod_waiting_while_its_node_joins_or_outside_the_deployment_raises_no_alert(tmp_path: Path) -> None:
    """Unschedulable for 6 minutes (a GPU node being added) and then running: no alert; a pod
    of another namespace waiting all along is not this deployment's."""
    values = _values(_good_capture())
    values[_unschedulable(_spec().namespace, "ray-llm-raycluster-7xk2q-decode-worker-8b2mc")] = "_x5 1x6 _x29"
    values[_unschedulable("batch-jobs", "etl-7d9f8c-x2v4q")] = "1x40"
    done = _promtool_test(tmp_path, [_scenario(values, set(), at="14m"), _scenario(values, set(), at="30m")])
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_alert_fires_on_its_bad_series_and_only_it(tmp_path: Path, scenario: str) -> None:
    scenarios = _bad_scenarios()  # built here: a renamed metric fails this test, not collection
    assert set(scenarios) == set(SCENARIOS)
    done = _promtool_test(tmp_path, [scenarios[scenario]])
    assert done.returncode == 0, done.stdout + done.stderr


# ---- every dashboard query on a real Prometheus server scraping the captures ----

@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `prometheus` on 127.0.0.1 with the rendered rules, scraping the captures every second."""
    need_prometheus()
    pages = Pages(cap.scrape_pages())
    # Ready once every target answered 3 pages after its idle ones and the rules have turned the
    # moved TTFT counters into a rate.
    moved = f"sum(rate({phased(m.TTFT + '_count')}[5m])) > 0"
    with page_server(pages) as target, running_prometheus(
            tmp_path_factory.mktemp("prometheus"), prometheus_rule_groups(_spec()), page_jobs(target, pages),
            ready=lambda base: pages.scrapes() >= cap.IDLE_SCRAPES + 3 and answers(base, moved)) as base:
        yield base


def _captured(expr: str) -> bool:
    return not any(name in expr for name in NOT_CAPTURED)


@pytest.mark.slow
def test_every_rule_evaluates_without_error_on_the_server(prometheus: str) -> None:
    groups = api(prometheus, "/api/v1/rules")["data"]["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    assert len(rules) == sum(len(g["rules"]) for g in prometheus_rule_groups(_spec()))
    unhealthy = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert not unhealthy


def test_every_dashboard_query_parses_and_the_captured_ones_answer(prometheus: str) -> None:
    empty, errors, parse_only = [], [], []
    for name, dashboard in dashboards(_spec()).items():
        for title, expr in panel_queries(dashboard):
            answer = query(prometheus, expr)
            if answer.get("status") != "success":
                errors.append((name, title, expr, answer.get("error")))
            elif not _captured(expr):
                parse_only.append(title)
            elif not answer["data"]["result"]:
                empty.append((title, expr))
    assert not errors
    assert not empty, "queries on captured metrics returned nothing (a renamed metric?)"
    print(f"parse-only (metric not in the captures): {sorted(set(parse_only))}")


def test_the_server_labels_the_captured_engines_by_phase(prometheus: str) -> None:
    answer = query(prometheus, f"count by (phase, deployment) ({phased(m.RUNNING)})")
    got = {(s["metric"]["phase"], s["metric"]["deployment"]) for s in answer["data"]["result"]}
    assert got == {("prefill", "Prefill:tiny"), ("decode", "Decode:tiny")}
    # No captured engine series is left without a phase.
    unphased = query(prometheus, f"{m.RUNNING} unless on(ReplicaId) {PHASE_INFO}")
    assert unphased["data"]["result"] == []


def test_every_dashboard_query_of_the_other_layouts_parses(prometheus: str) -> None:
    """Colocated and heterogeneous stacks render other queries (no KV handoff, other line rates)."""
    errors = []
    for config in ({"raypd:mode": "colocated"},
                   {"raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
                    "raypd:decode": {"instanceType": "g6e.48xlarge", "tensorParallelSize": 8}}):
        spec = DeploymentSpec.from_config(config, "other")
        for board in dashboards(spec).values():
            for title, expr in panel_queries(board):
                answer = query(prometheus, expr)
                if answer.get("status") != "success":
                    errors.append((title, expr, answer.get("error")))
        for group in prometheus_rule_groups(spec):
            for rule in group["rules"]:
                answer = query(prometheus, rule["expr"])
                if answer.get("status") != "success":
                    errors.append((rule.get("record") or rule.get("alert"), answer.get("error")))
    assert not errors


def test_ensure_prometheus_does_nothing_when_both_binaries_are_there() -> None:
    """`make test` calls it every run: with promtool and prometheus present it must be silent."""
    need_promtool(), need_prometheus()
    script = Path(__file__).resolve().parents[2] / "scripts" / "ensure-prometheus"
    done = subprocess.run([str(script)], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
