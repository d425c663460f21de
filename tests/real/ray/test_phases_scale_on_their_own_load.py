"""Issue 30 §4 on the real Ray Serve LLM 2.60 + vLLM CPU stack: each phase follows its own load.

The small stack runs autoscaled (each phase min 1, max 2; targets prefill 3, decode 8; tests/real/
stacks.py, which says why) under raypd's PD policy (components/render/scaling_policy/), and raypd's own
load generator drives it until what the test waits for has happened:
- a decode-bound load (short prompts, 128 streamed tokens each, 32 at a time) grows decode to 2
  serving replicas, and prefill's target stays 1 until Serve has decided decode's second replica
  (while that CPU engine starts, it starves prefill on 2 cores and the bottleneck really moves, so
  prefill is not judged then); once the load stops, both return to 1;
- a prefill-bound load (long prompts, ~750 tokens, queueing at a prefill that takes one sequence
  at a time; 1 token each; 16 at a time) grows prefill to 2, decode's target staying 1 until
  then, and both return to 1 afterwards. Under Serve's default policy decode grows too (measured here
  with Ray 2.60): decode's ongoing requests include the ones waiting on prefill. Decode's own work
  per request (the KV pull and one token) is short, so it stays far below decode's target;
- every request of both runs is answered: no 5xx while replicas start or stop.
Serve's application status is sampled every 2 s (each deployment's target and RUNNING replicas);
the samples go to test-artifacts/real/scaling/ with how long each scale-up took. Each test starts
from and leaves both phases at 1 replica. About 10-15 minutes on an idle 2-core machine (two CPU
engine starts under load, ~150 s each measured here, and two downscale delays).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import requests

from serve.benchmark.replicas import ReplicaRecorder, ReplicaSampler, raypd_deployments, scale_ups
from tests.real.processes import wait_until
from tests.real.ray.load import answered, start_load
from tests.real.ray_serve import RayServe
from tests.real.stacks import SCALING_TEST_BOUNDS

PREFILL = "Prefill:tiny"
DECODE = "Decode:tiny"
SCALE_UP_DEADLINE_S = 1200.0  # a second CPU engine under load: ~150 s measured, far more on a busy machine
SAMPLE_EVERY_S = 2.0
PHASE_OF = {PREFILL: "prefill", DECODE: "decode"}
UPSCALE_DELAY_S = SCALING_TEST_BOUNDS["upscaleDelaySeconds"]
DOWNSCALE_DELAY_S = SCALING_TEST_BOUNDS["downscaleDelaySeconds"]


def counts(ray: RayServe) -> dict[str, dict[str, int]]:
    """Per phase: Serve's target replicas and the replicas RUNNING now (its application REST API)."""
    app = (ray.applications().get("applications") or {}).get(ray.app_name) or {}
    result = {}
    for name in (PREFILL, DECODE):
        deployment = (app.get("deployments") or {}).get(name) or {}
        result[name] = {"target": int(deployment.get("target_num_replicas") or 0),
                        "running": sum(r.get("state") == "RUNNING" for r in deployment.get("replicas") or [])}
    return result


class Samples:
    """Serve's counts over a test, as the test polls them."""

    def __init__(self, ray: RayServe) -> None:
        self.ray = ray
        self.start = time.monotonic()
        self.rows: list[dict[str, Any]] = []

    def take(self) -> dict[str, dict[str, int]]:
        """Serve's counts now; a dashboard too busy to answer this once reads as no replica (asked again)."""
        try:
            now = counts(self.ray)
        except (requests.RequestException, ValueError):
            return {name: {"target": 0, "running": 0} for name in (PREFILL, DECODE)}
        self.rows.append({"t": round(time.monotonic() - self.start, 1), **now})
        return now

    def most(self, deployment: str, key: str) -> int:
        return max((row[deployment][key] for row in self.rows), default=0)

    def first(self, deployment: str, key: str, value: int) -> float:
        return next((row["t"] for row in self.rows if row[deployment][key] >= value), float("nan"))

    def save(self, path: Path, **extra: Any) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**extra, "samples": self.rows}, indent=1))


def at_min(ray: RayServe, samples: Samples) -> bool:
    now = samples.take()
    return all(now[name] == {"target": 1, "running": 1} for name in (PREFILL, DECODE))


def benchmark_saw_the_same(recorder: ReplicaRecorder, samples: Samples, grows: str, message: str) -> None:
    """The benchmark's own replica records (serve.benchmark.replicas, as `run --dashboard` keeps them)
    agree with Serve's counts read here: a scale-up of `grows` from 1 to 2, and the same most
    replicas of `grows` while the load ran. Not of `stays`: once the new engine starves it, its target
    can blip to 2 for one 2 s sample, which one sampler catches and the other misses (a CI run)."""
    rows = [row for row in recorder.samples if "phases" in row]
    assert rows, f"the benchmark recorded no replica counts: {recorder.samples[:3]}\n{message}"
    ups = scale_ups(rows)
    # the load's phase scaled up 1 -> 2 (the other phase may follow while the new engine starves it)
    assert (PHASE_OF[grows], 1, 2) in [(u["phase"], u["from"], u["to"]) for u in ups], f"{ups}\n{message}"
    phase = PHASE_OF[grows]
    for key in ("target", "running"):
        seen = max(row["phases"][phase][key] for row in rows)
        assert seen == samples.most(grows, key), f"{phase} {key}: benchmark {seen}\n{message}"


def run_burst(ray: RayServe, artifacts: Path, name: str, grows: str, stays: str, **load_shape: int) -> None:
    """Drive `load_shape` until `grows` serves on 2 replicas; check `stays` never left 1, every request
    was answered, and `grows` returned to 1 after the load (the delays are Serve's, from SCALING_TEST_BOUNDS)."""
    samples = Samples(ray)
    facts: dict[str, Any] = {"load": load_shape, "autoscaling": SCALING_TEST_BOUNDS}
    wait_until("both phases at 1 replica before the load", lambda: at_min(ray, samples),
               deadline_s=300 + DOWNSCALE_DELAY_S, watch=[ray.process], interval_s=SAMPLE_EVERY_S)
    started = facts["load_started_s"] = samples.rows[-1]["t"]
    recorder = ReplicaRecorder(ReplicaSampler(ray.dashboard_url, raypd_deployments(ray.model_id), app=ray.app_name),
                               every_s=SAMPLE_EVERY_S)
    load = start_load(ray.serve_url, ray.model_id, replicas=recorder, **load_shape)
    try:
        wait_until(f"{grows} serving on 2 replicas under the {name} load",
                   lambda: samples.take()[grows]["running"] >= 2, deadline_s=SCALE_UP_DEADLINE_S,
                   watch=[ray.process], interval_s=SAMPLE_EVERY_S)
    finally:
        # the moment the load is told to stop: its signal falls from here, while the requests in
        # flight finish (a CI run measured the stop after them and saw Serve scale down "early")
        stopped = facts["load_stopped_s"] = round(time.monotonic() - samples.start, 1)
        records = load.finish()
        facts.update(requests=len(records), target_2_after_s=samples.first(grows, "target", 2) - started,
                     serving_on_2_after_s=samples.first(grows, "running", 2) - started)
        samples.save(artifacts / f"{name}.json", **facts)
    message = f"{ray.describe()}\nsamples: {samples.rows}"
    failed = [r for r in records if not answered(r)]
    assert records and not failed, f"{len(failed)} of {len(records)} requests not answered: {failed[:3]}\n{message}"
    # the load's own phase is chosen first: `stays` kept 1 until Serve decided 2 for `grows`. After that,
    # the second CPU engine's start (minutes of both cores) starves the other phase and really shifts
    # the bottleneck on this 2-core machine (an isolated run: prefill's queue grew past its target
    # while decode's new engine loaded), so `stays` is not judged while it lasts.
    decided = facts["target_2_after_s"] + started
    before_decision = [row[stays]["target"] for row in samples.rows if started <= row["t"] < decided]
    assert before_decision and all(t == 1 for t in before_decision), f"{stays} was scaled by the {name} load\n{message}"
    assert facts["target_2_after_s"] >= UPSCALE_DELAY_S, f"scaled before upscale_delay_s\n{message}"
    benchmark_saw_the_same(recorder, samples, grows, message)
    wait_until(f"{grows} back to 1 replica after the load", lambda: at_min(ray, samples),
               deadline_s=300 + DOWNSCALE_DELAY_S, watch=[ray.process], interval_s=SAMPLE_EVERY_S)
    facts["back_to_1_after_stop_s"] = round(samples.rows[-1]["t"] - stopped, 1)
    samples.save(artifacts / f"{name}.json", **facts)



def test_a_decode_bound_load_grows_decode_and_leaves_prefill_alone(real_ray_serve: RayServe,
                                                                    real_artifacts: Path) -> None:
    run_burst(real_ray_serve, real_artifacts / "scaling", "decode-bound", grows=DECODE, stays=PREFILL,
              concurrency=32, input_words=16, output_tokens=128)


def test_a_prefill_bound_load_grows_prefill_and_leaves_decode_alone(real_ray_serve: RayServe,
                                                                     real_artifacts: Path) -> None:
    run_burst(real_ray_serve, real_artifacts / "scaling", "prefill-bound", grows=PREFILL, stays=DECODE,
              concurrency=16, input_words=280, output_tokens=1)
