"""`KubeClient`: one API server, one identity, one bounded request at a time (no retries, no
pool), and the calls raypd makes with it: objects, Secrets by merge patch, pod logs, and the
service and pod proxies. Every failure is a KubeError whose text is scrubbed of the credentials."""

from __future__ import annotations

import http.client
import json
import logging
import random
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence, Union
from urllib.parse import quote, urlencode, urlsplit

from serve.kube.eks import EKS_TOKEN_REUSE_SECONDS, EksTokenSource, mint_eks_token
from serve.kube.errors import KubeConfigError, KubeConflict, KubeError, KubeNotFound, KubeUnreachable
from serve.kube.limits import DEFAULT_TIMEOUT, MAX_BODY_BYTES

log = logging.getLogger(__name__)

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
