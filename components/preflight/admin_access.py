"""Is the identity that runs `up` also listed in `raypd:adminRoleArns`? (pure; preflight asks AWS)

pulumi-eks creates the cluster with `bootstrapClusterCreatorAdminPermissions: true`: EKS gives the
creating identity an access entry of its own. When that identity is also in
`raypd:adminRoleArns`, the program's CreateAccessEntry for it fails with ResourceInUseException
about ten minutes into the first `up`, after the cluster exists. Preflight compares the caller
(STS GetCallerIdentity) with the list first.

An STS caller ARN names a role without its IAM path (`arn:aws:sts::ACCOUNT:assumed-role/NAME/
SESSION`), while the role ARN in the list keeps it (`arn:aws:iam::ACCOUNT:role/some/path/NAME`):
roles match by account and role name. IAM users match as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from components.config.rules import ascii_pattern

_ASSUMED_ROLE = ascii_pattern(r"arn:(aws[-a-z]*):sts::(\d{12}):assumed-role/([^/]+)/.+")
_IAM_ROLE = ascii_pattern(r"arn:(aws[-a-z]*):iam::(\d{12}):role/(?:[^/]+/)*([^/]+)")
_IAM_USER = ascii_pattern(r"arn:(aws[-a-z]*):iam::(\d{12}):user/.+")


@dataclass(frozen=True)
class Principal:
    """Who an ARN is, in the terms IAM compares: a role by account and name, a user by its ARN."""
    kind: str  # "role" | "user" | "other"
    account: str
    name: str  # the role name, or the user's whole ARN
    arn: str

    def same(self, other: "Principal") -> bool:
        if self.kind != other.kind or self.kind == "other":
            return False
        if self.kind == "role":
            return (self.account, self.name) == (other.account, other.name)
        return self.arn == other.arn


def principal_of(arn: str) -> Principal:
    """The principal an STS caller ARN or an IAM role/user ARN stands for."""
    for pattern in (_ASSUMED_ROLE, _IAM_ROLE):
        match = pattern.fullmatch(arn)
        if match:
            return Principal("role", match.group(2), match.group(3), arn)
    match = _IAM_USER.fullmatch(arn)
    if match:
        return Principal("user", match.group(2), arn, arn)
    return Principal("other", "", arn, arn)


def caller_in_admins(caller_arn: str, admin_arns: Iterable[str]) -> list[tuple[int, str]]:
    """(index, ARN) of every `raypd:adminRoleArns` entry that is the caller itself."""
    caller = principal_of(caller_arn)
    return [(index, arn) for index, arn in enumerate(admin_arns) if caller.same(principal_of(arn))]


def matching_entry(caller_arn: str, entry_arns: Iterable[str]) -> Optional[str]:
    """The cluster access entry (its principal ARN, as EKS lists it) that belongs to the caller."""
    caller = principal_of(caller_arn)
    return next((arn for arn in entry_arns if caller.same(principal_of(arn))), None)
