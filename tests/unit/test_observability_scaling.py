"""The scaling expressions (components/render/observability_scaling.py) and the pinned-at-maxReplicas
alert, run for real on Debian's promtool (tests/required_tools.py: missing, the test fails).

The series are typed here, labelled as Ray 2.58 / 2.60 export them (metric names and tag keys:
components/render/metric_names.py, with the target labels raypd's PodMonitors add): no capture holds
the controller's target gauge or the handles' queue gauge (the captures predate issue 30).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from components.config.spec import DeploymentSpec
from components.render import metric_names as m
from components.render import observability_scaling as scaling
from components.render.observability_dashboards import dashboards, panel_queries
from components.render.observability_rules import prometheus_rule_groups
from tests.prometheus_server import need_promtool
from tests.real.stacks import SMALL_STACK

PREFILL, DECODE = "Prefill:tiny", "Decode:tiny"
DEPLOYMENTS = {"prefill": PREFILL, "decode": DECODE}
AUTOSCALING = {"minReplicas": 1, "maxReplicas": 3, "targetOngoingRequests": 8}


def _spec(**phases: dict[str, Any]) -> DeploymentSpec:
    """The small stack (Prefill:tiny, Decode:tiny) with the given phases' settings merged in."""
    config = {key: dict(value) if isinstance(value, dict) else value for key, value in SMALL_STACK.items()}
    for phase, settings in phases.items():
        config[f"raypd:{phase}"] = {**config[f"raypd:{phase}"], **settings}
    return DeploymentSpec.from_config(config, "scaling")


def _ray(name: str, deployment: str, pod: str, **labels: str) -> str:
    """A Ray Serve series as Prometheus stores it from raypd's PodMonitors."""
    extra = "".join(f',{k}="{v}"' for k, v in labels.items())
    return (f'{name}{{Component="core_worker",SessionName="session_2026_12_06",application="llm",'
            f'deployment="{deployment}",namespace="inference",pod="{pod}"{extra}}}')


def _promtool(tmp_path: Path, spec: DeploymentSpec, tests: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    rules = tmp_path / "rules.yml"
    rules.write_text(yaml.safe_dump({"groups": prometheus_rule_groups(spec)}, sort_keys=False))
    unit = tmp_path / "unit.yml"
    unit.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "1m",
                                    "tests": tests}, sort_keys=False))
    return subprocess.run([need_promtool(), "test", "rules", str(unit)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


def _load(prefill_running: tuple[int, ...], prefill_queued: int, decode_running: int,
          decode_queued: int) -> dict[str, str]:
    """Each Prefill replica's running requests, the requests decode's handle holds for prefill,
    decode's running requests and those the ingress holds for decode; held for 10 minutes."""
    series = {_ray(m.SERVE_REPLICA_QUERIES, PREFILL, f"ray-llm-prefill-worker-{i}", replica=f"p{i}"): f"{n}x10"
              for i, n in enumerate(prefill_running)}
    series[_ray(m.SERVE_REPLICA_QUERIES, DECODE, "ray-llm-decode-worker-0", replica="d0")] = f"{decode_running}x10"
    series[_ray(m.SERVE_QUEUED_QUERIES, PREFILL, "ray-llm-decode-worker-0", handle="h-decode",
                actor_id="a1")] = f"{prefill_queued}x10"
    series[_ray(m.SERVE_QUEUED_QUERIES, DECODE, "ray-llm-head", handle="h-ingress",
                actor_id="a2")] = f"{decode_queued}x10"
    return series


def _signals_test(load: dict[str, str], prefill: float, decode: float) -> dict[str, Any]:
    return {"interval": "1m", "input_series": [{"series": k, "values": v} for k, v in load.items()],
            "promql_expr_test": [
                {"expr": scaling.signal("prefill", DEPLOYMENTS), "eval_time": "5m",
                 "exp_samples": [{"labels": "{}", "value": prefill}]},
                {"expr": scaling.signal("decode", DEPLOYMENTS), "eval_time": "5m",
                 "exp_samples": [{"labels": "{}", "value": decode}]}]}


def test_each_phase_signal_is_the_policy_one(tmp_path: Path) -> None:
    """prefill: its running 2+1 plus 4 queued at decode's handle = 7. decode: its 10 running minus
    prefill's 7 = 3; the 6 queued at the ingress for decode are not decode's engines' load (with
    Serve's default signal decode would read 16). Prefill busier than decode runs: decode 0."""
    tests = [_signals_test(_load((2, 1), 4, 10, 6), prefill=7, decode=3),
             _signals_test(_load((2, 1), 4, 5, 0), prefill=7, decode=0)]
    done = _promtool(tmp_path, _spec(), tests)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_signal_of_an_app_without_prefill_is_serves_ongoing_requests(tmp_path: Path) -> None:
    colocated = {"colocated": "LLMServer:tiny"}
    load = {_ray(m.SERVE_REPLICA_QUERIES, "LLMServer:tiny", "w0", replica="c0"): "5x10",
            _ray(m.SERVE_QUEUED_QUERIES, "LLMServer:tiny", "head", handle="h", actor_id="a"): "2x10"}
    test = {"interval": "1m", "input_series": [{"series": k, "values": v} for k, v in load.items()],
            "promql_expr_test": [{"expr": scaling.signal("colocated", colocated), "eval_time": "5m",
                                  "exp_samples": [{"labels": "{}", "value": 7}]}]}
    done = _promtool(tmp_path, _spec(), [test])
    assert done.returncode == 0, done.stdout + done.stderr
    assert scaling.signal_words("colocated", colocated) == scaling.SERVE_DEFAULT_WORDS


def test_the_dashboard_draws_the_same_signal_the_page_reads() -> None:
    spec = _spec(decode={"autoscaling": AUTOSCALING})
    queries = [expr for _, expr in panel_queries(next(iter(dashboards(spec).values())))]
    for phase in ("prefill", "decode"):
        assert any(scaling.signal(phase, DEPLOYMENTS) in expr for expr in queries), phase
    assert f"{scaling.signal('decode', DEPLOYMENTS)} / 8" in queries  # what the signal asks for
    assert "vector(3)" in queries and "vector(1)" in queries        # decode's max and min


def _target(deployment: str, values: str) -> dict[str, str]:
    """The controller's target gauge (on the head pod) for one deployment."""
    return {_ray(m.SERVE_TARGET_REPLICAS, deployment, "ray-llm-head-abcde"): values}


def _alerts_at(minute: int, firing: list[dict[str, str]]) -> dict[str, Any]:
    (rule,) = [r for g in prometheus_rule_groups(_spec(decode={"autoscaling": AUTOSCALING}))
               for r in g["rules"] if r.get("alert") == "RaypdPhaseAtMaxReplicas"]
    notes = rule["annotations"]
    return {"eval_time": f"{minute}m", "alertname": "RaypdPhaseAtMaxReplicas",
            "exp_alerts": [{"exp_labels": {"severity": "warning", "raypd_alert": "true", **labels},
                            "exp_annotations": {
                                **notes, "summary": notes["summary"].replace("{{ $labels.phase }}", labels["phase"])
                                .replace("{{ $labels.deployment }}", labels["deployment"])}}
                           for labels in firing]}


def test_a_phase_at_its_max_for_10_minutes_fires_and_a_fixed_phase_never(tmp_path: Path) -> None:
    """Decode (max 3) reaches its maximum at minute 5: not yet at minute 14 (9 minutes), firing at
    15 (10 minutes). Prefill has no autoscaling block and sits at its one replica all along, as
    Serve reports a fixed phase: never an alert."""
    series = {**_target(DECODE, "1x4 3x30"), **_target(PREFILL, "1x35")}
    test = {"interval": "1m", "input_series": [{"series": k, "values": v} for k, v in series.items()],
            "alert_rule_test": [_alerts_at(14, []),
                                _alerts_at(15, [{"phase": "decode", "deployment": DECODE}]),
                                _alerts_at(30, [{"phase": "decode", "deployment": DECODE}])]}
    done = _promtool(tmp_path, _spec(decode={"autoscaling": AUTOSCALING}), [test])
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_phase_that_drops_below_its_max_does_not_fire(tmp_path: Path) -> None:
    """At its maximum for 9 minutes, then one replica fewer: the 10 minutes start again."""
    series = _target(DECODE, "1x4 3x8 2 3x20")
    test = {"interval": "1m", "input_series": [{"series": k, "values": v} for k, v in series.items()],
            "alert_rule_test": [_alerts_at(14, []), _alerts_at(24, []),
                                _alerts_at(25, [{"phase": "decode", "deployment": DECODE}])]}
    done = _promtool(tmp_path, _spec(decode={"autoscaling": AUTOSCALING}), [test])
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_alert_rule_on_a_stack_without_autoscaling() -> None:
    alerts = [rule["alert"] for group in prometheus_rule_groups(_spec()) for rule in group["rules"]
              if "alert" in rule]
    assert "RaypdPhaseAtMaxReplicas" not in alerts
    both = _spec(prefill={"autoscaling": {**AUTOSCALING, "maxReplicas": 2}}, decode={"autoscaling": AUTOSCALING})
    (rule,) = [r for g in prometheus_rule_groups(both) for r in g["rules"]
               if r.get("alert") == "RaypdPhaseAtMaxReplicas"]
    assert rule["for"] == "10m" and ">= 2" in rule["expr"] and ">= 3" in rule["expr"]
