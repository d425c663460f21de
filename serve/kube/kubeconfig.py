"""A kubeconfig to a `KubeClient`: parsed as data (YAML or JSON), its TLS context built, its
credentials read as secrets (trimmed, refused when no header can carry them, never quoted), and an
exec entry understood only when it asks for an EKS token (serve/kube/eks.py), never run."""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from typing import Any, Mapping, Optional
from urllib.parse import unquote, urlsplit, urlunsplit

from components.config.safe_documents import (
    DocumentError,
    FileRefused,
    load_yaml,
    read_file,
    read_text_file,
    shown_name,
)
from serve.kube.client import KubeClient
from serve.kube.eks import eks_token_source
from serve.kube.errors import KubeConfigError
from serve.kube.limits import DEFAULT_TIMEOUT, MAX_KUBECONFIG_BYTES, MAX_PEM_FILE_BYTES, MAX_TOKEN_FILE_BYTES

ALLOW_HTTP_CREDENTIALS_EXTENSION = "raypd.io/allow-credentials-over-http"


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
        pem = _read_pem_file(cluster["certificate-authority"], "certificate-authority")
        try:
            context.load_verify_locations(cadata=pem.decode("ascii", errors="replace"))
        except (ssl.SSLError, ValueError):
            raise KubeConfigError("the kubeconfig's certificate-authority file is not a PEM certificate") from None
    cert_data, key_data = user.get("client-certificate-data"), user.get("client-key-data")
    cert_file, key_file = user.get("client-certificate"), user.get("client-key")
    if cert_data and key_data:
        _load_client_pair(context, _decode_b64(cert_data, "client-certificate-data"),
                          _decode_b64(key_data, "client-key-data"))
    elif cert_file and key_file:
        _load_client_pair(context, _read_pem_file(cert_file, "client-certificate"),
                          _read_pem_file(key_file, "client-key"))
    return context


def _load_client_pair(context: ssl.SSLContext, certificate: bytes, key: bytes) -> None:
    """ssl only loads a client certificate from files: both written to a private temp dir (so the
    files ssl opens are ours, whatever the kubeconfig named)."""
    try:
        with tempfile.TemporaryDirectory() as directory:
            cert_path, key_path = os.path.join(directory, "c.pem"), os.path.join(directory, "k.pem")
            for path, data in ((cert_path, certificate), (key_path, key)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
            context.load_cert_chain(cert_path, key_path)
    except (OSError, ssl.SSLError):
        raise KubeConfigError("the kubeconfig's client certificate or key cannot be loaded") from None


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
    """The text of a kubeconfig `tokenFile`: a regular file of at most MAX_TOKEN_FILE_BYTES (read by
    components.config.safe_documents: a FIFO must not hang verify); errors name the field, never
    the contents."""
    try:
        return read_text_file(path, MAX_TOKEN_FILE_BYTES)
    except FileRefused as exc:
        raise KubeConfigError(exc.about("the kubeconfig's tokenFile")) from None


def _read_pem_file(path: Any, what: str) -> bytes:
    """A PEM file the kubeconfig names, read by the one safe reader before ssl sees it: ssl's own
    `load_verify_locations(cafile=)` and `load_cert_chain(certfile=)` open the path themselves,
    and a FIFO there hung verify and api_keys for ever."""
    try:
        return read_file(str(path), MAX_PEM_FILE_BYTES)
    except FileRefused as exc:
        raise KubeConfigError(exc.about(f"the kubeconfig's {what} file")) from None


def read_kubeconfig_file(path: str) -> str:
    """The text of a --kubeconfig file; KubeConfigError when it cannot be read (read by
    components.config.safe_documents: a regular file of at most MAX_KUBECONFIG_BYTES)."""
    try:
        data = read_file(path, MAX_KUBECONFIG_BYTES)
    except FileRefused as exc:
        raise KubeConfigError(exc.about(f"the kubeconfig file {shown_name(path)}")) from None
    text = data.decode("utf-8", errors="replace")
    parse_kubeconfig_text(text, f"the kubeconfig file {shown_name(path)}")  # refused here, naming the file
    return text
