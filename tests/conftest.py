"""Every test runs without the developer's AWS identity and never asks a metadata service or the Hub.

boto3's default credential chain ends at the EC2 instance metadata service (169.254.169.254):
tests must only ever reach loopback, so it is switched off here, before any test (or any CLI a test
starts, which inherits this environment) creates a session. Tests that need AWS point
AWS_ENDPOINT_URL at a local emulator and set fake keys themselves.

Preflight's `model-source` check asks the Hugging Face Hub (at HF_ENDPOINT) whether the model
exists. For the whole session HF_ENDPOINT is a local Hub stand-in (tests/fakes/hf_hub.py) that
knows the public models the suite deploys; any other repo is "not found", as on the real Hub.
Tests of the check itself start their own stand-in with the repos they need.

PULUMI_HOME is a temporary directory for the session: the stand-in Pulumi CLI writes there what the
real one writes (workspace bookkeeping files), never into the developer's ~/.pulumi.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Optional

import pytest

_AWS_IDENTITY = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
    "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
)


# The Hub models the suite's stacks use: public ones (the reference, one too big for an L4) and
# Meta's gated ones, which the suite's tokens (any token, for this stand-in) were granted.
SUITE_PUBLIC_MODELS = ("Qwen/Qwen3.5-9B", "Qwen/Qwen3-32B", "Qwen/Qwen3-8B")
SUITE_GATED_MODELS = ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct")
_suite_hub: Optional[Any] = None
_suite_pulumi_home: Optional[str] = None


def pytest_configure(config: object) -> None:
    global _suite_hub, _suite_pulumi_home
    for name in _AWS_IDENTITY:
        os.environ.pop(name, None)
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    os.environ["AWS_CONFIG_FILE"] = os.devnull
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
        os.environ.pop(name, None)
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    _suite_pulumi_home = tempfile.mkdtemp(prefix="raypd-tests-pulumi-home-")
    os.environ["PULUMI_HOME"] = _suite_pulumi_home
    os.environ.pop("PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER", None)
    from tests.fakes.hf_hub import FakeHub, HubRepo

    repos = {repo: HubRepo() for repo in SUITE_PUBLIC_MODELS}
    repos |= {repo: HubRepo(gated="manual", readers=None) for repo in SUITE_GATED_MODELS}
    _suite_hub = FakeHub(repos, tokens=None).start()
    os.environ["HF_ENDPOINT"] = _suite_hub.url


def pytest_unconfigure(config: object) -> None:
    if _suite_hub is not None:
        _suite_hub.stop()
    if _suite_pulumi_home is not None:
        shutil.rmtree(_suite_pulumi_home, ignore_errors=True)


# The real engines (tests/real) share one vLLM pair and one Ray cluster per process and hold the
# machine's real-engine lock (tests/real/machine_lock.py) while they live: under `pytest -n 2
# --dist loadgroup` (make test) they all go to one worker, which keeps them one set at a time while
# the other worker runs the rest of the suite.
REAL_ENGINES_GROUP = "real-engines"


# tryfirst: pytest-xdist's worker reads the group marks in its own pytest_collection_modifyitems
# (xdist/remote.py, it suffixes each node id with "@group"); that plugin registers after this
# conftest, so pluggy would call it first and the marks would come too late: the real tests then
# spread over both workers, one waiting up to an hour for the other's machine lock.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    real = os.path.join("tests", "real") + os.sep
    for item in items:
        if real in str(item.path):
            item.add_marker(pytest.mark.xdist_group(REAL_ENGINES_GROUP))
