"""Kubernetes API access for `serve.verify`, the web app's live status and API keys: bounded, no CLI.

A thin client on the standard library (http.client + ssl) instead of the official `kubernetes`
package, on purpose:
- `kubernetes` 37 requires pydantic >= 2.14.2, and raypd pins pydantic 2.13.4; it also pulls in
  aiohttp, oauthlib, websocket-client and friends (about 15 packages) for a dozen GET requests.
- its kubeconfig loader runs a user's `exec` plugin itself; raypd must never run the kubeconfig's
  command (pulumi-eks writes `aws eks get-token`), so we would be rewriting the user entry anyway.
- its generated proxy calls take no request body, so the chat POST would go through the raw
  `call_api` regardless, and its urllib3 pool retries by default.

What this package does: parse a kubeconfig (YAML or JSON text), build an SSL context from its CA and
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

Where each part is: kubeconfig.py (parsing, the TLS context, the credentials as read, and
`client_from_kubeconfig`), eks.py (the EKS token minted in Python, and reading the exec entry that
asks for it), client.py (`KubeClient`: one bounded request, the object, Secret, log and proxy
calls), errors.py (`KubeError` and its kinds), limits.py (the bounds every call and read keeps).
Everything other code uses is importable from `serve.kube` itself.
"""

from serve.kube.client import (
    MERGE_PATCH,
    RAYSERVICE_GROUP_VERSION,
    RAYSERVICE_PLURAL,
    SECRET_WRITE_ATTEMPTS,
    HttpResponse,
    KubeClient,
    Query,
)
from serve.kube.eks import EKS_TOKEN_PREFIX, EksTokenSource, eks_token_source, mint_eks_token
from serve.kube.errors import KubeConfigError, KubeConflict, KubeError, KubeNotFound, KubeUnreachable
from serve.kube.kubeconfig import (
    ALLOW_HTTP_CREDENTIALS_EXTENSION,
    allows_http_credentials,
    bearer_token,
    client_from_kubeconfig,
    parse_kubeconfig_text,
    read_kubeconfig_file,
    read_token_file,
    server_address,
)
from serve.kube.limits import DEFAULT_TIMEOUT, MAX_BODY_BYTES, MAX_KUBECONFIG_BYTES, MAX_TOKEN_FILE_BYTES

__all__ = [
    "ALLOW_HTTP_CREDENTIALS_EXTENSION", "DEFAULT_TIMEOUT", "EKS_TOKEN_PREFIX", "MAX_BODY_BYTES",
    "MAX_KUBECONFIG_BYTES", "MAX_TOKEN_FILE_BYTES", "MERGE_PATCH", "RAYSERVICE_GROUP_VERSION",
    "RAYSERVICE_PLURAL", "SECRET_WRITE_ATTEMPTS", "EksTokenSource", "HttpResponse", "KubeClient",
    "KubeConfigError", "KubeConflict", "KubeError", "KubeNotFound", "KubeUnreachable", "Query",
    "allows_http_credentials", "bearer_token", "client_from_kubeconfig", "eks_token_source",
    "mint_eks_token", "parse_kubeconfig_text", "read_kubeconfig_file", "read_token_file",
    "server_address",
]
