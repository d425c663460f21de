"""Verify's checks of the endpoint as its clients meet it (issue 17 §4): `endpoint-external` and
`endpoint-auth`, from wherever verify runs, over plain HTTP(S) to outputs `endpoint.url`.

- `endpoint-external`: GET <url>/v1/models with an API key answers 200 and lists the model.
- `endpoint-auth`: a request without a key and one with a wrong key are refused with 401 or 403,
  as Envoy's api_key_auth filter answers a missing or unknown key (401) and a key of a client the
  route does not allow (403) (envoy source/extensions/filters/http/api_key_auth/api_key_auth.cc).
  A 2xx is a failure: the endpoint is open. A random key raypd never made stands in for a revoked
  one: to the gateway both are keys not in the Secret.

Where the endpoint cannot be tested from here, the checks say so (skip) instead of guessing:
- outputs without `endpoint` (a stack from before issue 17);
- scope `cluster`: the endpoint has no address outside the cluster, and verify's only way in, the
  API server's service proxy, drops the caller's Authorization header once it has authenticated
  the caller (k8s.io/apiserver pkg/endpoints/filters/authentication.go), so no API key can be sent
  through it; endpoint-models and endpoint-chat test the Serve Service that way instead;
- scope `vpc` and the URL not reachable from here (an internal load balancer's name does not
  resolve or connect outside the VPC): run verify from a host inside the VPC;
- no key to test with (auth apiKey, no --api-key-file, no $RAYPD_API_KEY, outputs masked).
The key is sent only in the Authorization header of these requests, to the URL the outputs name,
and never written into a check's detail; redirects are not followed (a key must not travel on).
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import socket
import ssl
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional
from urllib.parse import urlsplit

from components.config.checks import Check
from components.config.safe_documents import FileRefused, read_file, shown_name
from components.config.spec import SECRET_PLACEHOLDER
from components.render.endpoint_names import API_KEY_HEADER
from serve.evidence import VerifyInputError, shorten

API_KEY_ENV = "RAYPD_API_KEY"
MAX_KEY_FILE_BYTES = 4096
MAX_ANSWER_BYTES = 1024 * 1024
ENDPOINT_IDS = ("endpoint-external", "endpoint-auth")
TITLES = {
    "endpoint-external": "the endpoint's URL answers /v1/models with an API key, from here",
    "endpoint-auth": "the endpoint refuses requests without a valid API key",
}
REFUSED = (401, 403)
FROM_INSIDE = ("run verify from a host inside the VPC (a bastion, an instance in the private subnets "
               f"or a pod): `python -m serve.verify --outputs FILE --api-key-file KEYFILE` (or set {API_KEY_ENV})")


class Unreachable(Exception):
    """No HTTP answer at all (the name does not resolve, refused, timed out, no route)."""


@dataclass(frozen=True)
class EndpointTarget:
    """outputs `endpoint`: the base URL (without /v1), its scope and its auth."""

    url: str
    scope: Optional[str]
    auth: Optional[str]

    @classmethod
    def from_outputs(cls, outputs: Mapping[str, Any]) -> Optional["EndpointTarget"]:
        endpoint = outputs.get("endpoint")
        if not isinstance(endpoint, Mapping) or not isinstance(endpoint.get("url"), str):
            return None
        url = endpoint["url"].strip().rstrip("/")
        url = url[: -len("/v1")] if url.endswith("/v1") else url
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return None
        scope, auth = endpoint.get("scope"), endpoint.get("auth")
        return cls(url=url, scope=scope if isinstance(scope, str) else None,
                   auth=auth if isinstance(auth, str) else None)


Get = Callable[[str, dict[str, str], float], tuple[int, bytes]]


def http_get(url: str, headers: dict[str, str], timeout: float) -> tuple[int, bytes]:
    """One GET, no redirects followed, certificates verified; Unreachable when nothing answered."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(host, parts.port, timeout=timeout,
                                                 context=ssl.create_default_context())
    else:
        connection = http.client.HTTPConnection(host, parts.port, timeout=timeout)
    try:
        connection.request("GET", target, headers={"Accept": "application/json", **headers})
        response = connection.getresponse()
        return response.status, response.read(MAX_ANSWER_BYTES)
    except ssl.SSLCertVerificationError as exc:  # it answered, with a certificate that does not fit
        return 0, f"TLS: {exc.verify_message or exc.reason}".encode()
    except socket.gaierror:
        raise Unreachable(f"the host name {host} does not resolve here") from None
    except ConnectionRefusedError:
        raise Unreachable(f"{host}:{parts.port or (443 if parts.scheme == 'https' else 80)} refused "
                          "the connection") from None
    except (socket.timeout, TimeoutError):
        raise Unreachable(f"no answer from {host} within {timeout:g} s") from None
    except (OSError, http.client.HTTPException) as exc:
        raise Unreachable(f"{host}: {type(exc).__name__}: {shorten(str(exc), 120)}") from None
    finally:
        connection.close()


def _bearer(key: str) -> dict[str, str]:
    return {API_KEY_HEADER: f"Bearer {key}"}


def _not_testable(check_id: str, target: Optional[EndpointTarget]) -> Check:
    """Why the check cannot run from here: no endpoint in the outputs, or scope cluster."""
    title = TITLES[check_id]
    if target is None:
        return Check.skipped(check_id, title, "the outputs have no `endpoint` (a stack deployed before "
                             "raypd exposed its endpoint): nothing outside the cluster to test",
                             "Deploy with the current raypd to get outputs endpoint and apiKey")
    return Check.skipped(check_id, title, (
        "scope cluster: the endpoint has no address outside the cluster, and verify's way in, the "
        "API server's service proxy, drops the Authorization header after authenticating verify "
        "itself, so no API key can be sent through it (endpoint-models and endpoint-chat checked "
        "the Serve Service that way)"),
        "test it from a pod in the cluster, e.g. `curl -H \"Authorization: Bearer $RAYPD_API_KEY\" "
        f"{target.url}/v1/models`")


def _unreachable(check_id: str, target: EndpointTarget, why: str) -> Check:
    title = TITLES[check_id]
    if target.scope == "internet":
        return Check.warned(check_id, title, f"{target.url} did not answer from here ({why})",
                            "check that raypd:endpoint.allowedCidrs includes this host's address and "
                            "that the load balancer is active in the EC2 console")
    return Check.skipped(check_id, title, f"{target.url} is not reachable from here ({why}); scope "
                         f"{target.scope or 'vpc'} is reachable from inside the VPC and peered networks",
                         FROM_INSIDE)


def _models_listed(body: bytes, model_id: Optional[str]) -> tuple[bool, list[str]]:
    try:
        data = json.loads(body.decode("utf-8")).get("data") or []
        ids = [str(item.get("id")) for item in data if isinstance(item, Mapping)]
    except (ValueError, AttributeError, UnicodeDecodeError):
        return False, []
    return (model_id in ids if model_id else bool(ids)), ids


def check_endpoint_external(target: Optional[EndpointTarget], key: Optional[str],
                            model_id: Optional[str], timeout: float, get: Get = http_get) -> Check:
    cid, title = "endpoint-external", TITLES["endpoint-external"]
    if target is None or target.scope == "cluster":
        return _not_testable(cid, target)
    if target.auth != "none" and not key:
        return Check.skipped(cid, title, f"no API key to test {target.url} with",
                             f"pass --api-key-file FILE or set {API_KEY_ENV}, or give the outputs with "
                             "`--show-secrets` (their apiKey is the first key)")
    url = f"{target.url}/v1/models"
    try:
        status, body = get(url, _bearer(key) if key and target.auth != "none" else {}, timeout)
    except Unreachable as exc:
        return _unreachable(cid, target, str(exc))
    with_key = "with an API key" if target.auth != "none" else "(auth none: no key)"
    if status == 200:
        listed, ids = _models_listed(body, model_id)
        if listed:
            return Check.passed(cid, title, f"GET {url} {with_key} answered 200 listing {model_id or ids[0]}, "
                                "from where verify runs")
        return Check.failed(cid, title, f"GET {url} answered 200 without the model {model_id} "
                            f"(listed: {', '.join(ids) or 'nothing'})",
                            "the route leads somewhere else: check the gateway's HTTPRoute backend")
    if status in REFUSED:
        return Check.failed(cid, title, f"GET {url} refused the API key (HTTP {status})",
                            "the key is revoked or not this deployment's (the stack's apiKey output is the "
                            "first key, `default`: if you revoked it, pass a current key with --api-key-file)")
    if status == 0:
        return Check.failed(cid, title, f"{url}: {body.decode(errors='replace')}",
                            "the endpoint's certificate does not cover its host: check "
                            "raypd:endpoint.certificateArn (preflight endpoint-certificate)")
    return Check.failed(cid, title, f"GET {url} answered HTTP {status}: "
                        f"{shorten(body.decode('utf-8', errors='replace'), 200)}",
                        "the gateway answered but the model server behind it did not: see endpoint-models "
                        "and the RayService's status")


def check_endpoint_auth(target: Optional[EndpointTarget], timeout: float, get: Get = http_get) -> Check:
    cid, title = "endpoint-auth", TITLES["endpoint-auth"]
    if target is None or target.scope == "cluster":
        return _not_testable(cid, target)
    if target.auth == "none":
        return Check.warned(cid, title, "not tested: the endpoint is open by choice (raypd:endpoint.auth: none): "
                            "it answers anyone who can reach it, without a key",
                            "set raypd:endpoint.auth: apiKey and Deploy to require API keys")
    url = f"{target.url}/v1/models"
    wrong = "rpd_" + secrets.token_urlsafe(32)  # a key no one was given: as the gateway sees a revoked one
    answers: list[tuple[str, int]] = []
    try:
        for label, headers in (("without a key", {}), ("with a wrong key", _bearer(wrong))):
            answers.append((label, get(url, headers, timeout)[0]))
    except Unreachable as exc:
        return _unreachable(cid, target, str(exc))
    said = "; ".join(f"{label}: HTTP {status}" for label, status in answers)
    if any(200 <= status < 300 for _, status in answers):
        return Check.failed(cid, title, f"the endpoint is open: GET {url} {said}",
                            "the gateway's SecurityPolicy is not applied to the route: check its status "
                            "(`kubectl get securitypolicy -A`) and Envoy Gateway's logs")
    if all(status in REFUSED for _, status in answers):
        return Check.passed(cid, title, f"GET {url} {said}: refused as it should be")
    return Check.warned(cid, title, f"GET {url} {said}: neither open nor refused with 401/403, so no "
                        "evidence that keys are checked", "see endpoint-external and the gateway's logs")


def api_key_from(outputs: Mapping[str, Any], given: Optional[str]) -> Optional[str]:
    """The key to test with: the one given (file or environment), else the outputs' apiKey."""
    if given:
        return given
    key = outputs.get("apiKey")
    return key if isinstance(key, str) and key and key != SECRET_PLACEHOLDER else None


def key_for_endpoint(outputs: Mapping[str, Any], given: Optional[str], endpoint_url: Optional[str]) -> Optional[str]:
    """The API key verify's requests to an --endpoint URL carry (endpoint-models, endpoint-chat,
    api-parity): none without one (through the proxy the API server drops it and the Serve Service
    checks none) nor with auth none; the key given (--api-key-file, $RAYPD_API_KEY) to the URL it
    was given with; the outputs' own apiKey only to the outputs' own endpoint URL (same scheme,
    host and port), so a stack's key never travels to another host."""
    if endpoint_url is None:
        return None
    target = EndpointTarget.from_outputs(outputs)
    if target is not None and target.auth == "none":
        return None
    if given:
        return given
    if target is not None and _origin(target.url) == _origin(endpoint_url):
        return api_key_from(outputs, None)
    return None


def _origin(url: str) -> tuple[str, str, Optional[int]]:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").lower(), port


def _read_small_file(path: str) -> bytes:
    """Read by components.config.safe_documents (a regular file only: a FIFO must not hang verify)."""
    try:
        return read_file(path, MAX_KEY_FILE_BYTES)
    except FileRefused as exc:
        raise VerifyInputError(exc.about(f"--api-key-file {shown_name(path)}")) from None


def read_api_key(path: Optional[str], environ: Mapping[str, str] = os.environ) -> Optional[str]:
    """--api-key-file (a small regular file) or $RAYPD_API_KEY; VerifyInputError naming the file or
    the variable, never quoting a key."""
    if path:
        raw = _read_small_file(path)
        text, what = raw.decode("utf-8", errors="replace"), f"--api-key-file {shown_name(path)}"
    elif environ.get(API_KEY_ENV):
        text, what = environ[API_KEY_ENV], API_KEY_ENV
    else:
        return None
    key = text.strip()
    if not key or any(not 0x21 <= ord(char) <= 0x7E for char in key):
        raise VerifyInputError(f"{what} does not hold one API key (empty, spaces, control characters or "
                               "non-ASCII)")
    return key


def endpoint_checks(outputs: Mapping[str, Any], api_key: Optional[str], timeout: float,
                    get: Get = http_get) -> list[Check]:
    """Both checks, in VERIFY_IDS order."""
    target = EndpointTarget.from_outputs(outputs)
    model = outputs.get("modelId")
    return [check_endpoint_external(target, api_key_from(outputs, api_key),
                                    model if isinstance(model, str) else None, timeout, get),
            check_endpoint_auth(target, timeout, get)]
