"""`python -m serve.resilience` (its `--help` as users start it: tests/unit/test_entry_points.py):
hostile input refused naming the flag (exit 2, one line, no
traceback, no secret), a refused fault before any load, and a whole run through the Kubernetes
stand-in's Serve Service proxy writing the report, its table and its plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from serve.resilience.__main__ import main
from tests.fakes.kube_api import DEFAULT_TOKEN, FakeKubeApi
from tests.fakes.openai_server import OpenAIServer
from tests.unit.cli_support import run_main


@pytest.fixture()
def outputs_file(tmp_path: Path) -> tuple[FakeKubeApi, Path]:
    kube = FakeKubeApi("healthy").start()
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(kube.outputs()))
    yield kube, path
    kube.stop()


@pytest.mark.parametrize("args, flag", [
    (["--fault", "../../etc/passwd"], "--fault must be one of prefill-pod, decode-pod, head-pod, node"),
    (["--fault", "node", "--rate", "nan"], "--rate must be above 0"),
    (["--fault", "node", "--rate", "-1"], "--rate must be above 0"),
    (["--fault", "node", "--rate", "1e9"], "--rate must be above 0 and at most 1000"),
    (["--fault", "node", "--rate", "fast"], "--rate must be a number"),
    (["--fault", "node", "--duration", "inf"], "--duration must be above 0"),
    (["--fault", "node", "--duration", "0"], "--duration must be above 0"),
    (["--fault", "node", "--duration", "20", "--fault-at", "20"], "--fault-at (20 s) must come before the end"),
    (["--fault", "node", "--kubeconfig", "/dev/zero"], "--kubeconfig:"),
    (["--fault", "node", "--kubeconfig", "/nonexistent/kubeconfig"], "--kubeconfig:"),
    (["--fault", "node", "--endpoint", "file:///etc/passwd"], "--endpoint must be an http(s) URL"),
])
def test_hostile_input_names_the_flag(outputs_file: tuple[FakeKubeApi, Path], tmp_path: Path,
                                      args: list[str], flag: str) -> None:
    kube, path = outputs_file
    result = run_main(main, "--outputs", str(path), *args, "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result
    assert result.stderr.startswith("resilience: ") and flag in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert DEFAULT_TOKEN not in result.stderr + result.stdout
    assert kube.fault_writes == []


def test_outputs_that_are_not_a_stacks_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "o.json"
    bad.write_text('{"schemaVersion": 1}')
    for source in (str(bad), str(tmp_path / "missing.json"), "/dev/zero"):
        result = run_main(main, "--outputs", source, "--fault", "node", "--out", str(tmp_path / "out"))
        assert result.returncode == 2 and result.stderr.startswith("resilience: --outputs"), result.stderr


def test_a_forbidden_delete_is_refused_before_any_request_is_sent(outputs_file: tuple[FakeKubeApi, Path],
                                                                   tmp_path: Path) -> None:
    kube, path = outputs_file
    kube.forbidden.add(("delete", "pods"))
    with OpenAIServer(kube.spec.model.id) as server:
        kube.serve_upstream = server.url
        result = run_main(main, "--outputs", str(path), "--fault", "decode-pod", "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert "not allowed to read or act on the decode-pod target (HTTP 403, RBAC)" in result.stderr
    assert "pods: get, list, delete" in result.stderr and DEFAULT_TOKEN not in result.stderr
    assert server.requests == [] and not (tmp_path / "out").exists()


@pytest.mark.slow  # over 4 s: a real load, or a process of its own
def test_a_run_through_the_service_proxy_deletes_the_decode_pod_and_writes_the_report(
        outputs_file: tuple[FakeKubeApi, Path], tmp_path: Path) -> None:
    kube, path = outputs_file
    with OpenAIServer(kube.spec.model.id, output_tokens=16) as server:
        kube.serve_upstream = server.url
        result = run_main(main, "--outputs", str(path), "--fault", "decode-pod", "--rate", "8", "--duration", "3",
                          "--fault-at", "1", "--json", "--out", str(tmp_path / "out"))
    report = json.loads(result.stdout)
    # the answers never failed, but 2 s of load after the fault is too little to call it recovered
    assert result.returncode == 1 and report["ok"] is False, result.stderr
    # the decode's counters were on the pod that was deleted: read once only, so not judged
    assert [c["status"] for c in report["checks"]] == ["fail", "pass", "pass", "skip"]
    decode_page = f"pod {report['fault']['injected'].rsplit('/', 1)[1]} metrics"
    assert decode_page in report["kv"]["notCompared"]  # (verify's reader then falls back to the group's pods)
    assert "read only once, so not judged: " in report["checks"][3]["detail"]
    assert report["fault"]["injected"].startswith("deleted pod inference/")
    assert [w["verb"] for w in kube.fault_writes if not w["dryRun"]] == ["delete"]
    assert report["requests"]["sent"] == report["requests"]["ok"] > 0
    assert report["golden"] == {"prompts": 8, "askedEach": 2, "unstable": [], "failed": 0}
    assert all(chat[2]["seed"] == 1234 and chat[2]["temperature"] == 0.0 and chat[2]["ignore_eos"]
               for chat in server.requests if chat[0] == "POST")
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["report.json", "report.txt", "requests.jsonl", "timeline.png"]
    assert (tmp_path / "out" / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert DEFAULT_TOKEN not in result.stdout + (tmp_path / "out" / "report.json").read_text()
