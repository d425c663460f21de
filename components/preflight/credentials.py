"""The `aws-credentials` check (components.preflight): do the credentials work, does the region
answer, and is the deploying identity not also listed in raypd:adminRoleArns (issue 14), which
breaks the first `up`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from botocore.exceptions import ClientError, NoCredentialsError, PartialCredentialsError

from components.config.checks import Check
from components.config.spec import ADMIN_ROLE_ARNS_KEY, REGION_KEY
from components.preflight.admin_access import caller_in_admins, matching_entry
from components.preflight.aws import Unreachable, call, error_code, short
from components.preflight.context import NO_CREDENTIALS, TITLES, Context, unreachable_remedy

_CREDENTIAL_ERRORS = frozenset({
    "InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException", "SignatureDoesNotMatch",
    "UnrecognizedClientException", "InvalidAccessKeyId", "AccessDenied", "AccessDeniedException",
    "AuthFailure", "RequestExpired", "InvalidToken",
})


def check_credentials(ctx: Context) -> Optional[str]:
    """The aws-credentials check; returns why the other AWS checks must be skipped, if they must."""
    spec, cid, title = ctx.spec, "aws-credentials", TITLES["aws-credentials"]
    try:
        identity = call(ctx.aws.caller_identity)
    except (NoCredentialsError, PartialCredentialsError) as exc:
        ctx.add(Check.skipped(cid, title, f"{NO_CREDENTIALS}; {type(exc).__name__}"))
        return "no AWS credentials"
    except Unreachable as exc:
        ctx.add(Check.failed(cid, title, f"AWS STS at {ctx.aws.endpoint('sts')} did not answer ({exc})",
                             unreachable_remedy()))
        return "AWS did not answer"
    except ClientError as exc:
        code = error_code(exc)
        if code in _CREDENTIAL_ERRORS:
            ctx.add(Check.failed(cid, title, f"AWS rejected the credentials ({code})",
                                 "refresh or replace them: `aws sso login`, `aws configure`, or new "
                                 "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN"))
        elif code.isdigit():  # an HTTP status and no AWS error: a proxy or gateway, not AWS
            ctx.add(Check.failed(cid, title, f"AWS STS at {ctx.aws.endpoint('sts')} did not answer: "
                                 f"{short(exc)}", unreachable_remedy()))
            return "AWS did not answer"
        else:
            ctx.add(Check.warned(cid, title, f"STS GetCallerIdentity failed ({short(exc)})"))
        return "the credentials did not work"
    who = f"account {identity.get('Account')} as {identity.get('Arn')}"
    try:
        status = call(ctx.aws.region_status)
    except Unreachable as exc:
        ctx.add(Check.failed(cid, title, f"{who}; EC2 at {ctx.aws.endpoint('ec2')} did not answer ({exc})",
                             unreachable_remedy()))
        return f"EC2 in {spec.region} did not answer"
    except ClientError as exc:
        code = error_code(exc)
        if code in _CREDENTIAL_ERRORS or code == "UnauthorizedOperation":
            ctx.add(Check.failed(cid, title, f"{who}; EC2 DescribeRegions refused ({code})",
                                 "grant read-only EC2 access (ec2:Describe*) to this identity"))
        else:
            ctx.add(Check.failed(cid, title, f"{who}; EC2 does not accept region {spec.region} ({code})",
                                 f"set {REGION_KEY} to a region this account can use"))
        return f"region {spec.region} is not usable"
    if status is None:
        ctx.add(Check.failed(cid, title, f"{who}; EC2 does not list region {spec.region}",
                             f"set {REGION_KEY} to an AWS region (e.g. us-east-2)"))
        return f"region {spec.region} is not usable"
    if status == "not-opted-in":
        ctx.add(Check.failed(cid, title, f"{who}; region {spec.region} is not enabled for this account",
                             f"enable {spec.region} (AWS console: Account > AWS Regions) or pick "
                             f"another {REGION_KEY}"))
        return f"region {spec.region} is not enabled"
    evidence = f"{who}; region {spec.region} answers ({status})"
    admin = _caller_as_admin(ctx, str(identity.get("Arn", "")))
    if admin is None:
        ctx.add(Check.passed(cid, title, evidence))
    elif admin.status == "fail":
        ctx.add(Check.failed(cid, title, f"{evidence}; {admin.detail}", admin.remedy))
    else:
        ctx.add(Check.warned(cid, title, f"{evidence}; {admin.detail}", admin.remedy))
    return None  # the credentials work: the other checks run either way



@dataclass(frozen=True)
class _Finding:
    status: str  # "fail" | "warn"
    detail: str
    remedy: str


def _caller_as_admin(ctx: Context, caller_arn: str) -> Optional[_Finding]:
    """Issue 14: the deploying identity in raypd:adminRoleArns (components.preflight.admin_access).

    No cluster yet: the first `up` will create it with the caller as bootstrap admin, then fail
    creating the caller's entry again: a failure. A cluster already there: EKS's access entries say
    whether the caller has one; on an update whose deployed spec already listed the ARN the stack
    owns that entry (fine); otherwise an existing entry collides (fail on an update, warn when
    preflight cannot know what the stack owns)."""
    listed = caller_in_admins(caller_arn, ctx.spec.admin_role_arns)
    if not listed:
        return None
    cluster = ctx.spec.effective_cluster_name
    keys = ", ".join(f"{ADMIN_ROLE_ARNS_KEY}[{index}] ({arn})" for index, arn in listed)
    remove = (f"remove it from {ADMIN_ROLE_ARNS_KEY}: the identity that runs `up` is cluster admin "
              "anyway; list only other identities (teammates', CI's)")
    try:
        exists = call(lambda: ctx.aws.cluster_exists(cluster))
    except (ClientError, Unreachable) as exc:
        why = short(exc) if isinstance(exc, ClientError) else str(exc)
        return _Finding("warn", f"{keys} is the identity running preflight, and EKS could not say "
                        f"whether cluster {cluster} exists ({why}); if it does not, the first `up` "
                        "fails with ResourceInUseException", remove)
    if not exists:
        return _Finding("fail", f"{keys} is the identity running preflight: the first `up` creates "
                        f"cluster {cluster} with it as the bootstrap cluster admin, so EKS already has "
                        "its access entry and creating it again fails with ResourceInUseException "
                        "about 10 minutes in", remove)
    managed = ctx.deployed is not None and all(arn in ctx.deployed.admin_role_arns for _, arn in listed)
    if managed:
        return None  # deployed with this list: the stack owns that entry already
    try:
        entry = matching_entry(caller_arn, call(lambda: ctx.aws.access_entry_principals(cluster)))
    except (ClientError, Unreachable) as exc:
        why = short(exc) if isinstance(exc, ClientError) else str(exc)
        return _Finding("warn", f"{keys} is the identity running preflight and cluster {cluster} "
                        f"exists, but its access entries could not be listed ({why}); if the caller "
                        "already has an entry the stack did not create, `up` fails with "
                        "ResourceInUseException", remove + " (or grant eks:ListAccessEntries to check)")
    if entry is None:
        return None  # no entry yet: the program's CreateAccessEntry will succeed
    if ctx.deployed is not None:
        return _Finding("fail", f"{keys} is the identity running preflight, and cluster {cluster} "
                        f"already has an access entry for it ({entry}) that this stack did not create "
                        "(the deployed settings do not list it): `up` fails with ResourceInUseException",
                        remove)
    return _Finding("warn", f"{keys} is the identity running preflight, and cluster {cluster} already "
                    f"has an access entry for it ({entry}): if this stack did not create it from "
                    f"{ADMIN_ROLE_ARNS_KEY} (for example, it is the creator's bootstrap entry), `up` "
                    "fails with ResourceInUseException", remove)

