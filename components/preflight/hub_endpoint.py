"""Where the preflight's `model-source` check asks the Hugging Face Hub (components.preflight.model_source):
`HF_ENDPOINT` (a mirror, or a test's stand-in) or the public Hub, checked before huggingface_hub is
imported (it reads the variable at import and fails there with a traceback on a value it cannot
use), and shown without any user name or password it may carry. Also `HF_HUB_OFFLINE`,
huggingface_hub's own switch not to ask the Hub at all.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from components.config.spec import HF_TOKEN_KEY

DEFAULT_HUB = "https://huggingface.co"
ENDPOINT_VARIABLE = "HF_ENDPOINT"
MAX_ENDPOINT_LENGTH = 2048
_SHOWN_ENDPOINT_LIMIT = 200
_TRUE = {"1", "true", "yes", "on"}


class HubEndpointError(ValueError):
    """`HF_ENDPOINT` (or an endpoint given) cannot be used; the message names it and never holds
    its user name or password."""


def hub_endpoint() -> str:
    """Where preflight asks the Hub: `HF_ENDPOINT` (a mirror, or a test's stand-in) or the public Hub.

    Only preflight looks there. The pods are given `HF_TOKEN` and `HF_HOME` and never
    `HF_ENDPOINT` (components/render/rayservice.py), so they download from https://huggingface.co unless
    their image sets `HF_ENDPOINT` itself; the check's detail says so when the two differ. An empty
    value counts as unset. Raises `HubEndpointError` for a value huggingface_hub cannot use: it reads
    `HF_ENDPOINT` when first imported and fails there with a traceback (utils/_http.py takes the
    endpoint's port to build `_HUB_ORIGINS`), so it is checked before that import."""
    return valid_endpoint(os.environ.get(ENDPOINT_VARIABLE) or DEFAULT_HUB)


def valid_endpoint(value: str, name: str = ENDPOINT_VARIABLE) -> str:
    """`value` without its trailing slash when it is an http(s) URL huggingface_hub can append
    API paths to, else `HubEndpointError` saying what is wrong with `name`."""
    if len(value) > MAX_ENDPOINT_LENGTH:
        raise HubEndpointError(f"{name} is {len(value)} characters long: not the URL of a Hub "
                               f"(at most {MAX_ENDPOINT_LENGTH})")
    for position, char in enumerate(value):
        if not "!" <= char <= "~":  # printable ASCII only: no space, control or non-ASCII character
            raise HubEndpointError(f"{name} holds a character no URL may hold (U+{ord(char):04X} at "
                                   f"position {position + 1}; spaces, control characters and non-ASCII "
                                   "are refused: write an international host name in punycode)")
    shown = shown_endpoint(value)
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:  # "Invalid IPv6 URL", "Port out of range 0-65535", a port not a number
        raise HubEndpointError(f"{name} is not a valid URL ({shown}: {exc})") from None
    if parts.scheme not in ("https", "http"):
        raise HubEndpointError(f"{name} must be an https:// (or http://) URL, not {shown}")
    if not parts.hostname:
        raise HubEndpointError(f"{name} names no host ({shown})")
    if port == 0:
        raise HubEndpointError(f"{name} names port 0 ({shown}): no server listens there")
    if "@" in parts.netloc:
        # httpx turns URL credentials into basic auth, which replaces the bearer token
        # huggingface_hub sends: the check would ask without raypd:hfToken and say it asked with it.
        raise HubEndpointError(f"{name} carries a user name or password ({shown}): huggingface_hub "
                               f"authenticates with a token ({HF_TOKEN_KEY}), which credentials in the "
                               "URL would replace")
    if parts.query or parts.fragment or "?" in value or "#" in value:
        raise HubEndpointError(f"{name} has a query or fragment ({shown}): huggingface_hub appends "
                               "API paths to it")
    return value.rstrip("/")


def shown_endpoint(value: str) -> str:
    """An endpoint as it may be shown: without the user name and password it may carry
    (`https://user:pass@mirror` becomes `https://***@mirror`), and short."""
    scheme, separator, rest = value.partition("://")
    if separator and "@" in rest:
        rest = "***@" + rest.rpartition("@")[2]
    shown = f"{scheme}{separator}{rest}"
    return shown if len(shown) <= _SHOWN_ENDPOINT_LIMIT else shown[:_SHOWN_ENDPOINT_LIMIT - 3] + "..."


def hub_offline() -> bool:
    """`HF_HUB_OFFLINE`, huggingface_hub's own switch: the Hub must not be asked from here."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE
