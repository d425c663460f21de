"""Kubernetes API access for `serve.verify`, the web app's live status and API keys: bounded, no CLI.

A thin client on the standard library (http.client + ssl) instead of the official `kubernetes`
package, on purpose:
- `kubernetes` 37 requires pydantic >= 2.14.2, and raypd pins pydantic 2.13.4; it also pulls in
  aiohttp, oauthlib, websocket-client and friends (about 15 packages) for a dozen GET requests.
- its kubeconfig loader runs a user's `exec` plugin itself; raypd must never run the kubeconfig's
  command (pulumi-eks writes `aws eks get-token`), so we would be rewriting the user entry anyway.
- its generated proxy calls take no request body, so the chat POST would go through the raw
  `call_api` regardless, and its urllib3 pool retries by default.

What this module does: parse a kubeconfig (YAML or JSON text), build an SSL context from its CA and
client certificate, mint the EKS bearer token in Python when the user runs `aws eks get-token` or
`aws-iam-authenticator token` (botocore presigned STS GetCallerIdentity, as the AWS CLI does), and
make single requests with a timeout (default 10 s, no retries). Every failure becomes `KubeError`,
whose text never contains the token or the kubeconfig.

Credentials are handled as secrets from the moment they are read:
- a `token` (or `tokenFile` contents) is trimmed of surrounding whitespace, as client-go trims a
  token file, and refused when what is left cannot be an HTTP header value (control characters,
  non-ASCII): it would otherwise be quoted back by http.client's "Invalid header value" error;
- `tokenFile` is read only when it is a regular file, at most MAX_TOKEN_FILE_BYTES (a FIFO, a
  device such as /dev/zero or a huge file is an error naming the field, never a hang);
- a bearer token, an EKS token or a basic-auth password is never sent to a plain `http://` server
  unless the kubeconfig's cluster entry asks for it explicitly with the extension
  `{name: raypd.io/allow-credentials-over-http, extension: true}` (kubeconfig clusters carry
  `extensions` for tools: client-go keeps and ignores unknown ones);
- a user and password in the server address (`https://admin:secret@host`) are cut from it: the
  client keeps, uses and shows the address without them (so no error, report or benchmark record
  carries the password, which is scrubbed from any text too), and never sends them: credentials
  belong in the kubeconfig's user entry.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import os
import random
import socket
import ssl
import stat
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence, Union
from urllib.parse import quote, unquote, urlencode, urlsplit, urlunsplit

from components.config.safe_documents import DocumentError, load_yaml, shown_name

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
# Bodies beyond this are cut: a node list of a big cluster is well under it, a log tail too.
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_KUBECONFIG_BYTES = 1024 * 1024
MAX_TOKEN_FILE_BYTES = 64 * 1024  # a service-account JWT is ~1 KiB; an EKS token ~1.5 KiB
ALLOW_HTTP_CREDENTIALS_EXTENSION = "raypd.io/allow-credentials-over-http"

# The EKS token recipe (aws-cli awscli/customizations/eks/get_token.py): a presigned STS
# GetCallerIdentity GET URL, signed with header x-k8s-aws-id=<cluster>, valid 60 s, base64url
# without padding behind this prefix.
EKS_TOKEN_PREFIX = "k8s-aws-v1."
EKS_CLUSTER_HEADER = "x-k8s-aws-id"
EKS_URL_EXPIRES_SECONDS = 60
# The CLI tells clients to refresh after 14 minutes; re-mint well before that.
EKS_TOKEN_REUSE_SECONDS = 600

Query = Union[Mapping[str, Any], Sequence[tuple[str, Any]]]

# A Secret's read-modify-write retries this often when another writer got there first (HTTP 409).
# Every conflict means another writer's write landed, so N writers at once need at most N attempts
# each: 10 covers ten people managing keys at the same instant. Between attempts a jittered,
# doubling pause (client-go's RetryOnConflict backs off too) keeps the losers from colliding again.
SECRET_WRITE_ATTEMPTS = 10
SECRET_RETRY_PAUSE_S = 0.02
SECRET_RETRY_PAUSE_MAX_S = 1.0
MERGE_PATCH = "application/merge-patch+json"

RAYSERVICE_GROUP_VERSION = "ray.io/v1"
RAYSERVICE_PLURAL = "rayservices"


class _HTTPSConnection(http.client.HTTPSConnection):
    """HTTPS with an SNI/verification name other than the host (kubeconfig `tls-server-name`)."""

    def __init__(self, host: str, port: Optional[int], *, timeout: float,
                 context: Optional[ssl.SSLContext], server_name: Optional[str]):
        super().__init__(host, port, timeout=timeout, context=context)
        self._server_name = server_name

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(  # type: ignore[attr-defined]
            sock, server_hostname=self._server_name or self.host)


class KubeError(Exception):
    """A readable failure of a Kubernetes API call; never carries the token or the kubeconfig."""

    def __init__(self, message: str, *, status: Optional[int] = None):
        self.status = status
        super().__init__(message)


class KubeUnreachable(KubeError):
    """No answer at all (refused, timed out, DNS, TLS): callers stop asking after the first one."""


class KubeConfigError(KubeError):
    """The kubeconfig itself cannot be used (not YAML, no context, an exec we will not run...)."""


class KubeNotFound(KubeError):
    """HTTP 404 from the API server for an object (not for a proxied path)."""


class KubeConflict(KubeError):
    """HTTP 409 for a write whose resourceVersion is no longer the object's: someone wrote first."""


@dataclass(frozen=True)
class HttpResponse:
    """An answer of a proxied service or pod: the status is the upstream's (or the proxy's)."""

    status: int
    headers: dict[str, str]
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


# ---- the EKS token ----

def mint_eks_token(
    cluster: str,
    region: str,
    *,
    session: Any = None,
    profile: Optional[str] = None,
    role_arn: Optional[str] = None,
    session_name: Optional[str] = None,
) -> str:
    """The bearer token `aws eks get-token --cluster-name CLUSTER` prints, minted with botocore.

    Presigning needs credentials but no network (unless `role_arn` asks for an AssumeRole first).
    """
    import botocore.session
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    if session is None:
        session = botocore.session.Session(profile=profile) if profile else botocore.session.Session()
    # The AWS CLI v2 signs against the regional STS endpoint; EKS accepts either.
    session.set_config_variable("sts_regional_endpoints", "regional")
    config = Config(connect_timeout=DEFAULT_TIMEOUT, read_timeout=DEFAULT_TIMEOUT,
                    retries={"max_attempts": 1})
    try:
        kwargs: dict[str, Any] = {"region_name": region, "config": config}
        if role_arn:
            sts = session.create_client("sts", **kwargs)
            creds = sts.assume_role(RoleArn=role_arn,
                                    RoleSessionName=session_name or "EKSGetTokenAuth")["Credentials"]
            kwargs.update(aws_access_key_id=creds["AccessKeyId"],
                          aws_secret_access_key=creds["SecretAccessKey"],
                          aws_session_token=creds["SessionToken"])
        sts = session.create_client("sts", **kwargs)

        def take_cluster(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
            if EKS_CLUSTER_HEADER in params:
                context[EKS_CLUSTER_HEADER] = params.pop(EKS_CLUSTER_HEADER)

        def sign_cluster(request: Any, **_: Any) -> None:
            if EKS_CLUSTER_HEADER in request.context:
                request.headers[EKS_CLUSTER_HEADER] = request.context[EKS_CLUSTER_HEADER]

        sts.meta.events.register("provide-client-params.sts.GetCallerIdentity", take_cluster)
        sts.meta.events.register("before-sign.sts.GetCallerIdentity", sign_cluster)
        url = sts.generate_presigned_url(
            "get_caller_identity", Params={EKS_CLUSTER_HEADER: cluster},
            ExpiresIn=EKS_URL_EXPIRES_SECONDS, HttpMethod="GET",
        )
    except (BotoCoreError, ClientError) as exc:
        # botocore's messages name the missing piece (credentials, profile), never a secret key.
        raise KubeConfigError(f"cannot sign an EKS token for cluster {cluster}: {exc}") from None
    encoded = base64.urlsafe_b64encode(url.encode("utf-8")).decode("ascii").rstrip("=")
    return EKS_TOKEN_PREFIX + encoded


@dataclass(frozen=True)
class EksTokenSource:
    """What an `aws eks get-token` / `aws-iam-authenticator token` exec user asks for."""

    cluster: str
    region: Optional[str]
    profile: Optional[str] = None
    role_arn: Optional[str] = None
    session_name: Optional[str] = None


def _flag(args: list[str], *names: str) -> Optional[str]:
    for index, arg in enumerate(args):
        for name in names:
            if arg == name and index + 1 < len(args):
                return args[index + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def eks_token_source(exec_spec: Mapping[str, Any], region_hint: Optional[str]) -> EksTokenSource:
    """Read the exec entry without running it; refuse commands that are not an EKS token."""
    command = str(exec_spec.get("command") or "")
    args = [str(a) for a in (exec_spec.get("args") or []) if a is not None]
    env = {str(e.get("name")): str(e.get("value")) for e in (exec_spec.get("env") or [])
           if isinstance(e, Mapping)}
    program = os.path.basename(command)
    profile = env.get("AWS_PROFILE")
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if program == "aws" and "eks" in args and "get-token" in args:
        cluster = _flag(args, "--cluster-name", "--cluster-id")
        region = _flag(args, "--region") or region
        profile = _flag(args, "--profile") or profile
        role = _flag(args, "--role-arn")
        session_name = _flag(args, "--session-name")
    elif program == "aws-iam-authenticator" and "token" in args:
        cluster = _flag(args, "-i", "--cluster-id")
        region = _flag(args, "--region") or region
        role = _flag(args, "-r", "--role")
        session_name = _flag(args, "-s", "--session-name")
    else:
        raise KubeConfigError(
            f"the kubeconfig's user runs `{program or '?'}` to get credentials; raypd never runs "
            "kubeconfig commands and only understands `aws eks get-token` or "
            "`aws-iam-authenticator token`: pass a kubeconfig with one of those or a token"
        )
    if not cluster:
        raise KubeConfigError("the kubeconfig's `aws eks get-token` names no --cluster-name")
    return EksTokenSource(cluster=cluster, region=region or region_hint, profile=profile,
                          role_arn=role, session_name=session_name)


# ---- the kubeconfig ----

def parse_kubeconfig_text(text: str, name: str = "the kubeconfig") -> dict[str, Any]:
    """YAML or JSON text to a dict; errors start with `name` and never quote the text (it holds
    credentials). Read by components.config.safe_documents: no YAML aliases, bounded nesting and numbers."""
    if not isinstance(text, str) or not text.strip():
        raise KubeConfigError(f"{name} is empty")
    try:
        document = load_yaml(text, max_bytes=MAX_KUBECONFIG_BYTES)  # JSON is YAML too
    except DocumentError as exc:
        raise KubeConfigError(f"{name} {exc}") from None
    if not isinstance(document, dict):
        raise KubeConfigError("the kubeconfig is not a YAML/JSON mapping (a `kind: Config` document)")
    return document


def _named(document: Mapping[str, Any], key: str, name: Optional[str], what: str) -> dict[str, Any]:
    entries = document.get(key) or []
    if not isinstance(entries, list):
        raise KubeConfigError(f"the kubeconfig's `{key}` is not a list")
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            body = entry.get(what)
            if not isinstance(body, Mapping):
                raise KubeConfigError(f"the kubeconfig's {what} {name!r} has no `{what}` mapping")
            return dict(body)
    raise KubeConfigError(f"the kubeconfig has no {what} named {name!r}")


def _select_context(document: Mapping[str, Any], context: Optional[str]) -> dict[str, Any]:
    name = context or document.get("current-context")
    if not name:
        contexts = document.get("contexts") or []
        if isinstance(contexts, list) and len(contexts) == 1 and isinstance(contexts[0], Mapping):
            name = contexts[0].get("name")
    if not name:
        raise KubeConfigError("the kubeconfig has no current-context")
    return _named(document, "contexts", name, "context")


def _decode_b64(value: Any, what: str) -> bytes:
    try:
        return base64.b64decode(str(value), validate=False)
    except (ValueError, TypeError):
        raise KubeConfigError(f"the kubeconfig's {what} is not base64") from None


def _ssl_context(cluster: Mapping[str, Any], user: Mapping[str, Any]) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if cluster.get("insecure-skip-tls-verify"):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif cluster.get("certificate-authority-data"):
        pem = _decode_b64(cluster["certificate-authority-data"], "certificate-authority-data")
        try:
            context.load_verify_locations(cadata=pem.decode("ascii", errors="replace"))
        except (ssl.SSLError, ValueError):
            raise KubeConfigError("the kubeconfig's certificate-authority-data is not a PEM "
                                  "certificate") from None
    elif cluster.get("certificate-authority"):
        try:
            context.load_verify_locations(cafile=str(cluster["certificate-authority"]))
        except (OSError, ssl.SSLError):
            raise KubeConfigError("cannot read the kubeconfig's certificate-authority file") from None
    cert_data, key_data = user.get("client-certificate-data"), user.get("client-key-data")
    cert_file, key_file = user.get("client-certificate"), user.get("client-key")
    try:
        if cert_data and key_data:
            # ssl only loads a client certificate from files: write both to a private temp dir.
            with tempfile.TemporaryDirectory() as directory:
                cert_path, key_path = os.path.join(directory, "c.pem"), os.path.join(directory, "k.pem")
                for path, data, what in ((cert_path, cert_data, "client-certificate-data"),
                                         (key_path, key_data, "client-key-data")):
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                    with os.fdopen(fd, "wb") as handle:
                        handle.write(_decode_b64(data, what))
                context.load_cert_chain(cert_path, key_path)
        elif cert_file and key_file:
            context.load_cert_chain(str(cert_file), str(key_file))
    except (OSError, ssl.SSLError):
        raise KubeConfigError("the kubeconfig's client certificate or key cannot be loaded") from None
    return context


@dataclass
class KubeClient:
    """One API server, one identity. Thread-safe for the web app: each call opens its connection."""

    server: str
    ssl_context: Optional[ssl.SSLContext]
    token: Optional[str] = None
    basic_auth: Optional[str] = None
    eks: Optional[EksTokenSource] = None
    tls_server_name: Optional[str] = None
    timeout: float = DEFAULT_TIMEOUT
    session: Any = None  # a botocore session for the EKS token (tests pass one with fake keys)
    # Secrets to scrub from any text this client produces (the raw token as read, a password...).
    extra_secrets: tuple[str, ...] = field(default=(), repr=False)
    # Send credentials to a plain http:// server (only when the kubeconfig asked for it explicitly).
    allow_http_credentials: bool = False
    _minted_at: float = field(default=0.0, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __repr__(self) -> str:  # never the token
        return f"KubeClient(server={self.server!r})"

    # -- authentication --

    def _bearer(self) -> Optional[str]:
        if self.eks is None:
            return self.token
        with self._lock:
            if self.token is None or time.monotonic() - self._minted_at > EKS_TOKEN_REUSE_SECONDS:
                if not self.eks.region:
                    raise KubeConfigError("no AWS region for the EKS token: the kubeconfig's "
                                          "`aws eks get-token` has no --region and none was given")
                self.token = mint_eks_token(
                    self.eks.cluster, self.eks.region, session=self.session,
                    profile=self.eks.profile, role_arn=self.eks.role_arn,
                    session_name=self.eks.session_name,
                )
                self._minted_at = time.monotonic()
            return self.token

    def _may_send_credentials(self) -> bool:
        return urlsplit(self.server).scheme == "https" or self.allow_http_credentials

    def auth_headers(self) -> dict[str, str]:
        """The Authorization header of this identity (an EKS token re-minted when it gets old), for a
        caller that talks to the API server with its own HTTP client (the benchmark's proxy mode).
        Empty for a plain http:// server unless the kubeconfig allowed credentials there."""
        if not self._may_send_credentials():
            return {}
        bearer = self._bearer()
        if bearer:
            return {"Authorization": f"Bearer {bearer}"}
        if self.basic_auth:
            return {"Authorization": f"Basic {self.basic_auth}"}
        return {}

    def scrub(self, text: str) -> str:
        """`text` without any credential of this client (for messages built from exceptions)."""
        secrets = [self.token, self.basic_auth, *self.extra_secrets]
        for secret in sorted((s for s in secrets if s), key=len, reverse=True):
            text = text.replace(secret, "[token]")
            stripped = secret.strip()
            if len(stripped) >= 4:
                text = text.replace(stripped, "[token]")
            text = text.replace(repr(secret)[1:-1], "[token]")  # as an error quotes it, escaped
        return text


    # -- raw requests --

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Query] = None,
        body: Optional[bytes] = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        max_bytes: int = MAX_BODY_BYTES,
    ) -> HttpResponse:
        """One request to the API server; raises KubeError on transport and auth failures only.

        `query` is a mapping, or (key, value) pairs where a key repeats (Ray's State API filters)."""
        parts = urlsplit(self.server)
        base_path = parts.path.rstrip("/")
        target = base_path + path
        if query:
            pairs = query.items() if isinstance(query, Mapping) else query
            target += "?" + urlencode([(k, v) for k, v in pairs if v is not None])
        send_headers = {"Accept": "application/json", "User-Agent": "raypd-verify",
                        **self.auth_headers()}
        if headers:
            send_headers.update(headers)
        if body is not None:
            send_headers.setdefault("Content-Type", "application/json")
        seconds = timeout if timeout is not None else self.timeout
        host, port = parts.hostname or "", parts.port
        try:
            if parts.scheme == "https":
                connection: http.client.HTTPConnection = _HTTPSConnection(
                    host, port, timeout=seconds, context=self.ssl_context,
                    server_name=self.tls_server_name)
            else:
                connection = http.client.HTTPConnection(host, port, timeout=seconds)
            try:
                connection.request(method, target, body=body, headers=send_headers)
                response = connection.getresponse()
                data = response.read(max_bytes + 1)[:max_bytes]
                result = HttpResponse(response.status, {k.lower(): v for k, v in response.getheaders()},
                                      data)
            finally:
                connection.close()
        except ConnectionRefusedError:
            raise KubeUnreachable(f"cannot reach the Kubernetes API at {self.server} "
                            "(connection refused)") from None
        except (socket.timeout, TimeoutError):
            raise KubeUnreachable(f"the Kubernetes API at {self.server} did not answer within "
                            f"{seconds:g} s") from None
        except ssl.SSLError as exc:
            raise KubeUnreachable(f"TLS with the Kubernetes API at {self.server} failed: "
                            f"{self.scrub(getattr(exc, 'reason', None) or str(exc))}") from None
        except socket.gaierror:
            raise KubeUnreachable(f"cannot reach the Kubernetes API at {self.server} "
                            "(the host name does not resolve)") from None
        except http.client.IncompleteRead as exc:  # the server behind a proxy ended its stream early
            raise KubeError(f"the answer from the Kubernetes API at {self.server} was cut off after "
                            f"{len(exc.partial)} bytes (the server it proxies to closed its stream "
                            "early)") from None
        except (OSError, http.client.HTTPException) as exc:
            raise KubeUnreachable(f"cannot reach the Kubernetes API at {self.server} "
                            f"({self.scrub(type(exc).__name__ + ': ' + str(exc))})") from None
        except ValueError as exc:  # http.client refusing a header or URL it cannot send
            raise KubeError(f"cannot send the request to the Kubernetes API at {self.server}: "
                            f"{self.scrub(type(exc).__name__ + ': ' + str(exc))}") from None
        if result.status == 401:
            raise KubeError(
                f"the kubeconfig's credentials were refused by the Kubernetes API at {self.server} "
                f"(HTTP 401{self._status_message(result)})", status=401)
        if result.status == 403:  # who you are is known; what you asked is not allowed (RBAC)
            raise KubeError(
                f"the kubeconfig's user may not {method} {path.split('?')[0]} (HTTP 403, RBAC"
                f"{self._status_message(result)}): grant it in the cluster's RBAC", status=403)
        return result

    def _status_message(self, response: HttpResponse) -> str:
        """The `message` of a Kubernetes Status body, if any, trimmed and scrubbed."""
        try:
            document = json.loads(response.body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return ""
        message = document.get("message") if isinstance(document, dict) else None
        return f": {self.scrub(str(message))[:300]}" if message else ""

    def get_json(self, path: str, query: Optional[Mapping[str, Any]] = None,
                 timeout: Optional[float] = None) -> Any:
        """GET an API object; 404 -> KubeNotFound, other non-2xx -> KubeError."""
        response = self.request("GET", path, query=query, timeout=timeout)
        if response.status == 404:
            raise KubeNotFound(f"not found: {path}{self._status_message(response)}", status=404)
        if not 200 <= response.status < 300:
            raise KubeError(f"the Kubernetes API answered HTTP {response.status} for GET {path}"
                            f"{self._status_message(response)}", status=response.status)
        try:
            return response.json()
        except (ValueError, UnicodeDecodeError):
            raise KubeError(f"the Kubernetes API answered GET {path} with something that is not "
                            "JSON") from None

    def create(self, path: str, document: Mapping[str, Any]) -> dict[str, Any]:
        """POST an object to a collection; 409 (it exists) and every other non-2xx -> KubeError."""
        response = self.request("POST", path, body=json.dumps(document).encode("utf-8"))
        if not 200 <= response.status < 300:
            raise KubeError(f"the Kubernetes API answered HTTP {response.status} for POST {path}"
                            f"{self._status_message(response)}", status=response.status)
        try:
            return dict(response.json())
        except (ValueError, UnicodeDecodeError, TypeError):
            return {}

    def delete(self, path: str) -> bool:
        """DELETE an object and its dependents (a Job's pods) in the background; False if already gone."""
        response = self.request("DELETE", path, query={"propagationPolicy": "Background"})
        if response.status == 404:
            return False
        if not 200 <= response.status < 300:
            raise KubeError(f"the Kubernetes API answered HTTP {response.status} for DELETE {path}"
                            f"{self._status_message(response)}", status=response.status)
        return True

    # -- Secrets (the endpoint's API keys): read, and changed by JSON merge patch --
    # A Secret's values are never logged or put in an error: a message names the Secret and what the
    # API server said (its Status messages name fields and keys, not data values).

    def get_secret(self, namespace: str, name: str) -> dict[str, Any]:
        """The Secret object (data base64, as the API serves it); KubeNotFound when absent."""
        return dict(self.get_json(_secret_path(namespace, name)))

    def patch_secret(self, namespace: str, name: str, patch: Mapping[str, Any],
                     resource_version: Optional[str] = None) -> dict[str, Any]:
        """Apply a JSON merge patch (RFC 7386: a null deletes a key) to a Secret.

        With `resource_version` the patch carries `metadata.resourceVersion`, which the API server
        treats as a precondition (a patch is an update of the merged object, and an update whose
        resourceVersion is not the stored one is refused with 409 Conflict: Kubernetes API
        conventions, "Concurrency Control and Consistency"): KubeConflict then, KubeNotFound when
        the Secret is gone, KubeError for anything else."""
        body = dict(patch)
        if resource_version is not None:
            metadata = dict(body.get("metadata") or {})
            metadata["resourceVersion"] = resource_version
            body["metadata"] = metadata
        path = _secret_path(namespace, name)
        response = self.request("PATCH", path, body=json.dumps(body).encode("utf-8"),
                                headers={"Content-Type": MERGE_PATCH})
        where = f"the Secret {namespace}/{name}"
        if response.status == 404:
            raise KubeNotFound(f"{where} does not exist{self._status_message(response)}", status=404)
        if response.status == 409:
            raise KubeConflict(f"{where} was changed by someone else meanwhile"
                               f"{self._status_message(response)}", status=409)
        if not 200 <= response.status < 300:
            raise KubeError(f"the Kubernetes API answered HTTP {response.status} for a change of "
                            f"{where}{self._status_message(response)}", status=response.status)
        try:
            return dict(response.json())
        except (ValueError, UnicodeDecodeError, TypeError):
            raise KubeError(f"the Kubernetes API answered the change of {where} with something "
                            "that is not JSON") from None

    def modify_secret(self, namespace: str, name: str,
                      change: Callable[[dict[str, Any]], Optional[Mapping[str, Any]]],
                      attempts: int = SECRET_WRITE_ATTEMPTS) -> dict[str, Any]:
        """Read the Secret, let `change` turn it into a merge patch, write it if its
        resourceVersion still holds; on 409 read again and retry, at most `attempts` times.

        So two writers (two revokes, a create racing a revoke) never lose each other's key: the
        loser of a race recomputes its patch from what the winner wrote. `change` may raise to
        refuse (a duplicate name, say) and returns None when there is nothing to write; the
        Secret as last read or written is returned."""
        attempts = max(1, attempts)
        for attempt in range(1, attempts + 1):
            secret = self.get_secret(namespace, name)
            patch = change(secret)
            if patch is None:
                return secret
            version = (secret.get("metadata") or {}).get("resourceVersion")
            try:
                return self.patch_secret(namespace, name, patch,
                                         str(version) if version is not None else None)
            except KubeConflict:
                if attempt == attempts:
                    raise KubeConflict(f"the Secret {namespace}/{name} kept changing under "
                                       f"{attempts} attempts to write it; try again", status=409) from None
                log.debug("Secret %s/%s changed meanwhile; reading it again", namespace, name)
                pause = min(SECRET_RETRY_PAUSE_MAX_S, SECRET_RETRY_PAUSE_S * 2 ** (attempt - 1))
                time.sleep(pause * random.uniform(0.5, 1.5))
        raise AssertionError("unreachable")  # the loop returns or raises

    # -- the calls verify and the web app make --

    def list_nodes(self, label_selector: Optional[str] = None) -> list[dict[str, Any]]:
        return list(self.get_json("/api/v1/nodes", {"labelSelector": label_selector}).get("items") or [])

    def list_pods(self, namespace: str, label_selector: Optional[str] = None) -> list[dict[str, Any]]:
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods"
        return list(self.get_json(path, {"labelSelector": label_selector}).get("items") or [])

    def get_rayservice(self, namespace: str, name: str) -> dict[str, Any]:
        path = (f"/apis/{RAYSERVICE_GROUP_VERSION}/namespaces/{quote(namespace, safe='')}/"
                f"{RAYSERVICE_PLURAL}/{quote(name, safe='')}")
        return dict(self.get_json(path))

    def pod_log(self, namespace: str, pod: str, *, container: Optional[str] = None,
                tail_lines: Optional[int] = None, limit_bytes: Optional[int] = None,
                timeout: Optional[float] = None) -> str:
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(pod, safe='')}/log"
        response = self.request("GET", path, query={"container": container, "tailLines": tail_lines,
                                                    "limitBytes": limit_bytes},
                                headers={"Accept": "text/plain"}, timeout=timeout,
                                max_bytes=max(limit_bytes or 0, MAX_BODY_BYTES))
        if response.status == 404:
            raise KubeNotFound(f"no log for pod {namespace}/{pod}{self._status_message(response)}",
                               status=404)
        if response.status != 200:
            raise KubeError(f"the Kubernetes API answered HTTP {response.status} for the log of pod "
                            f"{namespace}/{pod}{self._status_message(response)}", status=response.status)
        return response.text()

    def _proxy(self, kind: str, namespace: str, name: str, port: int | str, path: str, *,
               method: str, query: Optional[Query], body: Optional[bytes],
               headers: Optional[Mapping[str, str]], timeout: Optional[float]) -> HttpResponse:
        proxied = path.lstrip("/")
        full = (f"/api/v1/namespaces/{quote(namespace, safe='')}/{kind}/"
                f"{quote(name, safe='')}:{port}/proxy/{quote(proxied, safe='/')}")
        return self.request(method, full, query=query, body=body, headers=headers, timeout=timeout)

    def service_proxy(self, namespace: str, service: str, port: int | str, path: str, *,
                      method: str = "GET", query: Optional[Query] = None,
                      body: Optional[bytes] = None, headers: Optional[Mapping[str, str]] = None,
                      timeout: Optional[float] = None) -> HttpResponse:
        """GET/POST `path` on a Service through the API server; the upstream's status is returned."""
        return self._proxy("services", namespace, service, port, path, method=method, query=query,
                           body=body, headers=headers, timeout=timeout)

    def pod_proxy(self, namespace: str, pod: str, port: int | str, path: str, *,
                  method: str = "GET", query: Optional[Query] = None,
                  body: Optional[bytes] = None, headers: Optional[Mapping[str, str]] = None,
                  timeout: Optional[float] = None) -> HttpResponse:
        return self._proxy("pods", namespace, pod, port, path, method=method, query=query,
                           body=body, headers=headers, timeout=timeout)


def _secret_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/secrets/{quote(name, safe='')}"


def client_from_kubeconfig(
    text: str,
    *,
    context: Optional[str] = None,
    region_hint: Optional[str] = None,
    timeout: float = DEFAULT_TIMEOUT,
    session: Any = None,
) -> KubeClient:
    """A KubeClient for the kubeconfig's current (or named) context; raises KubeConfigError.

    `region_hint` (the stack's region) signs the EKS token when the exec entry names no region.
    The exec command is read, never run.
    """
    document = parse_kubeconfig_text(text)
    selected = _select_context(document, context)
    cluster = _named(document, "clusters", selected.get("cluster"), "cluster")
    user_name = selected.get("user")
    user: dict[str, Any] = _named(document, "users", user_name, "user") if user_name else {}
    try:
        server, userinfo = server_address(str(cluster.get("server") or ""))
    except ValueError as exc:
        raise KubeConfigError(str(exc)) from None
    parts = urlsplit(server)
    client = KubeClient(
        server=server,
        ssl_context=_ssl_context(cluster, user) if parts.scheme == "https" else None,
        tls_server_name=cluster.get("tls-server-name"),
        timeout=timeout,
        session=session,
        allow_http_credentials=allows_http_credentials(cluster),
    )
    client.extra_secrets = userinfo
    if user.get("token"):
        raw = str(user["token"])
        client.extra_secrets += (raw,)
        client.token = bearer_token(raw, "token")
    elif user.get("tokenFile"):
        raw = read_token_file(str(user["tokenFile"]))
        client.extra_secrets += (raw,)
        client.token = bearer_token(raw, "tokenFile")
    elif isinstance(user.get("exec"), Mapping):
        client.eks = eks_token_source(user["exec"], region_hint)
    elif user.get("username") and user.get("password"):
        pair = f"{user['username']}:{user['password']}".encode("utf-8", errors="replace")
        client.extra_secrets += (str(user["password"]),)
        client.basic_auth = base64.b64encode(pair).decode("ascii")
    elif user.get("auth-provider"):
        raise KubeConfigError("the kubeconfig's user uses an auth-provider plugin, which raypd "
                              "does not support: pass a kubeconfig with a token")
    has_credentials = bool(client.token or client.eks or client.basic_auth)
    if parts.scheme == "http" and has_credentials and not allows_http_credentials(cluster):
        raise KubeConfigError(
            f"the kubeconfig's server {server} is plain http://: raypd will not send "
            "its credentials (token, exec token or password) unencrypted. Use the https:// "
            "address, or, if this really is what you want (a local test server), add to that "
            f"cluster entry `extensions: [{{name: {ALLOW_HTTP_CREDENTIALS_EXTENSION}, extension: "
            "true}]`")
    return client


def server_address(raw: str) -> tuple[str, tuple[str, ...]]:
    """(the kubeconfig's server address as raypd uses and shows it, the secrets cut from it).

    A user and password in the address (`https://admin:secret@host:443`) are dropped; the
    password, as written and percent-decoded, is returned for scrubbing. ValueError (never quoting
    the address, which may hold that password) when it is no http(s) URL with a host and a valid port."""
    try:
        parts = urlsplit(raw.strip())
        hostname, _ = parts.hostname, parts.port  # urlsplit checks the port only when asked
    except ValueError:  # "Invalid IPv6 URL", "Port out of range 0-65535"...
        raise ValueError("the kubeconfig's server address is not a valid URL (its host or port)") from None
    if parts.scheme not in ("https", "http") or not hostname:
        raise ValueError("the kubeconfig's cluster has no https:// server address")
    secrets = tuple(s for s in {parts.password or "", unquote(parts.password or "")} if s)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", "")).rstrip("/"), secrets


def allows_http_credentials(cluster: Mapping[str, Any]) -> bool:
    """True when the kubeconfig's cluster entry explicitly allows credentials over plain HTTP."""
    extensions = cluster.get("extensions") or []
    if not isinstance(extensions, list):
        return False
    return any(isinstance(entry, Mapping) and entry.get("name") == ALLOW_HTTP_CREDENTIALS_EXTENSION
               and entry.get("extension") is True for entry in extensions)


def bearer_token(raw: str, what: str) -> str:
    """The token as it will go into the Authorization header: trimmed; refused (never quoted) when
    empty or when it holds anything but visible ASCII, which no HTTP header can carry."""
    token = raw.strip()
    if not token:
        raise KubeConfigError(f"the kubeconfig's user {what} is empty")
    if any(not 0x21 <= ord(char) <= 0x7E for char in token):
        raise KubeConfigError(f"the kubeconfig's user {what} holds characters a bearer token cannot "
                              "have (spaces, control characters or non-ASCII): copy it again")
    return token


def read_token_file(path: str) -> str:
    """The text of a kubeconfig `tokenFile`: a regular file of at most MAX_TOKEN_FILE_BYTES.

    Opened non-blocking (a FIFO must not hang verify) and checked with fstat on the open descriptor
    (no race between the check and the read); errors name the field, never the contents."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise KubeConfigError(f"cannot read the kubeconfig's tokenFile: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise KubeConfigError("the kubeconfig's tokenFile is not a regular file (a device, FIFO "
                                  "or directory): point it at the file that holds the token")
        if info.st_size > MAX_TOKEN_FILE_BYTES:
            raise KubeConfigError(f"the kubeconfig's tokenFile is larger than "
                                  f"{MAX_TOKEN_FILE_BYTES // 1024} KiB; that is not a token")
        data = os.read(fd, MAX_TOKEN_FILE_BYTES + 1)
    except OSError as exc:
        raise KubeConfigError(f"cannot read the kubeconfig's tokenFile: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_TOKEN_FILE_BYTES:
        raise KubeConfigError(f"the kubeconfig's tokenFile is larger than "
                              f"{MAX_TOKEN_FILE_BYTES // 1024} KiB; that is not a token")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise KubeConfigError("the kubeconfig's tokenFile is not UTF-8 text") from None


def read_kubeconfig_file(path: str) -> str:
    """The text of a --kubeconfig file; KubeConfigError when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_KUBECONFIG_BYTES + 1)
    except OSError as exc:
        raise KubeConfigError(f"cannot read the kubeconfig file {shown_name(path)}: {exc.strerror}") from None
    if len(data) > MAX_KUBECONFIG_BYTES:
        raise KubeConfigError(f"the kubeconfig file {shown_name(path)} is larger than 1 MiB; that is not a kubeconfig")
    text = data.decode("utf-8", errors="replace")
    parse_kubeconfig_text(text, f"the kubeconfig file {shown_name(path)}")  # refused here, naming the file
    return text

