"""The EKS bearer token, minted in Python as `aws eks get-token` mints it, and the kubeconfig exec
entry that asks for one, read without ever running it."""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from serve.kube.errors import KubeConfigError
from serve.kube.limits import DEFAULT_TIMEOUT

# The EKS token recipe (aws-cli awscli/customizations/eks/get_token.py): a presigned STS
# GetCallerIdentity GET URL, signed with header x-k8s-aws-id=<cluster>, valid 60 s, base64url
# without padding behind this prefix.
EKS_TOKEN_PREFIX = "k8s-aws-v1."
EKS_CLUSTER_HEADER = "x-k8s-aws-id"
EKS_URL_EXPIRES_SECONDS = 60
# The CLI tells clients to refresh after 14 minutes; re-mint well before that.
EKS_TOKEN_REUSE_SECONDS = 600


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
