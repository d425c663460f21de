"""`python -m serve.conformance` against Ray Serve LLM 2.60's PD app (raypd's small stack on CPU,
issue 32 §3). No reference runs beside it (one engine set at a time on this machine): the pair's
run (tests/real/pair/test_conformance_on_real_pair.py) compares plain vLLM with a PD path.

The report and the raw exchanges of every non-pass are kept in test-artifacts/real/conformance/ray/.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from serve.conformance import Session, run_features
from tests.real.ray_serve import RayServe

ROOT = Path(__file__).resolve().parents[3]


def test_conformance_of_ray_serve_llms_pd_app(real_ray_serve: RayServe, real_artifacts: Path) -> None:
    ray = real_ray_serve
    out = real_artifacts / "conformance" / "ray"
    result = subprocess.run(
        [sys.executable, "-m", "serve.conformance", "--endpoint", ray.serve_url, "--model", ray.model_id,
         "--json", "--out", str(out)], capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert result.returncode in (0, 1), f"exit {result.returncode}: {result.stderr[-3000:]}\n{ray.describe()}"
    report = json.loads(result.stdout)
    verdicts = {f["id"]: f["verdict"] for f in report["features"]}
    print(json.dumps(verdicts, indent=1))
    for feature in report["features"]:
        assert feature["evidence"], feature
    for feature_id in ("models.list", "chat.create", "chat.stream", "chat.stream_usage", "chat.max_tokens",
                       "completions.create", "sampling.temperature0"):
        assert verdicts[feature_id] == "pass", (feature_id, report)


def test_a_client_that_walks_away_stops_ray_serves_decode(real_ray_serve: RayServe) -> None:
    ray = real_ray_serve
    session = Session(ray.serve_url, ray.model_id)
    try:
        report = run_features(session, ["disconnect"], metrics_url=ray.metrics_urls[0])
    finally:
        session.close()
    result = report.result("disconnect.stops_generation")
    print(result.outcome.evidence)
    assert result.verdict.value == "pass", (result.outcome.evidence, [e.to_json() for e in result.exchanges][:3])
