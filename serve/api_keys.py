"""API keys of a deployment's endpoint: create, list and revoke them in the Secret the gateway reads.

`python -m serve.api_keys --outputs FILE|- [--kubeconfig FILE] (create NAME | list | revoke NAME) [--json]`

The keys live in one Secret in the deployment's namespace (components/render/endpoint_names.py: one data
entry per key, its name the key's name, its creation time an annotation). Envoy Gateway watches that
Secret, so a key created or revoked here works, or stops working, without redeploying anything.
The Pulumi program creates the Secret with the first key and leaves its data to this module: it is
only ever merge-patched, never replaced, and every write is a read-modify-write on the Secret's
resourceVersion (serve.kube `modify_secret`), so a create racing a revoke loses neither.

A key's value is shown once: `create` prints it alone on stdout (`KEY=$(... create ci)` works);
nothing else here prints, logs or puts it into an error; `list` gives names and creation times.

Exit 0 on success, 1 when the operation failed (no such key, a duplicate name, no key Secret, the
cluster did not answer), 2 on invalid input (a bad name, unreadable outputs or kubeconfig): one
line on stderr, no traceback.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import secrets
import sys
import time
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from components.render.endpoint_names import (
    KEY_NAME_PATTERN,
    api_keys_secret_name,
    created_annotation,
)
from serve.evidence import VerifyInputError, read_outputs, resolve_kubeconfig
from serve.kube import (
    DEFAULT_TIMEOUT,
    KubeClient,
    KubeConfigError,
    KubeError,
    KubeNotFound,
    client_from_kubeconfig,
    read_kubeconfig_file,
)

EXIT_FAILED = 1
EXIT_INVALID = 2
# A recognisable prefix lets secret scanners and people tell a raypd key from other tokens;
# 32 random bytes (256 bits) behind it, URL-safe base64 so it fits a header as it is.
KEY_PREFIX = "rpd_"
KEY_BYTES = 32
MAX_NAME_CHARS = 63  # well above the pattern's 32: longer input is refused without being quoted
_RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


class ApiKeyInputError(ValueError):
    """Input that cannot be a key operation (a bad name); `field` names what to fix."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class ApiKeyError(Exception):
    """An operation the cluster's state refuses; the message says why and what to do."""


class NoKeySecret(ApiKeyError):
    """The deployment has no API keys: its endpoint has auth none, or the Secret does not exist."""


class DuplicateKey(ApiKeyError):
    """A key by that name exists already."""


class UnknownKey(ApiKeyError):
    """No key by that name."""


class LastKey(ApiKeyError):
    """Revoking it would leave the Secret without any key."""


@dataclass(frozen=True)
class KeyTarget:
    """Where a deployment's keys are, from its stack outputs (Contract 3)."""

    namespace: str
    service_name: str
    auth: Optional[str]  # outputs endpoint.auth; None for a stack from before issue 17

    @property
    def secret_name(self) -> str:
        return api_keys_secret_name(self.service_name)

    @property
    def where(self) -> str:
        return f"the Secret {self.namespace}/{self.secret_name}"

    @classmethod
    def from_outputs(cls, outputs: Mapping[str, Any]) -> "KeyTarget":
        namespace, service = outputs.get("namespace"), outputs.get("rayServiceName")
        if not isinstance(namespace, str) or not namespace or not isinstance(service, str) or not service:
            raise VerifyInputError("the outputs have no `namespace` and `rayServiceName`: give the "
                                   "output of `pulumi stack output --json --show-secrets`")
        endpoint = outputs.get("endpoint")
        auth = endpoint.get("auth") if isinstance(endpoint, Mapping) else None
        return cls(namespace=namespace, service_name=service, auth=auth if isinstance(auth, str) else None)

    def refuse_without_keys(self) -> None:
        """NoKeySecret when the outputs already say there are no keys (auth none)."""
        if self.auth == "none":
            raise NoKeySecret("this deployment's endpoint has auth none (raypd:endpoint.auth): it "
                              "takes no API keys, so there are none to manage. Set auth: apiKey and "
                              "Deploy to require them")


def validate_key_name(name: Any) -> str:
    """The name as given when it can name a key (a Secret data key and an annotation suffix)."""
    if not isinstance(name, str) or not name:
        raise ApiKeyInputError("name", "give the key a name (lower-case letters, digits and '-')")
    if len(name) > MAX_NAME_CHARS or not KEY_NAME_PATTERN.fullmatch(name):
        shown = repr(name) if len(name) <= MAX_NAME_CHARS and name.isprintable() else "the name given"
        raise ApiKeyInputError("name", f"{shown} is not a key name: 1 to 32 lower-case letters, digits "
                                       "and '-', starting and ending with a letter or digit")
    return name


def new_key_value() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(KEY_BYTES)


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def listed(secret: Mapping[str, Any]) -> list[dict[str, Optional[str]]]:
    """[{name, created}] of the Secret's keys by name; `created` None when not recorded (a key
    someone added by hand) or not an RFC 3339 UTC time. Never the values."""
    data = secret.get("data") or {}
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    keys = []
    for name in sorted(data) if isinstance(data, Mapping) else []:
        created = annotations.get(created_annotation(name)) if isinstance(annotations, Mapping) else None
        ok = isinstance(created, str) and _RFC3339_UTC.match(created)
        keys.append({"name": str(name), "created": created if ok else None})
    return keys


def create_patch(secret: Mapping[str, Any], name: str, value: str, created: str,
                 where: str) -> dict[str, Any]:
    """The merge patch adding key `name`; DuplicateKey when the Secret has one by that name."""
    if name in (secret.get("data") or {}):
        raise DuplicateKey(f"a key named {name} exists already in {where}: pick another name, or "
                           "revoke that one first")
    return {"data": {name: base64.b64encode(value.encode("ascii")).decode("ascii")},
            "metadata": {"annotations": {created_annotation(name): created}}}


def revoke_patch(secret: Mapping[str, Any], name: str, where: str) -> dict[str, Any]:
    """The merge patch removing key `name` and its annotation (nulls delete, RFC 7386)."""
    data = secret.get("data") or {}
    if name not in data:
        known = ", ".join(sorted(data)) or "none"
        raise UnknownKey(f"no key named {name} in {where} (keys: {known})")
    if len(data) == 1:
        # Never an empty credential list: the gateway's SecurityPolicy names this Secret, and a
        # Secret with no key is not a state raypd leaves it in. Rotating is create, then revoke.
        raise LastKey(f"{name} is the last key in {where}: create its replacement first, then revoke "
                      "it (a deployment with auth apiKey always keeps at least one key)")
    return {"data": {name: None}, "metadata": {"annotations": {created_annotation(name): None}}}


class ApiKeys:
    """One deployment's keys through the Kubernetes API (a KubeClient with the stack's kubeconfig)."""

    def __init__(self, client: KubeClient, target: KeyTarget):
        self.client = client
        self.target = target

    def _missing(self) -> NoKeySecret:  # the Secret is absent
        return NoKeySecret(
            f"{self.target.where} does not exist: the deployment is not deployed yet, was deployed "
            "before raypd managed API keys, or its endpoint has auth none (raypd:endpoint.auth). "
            "Deploy it with auth apiKey to get keys")

    def list(self) -> list[dict[str, Optional[str]]]:
        self.target.refuse_without_keys()
        try:
            return listed(self.client.get_secret(self.target.namespace, self.target.secret_name))
        except KubeNotFound:
            raise self._missing() from None

    def create(self, name: Any) -> dict[str, str]:
        """{name, created, key}: the new key's value is in this answer and nowhere else."""
        key_name = validate_key_name(name)
        self.target.refuse_without_keys()
        value, created = new_key_value(), utc_now()
        try:
            self.client.modify_secret(
                self.target.namespace, self.target.secret_name,
                lambda secret: create_patch(secret, key_name, value, created, self.target.where))
        except KubeNotFound:
            raise self._missing() from None
        return {"name": key_name, "created": created, "key": value}

    def revoke(self, name: Any) -> str:
        key_name = validate_key_name(name)
        self.target.refuse_without_keys()
        try:
            self.client.modify_secret(
                self.target.namespace, self.target.secret_name,
                lambda secret: revoke_patch(secret, key_name, self.target.where))
        except KubeNotFound:
            raise self._missing() from None
        return key_name

    @classmethod
    def for_outputs(cls, outputs: Mapping[str, Any], kubeconfig: Optional[str] = None, *,
                    timeout: float = DEFAULT_TIMEOUT) -> "ApiKeys":
        """From stack outputs (secrets shown) and kubeconfig text (default: the outputs' own)."""
        target = KeyTarget.from_outputs(outputs)
        region = outputs.get("region")
        client = client_from_kubeconfig(resolve_kubeconfig(outputs, kubeconfig), timeout=timeout,
                                        region_hint=region if isinstance(region, str) else None)
        return cls(client, target)


# ---- the CLI ----

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m serve.api_keys",
        description="Create, list and revoke the API keys of a deployed raypd endpoint.")
    parser.add_argument("--outputs", required=True,
                        help="stack outputs JSON file (`pulumi stack output --json --show-secrets`), or -")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: the outputs' kubeconfig)")
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{create,list,revoke}")
    for command, text in (("create", "create a key; its value is printed once, on stdout"),
                          ("list", "list the keys: names and creation times, never values"),
                          ("revoke", "revoke a key; the gateway refuses it from then on")):
        sub = commands.add_parser(command, help=text)
        if command != "list":
            sub.add_argument("name", help="the key's name: 1 to 32 of a-z, 0-9 and '-'")
        sub.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    return parser


def _run(args: argparse.Namespace) -> None:
    outputs = read_outputs(args.outputs)
    kubeconfig = read_kubeconfig_file(args.kubeconfig) if args.kubeconfig else None
    keys = ApiKeys.for_outputs(outputs, kubeconfig)
    if args.command == "create":
        created = keys.create(args.name)
        if not args.json:
            print(f"created API key {created['name']} at {created['created']}; it is printed once, "
                  "on stdout: keep it now", file=sys.stderr)
        print(json.dumps(created) if args.json else created["key"])
    elif args.command == "list":
        found = keys.list()
        lines = [f"{key['name']:<34}{key['created'] or 'unknown'}" for key in found]
        print(json.dumps({"keys": found}) if args.json else "\n".join(lines))
    else:
        revoked = keys.revoke(args.name)
        print(json.dumps({"revoked": revoked}) if args.json else f"revoked API key {revoked}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)  # a usage mistake: argparse's message and exit 2
    try:
        _run(args)
    except (ApiKeyInputError, VerifyInputError, KubeConfigError) as exc:
        print(f"api-keys: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except (ApiKeyError, KubeError) as exc:
        print(f"api-keys: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
