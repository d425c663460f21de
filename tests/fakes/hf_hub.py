"""A stand-in for the two Hugging Face Hub paths preflight's `model-source` check uses, on 127.0.0.1.

The real Hub cannot be reached from here, so this answers like it for exactly what raypd asks:

- `GET /api/models/{org}/{name}` (and `.../revision/{rev}`): the model's info document, as
  `huggingface_hub.HfApi.model_info` reads it into `ModelInfo` (hf_api.py: `id`, `sha`,
  `private`, `gated` false | "auto" | "manual", `disabled`, `siblings: [{rfilename}]`).
- `HEAD /{org}/{name}/resolve/{rev}/{file}`: a file's metadata, as
  `huggingface_hub.file_download.get_hf_file_metadata` reads it: `X-Repo-Commit` (the commit the
  revision resolves to), `ETag` and `Content-Length` of a file kept in git, as the Hub answers for a
  small file like config.json (an LFS file is a 302 to a CDN with `X-Linked-Etag`/`X-Linked-Size`
  instead; raypd never asks for one). `hf_hub_download` refuses an answer without `X-Repo-Commit`
  or `ETag` (file_download.py `_get_metadata_or_catch_error`: "does not seem to be served by a
  Hugging Face Hub endpoint"), so this stand-in always sends both.

Repo ids are matched case-insensitively and answered with the repo's own spelling, as the Hub does
(`model_info("mbzuai/bactrian-x")` answers for `MBZUAI/Bactrian-X`: huggingface/huggingface_hub#1453).
A renamed repo (`renamed={"old/name": "new/name"}`) answers its old name with a relative 307 to
the same path under the new name, on both paths: huggingface_hub follows it (its GET client follows
redirects, utils/_http.py `default_client_factory`; HEAD follows same-host redirects,
`_httpx2_follow_hub_redirects_with_backoff`) and its tests download from a renamed repo
(tests/test_file_download.py `test_download_from_a_renamed_repo_with_hf_hub_download`; #981).
`list_files=False` makes the model info omit `siblings`, as a mirror or an older API may: the Hub
itself always sends them for GET /api/models/{repo}.

Errors carry the status codes and headers huggingface_hub's `utils/_http.py` `hf_raise_for_status`
tells apart, as the Hub sends them (huggingface_hub 2.4.0; its tests/test_utils_errors.py holds
the same answers, and the behaviour of 401 vs 404 is the Hub's, see the comment "401 is
misleading" there and huggingface/huggingface_hub#1202):
- a repo that does not exist, or a private one the caller cannot read: `X-Error-Code:
  RepoNotFound`, status 401 without a token and 404 with a valid one (the Hub never says a
  private repo exists);
- a gated repo whose files the caller may not read: `X-Error-Code: GatedRepo`, 401 without a
  token ("... You must have access to it and be authenticated to access it. Please log in.") and
  403 with a token not on the authorized list ("... is restricted and you are not in the
  authorized list. Visit ... to ask for access."); a gated repo's info document is public;
- a token the Hub does not know: 401 with `X-Error-Message: Invalid credentials in Authorization
  header` and no error code, on every path;
- a file not in the repo: 404 `X-Error-Code: EntryNotFound`.

    with FakeHub({"Qwen/Qwen3.5-9B": HubRepo()}, tokens={"hf_alice"},
                 renamed={"OldOrg/Qwen3.5-9B": "Qwen/Qwen3.5-9B"}) as hub:
        hub.url          # http://127.0.0.1:PORT, for HF_ENDPOINT
        hub.requests     # [(method, path, sent a token), ...]; the token itself is never kept
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable, Mapping, Optional, Union
from urllib.parse import unquote, urlsplit

from tests.fakes import LoopbackServer

INVALID_CREDENTIALS = "Invalid credentials in Authorization header"
DEFAULT_FILES = ("config.json", "model.safetensors", "tokenizer.json", "README.md")


@dataclass(frozen=True)
class HubRepo:
    """One model repo: who may read it and what it holds."""

    private: bool = False
    gated: Union[bool, str] = False  # False, "auto" or "manual", as the Hub's `gated` field
    files: tuple[str, ...] = DEFAULT_FILES
    # Tokens that may read it when private or gated; None: any valid token (an account granted access).
    readers: Optional[frozenset[str]] = field(default_factory=frozenset)
    disabled: bool = False

    def readable_with(self, token: Optional[str]) -> bool:
        return token is not None and (self.readers is None or token in self.readers)

    def sha(self, repo_id: str) -> str:
        return hashlib.sha1(repo_id.encode()).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet; and requests carry tokens in headers
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._answer(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(head=True)

    def _send(self, status: int, headers: Mapping[str, str], body: Optional[dict[str, Any]] = None,
              head: bool = False, length: Optional[int] = None) -> None:
        payload = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("X-Request-Id", "fake-hub-request")
        for name, value in headers.items():
            self.send_header(name, value)
        if body is not None:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(length if length is not None else len(payload)))
        self.end_headers()
        if not head and payload:
            self.wfile.write(payload)

    def _error(self, status: int, code: Optional[str], message: str, head: bool) -> None:
        headers = {"X-Error-Message": message}
        if code is not None:
            headers["X-Error-Code"] = code
        self._send(status, headers, None if head else {"error": message}, head=head)

    def _answer(self, head: bool) -> None:
        hub = self.server.hub
        path = unquote(urlsplit(self.path).path)
        token = _bearer(self.headers.get("Authorization"))
        hub.record(self.command, path, token is not None)
        if hub.hang:
            hub.release.wait(timeout=30)  # a Hub that accepts and never answers, until the test ends
            return
        if hub.status is not None:  # a proxy in front of a Hub it cannot reach: its own answer to all
            self._error(hub.status, None, "upstream unavailable", head)
            return
        if token is not None and hub.tokens is not None and token not in hub.tokens:
            self._error(401, None, INVALID_CREDENTIALS, head)
            return
        parts = path.strip("/").split("/")
        if len(parts) >= 4 and parts[:2] == ["api", "models"]:
            repo_at = 2
        elif len(parts) >= 5 and parts[2] == "resolve":
            repo_at = 0
        else:
            self._error(404, None, "Sorry, we can't find the page you are looking for.", head)
            return
        asked = "/".join(parts[repo_at:repo_at + 2])
        new_name = hub.new_name_of(asked)
        if new_name is not None:
            moved = [*parts[:repo_at], *new_name.split("/"), *parts[repo_at + 2:]]
            self._send(307, {"Location": "/" + "/".join(moved)}, head=head)
            return
        if repo_at == 2:
            self._model_info(asked, token, head)
        else:
            self._resolve(asked, "/".join(parts[4:]), token, head)

    def _visible(self, asked: str, token: Optional[str], head: bool) -> Optional[tuple[str, HubRepo]]:
        """(the repo's own id, the repo) when the caller may know it exists; else answers
        RepoNotFound (401 or 404)."""
        found = self.server.hub.lookup(asked)
        if found is None or (found[1].private and not found[1].readable_with(token)):
            self._error(401 if token is None else 404, "RepoNotFound", "Repository not found", head)
            return None
        if found[1].disabled:
            self._error(403, None, "Access to this resource is disabled.", head)
            return None
        return found

    def _model_info(self, asked: str, token: Optional[str], head: bool) -> None:
        found = self._visible(asked, token, head)
        if found is None:
            return
        repo_id, repo = found
        org = repo_id.split("/", 1)[0]
        document = {
            "_id": repo.sha(repo_id)[:24], "id": repo_id, "modelId": repo_id, "author": org,
            "sha": repo.sha(repo_id), "lastModified": "2026-09-01T00:00:00.000Z",
            "private": repo.private, "gated": repo.gated, "disabled": False, "downloads": 0,
            "likes": 0, "tags": ["transformers", "safetensors"], "library_name": "transformers",
        }
        if self.server.hub.list_files:
            document["siblings"] = [{"rfilename": name} for name in repo.files]
        self._send(200, {}, document, head=head)

    def _resolve(self, asked: str, filename: str, token: Optional[str], head: bool) -> None:
        found = self._visible(asked, token, head)
        if found is None:
            return
        repo_id, repo = found
        if repo.gated and not repo.readable_with(token):
            endpoint = self.server.hub.url
            if token is None:
                message = (f"Access to model {repo_id} is restricted. You must have access to it and be "
                           "authenticated to access it. Please log in.")
                self._error(401, "GatedRepo", message, head)
            else:
                message = (f"Access to model {repo_id} is restricted and you are not in the authorized "
                           f"list. Visit {endpoint}/{repo_id} to ask for access.")
                self._error(403, "GatedRepo", message, head)
            return
        if filename not in repo.files:
            self._error(404, "EntryNotFound", "Entry not found", head)
            return
        body = b'{"architectures": ["Fake"]}'
        etag = hashlib.sha1(repo_id.encode() + filename.encode()).hexdigest()
        self.send_response(200)
        self.send_header("X-Repo-Commit", repo.sha(repo_id))
        self.send_header("ETag", f'"{etag}"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)


def _bearer(header: Optional[str]) -> Optional[str]:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, hub: "FakeHub"):
        self.hub = hub
        super().__init__(("127.0.0.1", 0), _Handler)


class FakeHub(LoopbackServer):
    """Context manager: the Hub stand-in on a free 127.0.0.1 port. `tokens`: the tokens the Hub
    knows (None: every token is a valid one). `hang=True`: a Hub that accepts connections and never
    answers (for timeouts). `renamed`: old repo id -> the id it was renamed to (a key of `repos`).
    `list_files=False`: model info without `siblings` (a mirror's answer). `status=503`: every
    request answered with that status and no Hub error code, as a proxy answers for a Hub it cannot
    reach (502, 503, 504), or asks for its own credentials (407), or a rate limit (429)."""

    def __init__(self, repos: Mapping[str, HubRepo], tokens: Optional[Iterable[str]] = (), hang: bool = False,
                 renamed: Optional[Mapping[str, str]] = None, list_files: bool = True,
                 status: Optional[int] = None):
        self.repos = dict(repos)
        self.renamed = {old.lower(): new for old, new in (renamed or {}).items()}
        self.list_files = list_files
        self.tokens = None if tokens is None else frozenset(tokens)
        self.hang = hang
        self.status = status
        self.release = threading.Event()
        self.requests: list[tuple[str, str, bool]] = []
        self._lock = threading.Lock()
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def lookup(self, asked: str) -> Optional[tuple[str, HubRepo]]:
        """(the repo's own id, the repo) for an id in any case, as the Hub matches them."""
        wanted = asked.lower()
        return next(((repo_id, repo) for repo_id, repo in self.repos.items() if repo_id.lower() == wanted), None)

    def new_name_of(self, asked: str) -> Optional[str]:
        return self.renamed.get(asked.lower())

    def record(self, method: str, path: str, with_token: bool) -> None:
        with self._lock:
            self.requests.append((method, path, with_token))

    def stop(self) -> None:
        self.release.set()
        super().stop()
