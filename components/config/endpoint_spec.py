"""`raypd:endpoint`: who may reach the OpenAI endpoint, over what, and with which credential.

```yaml
raypd:endpoint:
  scope: vpc            # cluster | vpc | internet
  auth: apiKey          # apiKey | none (none only for cluster | vpc, with a warning)
  certificateArn: arn:aws:acm:us-east-2:123456789012:certificate/...   # TLS at the load balancer
  allowedCidrs: ["10.0.0.0/16"]                                       # who may reach it
  host: llm.example.com # optional: the DNS name users point at the load balancer
```

- `cluster`: no load balancer; only pods in the cluster reach the gateway's ClusterIP Service.
- `vpc` (the default): an internal Network Load Balancer in the private subnets; by default only
  the VPC's own range may connect (peered networks need `allowedCidrs`). HTTP, or HTTPS with a
  `certificateArn`.
- `internet`: an internet-facing NLB in the public subnets, always TLS (`certificateArn` is
  required) and always API keys (`auth: none` is refused). `allowedCidrs` defaults to every
  address, with a warning.

The shape of each field is checked here; what depends on the rest of the spec (the certificate's
region is the stack's, scope-specific keys) is checked by `endpoint_problems`, which
`DeploymentSpec` calls with every other cross-field check so all problems are reported at once.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import field_validator

from components.config import defaults
from components.config.errors import FieldError
from components.config.rules import SpecModel, ascii_pattern, cidr_list_problems

ENDPOINT_KEY = "raypd:endpoint"
# ACM certificate ARNs: arn:<partition>:acm:<region>:<account>:certificate/<UUID> (ACM API
# reference, "Amazon Resource Names (ARNs) for ACM"); the region must be the NLB's.
_CERTIFICATE_ARN = ascii_pattern(
    r"arn:(aws(?:-[a-z]+)*):acm:([a-z]{2}(?:-[a-z]+)+-\d):(\d{12}):certificate/"
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
)
MAX_ARN = 256
# A DNS host name (RFC 1123): dot-separated labels of letters, digits and inner hyphens, lower case.
_HOST = ascii_pattern(r"(?=.{4,253}$)([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


def certificate_region(arn: str) -> Optional[str]:
    """The region an ACM certificate ARN lives in (None when it is not one)."""
    match = _CERTIFICATE_ARN.fullmatch(arn)
    return match.group(2) if match else None


class EndpointSpec(SpecModel):
    scope: Literal["cluster", "vpc", "internet"] = defaults.ENDPOINT_SCOPE
    auth: Literal["apiKey", "none"] = defaults.ENDPOINT_AUTH
    certificate_arn: Optional[str] = None
    # None: the scope's default (effective_allowed_cidrs); each entry is checked by its index in
    # endpoint_problems, with the same rules as raypd:apiAccessCidrs.
    allowed_cidrs: Optional[tuple[str, ...]] = None
    host: Optional[str] = None

    @field_validator("certificate_arn")
    @classmethod
    def _certificate_arn(cls, value: Optional[str]) -> Optional[str]:
        if value is None:
            return None
        shown = value if len(value) <= MAX_ARN else f"{value[:60]}... ({len(value)} characters)"
        if len(value) > MAX_ARN or not _CERTIFICATE_ARN.fullmatch(value):
            raise ValueError(
                f"'{shown}' is not an ACM certificate ARN "
                "(arn:aws:acm:<region>:<12-digit account>:certificate/<certificate id>)")
        return value

    @field_validator("allowed_cidrs", mode="before")
    @classmethod
    def _cidr_list(cls, value: Any) -> Any:
        """The list's type, size and that every entry is text (each CIDR: endpoint_problems)."""
        if value is None:
            return None
        if not isinstance(value, (list, tuple)):
            kind = "text" if isinstance(value, str) else type(value).__name__
            raise ValueError(f"must be a list of IPv4 CIDRs such as [\"10.0.0.0/16\"], not {kind}")
        if not value:
            raise ValueError("is empty; list at least one IPv4 CIDR, or leave the key out for the "
                             "scope's default")
        if len(value) > defaults.MAX_ENDPOINT_CIDRS:
            raise ValueError(f"has {len(value)} entries; at most {defaults.MAX_ENDPOINT_CIDRS} "
                             "(each is a load balancer security-group rule): merge neighbouring ranges")
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise ValueError(f"[{index}] is {type(item).__name__}, not text; write each CIDR "
                                 "as a string such as \"10.0.0.0/16\"")
        return tuple(value)

    @field_validator("host")
    @classmethod
    def _host(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and not _HOST.fullmatch(value):
            shown = value if len(value) <= 64 else f"{value[:60]}..."
            raise ValueError(f"'{shown}' is not a DNS host name such as llm.example.com "
                             "(lower-case letters, digits, '-' and '.', at most 253 characters)")
        return value

    # ---- derived facts ----

    @property
    def load_balanced(self) -> bool:
        """Scopes vpc and internet get a Network Load Balancer (and its controller)."""
        return self.scope != "cluster"

    @property
    def tls(self) -> bool:
        """TLS is terminated at the load balancer with the ACM certificate."""
        return self.load_balanced and self.certificate_arn is not None

    @property
    def effective_allowed_cidrs(self) -> tuple[str, ...]:
        """Who may open a connection to the load balancer: the configured ranges, else the VPC's
        own range (vpc) or every address (internet); nothing for scope cluster."""
        if not self.load_balanced:
            return ()
        if self.allowed_cidrs is not None:
            return self.allowed_cidrs
        return (defaults.VPC_CIDR,) if self.scope == "vpc" else (defaults.OPEN_CIDR,)

    def public(self) -> dict[str, Any]:
        """Contract 1 form: camelCase keys, unset optional keys left out."""
        body = self.model_dump(by_alias=True, exclude_none=True)
        if self.allowed_cidrs is not None:
            body["allowedCidrs"] = list(self.allowed_cidrs)
        return body


def _key(field: str) -> str:
    return f"{ENDPOINT_KEY}.{field}"


def endpoint_problems(endpoint: EndpointSpec, region: str) -> list[FieldError]:
    """What is wrong with `endpoint` in a stack of `region` (empty when nothing is)."""
    problems: list[FieldError] = []
    if endpoint.scope == "internet":
        if endpoint.certificate_arn is None:
            problems.append(FieldError(_key("certificateArn"), (
                "scope internet needs an ACM certificate: the load balancer terminates TLS with it, "
                "so keys never cross the internet in clear text (request or import one in ACM in "
                f"{region}, then set {_key('certificateArn')})")))
        if endpoint.auth != "apiKey":
            problems.append(FieldError(_key("auth"), (
                "scope internet needs auth apiKey: an endpoint on the internet without keys would "
                "serve (and bill GPU time to) anyone who finds it")))
    if not endpoint.load_balanced:
        for field, value in (("certificateArn", endpoint.certificate_arn),
                             ("allowedCidrs", endpoint.allowed_cidrs), ("host", endpoint.host)):
            if value is not None:
                problems.append(FieldError(_key(field), (
                    "applies to a load balancer, and scope cluster has none (only pods in the "
                    "cluster reach the endpoint); remove it or choose scope vpc or internet")))
    arn_region = certificate_region(endpoint.certificate_arn or "")
    if arn_region is not None and arn_region != region:
        problems.append(FieldError(_key("certificateArn"), (
            f"the certificate is in {arn_region}, but the stack's load balancer is in {region}; a "
            f"load balancer only uses ACM certificates of its own region: request or import one "
            f"in {region}")))
    problems.extend(FieldError(f"{_key('allowedCidrs')}[{index}]", problem)
                    for index, problem in cidr_list_problems(endpoint.allowed_cidrs or ()))
    return problems


def endpoint_warnings(endpoint: EndpointSpec) -> list[str]:
    """Allowed but risky choices (shown in the plan, the web app and `pulumi up`)."""
    notes: list[str] = []
    if endpoint.auth == "none":
        notes.append(
            f"{_key('auth')} is none: anything that can reach the endpoint "
            f"({'every pod in the cluster' if endpoint.scope == 'cluster' else 'the allowed ranges'}"
            ") can use the model without a key; keep apiKey unless a gateway of your own checks callers")
    if endpoint.load_balanced and defaults.OPEN_CIDR in endpoint.effective_allowed_cidrs:
        notes.append(
            f"{_key('allowedCidrs')} allows {defaults.OPEN_CIDR}: the endpoint's load balancer "
            "accepts connections from every address on the internet (requests still need an API "
            f"key); narrow it to your clients' ranges, e.g. {_key('allowedCidrs')}: "
            "[\"203.0.113.0/24\"]")
    return notes
