"""Preflight `endpoint-certificate`: the ACM certificate the endpoint's NLB terminates TLS with.

A load balancer will not take a certificate that does not exist, is not ISSUED yet (DNS
validation pending) or has expired, and `pulumi up` only finds out when the AWS Load Balancer
Controller fails to create the TLS listener, minutes after the cluster was built. A certificate
that does not name the host clients use passes every AWS check and still fails every client's
TLS hostname verification, so the check compares it with `raypd:endpoint.host`; without a host,
clients would connect to the NLB's own `*.elb.amazonaws.com` name, which no certificate of the
user's can cover: a warning that says so.

Runs when the endpoint terminates TLS (scope internet, or vpc with a certificate); skips, with why,
otherwise. ACM DescribeCertificate is the only call (permission acm:DescribeCertificate).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from botocore.client import BaseClient
from botocore.exceptions import BotoCoreError, ClientError

from components.config.checks import Check
from components.config.spec import DeploymentSpec

CHECK_ID = "endpoint-certificate"
TITLE = "the endpoint's TLS certificate is issued and covers its host"
HOST_KEY = "raypd:endpoint.host"
ARN_KEY = "raypd:endpoint.certificateArn"


def covers(names: list[str], host: str) -> bool:
    """Whether a certificate for `names` is valid for `host` (RFC 6125: a wildcard stands for
    exactly one left-most label)."""
    host = host.lower().rstrip(".")
    for name in (n.lower().rstrip(".") for n in names):
        if name == host:
            return True
        if name.startswith("*.") and "." in host and host.split(".", 1)[1] == name[2:]:
            return True
    return False


def _names(certificate: dict[str, Any]) -> list[str]:
    names = [certificate.get("DomainName") or ""]
    names += list(certificate.get("SubjectAlternativeNames") or [])
    return [n for n in dict.fromkeys(names) if n]


def certificate_check(spec: DeploymentSpec, certificate: dict[str, Any]) -> Check:
    """The verdict on one DescribeCertificate answer (pure: tested without AWS)."""
    status = certificate.get("Status", "UNKNOWN")
    names = _names(certificate)
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    if status != "ISSUED":
        remedy = ("complete its DNS validation in ACM (the CNAME record ACM lists), then run "
                  "preflight again" if status == "PENDING_VALIDATION" else
                  f"request or import a valid certificate and set {ARN_KEY} to it")
        return Check.failed(CHECK_ID, TITLE, f"the certificate ({shown}) is {status}, not ISSUED: "
                            "the load balancer cannot use it", remedy)
    host = spec.endpoint.host
    if host is None:
        return Check.warned(CHECK_ID, TITLE, (
            f"the certificate ({shown}) is ISSUED, but {HOST_KEY} is not set: clients would connect "
            "to the load balancer's own name (*.elb.amazonaws.com), which this certificate does "
            "not cover, and TLS clients refuse the connection"), (
            f"set {HOST_KEY} to a name the certificate covers and point a DNS record (CNAME or "
            "alias) at the endpoint's load balancer after deploy"))
    if not covers(names, host):
        return Check.failed(CHECK_ID, TITLE, (
            f"the certificate is for {shown}, not for {host}: every TLS client would refuse it"),
            f"use a certificate covering {host}, or set {HOST_KEY} to a name it covers")
    return Check.passed(CHECK_ID, TITLE, f"ACM certificate ISSUED for {shown}; covers {host}")


def check_endpoint_certificate(spec: DeploymentSpec, acm: Optional[Callable[[], BaseClient]],
                               why_no_acm: str = "") -> Check:
    """The `endpoint-certificate` check (`acm` makes the ACM client; None: AWS cannot be asked)."""
    endpoint = spec.endpoint
    if not endpoint.tls:
        why = ("scope cluster has no load balancer and no TLS" if endpoint.scope == "cluster" else
               f"scope {endpoint.scope} without {ARN_KEY}: plain HTTP, no certificate to check")
        return Check.skipped(CHECK_ID, TITLE, why)
    if acm is None:
        return Check.skipped(CHECK_ID, TITLE, f"ACM was not asked: {why_no_acm}")
    try:
        answer = acm().describe_certificate(CertificateArn=endpoint.certificate_arn)
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "ResourceNotFoundException":
            return Check.failed(CHECK_ID, TITLE, (
                f"ACM has no certificate {endpoint.certificate_arn} in {spec.region}"),
                f"check {ARN_KEY}: the ARN of a certificate in ACM of {spec.region}")
        return Check.warned(CHECK_ID, TITLE, f"ACM DescribeCertificate failed ({code or 'error'})",
                            "grant acm:DescribeCertificate to this identity")
    except BotoCoreError as exc:
        return Check.warned(CHECK_ID, TITLE, f"ACM did not answer ({type(exc).__name__})")
    return certificate_check(spec, answer.get("Certificate") or {})
