"""serve.resilience's faults through the Kubernetes stand-in (tests/fakes/kube_api.py, with the
pod, eviction and node routes of tests/fakes/kube_faults.py): it touches only the deployment's
objects, refuses on RBAC's 403 before any load, and never leaves a node cordoned."""

from __future__ import annotations

import copy
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from serve.evidence import VerifyPlan
from serve.kube import client_from_kubeconfig
from serve.kv_evidence import compare_readings
from serve.resilience.faults import KubeDeployment, KubeFault
from serve.resilience.run import FaultRefused
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.openai_server import OpenAIServer
from tests.patience import until
from tests.unit.cli_support import ROOT


def fault(kube: FakeKubeApi, name: str, **knobs: Any) -> KubeFault:
    outputs = kube.outputs()
    client = client_from_kubeconfig(outputs["kubeconfig"])
    return KubeFault(name, KubeDeployment(client, VerifyPlan.from_outputs(outputs)), **knobs)


def pod_hosting(kube: FakeKubeApi, phase: str) -> dict[str, Any]:
    ip = kube.replicas[phase][0]["node_ip"]
    return next(p for p in kube.pods if p["status"]["podIP"] == ip and p["metadata"]["labels"]["ray.io/node-type"]
                == "worker")


def real_writes(kube: FakeKubeApi) -> list[tuple[str, str]]:
    return [(w["verb"], w["path"]) for w in kube.fault_writes if not w["dryRun"] and w["status"] < 300]


@pytest.mark.parametrize("name, phase", [("prefill-pod", "prefill"), ("decode-pod", "decode")])
def test_an_engine_fault_deletes_only_the_pod_hosting_that_phase(name: str, phase: str) -> None:
    with FakeKubeApi("healthy") as kube:
        target = pod_hosting(kube, phase)
        # an impostor: same namespace, group and IP, but another RayService's: never chosen
        impostor = copy.deepcopy(target)
        impostor["metadata"].update(name="other-worker", uid="0" * 32)
        impostor["metadata"]["labels"]["ray.io/originated-from-cr-name"] = "another-service"
        kube.pods.insert(0, impostor)
        chosen = fault(kube, name)
        assert chosen.choose() == f"pod inference/{target['metadata']['name']}"
        assert real_writes(kube) == []  # choosing is a dry run
        assert chosen.inject() == f"deleted pod inference/{target['metadata']['name']}"
        assert real_writes(kube) == [("delete", f"/api/v1/namespaces/inference/pods/{target['metadata']['name']}")]
        assert impostor in kube.pods and target not in kube.pods


def test_the_head_fault_deletes_the_active_clusters_head_pod() -> None:
    with FakeKubeApi("healthy") as kube:
        head = next(p for p in kube.pods if p["metadata"]["labels"]["ray.io/node-type"] == "head")
        chosen = fault(kube, "head-pod")
        chosen.choose()
        chosen.inject()
        assert real_writes(kube) == [("delete", f"/api/v1/namespaces/inference/pods/{head['metadata']['name']}")]


def test_a_pod_that_changed_since_it_was_chosen_is_not_touched() -> None:
    with FakeKubeApi("healthy") as kube:
        chosen = fault(kube, "prefill-pod")
        chosen.choose()
        pod_hosting(kube, "prefill")["metadata"]["labels"]["ray.io/originated-from-cr-name"] = "someone-else"
        with pytest.raises(FaultRefused, match="changed since it was chosen"):
            chosen.inject()
        assert real_writes(kube) == []


@pytest.mark.parametrize("name, forbidden", [
    ("prefill-pod", ("delete", "pods")), ("head-pod", ("delete", "pods")),
    ("node", ("patch", "nodes")), ("node", ("create", "pods/eviction"))])
def test_rbac_403_refuses_before_anything_is_done(name: str, forbidden: tuple[str, str]) -> None:
    with FakeKubeApi("healthy") as kube:
        kube.forbidden.add(forbidden)
        with pytest.raises(FaultRefused, match=r"not allowed to .* \(HTTP 403, RBAC\): serve.resilience needs pods: "):
            fault(kube, name).choose()
        assert real_writes(kube) == []
        assert not any(n["spec"].get("unschedulable") for n in kube.nodes)


def test_the_node_fault_cordons_drains_only_the_deployments_pods_and_uncordons() -> None:
    with FakeKubeApi("healthy") as kube:
        decode = pod_hosting(kube, "decode")
        node_name = decode["spec"]["nodeName"]
        foreign = copy.deepcopy(decode)  # a DaemonSet-like pod of the namespace, not KubeRay's
        foreign["metadata"].update(name="efa-plugin-xyz", uid="1" * 32, labels={"app": "efa"})
        kube.pods.append(foreign)
        chosen = fault(kube, "node")
        assert chosen.choose() == f"node {node_name} (hosting pod {decode['metadata']['name']})"
        words = chosen.inject()
        node = next(n for n in kube.nodes if n["metadata"]["name"] == node_name)
        assert node["spec"]["unschedulable"] is True
        assert words == f"cordoned node {node_name}, evicted {decode['metadata']['name']}"
        assert foreign in kube.pods and decode not in kube.pods
        chosen.restore()
        assert "unschedulable" not in node["spec"]
        assert real_writes(kube) == [
            ("patch", f"/api/v1/nodes/{node_name}"),
            ("create", f"/api/v1/namespaces/inference/pods/{decode['metadata']['name']}/eviction"),
            ("patch", f"/api/v1/nodes/{node_name}")]


def test_a_node_already_cordoned_or_outside_the_gpu_groups_is_refused() -> None:
    with FakeKubeApi("healthy") as kube:
        node_name = pod_hosting(kube, "decode")["spec"]["nodeName"]
        node = next(n for n in kube.nodes if n["metadata"]["name"] == node_name)
        node["spec"]["unschedulable"] = True
        with pytest.raises(FaultRefused, match="already cordoned"):
            fault(kube, "node").choose()
        node["spec"].pop("unschedulable")
        node["metadata"]["labels"].pop("role")
        with pytest.raises(FaultRefused, match="not one of the stack's GPU node groups"):
            fault(kube, "node").choose()
        assert real_writes(kube) == []


def test_a_disruption_budget_is_waited_for_then_reported(tmp_path: Path) -> None:
    with FakeKubeApi("healthy") as kube:
        decode = pod_hosting(kube, "decode")
        kube.eviction_blocked.add(decode["metadata"]["name"])
        chosen = fault(kube, "node", eviction_retry_s=0.01, drain_timeout_s=0.1)
        chosen.choose()
        assert "still blocked by a disruption budget" in chosen.inject()
        assert sum(w["status"] == 429 for w in kube.fault_writes) >= 2
        chosen.restore()
        assert not any(n["spec"].get("unschedulable") for n in kube.nodes)


@pytest.mark.slow  # over 4 s: a real load, or a process of its own
def test_sigterm_during_the_run_uncordons_the_node(tmp_path: Path) -> None:
    """The CLI in its own process (a signal is what is tested): cordoned under load, SIGTERM, and the
    node is schedulable again when it has exited."""
    with FakeKubeApi("healthy") as kube, OpenAIServer(kube.spec.model.id, output_tokens=4) as server:
        decode = pod_hosting(kube, "decode")
        kube.eviction_blocked.add(decode["metadata"]["name"])  # the drain keeps trying: still busy
        node = next(n for n in kube.nodes if n["metadata"]["name"] == decode["spec"]["nodeName"])
        (tmp_path / "outputs.json").write_text(json.dumps(kube.outputs()))
        process = subprocess.Popen(
            [sys.executable, "-m", "serve.resilience", "--outputs", str(tmp_path / "outputs.json"),
             "--fault", "node", "--rate", "2", "--duration", "600", "--fault-at", "0.5",
             "--endpoint", server.url, "--out", str(tmp_path / "out")],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            until(lambda: node["spec"].get("unschedulable") is True or process.poll() is not None,
                  "the node to be cordoned")
            assert process.poll() is None, process.communicate()
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 130, err
        assert "interrupted" in err and "Traceback" not in err
        assert "unschedulable" not in node["spec"]


def test_the_kv_reading_adds_prefills_expired_leases_and_nothing_else_of_prefills() -> None:
    """Decode's counters as verify reads them; prefill (the producer) counts the leases that ran
    out, and only that series of its page is taken: its own local_compute tokens are not decode's."""
    with FakeKubeApi("healthy") as kube:
        deployment = fault(kube, "prefill-pod").deployment
        prefill = kube._engines[kube.replicas["prefill"][0]["replica_id"]]
        decode = kube._engines[kube.replicas["decode"][0]["replica_id"]]
        prefill["local"], decode["transfers"] = 10.0, 1.0  # both pages have series before
        before = deployment.kv_reading()
        prefill["expired"], prefill["local"], decode["failed"] = 2.0, 300.0, 3.0
        after = deployment.kv_reading()
    assert before is not None and after is not None
    change = compare_readings(before, after).change
    assert change is not None and (change.expired, change.failed, change.local_tokens) == (2.0, 3.0, 0.0)
