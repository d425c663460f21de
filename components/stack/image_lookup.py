"""The image digest at deploy time: ECR asked through the AWS provider (components.config.image's
`resolve` with a real look-up). The mock runtime answers the same invoke with a placeholder digest
(components.stack.mockrun), so the offline plan runs this very code."""

from __future__ import annotations

import pulumi_aws as aws

from components.config.image import EcrLocation, ImageNotFound, LookupFailed, ResolvedImage, resolve


def _ecr_lookup(location: EcrLocation) -> str:
    """ECR DescribeImages through the AWS provider (pulumi_aws.ecr.get_image)."""
    try:
        found = aws.ecr.get_image(registry_id=location.registry_id, region=location.region,
                                  repository_name=location.repository, image_tag=location.tag)
    # The SDK raises a bare Exception("invoke of ... failed: <provider error>") for a failed
    # invoke (pulumi/runtime/invoke.py); this is the only call inside the try.
    except Exception as exc:  # noqa: BLE001
        text = str(exc)
        if "ImageNotFound" in text or "RepositoryNotFound" in text:
            raise ImageNotFound(_provider_reason(text)) from None
        raise LookupFailed(_provider_reason(text)) from None
    return str(found.image_digest or "")


def _provider_reason(text: str, limit: int = 200) -> str:
    """The provider's error without the invoke boilerplate, one short line."""
    reason = text.split("failed:", 1)[-1].strip().splitlines()[0] if text else "no reason given"
    return reason if len(reason) <= limit else reason[:limit] + "..."


def resolve_for_deploy(reference: str) -> ResolvedImage:
    """What the Pulumi program calls: `resolve` with ECR's answer (offline: components.stack.mockrun's
    placeholder digest)."""
    return resolve(reference, _ecr_lookup)
