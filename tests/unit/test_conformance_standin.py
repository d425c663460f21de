"""serve.conformance end to end against a vLLM-shaped stand-in (tests/fakes/vllm_openai.py): a
healthy server passes every feature it can be judged on, and each planted break fails exactly its
feature(s), with the healthy stand-in as the reference: so the checker can fail, and says where."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest

from serve.conformance import Session, run_features
from serve.conformance.__main__ import main
from tests.fakes.vllm_openai import VllmStandIn
from tests.unit.cli_support import run_main, run_module

# What a healthy vLLM-shaped server cannot pass here, and why: no prompt_tokens_details (vLLM without
# --enable-prompt-tokens-details), no tool parser for tool_choice auto.
HEALTHY_SKIPS = {"chat.cached_tokens", "tools.auto"}


@pytest.fixture(scope="module")
def reference() -> Iterator[VllmStandIn]:
    with VllmStandIn() as server:
        yield server


def _not_passing(broken: VllmStandIn, reference: VllmStandIn) -> dict[str, str]:
    report = run_features(Session(broken.url, "tiny"), reference=Session(reference.url, "tiny"))
    return {r.id: r.verdict.value for r in report.results if r.verdict.value != "pass"}


def test_a_healthy_vllm_shaped_server_passes_every_feature_it_can_be_judged_on(reference: VllmStandIn) -> None:
    with VllmStandIn() as healthy:
        report = run_features(Session(healthy.url, "tiny"), reference=Session(reference.url, "tiny"))
    verdicts = {r.id: r.verdict.value for r in report.results}
    assert {k for k, v in verdicts.items() if v != "pass"} == HEALTHY_SKIPS, report.table()
    assert {verdicts[k] for k in HEALTHY_SKIPS} == {"skip"}
    assert report.result("disconnect.stops_generation").verdict.value == "pass"
    assert report.exit_code == 0


@pytest.mark.parametrize(("switch", "expected"), [
    ("drop_usage_chunk", {"chat.stream_usage": "fail", "completions.stream_usage": "fail"}),
    ("ignore_stop", {"chat.stop": "fail", "completions.stop": "fail"}),
    ("other_text", {"reference.tokens_t0": "differs"}),
    ("too_long_500", {"limits.over_max_model_len": "fail"}),
])
def test_each_planted_break_fails_exactly_its_features(reference: VllmStandIn, switch: str,
                                                       expected: dict[str, str]) -> None:
    with VllmStandIn(**{switch: True}) as broken:
        found = _not_passing(broken, reference)
    assert {k: v for k, v in found.items() if k not in HEALTHY_SKIPS} == expected


def test_the_first_divergence_names_the_token_and_both_texts(reference: VllmStandIn) -> None:
    with VllmStandIn(other_text=True) as broken:
        report = run_features(Session(broken.url, "tiny"), ["reference"], reference=Session(reference.url, "tiny"))
    outcome = report.result("reference.tokens_t0").outcome
    assert outcome.data["first_divergence"] == 0 and outcome.data["unit"] == "token"
    assert outcome.data["ours"] and outcome.data["theirs"] and outcome.data["ours"] != outcome.data["theirs"]


def test_the_cli_prints_the_table_and_writes_a_versioned_report(tmp_path: Path, reference: VllmStandIn) -> None:
    with VllmStandIn(ignore_stop=True) as broken:
        done = run_main(main, "--endpoint", broken.url + "/v1", "--reference", reference.url, "--model", "tiny",
                        "--out", str(tmp_path / "out"))
    assert done.returncode == 1, done.stderr
    assert "chat.stop" in done.stdout and "fail *" in done.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["schemaVersion"] == 1 and report["tool"] == "serve.conformance"
    assert report["counts"]["fail"] == 2 and report["ok"] is False
    written = sorted(p.name for p in (tmp_path / "out" / "exchanges").iterdir())
    assert written == sorted(f"{k}.json" for k in ("chat.stop", "completions.stop", *HEALTHY_SKIPS))
    stop = json.loads((tmp_path / "out" / "exchanges" / "chat.stop.json").read_text())
    assert [e["label"] for e in stop["exchanges"]] == ["baseline", "with stop"]
    assert stop["exchanges"][1]["request"]["stop"] and stop["referenceExchanges"]


def test_api_keys_never_reach_the_report_or_the_screen(tmp_path: Path) -> None:
    key = "rpd_planted-key-0123456789abcdef"
    with VllmStandIn(echo_key=True) as echoing:  # its 404 quotes the Authorization header back
        done = run_main(lambda argv: main(argv, environ={"MY_KEY": key}), "--endpoint", echoing.url,
                        "--model", "tiny", "--api-key-env", "MY_KEY", "--json", "--out", str(tmp_path / "out"))
        sent = [r for r in echoing.requests if r[0].startswith("POST")]
    assert sent, "nothing was sent"
    unknown = json.loads((tmp_path / "out" / "exchanges" / "errors.unknown_model.json").read_text()) \
        if (tmp_path / "out" / "exchanges" / "errors.unknown_model.json").exists() else None
    report = json.loads(done.stdout)
    evidence = next(f["evidence"] for f in report["features"] if f["id"] == "errors.unknown_model")
    assert "[redacted]" in evidence, evidence  # the echo happened, and was caught
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert key not in path.read_text(), path
    assert key not in done.stdout + done.stderr
    assert unknown is None or "[redacted]" in json.dumps(unknown)


@pytest.mark.slow  # a fresh interpreter: ~6 s on a loaded machine
def test_it_runs_as_users_start_it(reference: VllmStandIn) -> None:
    done = run_module("serve.conformance", "--endpoint", reference.url, "--model", "tiny", "--json", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["ok"] is True
