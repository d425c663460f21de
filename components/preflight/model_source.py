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
- S3: ListObjectsV2 of the prefix (it exists, and holds `config.json` at its top) and HeadObject
  of that `config.json` (it can be read), with the preflight's AWS credentials. Both read-only.

Every network call has a short timeout; a Hub or S3 that does not answer is a failed check with
the reason, never a traceback. The token never appears in a detail, remedy or log line.
"""

from __future__ import annotations

import logging
import os
from typing import Callable, Optional
from urllib.parse import urlsplit

from botocore.client import BaseClient
from botocore.exceptions import BotoCoreError, ClientError

from components.config.checks import Check
from components.config.spec import HF_TOKEN_KEY, SECRET_PLACEHOLDER, DeploymentSpec
from components.render.model_access import S3Location, s3_location

log = logging.getLogger(__name__)

CHECK_ID = "model-source"
TITLE = "the model source exists and the pods can read it"
SOURCE_KEY = "raypd:model.source"
DEFAULT_HUB = "https://huggingface.co"
HUB_TIMEOUT_SECONDS = 5.0
# vLLM reads a Hugging Face-format config.json first; a Mistral-format checkpoint has params.json.
CONFIG_FILE = "config.json"
MISTRAL_CONFIG_FILE = "params.json"
_TRUE = {"1", "true", "yes", "on"}


ENDPOINT_VARIABLE = "HF_ENDPOINT"
MAX_ENDPOINT_LENGTH = 2048
_SHOWN_ENDPOINT_LIMIT = 200


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


def _passed(evidence: str) -> Check:
    return Check.passed(CHECK_ID, TITLE, evidence)


def _failed(detail: str, remedy: str) -> Check:
    return Check.failed(CHECK_ID, TITLE, detail, remedy)


def _warned(detail: str, remedy: str = "") -> Check:
    return Check.warned(CHECK_ID, TITLE, detail, remedy)


def _one_line(text: str, secret: Optional[str], limit: int = 200) -> str:
    """A server's words as one short line, with the token blotted out should a server echo it."""
    if secret:
        text = text.replace(secret, SECRET_PLACEHOLDER)
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


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
        return _failed(f"{exc}, so {spec.model.source} could not be looked up",
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
        return _failed(f"{HF_TOKEN_KEY} holds characters no HTTP header can carry: it is not a "
                       "Hugging Face token", f"set {HF_TOKEN_KEY} to a token from {shown_hub}/settings/tokens")
    # huggingface_hub otherwise fetches an "agent harness" registry from the Hub on its first
    # request (telemetry, its utils/_detect_agent.py) and writes it under HF_HOME: preflight only
    # reads metadata. Read at its import; a value the user set is kept.
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    try:
        from httpx2 import HTTPError as TransportError
        from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url
        from huggingface_hub.errors import (
            DisabledRepoError,
            GatedRepoError,
            HfHubHTTPError,
            HFValidationError,
            OfflineModeIsEnabled,
            RemoteEntryNotFoundError,
            RepositoryNotFoundError,
        )
    except Exception as exc:  # noqa: BLE001 - it parses HF_* variables at import: a bad one is a failed check
        return _failed(f"huggingface_hub could not start here ({type(exc).__name__}), so {repo} could "
                       "not be looked up", "check the HF_* environment variables (HF_ENDPOINT, "
                       "HF_HUB_ETAG_TIMEOUT, ...), or unset them")

    api = HfApi(endpoint=hub, token=token if token is not None else False, library_name="raypd")
    with_token = f"with {HF_TOKEN_KEY}" if token is not None else f"without a token ({HF_TOKEN_KEY} unset)"
    if unreadable_token:
        with_token = (f"without the token: {HF_TOKEN_KEY} is set, but kept in the stack's encrypted "
                      "config where preflight cannot read it")
    where = f"{repo} on {shown_hub}"

    def did_not_answer(exc: BaseException) -> Check:
        reason = _one_line(f"{type(exc).__name__}: {exc}", token) if str(exc) else type(exc).__name__
        return _failed(f"the Hugging Face Hub at {shown_hub} did not answer ({reason}), so nothing says "
                       f"{repo} can be downloaded; the pods would fail the same way",
                       f"check network access to {shown_hub} (HF_ENDPOINT names a mirror), then rerun")

    def http_error(exc: HfHubHTTPError, doing: str) -> Check:
        status = exc.response.status_code if exc.response is not None else 0
        said = _one_line(exc.server_message or "", token)
        if status == 401 and token is not None:
            return _failed(f"the Hub rejected {HF_TOKEN_KEY} while {doing} (HTTP 401"
                           f"{': ' + said if said else ''})",
                           f"create a read token at {shown_hub}/settings/tokens and set it: "
                           f"pulumi config set --secret {HF_TOKEN_KEY} <token>")
        return _failed(f"the Hub answered HTTP {status} while {doing}{': ' + said if said else ''}",
                       f"rerun preflight; if it persists, check {shown_hub}'s status")

    try:
        info = api.model_info(repo, timeout=timeout)
    except HFValidationError as exc:
        return _failed(f"{repo} is not a Hub repo id ({_one_line(str(exc), token)})",
                       f"set {SOURCE_KEY} to org/name as the model's Hub page shows it")
    except GatedRepoError:  # not expected from model_info (gated metadata is public), but be exact
        return _gated_refused(repo, shown_hub, token, unreadable_token, "")
    except RepositoryNotFoundError:
        if unreadable_token:
            return _warned(f"{where} was not found {with_token}: it does not exist, or it is private",
                           f"check the spelling of {SOURCE_KEY}; run the CLI preflight with the "
                           "stack file to check with the token")
        private_note = ("or it is private and this token cannot read it" if token is not None
                        else f"or it is private ({HF_TOKEN_KEY} is not set, and the Hub answers a "
                             "private repo it will not show like a missing one)")
        return _failed(f"{where} was not found {with_token}: it does not exist (a typo?), {private_note}",
                       f"check the spelling of {SOURCE_KEY} against the model's page on {shown_hub}; for a "
                       f"private repo set {HF_TOKEN_KEY} to a token that can read it")
    except DisabledRepoError:
        return _failed(f"{where} is disabled on the Hub: nothing in it can be downloaded",
                       f"pick another repo in {SOURCE_KEY}")
    except HfHubHTTPError as exc:
        return http_error(exc, f"reading {repo}'s info")
    except OfflineModeIsEnabled:
        return Check.skipped(CHECK_ID, TITLE, f"HF_HUB_OFFLINE is set: {shown_hub} was not asked about {repo}")
    except (TransportError, OSError) as exc:
        return did_not_answer(exc)
    except (ValueError, KeyError, TypeError) as exc:  # a 200 that is not the Hub's JSON (a proxy, a portal)
        return not_the_hub(shown_hub, f"its answer to GET /api/models/{repo} is not a model's info "
                           f"({type(exc).__name__})")

    answered = _one_line(info.id, token, limit=120) if isinstance(info.id, str) else ""
    if not answered:
        return not_the_hub(shown_hub, f"its answer to GET /api/models/{repo} names no repo")
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
        return _passed(f"{named}: {kind}, readable {with_token}, holds {held} ({revision})")

    # The info alone is not enough (gated: the info is public, the files are not; no file list;
    # another repo's info): ask for the first file vLLM fetches, as hf_hub_download does.
    for probe in ([held] if listed else [CONFIG_FILE, MISTRAL_CONFIG_FILE]):
        try:
            metadata = get_hf_file_metadata(hf_hub_url(repo, probe, endpoint=hub),
                                            token=token if token is not None else False,
                                            timeout=timeout, endpoint=hub)
        except RemoteEntryNotFoundError:
            continue
        except GatedRepoError as exc:
            return _gated_refused(repo, shown_hub, token, unreadable_token,
                                  _one_line(exc.server_message or "", token))
        except RepositoryNotFoundError:
            return _failed(f"{where}: the Hub answered its info, but its files were not found {with_token}",
                           f"check {SOURCE_KEY} and {HF_TOKEN_KEY}")
        except HfHubHTTPError as exc:
            return http_error(exc, f"reading {repo}/{probe}")
        except OfflineModeIsEnabled:
            return Check.skipped(CHECK_ID, TITLE, f"HF_HUB_OFFLINE is set: {shown_hub} was not asked about {repo}")
        except (TransportError, OSError) as exc:
            return did_not_answer(exc)
        break
    else:
        return _no_config(where, f"HEAD of {CONFIG_FILE} and {MISTRAL_CONFIG_FILE}: not found")
    missing = [header for header, value in (("X-Repo-Commit", metadata.commit_hash), ("ETag", metadata.etag))
               if not value]
    if missing:  # hf_hub_download raises FileMetadataError on such an answer
        return not_the_hub(shown_hub, f"it answered HEAD {repo}/{probe} without the Hub's "
                           f"{' and '.join(missing)} header{'s' if len(missing) > 1 else ''}, which "
                           "huggingface_hub needs to download a file")
    commit = _one_line(metadata.commit_hash or "", token)[:12]
    served = f"the Hub serves its {probe} (revision {commit})"
    if not same_repo:
        return _warned(f"{where} answered with the info of {answered}, as the Hub does for the old "
                       f"name of a renamed repo, and {served} under the asked name: the pods' download "
                       "follows the rename today", f"set {SOURCE_KEY} to {answered}, the repo's name now, so the "
                       "download does not depend on the Hub's redirect")
    if info.gated:
        return _passed(f"{named}: gated ({info.gated}), {kind}; {HF_TOKEN_KEY} has been granted access "
                       f"({served})")
    return _passed(f"{named}: {kind}, readable {with_token}; its info lists no files, and {served}")


def not_the_hub(shown_hub: str, why: str) -> Check:
    """The server at the endpoint does not answer as a Hugging Face Hub does."""
    return _failed(f"{shown_hub} does not answer as a Hugging Face Hub: {why}; nothing says the model "
                   "can be downloaded", f"check {ENDPOINT_VARIABLE} (a mirror's URL) and any proxy "
                   f"between here and {shown_hub}")


def _no_config(where: str, seen: str) -> Check:
    return _failed(f"{where} exists but holds no {CONFIG_FILE} at its top level ({seen}): "
                   "vLLM cannot load it as a model",
                   f"point {SOURCE_KEY} at the repo that holds the model's {CONFIG_FILE} (a GGUF-only "
                   "or adapter-only repo is not served this way)")


def _gated_refused(repo: str, hub: str, token: Optional[str], unreadable_token: bool, said: str) -> Check:
    hub_said = f" (the Hub: {said})" if said else ""
    page = f"{hub}/{repo}"
    if unreadable_token:
        return _warned(f"{repo} is gated: its files need a token granted access, and {HF_TOKEN_KEY} is "
                       f"kept where preflight cannot read it{hub_said}",
                       f"make sure the token's account was granted access on {page}")
    if token is None:
        return _failed(f"{repo} is a gated model and {HF_TOKEN_KEY} is not set: the pods cannot "
                       f"download it{hub_said}",
                       f"accept the model's terms on {page} with your Hugging Face account, then set "
                       f"a read token of that account: pulumi config set --secret {HF_TOKEN_KEY} <token>")
    return _failed(f"{repo} is a gated model and the account of {HF_TOKEN_KEY} has not been granted "
                   f"access (or its request is still awaiting review){hub_said}",
                   f"request access on {page} with the token's account and wait for approval, or set "
                   f"{HF_TOKEN_KEY} to a token of an account that has it")


# ---- S3 ----

def _s3_text(location: S3Location) -> str:
    return f"s3://{location.bucket}/{location.prefix + '/' if location.prefix else ''}"


def check_s3_source(spec: DeploymentSpec, s3: Optional[Callable[[], BaseClient]],
                    why_not: str = "") -> Check:
    """`model-source` for an s3:// URI. `s3`: makes the S3 client (None: no usable AWS
    credentials, `why_not` says why)."""
    location = s3_location(spec.model.source)
    assert location is not None  # called for s3:// sources only
    where = _s3_text(location)
    if s3 is None:
        return Check.skipped(CHECK_ID, TITLE, f"{where} is read with AWS credentials: {why_not}")
    prefix = f"{location.prefix}/" if location.prefix else ""
    config_key = f"{prefix}{CONFIG_FILE}"
    try:
        client = s3()
        listing = client.list_objects_v2(Bucket=location.bucket, Prefix=prefix, Delimiter="/", MaxKeys=1000)
        keys = [item["Key"] for item in listing.get("Contents", [])]
        folders = [item["Prefix"] for item in listing.get("CommonPrefixes", [])]
        if not keys and not folders:
            return _failed(f"{where} holds no objects: the prefix does not exist in bucket {location.bucket}",
                           f"upload the model there, or fix {SOURCE_KEY}")
        if config_key not in keys and not listing.get("IsTruncated"):
            below = f"; sub-folders: {', '.join(f[len(prefix):] for f in folders[:5])}" if folders else ""
            return _failed(f"{where} holds no {CONFIG_FILE} at its top ({len(keys)} objects there{below}): "
                           "vLLM loads a model from the folder with its config.json",
                           f"point {SOURCE_KEY} at the folder holding {CONFIG_FILE}")
        head = client.head_object(Bucket=location.bucket, Key=config_key)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        if code == "NoSuchBucket":
            return _failed(f"bucket {location.bucket} of {where} does not exist",
                           f"fix the bucket name in {SOURCE_KEY}")
        if code in ("404", "NoSuchKey"):
            return _failed(f"{where}{CONFIG_FILE} does not exist", f"upload the model's {CONFIG_FILE}")
        if code in ("403", "AccessDenied", "AllAccessDisabled"):
            return _warned(f"this identity may not read {where} ({code}); the pods read it with the "
                           "role raypd creates for them, but a bucket policy or KMS key may refuse them too",
                           "grant s3:ListBucket and s3:GetObject on it to check, or check the bucket policy")
        said = _one_line(str(error.get("Message", "")), None)
        return _warned(f"S3 refused to list {where} ({code or 'error'}: {said})")
    except BotoCoreError as exc:  # connection refused, timeout, DNS
        return _failed(f"S3 did not answer while listing {where} ({_one_line(str(exc), None)})",
                       "check network access to S3 (and AWS_ENDPOINT_URL if set), then rerun")
    size = head.get("ContentLength")
    return _passed(f"{where} exists and holds a readable {CONFIG_FILE} ({size} bytes; ListObjectsV2 and "
                   "HeadObject answered)")


def check_model_source(spec: DeploymentSpec, s3: Optional[Callable[[], BaseClient]] = None,
                       why_no_s3: str = "") -> Check:
    """The `model-source` check for either kind of source."""
    if s3_location(spec.model.source) is not None:
        return check_s3_source(spec, s3, why_no_s3)
    return check_hub_source(spec)
