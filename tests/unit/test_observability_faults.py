"""The fault alerts of docs/resilience.md (components/render/observability_faults.py), run for real
on Debian's promtool (tests/required_tools.py: missing, the test fails): each fires on its fault,
with its labels, and stays silent on the normal path (a first start, a scale-up, a NewCluster
upgrade, kube-state-metrics or the head's metrics moving to another pod, another deployment's).

No capture holds these series (the controller's health-check counter only exists after a failure;
kube-state-metrics does not run on this machine), so they are typed here as the real exporters
label them: Ray's from the head pod's metrics agent with the PodMonitor's target labels (as
tests/fixtures/real/ray/serve-metrics-probe.txt shows Ray 2.60's), kube-state-metrics' as
kube-prometheus-stack's ServiceMonitor scrapes them (honorLabels; its target labels beside).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from components.render import metric_names as m
from components.render.observability_rules import prometheus_rule_groups
from tests.prometheus_server import need_promtool
from tests.real.stacks import small_stack_spec

SPEC = small_stack_spec()   # Prefill:tiny, Decode:tiny; namespace inference, service ray-llm
NS = SPEC.namespace
KSM = ('job="kube-state-metrics",instance="10.0.1.23:8080",endpoint="http",'
       'service="kube-prometheus-stack-kube-state-metrics"')
KSM_MOVED = KSM.replace("10.0.1.23", "10.0.1.99")
FAULT_ALERTS = ("RaypdReplicaHealthCheckFailed", "RaypdHeadRestarted", "RaypdSystemNodeNotReady",
                "RaypdGpuNodeNotReady")


def _rule(alert: str) -> dict[str, Any]:
    (rule,) = [r for g in prometheus_rule_groups(SPEC) for r in g["rules"] if r.get("alert") == alert]
    return rule


def _promtool(tmp_path: Path, tests: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump({"groups": prometheus_rule_groups(SPEC)}, sort_keys=False))
    unit = tmp_path / "unit.yml"
    unit.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "1m",
                                    "tests": tests}, sort_keys=False))
    return subprocess.run([need_promtool(), "test", "rules", str(unit)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


def _expect(alert: str, minute: int, firing: list[dict[str, str]]) -> dict[str, Any]:
    """promtool's alert_rule_test entry: exactly these alerts (labels and templated words)."""
    rule = _rule(alert)

    def fill(text: str, labels: dict[str, str]) -> str:
        for key, value in labels.items():
            text = text.replace("{{ $labels.%s }}" % key, value)
        return text

    return {"eval_time": f"{minute}m", "alertname": alert, "exp_alerts": [
        {"exp_labels": {**rule["labels"], **labels},
         "exp_annotations": {key: fill(value, labels) for key, value in rule["annotations"].items()}}
        for labels in firing]}


def _test(series: dict[str, str], checks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"interval": "1m", "input_series": [{"series": k, "values": v} for k, v in series.items()],
            "alert_rule_test": checks}


def _silent(minutes: tuple[int, ...]) -> list[dict[str, Any]]:
    return [_expect(alert, minute, []) for alert in FAULT_ALERTS for minute in minutes]


# ---- a replica lost: the controller's failed health checks ----

def _health_failures(deployment: str, replica: str, pod: str = "ray-llm-raycluster-7xk2q-head-8w2xd",
                     application: str = "llm") -> str:
    """serve_health_check_failures_total as the controller (on the head) exports it through Ray
    2.60's metrics agent, with the PodMonitor's target labels."""
    return (f'{m.SERVE_HEALTH_CHECK_FAILURES}{{Component="core_worker",NodeAddress="10.0.2.17",'
            f'SessionName="session_2026-12-06_10-02-11_418402_1",Version="2.60.0",'
            f'WorkerId="5f1d0c7e",application="{application}",deployment="{deployment}",'
            f'replica="{replica}",namespace="{NS}",pod="{pod}",instance="10.0.2.17:8080",'
            f'job="{NS}/ray-llm-head",ray_io_cluster="ray-llm-raycluster-7xk2q"}}')


def _replica_starts(deployment: str, replica: str, pod: str) -> str:
    return (f'{m.SERVE_REPLICA_STARTS}{{Component="core_worker",application="llm",'
            f'deployment="{deployment}",replica="{replica}",namespace="{NS}",pod="{pod}"}}')


def _replica(phase: str, deployment: str, replica: str) -> dict[str, str]:
    return {"phase": phase, "deployment": deployment, "replica": replica}


def test_a_replica_whose_actor_died_fires_at_once_for_the_window(tmp_path: Path) -> None:
    """Decode replica d0 dies at minute 10 (pod lost): the controller's check finds its actor dead
    and counts 1, a counter Ray exports only from then on (born at 1). Fires from that minute,
    for the 5-minute window, labelled with its phase; the replacement's first start (a new
    replica id in the starts counter) adds nothing."""
    series = {_health_failures("Decode:tiny", "d0"): "_x10 1x30",
              _replica_starts("Decode:tiny", "d0", "ray-llm-gpu-worker-a"): "1x10 stale",
              _replica_starts("Decode:tiny", "d1", "ray-llm-gpu-worker-b"): "_x12 1x28"}
    fired = [_replica("decode", "Decode:tiny", "d0")]
    checks = [_expect("RaypdReplicaHealthCheckFailed", 9, []),
              _expect("RaypdReplicaHealthCheckFailed", 10, fired),
              _expect("RaypdReplicaHealthCheckFailed", 14, fired),
              _expect("RaypdReplicaHealthCheckFailed", 16, [])]
    done = _promtool(tmp_path, [_test(series, checks)])
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_hung_replica_whose_failures_climb_fires_on_the_increase(tmp_path: Path) -> None:
    """Prefill replica p0 failed one check long ago (counter at 1 since minute 0), then hangs at
    minute 20: three failed checks in a row (2, 3, 4), after which Serve replaces it."""
    series = {_health_failures("Prefill:tiny", "p0"): "1x20 2 3 4x18"}
    fired = [_replica("prefill", "Prefill:tiny", "p0")]
    checks = [_expect("RaypdReplicaHealthCheckFailed", 19, []),
              _expect("RaypdReplicaHealthCheckFailed", 21, fired),
              _expect("RaypdReplicaHealthCheckFailed", 27, fired),
              _expect("RaypdReplicaHealthCheckFailed", 30, [])]
    done = _promtool(tmp_path, [_test(series, checks)])
    assert done.returncode == 0, done.stdout + done.stderr


def test_starts_scale_ups_moved_series_and_other_apps_raise_no_replica_alert(tmp_path: Path) -> None:
    """A first start and a scale-up (new replicas in the starts counter, no failed check); an old
    failure whose series moves to another head pod at minute 20 (the head restarted: other `pod`
    and `instance`) without moving; another Serve application's replica failing. (Read from
    minute 6: in a Prometheus's first 5 minutes every non-zero counter counts as born, the one
    false alarm the born-at-1 rule has, as RaypdNixlTransferFailed's.)"""
    moved = _health_failures("Decode:tiny", "d9", pod="ray-llm-raycluster-7xk2q-head-q2m7c")
    series = {_replica_starts("Decode:tiny", "d0", "ray-llm-gpu-worker-a"): "_x3 1x37",
              _replica_starts("Decode:tiny", "d1", "ray-llm-gpu-worker-b"): "_x15 1x25",
              _health_failures("Decode:tiny", "d9"): "1x20 stale",
              moved.replace('instance="10.0.2.17:8080"', 'instance="10.0.2.44:8080"'): "_x20 1x20",
              _health_failures("Decode:other", "x1", application="other"): "_x10 1x30"}
    done = _promtool(tmp_path, [_test(series, _silent((6, 11, 16, 21, 24, 30)))])
    assert done.returncode == 0, done.stdout + done.stderr


# ---- the Ray head restarted or replaced: kube-state-metrics ----

def _head_labels(pod: str, uid: str, cluster: str = "ray-llm-raycluster-7xk2q", service: str = "ray-llm",
                 ksm: str = KSM) -> str:
    """kube_pod_labels with raypd's allowlist (label_<key>, namespace, pod, uid; internal/store/pod.go)."""
    return (f'{m.KUBE_POD_LABELS}{{namespace="{NS}",pod="{pod}",uid="{uid}",'
            f'label_raypd_io_ray_service="{service}",label_ray_io_node_type="head",'
            f'label_ray_io_cluster="{cluster}",container="kube-state-metrics",{ksm}}}')


def _restarts(pod: str, uid: str, container: str = "ray-head", ksm: str = KSM) -> str:
    return (f'{m.KUBE_POD_RESTARTS}{{namespace="{NS}",pod="{pod}",uid="{uid}",'
            f'container="{container}",{ksm}}}')


HEAD, HEAD_UID = "ray-llm-raycluster-7xk2q-head-8w2xd", "3c1d-0001"
NEW_HEAD, NEW_HEAD_UID = "ray-llm-raycluster-7xk2q-head-q2m7c", "3c1d-0002"


def _head(pod: str) -> dict[str, str]:
    return {"namespace": NS, "pod": pod, "label_ray_io_cluster": "ray-llm-raycluster-7xk2q"}


def test_a_head_container_restart_fires_for_15_minutes(tmp_path: Path) -> None:
    """The GCS exits at minute 10 (a crash, or its Redis gone): the ray-head container restarts in
    the same pod. A restart of the head pod's autoscaler sidecar is not the head."""
    series = {_head_labels(HEAD, HEAD_UID): "1x40",
              _restarts(HEAD, HEAD_UID): "0x10 1x30",
              _restarts(HEAD, HEAD_UID, container="autoscaler"): "0x3 1x37"}
    checks = [_expect("RaypdHeadRestarted", 9, []),
              _expect("RaypdHeadRestarted", 11, [_head(HEAD)]),
              _expect("RaypdHeadRestarted", 24, [_head(HEAD)]),
              _expect("RaypdHeadRestarted", 27, [])]
    done = _promtool(tmp_path, [_test(series, checks)])
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_head_pod_replaced_in_its_ray_cluster_fires(tmp_path: Path) -> None:
    """The head pod is deleted (or its node lost) at minute 20; KubeRay's new head pod for the
    same RayCluster is listed from that minute (the old one still terminating), its container at
    0 restarts. Fires for the new head's first 15 minutes (then it was there 15 minutes ago too)."""
    series = {_head_labels(HEAD, HEAD_UID): "1x20 stale",
              _restarts(HEAD, HEAD_UID): "0x20 stale",
              _head_labels(NEW_HEAD, NEW_HEAD_UID): "_x20 1x40",
              _restarts(NEW_HEAD, NEW_HEAD_UID): "_x20 0x40"}
    checks = [_expect("RaypdHeadRestarted", 19, []),
              _expect("RaypdHeadRestarted", 20, [_head(NEW_HEAD)]),
              _expect("RaypdHeadRestarted", 34, [_head(NEW_HEAD)]),
              _expect("RaypdHeadRestarted", 35, [])]
    done = _promtool(tmp_path, [_test(series, checks)])
    assert done.returncode == 0, done.stdout + done.stderr


def test_first_start_upgrade_exporter_restart_and_other_services_raise_no_head_alert(tmp_path: Path) -> None:
    """A first head (minute 5); a NewCluster upgrade's head in a new RayCluster beside the old one
    (minute 25 on, the old one gone at 35); kube-state-metrics restarted at minute 15 (every
    series under another `instance`); another RayService's head in the namespace restarting."""
    upgraded = "ray-llm-raycluster-9fq4d-head-z8k1m"
    series = {_head_labels(HEAD, HEAD_UID): "_x5 1x10 stale",
              _head_labels(HEAD, HEAD_UID, ksm=KSM_MOVED): "_x15 1x20 stale",
              _restarts(HEAD, HEAD_UID): "_x5 0x10 stale",
              _restarts(HEAD, HEAD_UID, ksm=KSM_MOVED): "_x15 0x20 stale",
              _head_labels(upgraded, "9f00-0001", cluster="ray-llm-raycluster-9fq4d", ksm=KSM_MOVED): "_x25 1x30",
              _restarts(upgraded, "9f00-0001", ksm=KSM_MOVED): "_x25 0x30",
              _head_labels("batch-head-x", "b000-0001", cluster="batch-rc", service="batch"): "1x50",
              _restarts("batch-head-x", "b000-0001"): "0x10 1 2x40"}
    done = _promtool(tmp_path, [_test(series, _silent((6, 12, 16, 21, 26, 30, 36, 45)))])
    assert done.returncode == 0, done.stdout + done.stderr


# ---- a system node not Ready ----

def _node(name: str, role: str) -> dict[str, str]:
    return {f'{m.KUBE_NODE_LABELS}{{label_role="{role}",node="{name}",{KSM}}}': "1x40"}


def _ready(name: str, values: str) -> dict[str, str]:
    return {f'{m.KUBE_NODE_CONDITION}{{condition="Ready",status="true",node="{name}",{KSM}}}': values}


def test_a_system_node_not_ready_for_5_minutes_fires_and_a_gpu_node_is_the_other_alert(tmp_path: Path) -> None:
    """The system node goes NotReady at minute 6 (pending 5 minutes, firing from 11); a GPU node
    NotReady from minute 20 is RaypdGpuNodeNotReady's, not this one's; a system node NotReady
    for 3 minutes (a kubelet restart) never fires."""
    system, other, gpu = "ip-10-0-1-7.us-east-2.compute.internal", "ip-10-0-1-8", "ip-10-0-7-9"
    series = {**_node(system, "system"), **_ready(system, "1x5 0x35"),
              **_node(other, "system"), **_ready(other, "1x20 0x3 1x17"),
              **_node(gpu, "gpu-worker"), **_ready(gpu, "1x20 0x20")}
    checks = [_expect("RaypdSystemNodeNotReady", 10, []),
              _expect("RaypdSystemNodeNotReady", 11, [{"node": system}]),
              _expect("RaypdSystemNodeNotReady", 25, [{"node": system}]),
              _expect("RaypdSystemNodeNotReady", 30, [{"node": system}]),
              _expect("RaypdGpuNodeNotReady", 30, [{"node": gpu}])]
    done = _promtool(tmp_path, [_test(series, checks)])
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_fault_alert_links_a_runbook_that_exists() -> None:
    """docs/resilience.md's faults each name an alert; each alert's runbook anchor is in
    docs/troubleshooting.md and the alert is in docs/observability.md's table."""
    root = Path(__file__).resolve().parents[2]
    runbooks = (root / "docs" / "troubleshooting.md").read_text()
    table = (root / "docs" / "observability.md").read_text()
    resilience = (root / "docs" / "resilience.md").read_text()
    for alert in ("RaypdReplicaHealthCheckFailed", "RaypdHeadRestarted", "RaypdSystemNodeNotReady"):
        anchor = _rule(alert)["annotations"]["runbook_url"].split("#")[1]
        assert f'<a id="{anchor}"></a>' in runbooks, alert
        assert f"| `{alert}` |" in table, alert
        assert f"`{alert}`" in resilience, alert


def test_every_fault_of_the_resilience_table_names_alerts_the_rules_raise() -> None:
    """Issue 31 §2: each fault of docs/resilience.md's table fires an alert. Its alert cell names
    at least one, and every name there is an alert raypd renders (no renamed or invented one)."""
    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "resilience.md").read_text()
    table = text[text.index("## The faults"):].split("\n\n")[1].splitlines()
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    column = next(i for i, cell in enumerate(header) if cell.startswith("alert"))
    rendered = {r["alert"] for g in prometheus_rule_groups(SPEC) for r in g["rules"] if "alert" in r}
    faults = {}
    for row in table[2:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        faults[cells[0]] = set(re.findall(r"`(Raypd[A-Za-z]+)`", cells[column]))
    assert len(faults) == 8, list(faults)
    for fault, alerts in faults.items():
        assert alerts and alerts <= rendered, (fault, alerts - rendered)
