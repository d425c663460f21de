"""`python -m serve.benchmark run|compare`: Contract 6 files and keys, exit codes 0/1/2, sweeps, the report."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from serve.benchmark.__main__ import main
from tests.fakes.openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[2]
MODEL = "bench-model"
CONTRACT_KEYS = {"requests", "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "request_rate", "input_tokens_per_s",
                 "output_tokens_per_s", "slo", "usd_per_million_output_tokens"}
STATS_KEYS = {"mean", "p50", "p90", "p95", "p99"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def check_contract(summary: dict[str, Any]) -> None:
    assert CONTRACT_KEYS <= set(summary)
    assert set(summary["requests"]) == {"sent", "completed", "failed"}
    for key in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        assert set(summary[key]) == STATS_KEYS
    assert set(summary["slo"]) == {"ttft_ms", "tpot_ms", "attained"}


def test_run_writes_records_and_a_contract_6_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    with OpenAIServer(MODEL, ttft_s=0.01, itl_s=0.002, output_tokens=50, failure_rate=0.2, seed=1) as server:
        code = main(["run", "--endpoint", server.url, "--model", MODEL, "--rate", "50", "--requests", "30",
                     "--input-tokens", "40", "--output-tokens", "8", "--slo-ttft-ms", "500", "--slo-tpot-ms", "100",
                     "--usd-per-hour", "12.5", "--out", str(out), "--json"])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert json.loads(capsys.readouterr().out) == summary
    check_contract(summary)
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert len(records) == 30 == summary["requests"]["sent"]
    failed = sum(not r["ok"] for r in records)
    assert 1 <= failed == summary["requests"]["failed"] == summary["errors"]["http"]
    assert summary["slo"]["attained"] == pytest.approx((30 - failed) / 30)
    assert summary["usd_per_million_output_tokens"] > 0
    assert summary["workload"]["input_tokens"] == 40 and summary["workload"]["output_tokens"] == 8
    assert all(r["completion_tokens"] == 8 for r in records if r["ok"])
    gaps = [gap for r in records for gap in r["itl_ms"]]
    assert gaps and all(round(gap, 3) == gap for gap in gaps)  # to the microsecond, once the run is over


def test_rate_sweep_runs_one_sub_run_per_rate_and_reports_goodput(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    with OpenAIServer(MODEL, ttft_s=0.005, output_tokens=4) as server:
        code = main(["run", "--endpoint", server.base_url, "--model", MODEL, "--rate", "40,20", "--requests", "10",
                     "--output-tokens", "4", "--input-tokens", "10", "--slo-ttft-ms", "60000", "--slo-tpot-ms", "10000",
                     "--out", str(out)])
    assert code == 0
    top = json.loads((out / "summary.json").read_text())
    check_contract(top)
    assert top["requests"]["sent"] == 20
    assert top["goodput"]["rate"] == 40.0
    for rate in ("20", "40"):
        check_contract(json.loads((out / f"rate-{rate}" / "summary.json").read_text()))
        assert len((out / f"rate-{rate}" / "requests.jsonl").read_text().splitlines()) == 10
    report = tmp_path / "report"
    single = tmp_path / "single"
    with OpenAIServer(MODEL, ttft_s=0.02, output_tokens=4) as server:
        assert main(["run", "--endpoint", server.url, "--model", MODEL, "--concurrency", "2", "--requests", "6",
                     "--output-tokens", "4", "--input-tokens", "10", "--out", str(single)]) == 0
    assert main(["compare", str(out), str(single), "--out", str(report)]) == 0
    html = (report / "report.html").read_text()
    assert "data:image/png;base64," in html and "<style>" in html and "sweep" in html and "single" in html
    for name in ("ttft_cdf.png", "tpot_cdf.png", "percentiles_vs_rate.png"):
        assert (report / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_verdict_states_the_goodput_ratio_and_conditions(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    slo = {"ttft_ms": 200.0, "tpot_ms": 50.0}
    empty = {k: None for k in STATS_KEYS}
    for name, goodput, cost in (("disagg", 4.0, 0.26), ("colocated", 3.0, 0.2)):
        run = tmp_path / name
        run.mkdir()
        summary = {"requests": {"sent": 1, "completed": 1, "failed": 0}, "ttft_ms": empty, "itl_ms": empty,
                   "tpot_ms": empty, "e2e_ms": empty, "request_rate": 1.0, "input_tokens_per_s": 1.0,
                   "output_tokens_per_s": 1.0, "slo": {**slo, "attained": 0.95},
                   "usd_per_million_output_tokens": cost, "goodput": {"rate": goodput},
                   "load": {"rates": [1.0, 2.0, 3.0, 4.0, 6.0]},
                   "workload": {"api": "chat", "input_tokens": 1024, "output_tokens": 256, "preset": "chat"}}
        (run / "summary.json").write_text(json.dumps(summary))
        (run / "requests.jsonl").write_text("")
    assert main(["compare", str(tmp_path / "disagg"), str(tmp_path / "colocated"), "--out",
                 str(tmp_path / "r")]) == 0
    printed = capsys.readouterr().out
    assert ("disagg meets the SLOs for 90% of requests at 1.3x the rate of colocated (4 vs 3 req/s); disagg at "
            "1.3x the cost per output token of colocated (0.26 vs 0.2 USD per million, both from the --usd-per-hour "
            "given to the run" in printed)
    assert "SLO TTFT <= 200 ms and TPOT <= 50 ms" in printed and "1024 input / 256 output" in printed


def test_unreachable_endpoint_exits_1_with_every_request_failed(tmp_path: Path) -> None:
    out = tmp_path / "run"
    code = main(["run", "--endpoint", f"http://127.0.0.1:{free_port()}", "--model", MODEL, "--concurrency", "2",
                 "--requests", "3", "--timeout", "5", "--out", str(out)])
    assert code == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"] == {"sent": 3, "completed": 0, "failed": 3}
    assert summary["errors"] == {"connect": 3}


@pytest.mark.parametrize("args, named", [
    (["--rate", "-1"], "--rate"),
    (["--rate", "nan"], "--rate"),
    (["--rate", "0"], "--rate"),
    (["--requests", "0"], "--requests"),
    (["--requests", "100000000000"], "--requests"),
    (["--endpoint", "not a url"], "--endpoint"),
    (["--endpoint", "file:///etc/passwd"], "--endpoint"),
    (["--concurrency", "-3"], "--concurrency"),
    (["--slo-ttft-ms", "100"], "--slo-tpot-ms"),
    (["--input-tokens", "abc"], "--input-tokens"),
    (["--prompts", "/nonexistent/prompts.jsonl"], "--prompts"),
    (["--requests", "100000", "--input-tokens", "8192"], "--input-tokens"),
    (["--rate", "0.0001", "--requests", "1000"], "--duration"),
    (["--api", "embeddings"], "--api"),
    (["--out", "/proc/raypd-benchmark"], "--out"),
])
def test_hostile_arguments_exit_2_naming_the_argument(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      args: list[str], named: str) -> None:
    base = {"--endpoint": "http://127.0.0.1:9", "--model": MODEL, "--requests": "5", "--out": str(tmp_path / "o")}
    load = [] if {"--rate", "--concurrency"} & set(args) else ["--rate", "1"]
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    argv = ["run", *[item for pair in base.items() for item in pair], *load]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and named in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_module_entry_point_exit_codes_and_one_line_errors(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "serve.benchmark", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)

    both = cli("run", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--rate", "1", "--concurrency", "1",
               "--requests", "1", "--out", str(tmp_path))
    assert both.returncode == 2 and len(both.stderr.strip().splitlines()) == 1 and "--concurrency" in both.stderr
    missing = cli("compare", str(tmp_path / "nope"), str(tmp_path / "nope2"), "--out", str(tmp_path / "r"))
    assert missing.returncode == 2 and "nope" in missing.stderr and "Traceback" not in missing.stderr
    assert cli("--help").returncode == 0


def test_run_does_not_need_matplotlib_so_it_can_run_in_a_serving_image():
    import subprocess
    import sys

    probe = ("import sys; import serve.benchmark.__main__; "
             "print('matplotlib' in sys.modules, 'serve.benchmark.compare' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                            cwd=__import__("pathlib").Path(__file__).resolve().parents[2])
    assert result.stdout.split() == ["False", "False"], result.stderr


def test_two_sweeps_without_slos_are_compared_on_latency_not_on_a_goodput_nobody_asked_for() -> None:
    from serve.benchmark.compare import Run, verdict

    def sweep(p90_ttft: float) -> dict:
        stats = {k: None for k in STATS_KEYS} | {"p90": p90_ttft}
        return {"requests": {"sent": 4, "completed": 4, "failed": 0}, "ttft_ms": stats, "itl_ms": stats,
                "tpot_ms": stats, "e2e_ms": stats, "request_rate": 2.0, "input_tokens_per_s": 1.0,
                "output_tokens_per_s": 10.0, "slo": {"ttft_ms": None, "tpot_ms": None, "attained": None},
                "usd_per_million_output_tokens": None, "goodput": None, "load": {"rates": [1.0, 2.0]}}

    sentence = verdict(Run("disagg", sweep(50.0), []), Run("colocated", sweep(100.0), []))
    assert "SLO" not in sentence and "Neither" not in sentence
    assert sentence.startswith("disagg vs colocated; disagg has 0.5x the p90 TTFT")


def test_run_against_a_deployment_through_the_api_servers_service_proxy(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from tests.fakes.kube_api import DEFAULT_TOKEN, FakeKubeApi

    with FakeKubeApi() as kube, OpenAIServer(MODEL, ttft_s=0.02, output_tokens=6) as server:
        kube.serve_upstream = server.url
        outputs = {**kube.outputs(), "modelId": MODEL}
        (tmp_path / "outputs.json").write_text(json.dumps(outputs), encoding="utf-8")
        code = main(["run", "--outputs", str(tmp_path / "outputs.json"), "--rate", "20", "--requests", "8",
                     "--input-tokens", "10", "--output-tokens", "6", "--out", str(tmp_path / "run"), "--json"])
        assert code == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["requests"] == {"sent": 8, "completed": 8, "failed": 0}
        assert summary["ttft_ms"]["p50"] >= 20.0  # the injected TTFT, through the proxy
        proxied = [r["path"] for r in kube.requests if r["method"] == "POST"]
        assert proxied == ["/api/v1/namespaces/inference/services/ray-llm-serve-svc:8000/proxy/v1/chat/completions"] * 8
        assert len([r for r in server.requests if r[1] == "/v1/chat/completions"]) == 8
        assert summary["workload"]["endpoint"].startswith(kube.url) and DEFAULT_TOKEN not in json.dumps(summary)

        (tmp_path / "masked.json").write_text(json.dumps({**outputs, "kubeconfig": "[secret]"}), encoding="utf-8")
        assert main(["run", "--outputs", str(tmp_path / "masked.json"), "--rate", "1", "--requests", "1",
                     "--out", str(tmp_path / "x")]) == 2
        assert "--show-secrets" in capsys.readouterr().err
    assert main(["run", "--endpoint", "http://127.0.0.1:9", "--rate", "1", "--requests", "1",
                 "--out", str(tmp_path / "y")]) == 2
    assert "--model is required" in capsys.readouterr().err


def test_job_with_out_runs_in_the_cluster_and_brings_every_record_back(tmp_path: Path, monkeypatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from tests.fakes.kube_api import FakeKubeApi

    monkeypatch.setattr("serve.benchmark.incluster.POLL_SECONDS", 0.05)
    with FakeKubeApi() as kube, OpenAIServer(MODEL, ttft_s=0.01, output_tokens=5) as server:
        outputs = {**kube.outputs(), "modelId": MODEL, "openaiBaseUrl": server.base_url}
        (tmp_path / "outputs.json").write_text(json.dumps(outputs), encoding="utf-8")
        code = main(["job", "--outputs", str(tmp_path / "outputs.json"), "--name", "cli-1", "--out",
                     str(tmp_path / "run"), "--", "--rate", "20,40", "--requests", "10", "--input-tokens", "8",
                     "--output-tokens", "5", "--slo-ttft-ms", "500", "--slo-tpot-ms", "50"])
        printed = capsys.readouterr()
        assert code == 0, printed.err
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert json.loads(printed.out) == summary and summary["goodput"]["rate"] == 40.0
        records = (tmp_path / "run" / "requests.jsonl").read_text().splitlines()
        assert len(records) == 20 and {json.loads(r)["rate"] for r in records} == {20.0, 40.0}
        assert "Job cli-1 created in inference" in printed.err and "/20 requests" in printed.err
        assert kube.objects() == {"configmaps": [], "jobs": [], "pods": []}

        posts = len([r for r in kube.requests if r["method"] == "POST"])
        code = main(["job", "--outputs", str(tmp_path / "outputs.json"), "--name", "cli-2", "--out",
                     str(tmp_path / "bad"), "--", "--rate", "0", "--requests", "10"])
        assert code == 2 and "--rate" in capsys.readouterr().err
        assert len([r for r in kube.requests if r["method"] == "POST"]) == posts  # refused before any create


def test_a_sweeps_table_prints_a_line_per_rate_and_goodput_in_words(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with OpenAIServer(MODEL, ttft_s=0.005, output_tokens=4) as server:
        common = ["run", "--endpoint", server.url, "--model", MODEL, "--requests", "6", "--output-tokens", "4",
                  "--input-tokens", "10", "--rate", "40,20"]
        assert main([*common, "--out", str(tmp_path / "no-slo")]) == 0
        no_slo = capsys.readouterr().out
        assert main([*common, "--slo-ttft-ms", "5000", "--slo-tpot-ms", "5000", "--out", str(tmp_path / "slo")]) == 0
        met = capsys.readouterr().out
        assert main([*common, "--slo-ttft-ms", "0.001", "--slo-tpot-ms", "0.001", "--out", str(tmp_path / "t")]) == 0
        unmet = capsys.readouterr().out
    for printed in (no_slo, met, unmet):
        assert "None" not in printed, printed
        assert "requests (all rates pooled): 12 sent" in printed
        for rate in ("20", "40"):
            assert f"rate {rate}/s: 6/6 completed" in printed and f"(rate-{rate}/)" in printed, printed
    assert "goodput: n/a (no SLO given" in no_slo and "attained" not in no_slo
    assert "rate 40/s: 6/6 completed" in met and "SLO 100.0% attained" in met
    assert "goodput: 40 requests/s (the highest swept rate meeting the SLOs for 90% of requests)" in met
    assert "goodput: none (no swept rate met the SLOs for 90% of requests)" in unmet and "SLO 0.0% attained" in unmet
