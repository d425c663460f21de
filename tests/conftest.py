"""Every test runs without the developer's AWS identity and never asks a metadata service.

boto3's default credential chain ends at the EC2 instance metadata service (169.254.169.254):
tests must only ever reach loopback, so it is switched off here, before any test (or any CLI a test
starts, which inherits this environment) creates a session. Tests that need AWS point
AWS_ENDPOINT_URL at a local emulator and set fake keys themselves.
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest

_AWS_IDENTITY = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
    "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
)


def pytest_configure(config: object) -> None:
    for name in _AWS_IDENTITY:
        os.environ.pop(name, None)
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    os.environ["AWS_CONFIG_FILE"] = os.devnull
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull


@pytest.fixture(autouse=True)
def _fresh_redaction_set() -> Iterator[None]:
    """The web app's set of secrets to mask is process-wide: each test starts and ends without
    another test's secrets in it, so a masking test cannot pass on a secret it did not plant."""
    from webui.redact import forget_secrets

    forget_secrets()
    yield
    forget_secrets()
