"""The Ray image pinned by digest: every node runs the same bits (issue 17 §3, image provenance).

A tag such as the DLC's `ray:serve-llm-cuda-v1.0` is a name AWS moves to each new build; nodes
that pull it a week apart can run different images, and a rebuilt Ray cluster can start on bits
nobody tested. So at deploy time the program asks ECR for the digest the tag points to
(`aws.ecr.get_image`: DescribeImages by registry id, repository and tag) and every Ray pod runs
`<registry>/<repository>@sha256:<digest>`. A `raypd:image` given with `@sha256:` is used as it
is. A registry raypd cannot ask (public.ecr.aws, Docker Hub, other registries: they need their
own credentials or APIs) keeps the tag, with a warning that nodes may run different bits.

The pure part (`parse_image`, `ecr_location`, `pin`, `resolve`) takes the look-up as a function,
so tests run it without Pulumi; `components.stack.image_lookup.resolve_for_deploy` is the
program's thin wrapper around the ECR invoke. A consequence worth knowing: when AWS pushes a new
build under the same tag, the next `pulumi up` sees a new digest, and the Ray cluster is rebuilt
on it (components.changes says what that costs); until then the running nodes keep the bits they have.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from components.config.errors import SpecError
from components.config.rules import ascii_pattern

IMAGE_KEY = "raypd:image"
DIGEST_PATTERN = ascii_pattern(r"sha256:[a-f0-9]{64}")
# ECR private registries: <account>.dkr.ecr[-fips].<region>.amazonaws.com[.cn] (the ECR user guide,
# "Amazon ECR private registry": registry URI format).
_ECR_HOST = ascii_pattern(r"(\d{12})\.dkr\.ecr(?:-fips)?\.([a-z]{2}(?:-[a-z]+)+-\d)\.amazonaws\.com(?:\.cn)?")
# An OCI image reference: [registry[:port]/]repository[:tag][@sha256:digest] (the distribution
# spec's grammar, simplified): nothing a shell or YAML would read as syntax.
_IMAGE = ascii_pattern(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::\d{1,5})?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?"
)
_IMAGE_DIGEST = ascii_pattern(r"@sha256:[a-f0-9]{64}$")
MAX_IMAGE = 255
# The image reference grammar's last parts (reference_problem has let only whole references through).
_REFERENCE = ascii_pattern(
    r"(?:(?P<registry>[^/]+\.[^/]+|[^/]+:\d+|localhost)/)?(?P<repository>[^:@]+)"
    r"(?::(?P<tag>[^@]+))?(?:@(?P<digest>sha256:[a-f0-9]{64}))?")


@dataclass(frozen=True)
class ImageRef:
    registry: Optional[str]
    repository: str
    tag: Optional[str]
    digest: Optional[str]

    @property
    def name(self) -> str:
        """registry/repository, without tag or digest."""
        return f"{self.registry}/{self.repository}" if self.registry else self.repository


@dataclass(frozen=True)
class EcrLocation:
    registry_id: str
    region: str
    repository: str
    tag: str


@dataclass(frozen=True)
class ResolvedImage:
    """`reference`: as configured (or the region's DLC); `image`: what every Ray pod runs;
    `digest`: None when the registry could not be asked; `warning`: why, for the user."""
    reference: str
    image: str
    digest: Optional[str]
    warning: Optional[str] = None

    def as_output(self) -> dict[str, Optional[str]]:
        """The `imageProvenance` stack output (Contract 3, docs/outputs.md)."""
        return {"reference": self.reference, "digest": self.digest}


def reference_problem(value: str) -> Optional[str]:
    """Why `value` (raypd:image) is not a container image reference (None when it is, or empty)."""
    shown = value if len(value) <= MAX_IMAGE else f"{value[:80]}..."
    if value and "@" in value and len(value) <= MAX_IMAGE and not _IMAGE_DIGEST.search(value):
        # Pinned by digest (see the module docstring): say what a digest looks like.
        return (f"'{shown}' has a malformed digest: after '@' write sha256: and 64 lower-case hex "
                "digits (the image's manifest digest, as `docker buildx imagetools inspect` or "
                "ECR's console shows it)")
    if value and (len(value) > MAX_IMAGE or not _IMAGE.fullmatch(value)):
        return (f"'{shown}' is not a container image reference "
                f"([registry/]repository[:tag][@sha256:digest], at most {MAX_IMAGE} characters)")
    return None


def parse_image(reference: str) -> ImageRef:
    match = _REFERENCE.fullmatch(reference)
    if match is None:  # the spec only lets references through that reference_problem accepts
        raise ValueError(f"{reference!r} is not an image reference")
    return ImageRef(match["registry"], match["repository"], match["tag"], match["digest"])


def ecr_location(ref: ImageRef) -> Optional[EcrLocation]:
    """Where ECR can be asked for the tag's digest; None for other registries or no tag."""
    host = _ECR_HOST.fullmatch(ref.registry or "")
    if host is None:
        return None
    return EcrLocation(host[1], host[2], ref.repository, ref.tag or "latest")


def pin(ref: ImageRef, digest: str) -> str:
    """`registry/repository@sha256:...`: a digest reference names exactly one image; the tag is
    dropped so nothing reads it as the thing that decides."""
    if not DIGEST_PATTERN.fullmatch(digest):
        raise ValueError(f"{digest!r} is not a sha256 image digest")
    return f"{ref.name}@{digest}"


class LookupFailed(Exception):
    """The registry could not be asked (no permission, throttled...): the tag is used."""


class ImageNotFound(Exception):
    """The registry answered that the repository or tag does not exist."""


def resolve(reference: str, lookup: Callable[[EcrLocation], str]) -> ResolvedImage:
    """The image every Ray pod runs for `reference` (see the module docstring).

    `lookup` returns the digest of an ECR location, raises ImageNotFound (a SpecError naming
    raypd:image follows: no pod could ever pull it) or LookupFailed (a warning, the tag is kept).
    """
    ref = parse_image(reference)
    if ref.digest is not None:
        return ResolvedImage(reference, f"{ref.name}@{ref.digest}", ref.digest)
    location = ecr_location(ref)
    if location is None:
        # Known without asking anyone: the spec's warnings carry it (unpinned_warning).
        return ResolvedImage(reference, reference, None)
    try:
        digest = lookup(location)
    except ImageNotFound as exc:
        raise SpecError.single(IMAGE_KEY, (
            f"ECR has no image {location.repository}:{location.tag} in registry "
            f"{location.registry_id} ({location.region}): {exc}; no node could pull it")) from None
    except LookupFailed as exc:
        return ResolvedImage(reference, reference, None, (
            f"{IMAGE_KEY}: could not ask ECR for the digest of {reference} ({exc}); the pods pull "
            "it by tag, so nodes may run different bits"))
    if not DIGEST_PATTERN.fullmatch(digest or ""):
        return ResolvedImage(reference, reference, None, (
            f"{IMAGE_KEY}: ECR answered no usable digest for {reference}; the pods pull it by tag"))
    return ResolvedImage(reference, pin(ref, digest), digest)


def unpinned_warning(reference: str) -> Optional[str]:
    """The warning for an image raypd cannot pin (a registry other than private ECR, no digest
    given): known from the reference alone, so the offline plan and the web form show it too."""
    ref = parse_image(reference)
    if ref.digest is not None or ecr_location(ref) is not None:
        return None
    return (f"{IMAGE_KEY} {reference} is in a registry raypd cannot ask for digests (only private "
            "ECR): the pods pull it by tag, so nodes that pull at different times may run "
            f"different bits; give {IMAGE_KEY} as <repository>@sha256:<digest> to pin it")
