"""`python -m serve.conformance` against the real vLLM PD pair (issue 32 §3), the prefill engine
answered directly as the reference: plain vLLM 0.32 serving the same weights.

The report and the raw exchanges of every non-pass are kept in test-artifacts/real/conformance/pair/
(docs/openai-api.md quotes them). What is asserted is what these runs showed, feature by feature:
a change of vLLM or of the proxy that changes a verdict turns this red and the docs get re-checked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from serve.conformance import Session, run_features
from tests.real.pd_pair import PdPair

ROOT = Path(__file__).resolve().parents[3]


def _report(real_artifacts: Path, pair: PdPair) -> dict[str, Any]:
    out = real_artifacts / "conformance" / "pair"
    result = subprocess.run(
        [sys.executable, "-m", "serve.conformance", "--endpoint", pair.proxy_url, "--reference", pair.prefill.url,
         "--model", pair.model_id, "--json", "--out", str(out)],
        capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert result.returncode in (0, 1), f"exit {result.returncode}: {result.stderr[-3000:]}\n{pair.describe()}"
    report = json.loads(result.stdout)
    assert json.loads((out / "report.json").read_text()) == report
    return report


def test_conformance_of_the_pd_pair_against_plain_vllm(real_pd_pair: PdPair, real_artifacts: Path) -> None:
    report = _report(real_artifacts, real_pd_pair)
    verdicts = {f["id"]: (f["verdict"], (f["reference"] or {}).get("verdict")) for f in report["features"]}
    print(json.dumps(verdicts, indent=1))
    for feature in report["features"]:
        assert feature["verdict"] in ("pass", "differs", "unsupported", "fail", "skip"), feature
        assert feature["evidence"], feature
    for feature_id in ("models.list", "chat.create", "chat.stream", "chat.stream_usage", "chat.max_tokens",
                       "completions.create", "completions.stream_usage", "sampling.temperature0", "server.alive"):
        assert verdicts[feature_id][0] == "pass", (feature_id, report)


def test_a_client_that_walks_away_stops_the_decode(real_pd_pair: PdPair) -> None:
    pair = real_pd_pair
    session = Session(pair.proxy_url, pair.model_id)
    try:
        report = run_features(session, ["disconnect"], metrics_url=pair.decode.metrics_url)
    finally:
        session.close()
    result = report.result("disconnect.stops_generation")
    print(result.outcome.evidence)
    assert result.verdict.value == "pass", (result.outcome.evidence, [e.to_json() for e in result.exchanges][:3])
