"""Wall-time benchmark of preflight on the reference stack, against a local AWS emulator.

    python bench/preflight_bench.py [--runs N]

Starts moto's ThreadedMotoServer on 127.0.0.1 (a free port), points the default credential chain at
it (AWS_ENDPOINT_URL, dummy keys, empty config files), and runs `run_preflight` on the reference
stack (Pulumi.dev.yaml defaults, us-east-2) N times in this process: STS and EC2 through the
emulator over HTTP, Service Quotas through a botocore Stubber (moto does not implement EC2's quotas;
the stubbed client is built inside the timed region, as run_preflight would build a real one).
The model-source check asks the Hugging Face Hub stand-in of tests/fakes/hf_hub.py (HF_ENDPOINT,
on 127.0.0.1) through huggingface_hub, as it would ask the Hub.
Each run builds its own boto3 session and clients, as a CLI run or a web request does. Prints the
median and max wall time and whether the median meets the target (< 2 s). Not a test.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # a script: make the project importable from anywhere

TARGET_SECONDS = 2.0


def _quotas_client(region: str, codes: list[str]) -> Any:
    import boto3
    from botocore.stub import Stubber

    client = boto3.client(
        "service-quotas", region_name=region, endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="stub", aws_secret_access_key="stub",
    )
    stubber = Stubber(client)
    for code in sorted(codes):
        stubber.add_response(
            "get_service_quota",
            {"Quota": {"ServiceCode": "ec2", "QuotaCode": code, "QuotaName": code, "Value": 1000.0}},
            {"ServiceCode": "ec2", "QuotaCode": code},
        )
    stubber.activate()
    return client


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="preflight runs (default 5)")
    args = parser.parse_args()

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the emulator's request log
    with warnings.catch_warnings():  # "install moto[server]": the parts used here are installed
        warnings.simplefilter("ignore", UserWarning)
        from moto.server import ThreadedMotoServer

    from components.config import defaults
    from components.config.spec import DeploymentSpec
    from components.plan.topology import plan_deployment
    from components.preflight.run import node_lines, run_preflight, vcpus_needed
    from tests.fakes.hf_hub import FakeHub, HubRepo

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    hub = FakeHub({defaults.MODEL_SOURCE: HubRepo()}).start()
    try:
        host, port = server.get_host_and_port()
        with tempfile.TemporaryDirectory() as scratch:
            for name in ("config", "credentials"):
                (Path(scratch) / name).write_text("", encoding="utf-8")
            for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
                os.environ.pop(name, None)
            os.environ.update({
                "AWS_ENDPOINT_URL": f"http://{host}:{port}",
                "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-2", "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_CONFIG_FILE": str(Path(scratch) / "config"),
                "AWS_SHARED_CREDENTIALS_FILE": str(Path(scratch) / "credentials"),
                "HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_TELEMETRY": "1",
            })
            spec = DeploymentSpec.from_config({}, "dev")
            codes = sorted(vcpus_needed(node_lines(plan_deployment(spec), {})))
            times: list[float] = []
            statuses = ""
            for _ in range(args.runs):
                start = time.perf_counter()
                report = run_preflight(spec, clients={"service-quotas": _quotas_client(spec.region, codes)})
                times.append(time.perf_counter() - start)
                statuses = " ".join(f"{c.id}={c.status}" for c in report.checks)
    finally:
        hub.stop()
        server.stop()
    median, worst = statistics.median(times), max(times)
    ok = median < TARGET_SECONDS
    print(f"reference preflight ({args.runs} runs): {statuses}")
    print(f"median {median:.2f} s  max {worst:.2f} s  (target < {TARGET_SECONDS:.0f} s: "
          f"{'ok' if ok else 'MISSED'})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
