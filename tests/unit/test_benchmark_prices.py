"""Every benchmark cost says what it is priced at: `compare` names the catalogue's basis for the
stacks' region (components.config.catalogue.price_basis; a stack outside us-east-1 is told its prices are
not its region's), or says the figure is the --usd-per-hour a run was given; `run` says so too; and
summary.json keeps exactly its keys (Contract 6 fixes them, so the basis is not one of them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest

from components.config import catalogue
from serve.benchmark.__main__ import main
from serve.benchmark.compare import Run, verdict
from serve.benchmark.prices import GIVEN_PRICE, estimate_basis, price_notes
from tests.fakes.openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[2]
EMPTY = {k: None for k in ("mean", "p50", "p90", "p95", "p99")}


def _summary(usd: Optional[float], output_per_s: float = 100.0) -> dict[str, Any]:
    return {"requests": {"sent": 10, "completed": 10, "failed": 0}, "ttft_ms": {**EMPTY, "p90": 80.0},
            "itl_ms": EMPTY, "tpot_ms": {**EMPTY, "p90": 12.0}, "e2e_ms": EMPTY, "request_rate": 1.0,
            "input_tokens_per_s": 1.0, "output_tokens_per_s": output_per_s,
            "slo": {"ttft_ms": None, "tpot_ms": None, "attained": None},
            "usd_per_million_output_tokens": usd, "load": {"rate": 2.0},
            "workload": {"api": "chat", "input_tokens": 1024, "output_tokens": 256, "preset": "chat"}}


def _run_dir(parent: Path, name: str, usd: Optional[float]) -> Path:
    directory = parent / name
    directory.mkdir()
    (directory / "summary.json").write_text(json.dumps(_summary(usd)), encoding="utf-8")
    (directory / "requests.jsonl").write_text("", encoding="utf-8")
    return directory


def test_compare_for_a_stack_in_eu_west_1_says_its_prices_are_not_eu_west_1s(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _run_dir(tmp_path, "disagg", 0.26), _run_dir(tmp_path, "colocated", 0.2)
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "r"), "--region", "eu-west-1"]) == 0
    printed = capsys.readouterr().out
    basis = catalogue.price_basis("eu-west-1")
    assert "this is not eu-west-1's" in basis  # (what the catalogue says; the test holds the page to it)
    table = printed.split("\n\n")[0]
    assert f"USD / M output tokens: from the {basis}." in table.splitlines()  # right under the table
    assert f"(0.26 vs 0.2 USD per million, both from the {basis})" in printed  # the verdict's cost too
    report = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    assert "this is not eu-west-1&#x27;s" in report and f"{catalogue.PRICE_REGION} on-demand list price" in report


def test_compare_for_a_stack_in_us_east_1_names_the_list_price_and_nothing_else(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _run_dir(tmp_path, "a", 0.3), _run_dir(tmp_path, "b", 0.1)
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "r"), "--region", "us-east-1"]) == 0
    printed = capsys.readouterr().out
    assert f"USD / M output tokens: from the {catalogue.price_basis('us-east-1')}." in printed
    assert "differ" not in printed and catalogue.PRICE_AS_OF in printed


def test_compare_without_a_region_says_the_cost_is_the_price_each_run_was_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _run_dir(tmp_path, "a", 0.3), _run_dir(tmp_path, "b", None)
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "r")]) == 0
    printed = capsys.readouterr().out
    assert f"USD / M output tokens: from {GIVEN_PRICE}." in printed
    assert "list price" not in printed  # nothing claims a catalogue basis nobody said it had


def test_compare_without_any_cost_adds_no_price_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _run_dir(tmp_path, "a", None), _run_dir(tmp_path, "b", None)
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "r"), "--region", "eu-west-1"]) == 0
    printed = capsys.readouterr().out
    assert "USD / M output tokens" in printed and "USD / M output tokens:" not in printed  # the row, no note
    assert "list price" not in printed


@pytest.mark.parametrize("region, shown", [
    ("eu-west-9", "eu-west-"),             # a typo: the nearest real names
    ("\ud800", "'\\ud800'"),                # a lone surrogate, shown escaped
    ("\x1b[31mred", "'\\x1b[31mred'"),      # a terminal escape, shown escaped
    ("us-east-1; rm -rf ~", "'us-east-1; rm -rf ~'"),
    ("x" * 100_000, "(100000 characters)"),
])
def test_a_bad_region_is_refused_by_name_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], region: str, shown: str) -> None:
    a, b = _run_dir(tmp_path, "a", 0.3), _run_dir(tmp_path, "b", 0.1)
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "r"), "--region", region]) == 2
    captured = capsys.readouterr()
    line = captured.err.strip()
    assert line.startswith("benchmark: --region: ") and shown in line and len(line) < 400
    assert "\x1b" not in captured.err and "Traceback" not in captured.err and captured.out == ""
    assert not (tmp_path / "r").exists()


def test_a_bad_region_from_a_shell_is_one_line_with_exit_2(tmp_path: Path) -> None:
    a, b = _run_dir(tmp_path, "a", 0.3), _run_dir(tmp_path, "b", 0.1)
    result = subprocess.run([sys.executable, "-m", "serve.benchmark", "compare", str(a), str(b), "--out",
                             str(tmp_path / "r"), "--region", "$(whoami)"], cwd=ROOT, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "benchmark: --region: must be an AWS region name such as us-east-2, got '$(whoami)'"]


def test_verdict_names_each_runs_basis_when_they_differ() -> None:
    east, europe = catalogue.price_basis("us-east-1"), catalogue.price_basis("eu-west-1")
    sentence = verdict(Run("disagg", _summary(0.26), [], price_basis=europe),
                       Run("colocated", _summary(0.13), [], price_basis=east))
    assert f"disagg's from the {europe}, colocated's from the {east}" in sentence
    assert price_notes([("disagg", europe), ("colocated", east)]) == [
        f"USD / M output tokens of disagg: from the {europe}.", f"USD / M output tokens of colocated: from the {east}."]


def test_a_run_stored_without_its_region_says_the_region_is_not_known() -> None:
    assert estimate_basis("ap-south-1") == catalogue.price_basis("ap-south-1")
    unknown = estimate_basis(None)
    assert unknown.startswith(catalogue.price_basis(catalogue.PRICE_REGION)) and "not recorded" in unknown


def test_run_says_its_cost_is_the_price_given_and_summary_json_keeps_its_keys(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    with OpenAIServer("m", ttft_s=0.005, output_tokens=4) as server:
        assert main(["run", "--endpoint", server.url, "--model", "m", "--concurrency", "2", "--requests", "4",
                     "--input-tokens", "5", "--output-tokens", "4", "--usd-per-hour", "4.6", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    cost_line = next(line for line in printed.splitlines() if line.startswith("USD per million output tokens"))
    assert cost_line.endswith("(at the --usd-per-hour given, 4.6/h)")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    # Contract 6's keys and the documented extras (docs/benchmark.md), nothing about prices added.
    assert set(summary) == {"requests", "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "request_rate",
                            "input_tokens_per_s", "output_tokens_per_s", "slo", "usd_per_million_output_tokens",
                            "errors", "wall_s", "load", "workload"}
