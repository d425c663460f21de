"""Preflight `endpoint-certificate` against moto's ACM: exists, ISSUED, covers the host; skips
with why when the endpoint terminates no TLS."""

from __future__ import annotations

import datetime
from typing import Any

import boto3
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from moto import mock_aws

from components.config.spec import DeploymentSpec
from components.preflight.certificate import CHECK_ID, check_endpoint_certificate, covers
from components.preflight.run import run_preflight

MISSING = "arn:aws:acm:us-east-2:123456789012:certificate/0f3c7d2e-1b4a-4c5d-9e8f-a1b2c3d4e5f6"


def self_signed(*names: str) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=90))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


@pytest.fixture
def acm(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        yield boto3.client("acm", region_name="us-east-2")


def spec_for(arn: str, host: Any = None, scope: str = "internet") -> DeploymentSpec:
    endpoint: dict[str, Any] = {"scope": scope, "certificateArn": arn}
    if host:
        endpoint["host"] = host
    return DeploymentSpec.from_config({"raypd:endpoint": endpoint}, "dev")


def imported(acm, *names: str) -> str:
    cert, key = self_signed(*names)
    return acm.import_certificate(Certificate=cert, PrivateKey=key)["CertificateArn"]


def test_an_issued_certificate_for_the_host_passes(acm):
    arn = imported(acm, "llm.example.com")
    check = check_endpoint_certificate(spec_for(arn, "llm.example.com"), lambda: acm)
    assert check.status == "pass" and "covers llm.example.com" in check.detail


def test_a_wildcard_covers_one_label_only(acm):
    arn = imported(acm, "*.example.com")
    assert check_endpoint_certificate(spec_for(arn, "llm.example.com"), lambda: acm).status == "pass"
    check = check_endpoint_certificate(spec_for(arn, "a.llm.example.com"), lambda: acm)
    assert check.status == "fail" and "not for a.llm.example.com" in check.detail
    assert not covers(["*.example.com"], "example.com")


def test_a_certificate_for_another_name_fails_naming_both(acm):
    arn = imported(acm, "other.example.org")
    check = check_endpoint_certificate(spec_for(arn, "llm.example.com"), lambda: acm)
    assert check.status == "fail"
    assert "other.example.org" in check.detail and "llm.example.com" in check.detail


def test_without_a_host_it_warns_that_clients_would_see_the_nlb_name(acm):
    arn = imported(acm, "llm.example.com")
    check = check_endpoint_certificate(spec_for(arn), lambda: acm)
    assert check.status == "warn" and "raypd:endpoint.host is not set" in check.detail


def test_a_pending_certificate_fails_with_the_validation_step(acm):
    arn = acm.request_certificate(DomainName="llm.example.com", ValidationMethod="DNS")["CertificateArn"]
    check = check_endpoint_certificate(spec_for(arn, "llm.example.com"), lambda: acm)
    assert check.status == "fail" and "PENDING_VALIDATION" in check.detail
    assert "DNS validation" in check.remedy


def test_a_missing_certificate_fails_naming_the_arn(acm):
    check = check_endpoint_certificate(spec_for(MISSING, "llm.example.com"), lambda: acm)
    assert check.status == "fail" and MISSING in check.detail
    assert "raypd:endpoint.certificateArn" in check.remedy


@pytest.mark.parametrize("endpoint, words", [
    ({}, "without raypd:endpoint.certificateArn"),
    ({"scope": "cluster"}, "scope cluster has no load balancer"),
])
def test_no_tls_means_nothing_to_check_and_says_why(endpoint, words):
    spec = DeploymentSpec.from_config({"raypd:endpoint": endpoint} if endpoint else {}, "dev")
    check = check_endpoint_certificate(spec, None)
    assert check.status == "skip" and words in check.detail


def test_preflight_reports_the_check_in_its_place_even_without_credentials(monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    report = run_preflight(spec_for(MISSING, "llm.example.com"))
    ids = [check.id for check in report.checks]
    assert ids[-1] == CHECK_ID
    (check,) = [c for c in report.checks if c.id == CHECK_ID]
    assert check.status == "skip" and "no AWS credentials" in check.detail
