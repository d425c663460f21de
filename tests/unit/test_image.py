"""The Ray image pinned by digest (components.config.image): what each kind of reference becomes."""

from __future__ import annotations

import pytest

from components.config import defaults
from components.config.errors import SpecError
from components.config.image import (
    EcrLocation,
    ImageNotFound,
    LookupFailed,
    ecr_location,
    parse_image,
    resolve,
    unpinned_warning,
)
from components.config.spec import DeploymentSpec

DIGEST = "sha256:" + "ab" * 32
DLC = defaults.dlc_image(defaults.REGION)


def never(location: EcrLocation) -> str:
    raise AssertionError(f"ECR must not be asked for {location}")


def test_the_dlc_tag_is_asked_of_its_own_registry_and_pinned():
    asked: list[EcrLocation] = []

    def lookup(location: EcrLocation) -> str:
        asked.append(location)
        return DIGEST

    resolved = resolve(DLC, lookup)
    assert asked == [EcrLocation("763104351884", "us-east-2", "ray", "serve-llm-cuda-v1.0")]
    assert resolved.image == f"763104351884.dkr.ecr.us-east-2.amazonaws.com/ray@{DIGEST}"
    assert resolved.as_output() == {"reference": DLC, "digest": DIGEST}
    assert resolved.warning is None


def test_china_and_fips_registries_are_ecr_too():
    china = ecr_location(parse_image("727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/ray:x"))
    assert china == EcrLocation("727897471807", "cn-north-1", "ray", "x")
    fips = ecr_location(parse_image("123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com/a/b:1"))
    assert fips == EcrLocation("123456789012", "us-gov-west-1", "a/b", "1")


def test_an_image_given_by_digest_is_used_as_it_is_without_asking():
    resolved = resolve(f"example.com/team/ray@{DIGEST}", never)
    assert resolved.image == f"example.com/team/ray@{DIGEST}"
    assert resolved.digest == DIGEST
    # A tag beside the digest is dropped: the digest decides.
    assert resolve(f"example.com/ray:2@{DIGEST}", never).image == f"example.com/ray@{DIGEST}"


@pytest.mark.parametrize("reference", [
    "public.ecr.aws/deep-learning-containers/ray:serve-llm-cuda", "docker.io/rayproject/ray:2.58.0",
    "rayproject/ray:2.58.0", "localhost:5000/ray:1",
])
def test_registries_raypd_cannot_ask_keep_the_tag_and_warn(reference):
    resolved = resolve(reference, never)
    assert resolved.image == reference and resolved.digest is None
    warning = unpinned_warning(reference)
    assert warning is not None and "may run different bits" in warning
    assert any("may run different bits" in w for w in DeploymentSpec.from_config(
        {"raypd:image": reference}).warnings)


def test_pinned_and_ecr_images_do_not_warn():
    assert unpinned_warning(DLC) is None
    assert unpinned_warning(f"example.com/ray@{DIGEST}") is None
    assert not any("different bits" in w for w in DeploymentSpec().warnings)


def test_a_tag_ecr_does_not_have_is_a_config_error_naming_the_key():
    def missing(location: EcrLocation) -> str:
        raise ImageNotFound("ImageNotFoundException: no image with tag v9")

    with pytest.raises(SpecError) as caught:
        resolve("123456789012.dkr.ecr.us-east-2.amazonaws.com/ray:v9", missing)
    (error,) = caught.value.errors
    assert error.field == "raypd:image" and "no node could pull it" in error.message


def test_an_unanswered_lookup_keeps_the_tag_and_says_why():
    def denied(location: EcrLocation) -> str:
        raise LookupFailed("AccessDeniedException: not authorized to perform ecr:DescribeImages")

    resolved = resolve(DLC, denied)
    assert resolved.image == DLC and resolved.digest is None
    assert resolved.warning is not None and "AccessDeniedException" in resolved.warning


def test_a_malformed_answer_is_never_pinned():
    resolved = resolve(DLC, lambda location: "sha256:short")
    assert resolved.image == DLC and resolved.digest is None and resolved.warning


@pytest.mark.parametrize("value, words", [
    ("repo@sha256:abc", "malformed digest"),
    ("repo@sha256:" + "A" * 64, "malformed digest"),
    ("repo@md5:" + "a" * 32, "malformed digest"),
    ("x" * 100_000, "is not a container image reference"),
    ("repo:tag\ud800", "control character or a lone surrogate"),
    ("repo:tag\n", "control character or a lone surrogate"),
])
def test_bad_image_references_are_refused_naming_the_key(value, words):
    with pytest.raises(SpecError) as caught:
        DeploymentSpec.from_config({"raypd:image": value})
    (error,) = caught.value.errors
    assert error.field == "raypd:image" and words in error.message
    assert len(error.message) < 400
