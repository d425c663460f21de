"""raypd's own docs (docs/*.md) as pages of the web app, and links to them from the text pages show.

Check remedies, warnings, the engine banner and alert runbooks say "see docs/observability.md" or
"docs/troubleshooting.md#alert-..."; as plain text a user has to find the repository to follow them
(issue 29 §2). The app serves the docs it ships with, so every such reference becomes a link that
works offline and matches the running version.

The rendering is deliberately small: headings (with the anchors GitHub gives them, and the
`<a id="..."></a>` lines the docs add for alert runbooks), fenced code, lists and paragraphs, with
inline code and links. Everything is escaped first; the only tags in the output are the ones built
here. Pure functions, besides reading the docs folder.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional

from markupsafe import Markup, escape

DOCS_DIR = Path(__file__).resolve().parents[1] / "docs"
# How text names a doc: docs/<name>.md, optionally with #anchor (not inside a longer path).
_REFERENCE = re.compile(r"(?<![\w/.-])docs/([a-z0-9][a-z0-9-]*\.md)(#[a-z0-9-]+)?")
_ANCHOR_LINE = re.compile(r'<a id="([a-z0-9-]+)"></a>')
_HEADING = re.compile(r"(#{1,6}) (.+)")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`]+)`")
_STRONG = re.compile(r"\*\*([^*]+)\*\*")

DocUrl = Callable[[str, str], str]  # (doc name, "#anchor" or "") -> the URL of the page


@lru_cache(maxsize=1)
def doc_names() -> frozenset[str]:
    """The docs the app serves: the markdown files directly in docs/ (nothing else is reachable)."""
    if not DOCS_DIR.is_dir():
        return frozenset()
    return frozenset(path.name for path in DOCS_DIR.glob("*.md") if path.is_file())


def read_doc(name: str) -> Optional[str]:
    """The text of one served doc, None for any other name."""
    if name not in doc_names():
        return None
    return (DOCS_DIR / name).read_text(encoding="utf-8")


def link_doc_references(text: object, url: DocUrl) -> Markup:
    """`text` escaped, with each reference to a served doc turned into a link to its page."""
    escaped = str(escape("" if text is None else text))

    def link(match: re.Match[str]) -> str:
        name, anchor = match.group(1), match.group(2) or ""
        if name not in doc_names():
            return match.group(0)
        return f'<a href="{escape(url(name, anchor))}">{match.group(0)}</a>'

    return Markup(_REFERENCE.sub(link, escaped))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = _CODE.sub(r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _inline(text: str, url: DocUrl) -> str:
    """One line of prose: escaped, then `code` and [links](target) (relative .md targets to pages)."""
    escaped = str(escape(text))

    def link(match: re.Match[str]) -> str:
        label, target = match.group(1), match.group(2)
        page, _, anchor = target.partition("#")
        if re.fullmatch(r"[a-z0-9-]+\.md", page) and page in doc_names():
            target = url(page, f"#{anchor}" if anchor else "")
        elif not re.match(r"https?://|#", target):
            return label  # a path in the repository: no page to link to
        return f'<a href="{target}">{label}</a>'

    escaped = _LINK.sub(link, escaped)
    escaped = _CODE.sub(r"<code>\1</code>", escaped)
    return _STRONG.sub(r"<strong>\1</strong>", escaped)


def render_markdown(text: str, url: DocUrl) -> Markup:
    """A doc as HTML: headings with anchors, fenced code, list items (with their indented
    continuation lines), table rows kept as text, paragraphs."""
    out: list[str] = []
    block: list[str] = []  # the lines of the paragraph or list item being read
    kind = "p"
    fence: Optional[list[str]] = None

    def flush() -> None:
        if block:
            body = _inline(" ".join(block), url)
            out.append(f"<p>{body}</p>" if kind == "p" else f'<div class="doc-item">{body}</div>')
            block.clear()

    for line in text.splitlines():
        if fence is not None:
            if line.startswith("```"):
                out.append(f'<pre class="code">{escape(chr(10).join(fence))}</pre>')
                fence = None
            else:
                fence.append(line)
            continue
        heading, anchor = _HEADING.fullmatch(line), _ANCHOR_LINE.fullmatch(line.strip())
        item = re.match(r"\s*(?:[-*]|\d+\.) ", line)
        if line.startswith("```"):
            flush()
            fence = []
        elif anchor:
            flush()
            out.append(f'<a id="{anchor.group(1)}"></a>')
        elif heading:
            flush()
            level, title = len(heading.group(1)), heading.group(2)
            out.append(f'<h{level} id="{escape(slug(title))}">{_inline(title, url)}</h{level}>')
        elif line.lstrip().startswith("|"):
            flush()
            out.append(f'<div class="doc-table">{_inline(line, url)}</div>')
        elif item:
            flush()
            kind = "item"
            block.append(line.strip())
        elif not line.strip():
            flush()
        else:
            if not block:
                kind = "p"
            block.append(line.strip())
    flush()
    if fence is not None:
        out.append(f'<pre class="code">{escape(chr(10).join(fence))}</pre>')
    return Markup("\n".join(out))
