"""The generic rules of Contract 1: text, names, versions and address ranges, each checked once.

Every spec module (spec, serving_spec, endpoint_spec, observability_spec) asks these instead of
keeping its own copy, so a name or a CIDR is judged, and its problem worded, the same way under
every key. A rule either returns why a value is wrong (None when it is fine) for the caller to
file under the user-facing key, or, where a pydantic validator uses it as it is, raises
ValueError. Nothing here knows which key it is checking. `SpecModel` is the shape every block
shares (camelCase keys, unknown keys refused, frozen).
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from typing import Iterable, Optional

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from components.config import defaults
from components.config.errors import SpecError


def ascii_pattern(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """`pattern` compiled so that `\\d`, `\\w`, `\\s` and `\\b` mean their ASCII classes only.

    By default Python's `re` reads them as Unicode classes: `\\d` takes "٢" and "３" (and `int()`
    then reads "1.٢٩" as 1.29), `\\w` takes "Б". Every value the config layer checks reaches AWS,
    Kubernetes or the Hugging Face Hub, which take ASCII only, so every pattern of the config layer
    (and every other pattern of components/ that uses those classes) is compiled here; the one home
    of the rule, held by tests/unit/test_ascii_rules.py.
    """
    return re.compile(pattern, flags | re.ASCII)


# Patterns are applied with fullmatch: `$` alone would accept a trailing newline.
_DNS1123_LABEL = ascii_pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_EKS_CLUSTER_NAME = ascii_pattern(r"^[0-9A-Za-z][A-Za-z0-9_-]*$")
MAX_EKS_CLUSTER_NAME = 100
# "1.35": no leading zero ("1.035" is not 1.35 to EKS), ASCII digits only.
_K8S_VERSION = ascii_pattern(r"^1\.(0|[1-9][0-9]{0,2})$")
_INSTANCE_TYPE = ascii_pattern(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")
# IAM role ARNs in any partition (aws, aws-cn, aws-us-gov, aws-iso...), role paths allowed; IAM's
# role name characters are ASCII letters, digits and + = , . @ _ - (IAM API reference, CreateRole).
_ROLE_ARN = ascii_pattern(r"^arn:aws[-a-z]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}$")
# Control characters (C0, DEL and C1) and lone UTF-16 surrogates: no Contract 1 value is multi-line
# or binary, and a surrogate cannot even be written out as UTF-8 (a page showing it would fail for
# everyone).
BAD_TEXT = ascii_pattern(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
NOT_TEXT = "contains a control character or a lone surrogate (not valid text)"
MAX_STACK_NAME = 40
# The longest IPv4 CIDR text (255.255.255.255/32): longer entries are not quoted back whole.
MAX_CIDR_TEXT = 18


class SpecModel(BaseModel):
    """The rules every Contract 1 block follows: camelCase keys (snake_case accepted too), unknown
    keys refused, frozen once validated, defaults validated like given values."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True,
        validate_default=True,
    )


# ---- names ----

def dns_label(value: str, max_len: int = 63) -> str:
    """`value` when it is a DNS-1123 label of at most `max_len` characters; ValueError otherwise."""
    if len(value) > max_len:
        raise ValueError(f"'{value}' is {len(value)} characters; at most {max_len} allowed")
    if not _DNS1123_LABEL.fullmatch(value):
        raise ValueError(
            f"'{value}' is not a DNS-1123 label (lower-case letters, digits and '-', "
            "starting and ending with a letter or digit)"
        )
    return value


def validate_stack_name(name: str) -> str:
    """Stack names become part of cluster and resource names, so they follow DNS-1123 labels."""
    if not isinstance(name, str) or not name:
        raise SpecError.single("name", "a stack name is required")
    if BAD_TEXT.search(name):
        raise SpecError.single("name", NOT_TEXT)
    try:
        return dns_label(name, MAX_STACK_NAME)
    except ValueError as exc:
        raise SpecError.single("name", str(exc)) from None


def eks_cluster_name_problem(name: str) -> Optional[str]:
    """Why EKS would refuse `name` as a cluster name (None when it takes it)."""
    if len(name) > MAX_EKS_CLUSTER_NAME or not _EKS_CLUSTER_NAME.fullmatch(name):
        return (f"'{name}' is not a valid EKS cluster name (1-{MAX_EKS_CLUSTER_NAME} letters, digits, "
                "'-' or '_', starting with a letter or digit)")
    return None


def instance_type_name_problem(name: str) -> Optional[str]:
    """Why `name` cannot be an EC2 instance type name (None when it has the shape of one)."""
    if not _INSTANCE_TYPE.fullmatch(name):
        return f"'{name}' is not an EC2 instance type name (e.g. m7i.xlarge)"
    return None


def role_arn_problem(arn: str) -> Optional[str]:
    """Why `arn` is not an IAM role ARN (None when it is)."""
    if not _ROLE_ARN.fullmatch(arn):
        return f"'{arn}' is not an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>)"
    return None


# ---- EKS versions ----

def utc_today() -> datetime.date:
    return datetime.datetime.now(datetime.timezone.utc).date()


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


def eks_version_problem(version: str, today: datetime.date) -> Optional[str]:
    """Why EKS no longer offers Kubernetes `version` on `today` (None when it does, or when the
    version is newer than raypd's table: see defaults.EKS_KUBERNETES_VERSIONS)."""
    table = defaults.EKS_KUBERNETES_VERSIONS
    supported = [v for v, (_, ends) in table.items() if datetime.date.fromisoformat(ends) >= today]
    listed = ", ".join(sorted(supported, key=_minor))
    basis = f"EKS release calendar as of {defaults.EKS_VERSIONS_AS_OF}, {defaults.EKS_VERSIONS_SOURCE}"
    if version in table:
        extended_end = table[version][1]
        if datetime.date.fromisoformat(extended_end) >= today:
            return None
        return (f"EKS ended extended support for {version} on {extended_end} and no longer creates "
                f"or keeps clusters of it; use one of {listed} ({basis})")
    if _minor(version) < min(_minor(v) for v in table):
        return f"EKS no longer offers {version}; use one of {listed} ({basis})"
    return None


def kubernetes_version_problem(value: str, today: datetime.date) -> Optional[str]:
    """Why `value` is not a Kubernetes minor version EKS offers on `today` (None when it is)."""
    if not _K8S_VERSION.fullmatch(value):
        return f"'{value}' is not a Kubernetes minor version such as \"1.35\""
    return eks_version_problem(value, today)


def eks_support_type(version: str, today: datetime.date) -> str:
    """The EKS upgradePolicy.supportType a cluster of `version` gets on `today`.

    STANDARD while the version is in standard support (or newer than raypd's table): at its end
    EKS upgrades the control plane instead of billing the cluster for extended support. EXTENDED
    once the version is past it: EKS cannot take a cluster that is in extended support out of it
    ("you can only disable extended support for clusters on standard support", EKS user guide),
    so asking for STANDARD there would fail the update; the spec warns instead (`warnings`).
    """
    dates = defaults.EKS_KUBERNETES_VERSIONS.get(version)
    if dates is None or datetime.date.fromisoformat(dates[0]) >= today:
        return defaults.SUPPORT_STANDARD
    return defaults.SUPPORT_EXTENDED


# ---- address ranges ----

def _shown(text: str) -> str:
    """An entry quoted back in a message, cut short when it is longer than any CIDR."""
    return text if len(text) <= MAX_CIDR_TEXT + 6 else f"{text[:MAX_CIDR_TEXT]}..."


def cidr_problem(text: str) -> Optional[str]:
    """Why `text` is not an IPv4 CIDR EKS takes as a public access range (None when it is).

    EKS reads network/prefix (203.0.113.0/24); Python's ipaddress also reads a bare address, a
    netmask (10.0.0.0/255.0.0.0) and host bits, each of which gets its own hint here.
    """
    if len(text) > MAX_CIDR_TEXT:
        return (f"'{_shown(text)}' ({len(text)} characters) is not an IPv4 CIDR: a.b.c.d/n has at "
                f"most {MAX_CIDR_TEXT}")
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError:
        try:
            loose = ipaddress.ip_network(text, strict=False)
        except ValueError:
            return f"'{text}' is not an IPv4 CIDR such as 203.0.113.0/24"
        address = text.split("/", 1)[0]
        return (f"'{text}' has host bits set: its network is {loose}; write {loose}, or "
                f"{address}/32 for that one address")
    if network.version != 4:
        return (f"'{text}' is an IPv6 range; raypd's cluster is IPv4, and EKS takes IPv6 public "
                "access CIDRs only on IPv6 clusters")
    if "/" not in text:
        return f"'{text}' has no prefix length; write {network} for that one address"
    if str(network) != text:
        return f"'{text}' is not written as EKS reads a CIDR; write {network}"
    return None


def cidr_list_problems(texts: Iterable[str]) -> list[tuple[int, str]]:
    """(index, why) for each entry of a CIDR list that is not one (cidr_problem) or repeats an
    earlier one. A valid entry is written exactly as its network, so equal text is an equal range."""
    problems: list[tuple[int, str]] = []
    seen: dict[str, int] = {}
    for index, text in enumerate(texts):
        problem = cidr_problem(text)
        if problem is None and text in seen:
            problem = f"'{text}' is given twice (also [{seen[text]}])"
        seen.setdefault(text, index)
        if problem is not None:
            problems.append((index, problem))
    return problems
