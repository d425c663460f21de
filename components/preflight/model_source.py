"""The `model-source` preflight check: can the pods download `raypd:model.source` at all?

A typo in the repo id (`Qwen/Qwen3.5-9B-Instrcut`), a gated model whose licence was never
accepted, a private repo without `raypd:hfToken`, an empty S3 prefix: each lets `pulumi up` run
for 25 minutes and then leaves the Ray workers crash-looping on the first download. Asking first
takes a second.

- Hugging Face: `huggingface_hub.HfApi.model_info` (GET /api/models/{repo}) with exactly the token
  the pods get (`raypd:hfToken`, never a token saved on this machine), on `HF_ENDPOINT` when set.
  It says whether the repo exists for that token (the Hub answers a private repo it will not show
  like a missing one), whether it is gated, and which files it holds. The answer is evidence only
  when it is about the asked repo: its `id` must be the asked one (the Hub matches ids without
  regard to case). When it names another repo (the Hub answers a renamed repo's old name with the
  new one), is gated, or lists no files (a mirror), the metadata of `config.json` (HEAD
  /{repo}/resolve/main/config.json, the first file vLLM fetches, as `hf_hub_download` asks it)
  says whether the file is there for that token, and `X-Repo-Commit` and `ETag` in the answer that
  the server is a Hub (`hf_hub_download` refuses an answer without them).
- S3: ListObjectsV2 and HeadObject (components.preflight.s3_source).

Every network call has a short timeout. What the Hub or S3 says about the repo or the token (not
found, 401/403, gated without access) fails the check: the pods would get the same answer. No
answer from here (DNS, connection refused, TLS, a timeout, a 5xx, 407, 408 or 429 from the Hub or a
proxy) only warns, saying where it was tried from: the pods download from AWS, whose network may
reach the Hub where this machine does not. Never a traceback. The token never appears in a detail,
remedy or log line.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Optional

from botocore.client import BaseClient

from components.config.checks import Check
from components.config.spec import HF_TOKEN_KEY, SECRET_PLACEHOLDER, DeploymentSpec
from components.preflight.hub_endpoint import (
    DEFAULT_HUB,
    ENDPOINT_VARIABLE,
    HubEndpointError,
    hub_endpoint,
    hub_offline,
    shown_endpoint,
    valid_endpoint,
)
from components.preflight.s3_source import check_s3_source
from components.preflight.source_verdicts import (
    CHECK_ID,
    CONFIG_FILE,
    MISTRAL_CONFIG_FILE,
    SOURCE_KEY,
    TITLE,
    failed,
    one_line,
    passed,
    this_machine,
    warned,
)
from components.render.model_access import s3_location

log = logging.getLogger(__name__)

HUB_TIMEOUT_SECONDS = 5.0


# ---- Hugging Face ----

def _token_of(spec: DeploymentSpec) -> tuple[Optional[str], bool]:
    """(the token to send, whether a token is configured that preflight cannot read here).

    The web app keeps a stored deployment's token in the stack's encrypted config; its spec holds
    the placeholder, so such a run asks the Hub anonymously and says so."""
    if spec.hf_token is None:
        return None, False
    token = spec.hf_token.get_secret_value()
    if not token or token == SECRET_PLACEHOLDER:
        return None, True
    return token, False


def check_hub_source(spec: DeploymentSpec, *, endpoint: Optional[str] = None,
                     timeout: float = HUB_TIMEOUT_SECONDS) -> Check:
    """`model-source` for a Hugging Face repo id (see the module docstring). `endpoint`: ask this
    Hub instead of `hub_endpoint()` (HF_ENDPOINT is checked either way: huggingface_hub reads it)."""
    try:
        from_environment = hub_endpoint()
        hub = valid_endpoint(endpoint, "the Hub endpoint") if endpoint else from_environment
    except HubEndpointError as exc:
        return failed(f"{exc}, so {spec.model.source} could not be looked up",
                      f"set {ENDPOINT_VARIABLE} to the https:// URL of a Hugging Face Hub mirror, or "
                      f"unset it to ask {DEFAULT_HUB} (the pods download from there either way)")
    result = _ask_hub(spec, hub, timeout)
    if hub != DEFAULT_HUB and result.status != "skip":
        # The pods are never given HF_ENDPOINT (components/render/rayservice.py): say whose answer this is.
        result = result.model_copy(update={"detail": f"{result.detail}; preflight asked {shown_endpoint(hub)} "
                                           f"({ENDPOINT_VARIABLE}), the pods download from {DEFAULT_HUB}"})
    return result


def _ask_hub(spec: DeploymentSpec, hub: str, timeout: float) -> Check:
    repo = spec.model.source
    shown_hub = shown_endpoint(hub)
    if hub_offline():
        return Check.skipped(CHECK_ID, TITLE, f"HF_HUB_OFFLINE is set: {shown_hub} was not asked whether "
                             f"{repo} exists; the pods download it at start")
    token, unreadable_token = _token_of(spec)
    if token is not None and not token.isascii():
        return failed(f"{HF_TOKEN_KEY} holds characters no HTTP header can carry: it is not a "
                      "Hugging Face token", f"set {HF_TOKEN_KEY} to a token from {shown_hub}/settings/tokens")
    try:
        library = _hub_library()
    except Exception as exc:  # noqa: BLE001 - it parses HF_* variables at import: a bad one is a failed check
        return failed(f"huggingface_hub could not start here ({type(exc).__name__}), so {repo} could "
                      "not be looked up", "check the HF_* environment variables (HF_ENDPOINT, "
                      "HF_HUB_ETAG_TIMEOUT, ...), or unset them")
    asker = _Asker(library, hub, repo, token, unreadable_token, timeout)
    info = asker.ask(None)
    return info if isinstance(info, Check) else _judge_info(asker, info)


def _hub_library() -> SimpleNamespace:
    """The parts of huggingface_hub the check uses, imported here and not at the top: the library
    reads the HF_* variables when first imported (and fails there on a bad one), so it is imported
    only after hub_endpoint() checked HF_ENDPOINT; and it would otherwise fetch an "agent harness"
    registry from the Hub on its first request (telemetry, its utils/_detect_agent.py) and write it
    under HF_HOME, where preflight only reads metadata (read at its import; a value the user set is
    kept)."""
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from httpx2 import HTTPError as TransportError
    from huggingface_hub import HfApi, errors, get_hf_file_metadata, hf_hub_url

    return SimpleNamespace(HfApi=HfApi, get_hf_file_metadata=get_hf_file_metadata, hf_hub_url=hf_hub_url,
                           errors=errors, TransportError=TransportError)


# What _Asker.ask answers when the file it asked for is not in the repo (the next one is asked).
_NOT_THERE = object()


@dataclass(frozen=True)
class _Asker:
    """Asks one Hub about one repo with the pods' token, and words what went wrong."""

    library: SimpleNamespace  # _hub_library()
    hub: str
    repo: str
    token: Optional[str]
    unreadable_token: bool  # a token is configured that preflight cannot read here
    timeout: float

    @property
    def shown_hub(self) -> str:
        return shown_endpoint(self.hub)

    @property
    def where(self) -> str:
        return f"{self.repo} on {self.shown_hub}"

    @property
    def with_token(self) -> str:
        if self.unreadable_token:
            return (f"without the token: {HF_TOKEN_KEY} is set, but kept in the stack's encrypted "
                    "config where preflight cannot read it")
        return f"with {HF_TOKEN_KEY}" if self.token is not None else f"without a token ({HF_TOKEN_KEY} unset)"

    def ask(self, probe: Optional[str]) -> Any:
        """The repo's info (`probe` None) or the metadata of its file `probe`, as hf_hub_download
        asks it; a failed Check when the question failed, _NOT_THERE when the file is not there."""
        hf = self.library
        token = self.token if self.token is not None else False
        api = hf.HfApi(endpoint=self.hub, token=token, library_name="raypd")
        try:
            if probe is None:
                return api.model_info(self.repo, timeout=self.timeout)
            return hf.get_hf_file_metadata(hf.hf_hub_url(self.repo, probe, endpoint=self.hub),
                                           token=token, timeout=self.timeout, endpoint=self.hub)
        except Exception as exc:  # sorted by _refusal; what it does not know is raised again
            refusal = self._refusal(exc, probe)
            if refusal is None:
                raise
            return refusal

    def _refusal(self, exc: Exception, probe: Optional[str]) -> Any:
        """What a failed question says (most specific error first): a Check, _NOT_THERE, or None."""
        errors, repo, doing = self.library.errors, self.repo, f"reading {self.repo}/{probe}"
        if probe is None and isinstance(exc, errors.HFValidationError):
            return failed(f"{repo} is not a Hub repo id ({one_line(str(exc), self.token)})",
                          f"set {SOURCE_KEY} to org/name as the model's Hub page shows it")
        if probe is not None and isinstance(exc, errors.RemoteEntryNotFoundError):
            return _NOT_THERE
        if isinstance(exc, errors.GatedRepoError):  # from model_info not expected (gated metadata is public)
            said = one_line(exc.server_message or "", self.token) if probe is not None else ""
            return _gated_refused(repo, self.shown_hub, self.token, self.unreadable_token, said)
        if isinstance(exc, errors.RepositoryNotFoundError):
            return self._not_found() if probe is None else failed(
                f"{self.where}: the Hub answered its info, but its files were not found {self.with_token}",
                f"check {SOURCE_KEY} and {HF_TOKEN_KEY}")
        if probe is None and isinstance(exc, errors.DisabledRepoError):
            return failed(f"{self.where} is disabled on the Hub: nothing in it can be downloaded",
                          f"pick another repo in {SOURCE_KEY}")
        if isinstance(exc, errors.HfHubHTTPError):
            return self._http_error(exc, f"reading {repo}'s info" if probe is None else doing)
        if isinstance(exc, errors.OfflineModeIsEnabled):
            return Check.skipped(CHECK_ID, TITLE, f"HF_HUB_OFFLINE is set: {self.shown_hub} was not asked "
                                 f"about {repo}")
        if isinstance(exc, (self.library.TransportError, OSError)):  # DNS, connect, TLS, timeout
            reason = one_line(f"{type(exc).__name__}: {exc}", self.token) if str(exc) else type(exc).__name__
            return _unreached(self.shown_hub, repo, f"did not answer ({reason})")
        if probe is None and isinstance(exc, (ValueError, KeyError, TypeError)):
            # A 200 that is not the Hub's JSON (a proxy, a portal).
            return not_the_hub(self.shown_hub, f"its answer to GET /api/models/{repo} is not a model's "
                               f"info ({type(exc).__name__})")
        return None

    def _not_found(self) -> Check:
        if self.unreadable_token:
            return warned(f"{self.where} was not found {self.with_token}: it does not exist, or it is "
                          f"private", f"check the spelling of {SOURCE_KEY}; run the CLI preflight with "
                          "the stack file to check with the token")
        private_note = ("or it is private and this token cannot read it" if self.token is not None
                        else f"or it is private ({HF_TOKEN_KEY} is not set, and the Hub answers a "
                             "private repo it will not show like a missing one)")
        return failed(f"{self.where} was not found {self.with_token}: it does not exist (a typo?), "
                      f"{private_note}", f"check the spelling of {SOURCE_KEY} against the model's page "
                      f"on {self.shown_hub}; for a private repo set {HF_TOKEN_KEY} to a token that can read it")

    def _http_error(self, exc: Any, doing: str) -> Check:
        status = exc.response.status_code if exc.response is not None else 0
        said = one_line(exc.server_message or "", self.token)
        if status in _NOT_ABOUT_THE_REPO or status >= 500:
            return _unreached(self.shown_hub, self.repo,
                              f"answered HTTP {status}{f' ({said})' if said else ''} while {doing}")
        if status == 401 and self.token is not None:
            return failed(f"the Hub rejected {HF_TOKEN_KEY} while {doing} (HTTP 401"
                          f"{': ' + said if said else ''})",
                          f"create a read token at {self.shown_hub}/settings/tokens and set it: "
                          f"pulumi config set --secret {HF_TOKEN_KEY} <token>")
        return failed(f"the Hub answered HTTP {status} while {doing}{': ' + said if said else ''}",
                      f"rerun preflight; if it persists, check {self.shown_hub}'s status")


def _judge_info(asker: _Asker, info: Any) -> Check:
    """The repo's info is evidence when it is about the asked repo, lists its files and is not
    gated; else the first file vLLM fetches is asked for too."""
    repo, where, token = asker.repo, asker.where, asker.token
    answered = one_line(info.id, token, limit=120) if isinstance(info.id, str) else ""
    if not answered:
        return not_the_hub(asker.shown_hub, f"its answer to GET /api/models/{repo} names no repo")
    same_repo = answered.lower() == repo.lower()  # the Hub matches repo ids without regard to case
    named = where if answered == repo or not same_repo else f"{where} (the Hub spells it {answered})"
    kind = "private" if info.private else "public"
    listed = same_repo and info.siblings is not None
    files = [sibling.rfilename for sibling in (info.siblings or [])] if listed else []
    if listed and CONFIG_FILE not in files and MISTRAL_CONFIG_FILE not in files:
        return _no_config(where, f"{len(files)} files")
    held = MISTRAL_CONFIG_FILE if MISTRAL_CONFIG_FILE in files and CONFIG_FILE not in files else CONFIG_FILE
    if listed and not info.gated:
        revision = f"revision {info.sha[:12]}" if info.sha else "its main revision"
        return passed(f"{named}: {kind}, readable {asker.with_token}, holds {held} ({revision})")

    # The info alone is not enough (gated: the info is public, the files are not; no file list;
    # another repo's info): ask for the first file vLLM fetches, as hf_hub_download does.
    for probe in ([held] if listed else [CONFIG_FILE, MISTRAL_CONFIG_FILE]):
        metadata = asker.ask(probe)
        if metadata is not _NOT_THERE:
            break
    else:
        return _no_config(where, f"HEAD of {CONFIG_FILE} and {MISTRAL_CONFIG_FILE}: not found")
    if isinstance(metadata, Check):
        return metadata
    missing = [header for header, value in (("X-Repo-Commit", metadata.commit_hash), ("ETag", metadata.etag))
               if not value]
    if missing:  # hf_hub_download raises FileMetadataError on such an answer
        return not_the_hub(asker.shown_hub, f"it answered HEAD {repo}/{probe} without the Hub's "
                           f"{' and '.join(missing)} header{'s' if len(missing) > 1 else ''}, which "
                           "huggingface_hub needs to download a file")
    commit = one_line(metadata.commit_hash or "", token)[:12]
    served = f"the Hub serves its {probe} (revision {commit})"
    if not same_repo:
        return warned(f"{where} answered with the info of {answered}, as the Hub does for the old "
                      f"name of a renamed repo, and {served} under the asked name: the pods' download "
                      "follows the rename today", f"set {SOURCE_KEY} to {answered}, the repo's name now, so the "
                      "download does not depend on the Hub's redirect")
    if info.gated:
        return passed(f"{named}: gated ({info.gated}), {kind}; {HF_TOKEN_KEY} has been granted access "
                      f"({served})")
    return passed(f"{named}: {kind}, readable {asker.with_token}; its info lists no files, and {served}")


# Answers about the way from here to the Hub, not about the repo or the token: a proxy asking for
# its own credentials (407), a timeout (408), a rate limit (429), and every 5xx (the Hub's, or a
# proxy's 502/503 for a Hub it cannot reach).
_NOT_ABOUT_THE_REPO = frozenset({407, 408, 429})


def _unreached(shown_hub: str, repo: str, what: str) -> Check:
    """The Hub gave no answer about the repo from where preflight runs: no evidence either way.

    The pods download from AWS, through the stack's own network (NAT gateway), which may reach the
    Hub where this machine does not (a laptop offline, a corporate proxy, a web app in a private
    subnet), or may not: a warning, never a failure (a new user's first preview must not read
    FAILED because this machine has no Hub)."""
    return warned(f"the Hugging Face Hub at {shown_hub} {what} from this machine ({this_machine()}, "
                  f"where preflight runs), so nothing was learnt about {repo}: the pods download it "
                  "through the stack's own network in AWS, which may reach the Hub where this machine "
                  "cannot",
                  f"nothing to fix if the pods can reach {DEFAULT_HUB} (the stack's NAT gateway gives them "
                  f"outbound HTTPS); to check {repo} from here, let this machine reach {shown_hub} (or set "
                  f"{ENDPOINT_VARIABLE} to a mirror it reaches) and rerun")


def not_the_hub(shown_hub: str, why: str) -> Check:
    """The server at the endpoint does not answer as a Hugging Face Hub does."""
    return failed(f"{shown_hub} does not answer as a Hugging Face Hub: {why}; nothing says the model "
                  "can be downloaded", f"check {ENDPOINT_VARIABLE} (a mirror's URL) and any proxy "
                  f"between here and {shown_hub}")


def _no_config(where: str, seen: str) -> Check:
    return failed(f"{where} exists but holds no {CONFIG_FILE} at its top level ({seen}): "
                  "vLLM cannot load it as a model",
                  f"point {SOURCE_KEY} at the repo that holds the model's {CONFIG_FILE} (a GGUF-only "
                  "or adapter-only repo is not served this way)")


def _gated_refused(repo: str, hub: str, token: Optional[str], unreadable_token: bool, said: str) -> Check:
    hub_said = f" (the Hub: {said})" if said else ""
    page = f"{hub}/{repo}"
    if unreadable_token:
        return warned(f"{repo} is gated: its files need a token granted access, and {HF_TOKEN_KEY} is "
                      f"kept where preflight cannot read it{hub_said}",
                      f"make sure the token's account was granted access on {page}")
    if token is None:
        return failed(f"{repo} is a gated model and {HF_TOKEN_KEY} is not set: the pods cannot "
                      f"download it{hub_said}",
                      f"accept the model's terms on {page} with your Hugging Face account, then set "
                      f"a read token of that account: pulumi config set --secret {HF_TOKEN_KEY} <token>")
    return failed(f"{repo} is a gated model and the account of {HF_TOKEN_KEY} has not been granted "
                  f"access (or its request is still awaiting review){hub_said}",
                  f"request access on {page} with the token's account and wait for approval, or set "
                  f"{HF_TOKEN_KEY} to a token of an account that has it")


def check_model_source(spec: DeploymentSpec, s3: Optional[Callable[[], BaseClient]] = None,
                       why_no_s3: str = "") -> Check:
    """The `model-source` check for either kind of source."""
    if s3_location(spec.model.source) is not None:
        return check_s3_source(spec, s3, why_no_s3)
    return check_hub_source(spec)
