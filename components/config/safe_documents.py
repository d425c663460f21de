"""Read YAML and JSON documents from users without letting the document exhaust the reader.

Every config reader (stack files, kubeconfigs, stack outputs, structured Pulumi config, web API
bodies) goes through here, so each refuses the same things with the same words:

- YAML aliases (``*name``): a 400-byte "billion laughs" document expands to 10^9 nodes and a
  recursive alias to an endless one. No raypd document needs them (Pulumi and kubectl never write
  them), so they are refused, not bounded.
- Nesting deeper than `MAX_DEPTH`: Python's recursion limit would end the process with a traceback.
- Documents over their reader's byte limit, integers over `MAX_INT_DIGITS` digits (Python refuses to
  convert more than 4300 digits anyway, with a ValueError nobody expects from a parser), floats that
  overflow to infinity, JSON's non-standard NaN/Infinity.
- A key given twice in one mapping: both readers silently keep the last, so the value a user sees
  first is not the value used. Pulumi's own YAML reader (Go yaml.v3) refuses them too.

Errors are one line, `DocumentError`, worded to follow the document's name ("<file> is nested
...") and never quote the document: kubeconfigs and outputs hold credentials.

Every FILE a raypd CLI is given (stack files, outputs, kubeconfigs and the files they name: token,
certificate authority, client certificate and key; API key files, prompts, benchmark runs) is read
by `read_file` here, the one bounded, regular-file-only reader: a FIFO never hangs a CLI, a device
such as /dev/zero is refused instead of read without end, and no file is read past its limit.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from typing import Any, Optional, Union

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node

from components.config.rules import ascii_pattern

MAX_DEPTH = 64
MAX_INT_DIGITS = 100
MAX_DOCUMENT_BYTES = 1024 * 1024


class DocumentError(ValueError):
    """A document refused; `str()` is one line that reads after the document's name."""

    def __init__(self, problem: str, line: Optional[int] = None):
        self.problem = " ".join(problem.split())  # one line, whatever the parser said
        self.line = line
        super().__init__(self.problem + (f" (line {line})" if line is not None else ""))


def shown_name(name: object) -> str:
    """A file name as one printable line: repr() when it holds a control character or a
    surrogate (a name from argv can hold anything)."""
    text = str(name)
    return text if text.isprintable() else ascii(text)


def _size_problem(text: str | bytes, max_bytes: int) -> Optional[DocumentError]:
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        return DocumentError(f"is larger than {_shown_bytes(max_bytes)}; no raypd document is that big")
    return None


def _shown_bytes(count: int) -> str:
    if count >= 1024 * 1024 and count % (1024 * 1024) == 0:
        return f"{count // (1024 * 1024)} MiB"
    if count >= 1024 and count % 1024 == 0:
        return f"{count // 1024} KiB"
    return f"{count} bytes"


# ---- YAML ----

def _line(mark: Any) -> Optional[int]:
    return mark.line + 1 if mark is not None else None


class _Refused(yaml.YAMLError):
    def __init__(self, problem: str, mark: Any):
        super().__init__(problem)
        self.error = DocumentError(problem, _line(mark))


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader (no object construction) that composes no alias, nests at most
    MAX_DEPTH levels and constructs no runaway integer or duplicate key."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Optional[Node], index: Any) -> Optional[Node]:
        if self.check_event(AliasEvent):
            raise _Refused("uses a YAML alias (*name); raypd reads no aliases: write the values out",
                           self.peek_event().start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"is nested more than {MAX_DEPTH} levels deep", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag in ("tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"):
                continue  # `<<` and `=` are instructions, not keys
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: the constructor below says so
                break
            if duplicate:
                raise _Refused(f"has the key {_shown_key(key)} twice in one mapping", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as exc:
            # A scalar YAML resolves but Python cannot build: the timestamp 2024-13-45.
            raise _Refused(f"holds a value that cannot be read ({type(exc).__name__})", node.start_mark) from None

    def construct_yaml_int(self, node: Node) -> int:
        digits = re.sub(r"[^0-9a-fA-F]", "", str(node.value))
        if len(digits) > MAX_INT_DIGITS:
            raise _Refused(f"holds an integer of more than {MAX_INT_DIGITS} digits", node.start_mark)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: Node) -> float:
        value: float = super().construct_yaml_float(node)
        text = str(node.value).lower()
        if math.isinf(value) and "inf" not in text:  # 1e999: an overflow, not the YAML .inf a user wrote
            raise _Refused("holds a number too large to be a float", node.start_mark)
        return value


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)
_BoundedLoader.add_constructor("tag:yaml.org,2002:float", _BoundedLoader.construct_yaml_float)


def _shown_key(key: Any) -> str:
    text = repr(key) if isinstance(key, str) else f"'{key}'"
    return text if len(text) <= 80 else text[:77] + "..."


def load_yaml(text: str, max_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """The one YAML document in `text` as plain Python values; DocumentError for anything refused
    above or malformed."""
    too_big = _size_problem(text, max_bytes)
    if too_big is not None:
        raise too_big
    loader: Optional[_BoundedLoader] = None
    try:
        loader = _BoundedLoader(text)  # its reader refuses non-printable characters at once
        return loader.get_single_data()
    except _Refused as exc:
        raise exc.error from None
    except yaml.MarkedYAMLError as exc:
        problem = _unquoted(exc.problem or exc.context or "cannot be parsed")
        raise DocumentError(f"is not valid YAML: {problem}", _line(exc.problem_mark)) from None
    except yaml.YAMLError as exc:  # ReaderError: a character YAML does not allow
        raise DocumentError(f"is not valid YAML: {_reader_problem(exc)}") from None
    except (ValueError, OverflowError, TypeError) as exc:
        # A scalar YAML resolves but Python cannot build: a timestamp 2024-13-45, a huge int.
        raise DocumentError(f"holds a value that cannot be read ({type(exc).__name__})") from None
    except RecursionError:
        raise DocumentError(f"is nested more than {MAX_DEPTH} levels deep") from None
    finally:
        if loader is not None:
            loader.dispose()


# A quoted stretch of a PyYAML problem ('...', not an apostrophe inside a word).
_QUOTED = ascii_pattern(r"(?<![\w'])'([^']*)'(?![\w'])")


def _unquoted(problem: str) -> str:
    """PyYAML's problem without document text longer than a punctuation mark (a tag or an escape
    it quotes may be part of a credential): "but got ':'" stays, "tag '!s3cr3t'" does not."""
    def shown(match: re.Match[str]) -> str:
        quoted = match.group(1)
        return match.group(0) if len(quoted) <= 2 or quoted.startswith("<") else "'...'"
    return _QUOTED.sub(shown, problem)


def _reader_problem(exc: yaml.YAMLError) -> str:
    character = getattr(exc, "character", None)
    if isinstance(character, int):  # PyYAML's ReaderError: the code point, never the text around it
        return f"it holds the character #x{character:04x}, which YAML does not allow"
    return "it holds text YAML does not allow"


# ---- JSON ----

class _Pairs(list):
    """A JSON object as its (key, value) pairs, so duplicates can be named with their path."""


def _refuse_constant(name: str) -> Any:
    raise DocumentError(f"holds {name}, which is not JSON")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise DocumentError(f"holds an integer of more than {MAX_INT_DIGITS} digits")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise DocumentError("holds a number too large to be a float")
    return value


def _path(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def _objects(value: Any, path: str, depth: int) -> Any:
    """`_Pairs` to dicts, refusing a key given twice (naming its path) and runaway nesting."""
    if depth > MAX_DEPTH:
        raise DocumentError(f"is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, _Pairs):
        result: dict[str, Any] = {}
        for key, item in value:
            if key in result:
                raise DuplicateKeyError(_path(path, key))
            result[key] = _objects(item, _path(path, key), depth + 1)
        return result
    if isinstance(value, list):
        return [_objects(item, f"{path}[{index}]", depth + 1) for index, item in enumerate(value)]
    return value


class DuplicateKeyError(DocumentError):
    """A JSON object names a key twice; `path` is where ("config.raypd:model.id")."""

    def __init__(self, path: str):
        self.path = path
        super().__init__(f"has the key {_shown_key(path)} twice")


def load_json(text: str | bytes, max_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """The JSON value in `text`; DocumentError for anything refused above or malformed."""
    too_big = _size_problem(text, max_bytes)
    if too_big is not None:
        raise too_big
    try:
        raw = json.loads(text, object_pairs_hook=_Pairs, parse_constant=_refuse_constant,
                         parse_int=_bounded_int, parse_float=_finite_float)
    except DocumentError:
        raise
    except json.JSONDecodeError as exc:
        raise DocumentError(f"is not valid JSON: {exc.msg}", exc.lineno) from None
    except UnicodeDecodeError:
        raise DocumentError("is not UTF-8 text") from None
    except RecursionError:
        raise DocumentError(f"is nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:  # anything else the decoder refuses
        raise DocumentError(f"is not valid JSON ({type(exc).__name__})") from None
    return _objects(raw, "", 0)


# ---- files ----

class FileRefused(DocumentError):
    """A file a CLI was given that cannot be read as one: `str()` reads after the file's name ("is
    not a regular file ..."), `about(name)` is the whole line. `os_error` is the system's reason
    when the system refused (`missing`: there is no such file)."""

    def __init__(self, problem: str, os_error: Optional[str] = None, missing: bool = False):
        super().__init__(problem)
        self.os_error = os_error
        self.missing = missing

    def about(self, name: str) -> str:
        return f"cannot read {name}: {self.os_error}" if self.os_error else f"{name} {self.problem}"


def read_file(path: Union[str, "os.PathLike[str]"], max_bytes: int) -> bytes:
    """The bytes of the regular file at `path`, at most `max_bytes`; FileRefused otherwise.

    Opened non-blocking, since opening a FIFO for reading otherwise waits for a writer for ever
    (reads of a regular file are unaffected), and judged on the open descriptor (fstat: nothing can
    be swapped in between the check and the read). Not a regular file (a FIFO, a device such as
    /dev/zero, a directory) is refused; the read stops one byte past the limit, whatever the file's
    size claims (a file can grow while it is read)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise FileRefused("cannot be read", exc.strerror or type(exc).__name__,
                          missing=isinstance(exc, FileNotFoundError)) from None
    except ValueError:  # a NUL in the name: no file is called that
        raise FileRefused("cannot be read", "the name holds a NUL character", missing=True) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused("is not a regular file (a FIFO, a device or a directory): give the file itself")
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise FileRefused("cannot be read", exc.strerror or type(exc).__name__) from None
    finally:
        os.close(fd)
    if size > max_bytes:
        raise FileRefused(f"is larger than {_shown_bytes(max_bytes)}, more than such a file holds")
    return b"".join(chunks)


def read_text_file(path: Union[str, "os.PathLike[str]"], max_bytes: int) -> str:
    """`read_file`, as UTF-8 text (FileRefused when it is not)."""
    try:
        return read_file(path, max_bytes).decode("utf-8")
    except UnicodeDecodeError:
        raise FileRefused("is not UTF-8 text") from None
