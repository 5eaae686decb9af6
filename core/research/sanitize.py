"""Make a report safe to show and easy to check: safe links only, numbered citations, Sources.

- Links: only ``http``/``https`` with a real host name survive. Shorteners, IP-address hosts,
  user-info tricks, truncated URLs (``…``, ``...``, a dangling ``%``), ``javascript:``, ``data:``,
  ``file:`` and every other scheme are removed (the link text is kept, the URL is not). Raw HTML
  tags are escaped so no renderer runs them.
- Citations ``[ev1:…]`` are renumbered ``[1]``, ``[2]`` in order of first use; evidence from the
  same document version shares one number.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from urllib.parse import urlsplit

from core.research.schemas import CitationRecord
from graph.ids import CITED_ID_RE

SHORTENERS = frozenset(
    [
        "bit.ly",
        "t.co",
        "tinyurl.com",
        "goo.gl",
        "ow.ly",
        "is.gd",
        "buff.ly",
        "rebrand.ly",
        "cutt.ly",
        "t.ly",
        "shorturl.at",
        "tiny.cc",
        "lnkd.in",
        "rb.gy",
        "bl.ink",
        "s.id",
        "v.gd",
        "shorte.st",
        "adf.ly",
        "bitly.com",
        "tiny.one",
        "qr.ae",
        "trib.al",
        "dlvr.it",
        "soo.gd",
        "x.co",
        "po.st",
        "mcaf.ee",
        "su.pr",
        "cli.gs",
        "u.to",
    ]
)
_HOST_RE = re.compile(r"^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
_MD_LINK_RE = re.compile(r"(!?)\[([^\]\n]*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_AUTOLINK_RE = re.compile(r"<([a-zA-Z][a-zA-Z0-9+.\-]*:[^>\s]*)>")
_BARE_RE = re.compile(
    r"(?<![\w(<\[])((?:[a-zA-Z][a-zA-Z0-9+.\-]{1,15}://|(?:javascript|vbscript|data|file|blob|"
    r"about|mailto|tel|sms|intent|chrome|view-source):)[^\s<>()\[\]\"']+)",
    re.IGNORECASE,
)
_HTML_RE = re.compile(r"</?[a-zA-Z!][^>]*>")


def safe_url(url: str) -> bool:
    """True only for a plain http(s) link to a named host that is not a URL shortener."""
    url = url.strip()
    if not url or any(c in url for c in "\u2026\\\x00\n\r\t ") or url.endswith(("...", "%")):
        return False
    if re.search(r"%(?![0-9a-fA-F]{2})", url):
        return False
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower().rstrip(".")
        _ = parts.port
    except ValueError:
        return False
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return False
    if "@" in parts.netloc or not host:
        return False
    try:
        ipaddress.ip_address(host.strip("[]"))
        return False
    except ValueError:
        pass
    if re.fullmatch(r"[0-9a-fx.]+", host) and not re.search(r"[g-wyz]", host):
        return False
    if not _HOST_RE.match(host) or host == "localhost":
        return False
    return not (host in SHORTENERS or any(host.endswith("." + s) for s in SHORTENERS))


def sanitize_links(markdown: str) -> str:
    """Drop unsafe links (keeping their text) and escape raw HTML."""

    def md_link(m: re.Match[str]) -> str:
        bang, text, url = m.group(1), m.group(2), m.group(3)
        if bang or not safe_url(url):  # images would load remote content: never kept
            return text
        return f"[{text}]({url})"

    out = _MD_LINK_RE.sub(md_link, markdown)
    out = _AUTOLINK_RE.sub(
        lambda m: f"<{m.group(1)}>" if safe_url(m.group(1)) else "[link removed]", out
    )
    out = _BARE_RE.sub(
        lambda m: (
            m.group(1)
            if safe_url(m.group(1)) or m.group(1).startswith("ev1:")
            else "[link removed]"
        ),
        out,
    )
    return _HTML_RE.sub(lambda m: m.group(0).replace("<", "&lt;").replace(">", "&gt;"), out)


def renumber(markdown: str, doc_of: Callable[[str], str]) -> tuple[str, dict[str, int]]:
    """Replace ``[ev1:…]`` by ``[n]`` in order of first use, one number per document version.

    Returns the text and ``evidence id -> number``.
    """
    doc_number: dict[str, int] = {}
    numbers: dict[str, int] = {}

    def sub(m: re.Match[str]) -> str:
        ev_id = m.group(1)
        doc = doc_of(ev_id)
        if doc not in doc_number:
            doc_number[doc] = len(doc_number) + 1
        numbers[ev_id] = doc_number[doc]
        return f"[{doc_number[doc]}]"

    text = CITED_ID_RE.sub(sub, markdown)
    text = re.sub(  # [1][1] -> [1], [1][2][1] -> [1][2] (two passages of one document)
        r"(?:\[\d+\]){2,}",
        lambda m: "".join(f"[{n}]" for n in dict.fromkeys(re.findall(r"\d+", m.group(0)))),
        text,
    )
    return text, numbers


def _pages(pages: list[int]) -> str:
    if not pages:
        return ""
    return f"p. {pages[0]}" if len(pages) == 1 else "pp. " + ", ".join(str(p) for p in pages)


def _plain(text: str) -> str:
    return re.sub(r"([\\`*_\[\]<>])", r"\\\1", " ".join(text.split()))


def source_reference(title: str, pages: list[int], source_uri: str) -> str:
    """One source as the Sources list names it: title, pages, and the link (only a safe one;
    any other source is shown as plain text). The MCP server's ``citation_markdown`` too."""
    parts = [_plain(title)]
    if pages:
        parts.append(_pages(pages))
    uri = source_uri
    parts.append(f"<{uri}>" if safe_url(uri) else f"source: {_plain(uri)}")
    return " — ".join(parts)


def sources_section(citations: list[CitationRecord]) -> str:
    """The Sources list: one entry per number with title, pages, link and credibility."""
    by_number: dict[int, list[CitationRecord]] = {}
    for c in citations:
        by_number.setdefault(c.number, []).append(c)
    lines = ["## Sources", ""]
    for n in sorted(by_number):
        recs = by_number[n]
        first = recs[0]
        pages = sorted({p for r in recs for p in r.pages})
        parts = [f"{n}. {source_reference(first.title, pages, first.source_uri)}"]
        parts.append(f"credibility {first.credibility:.2f}")
        if first.superseded:
            parts.append("superseded version")
        lines.append(" — ".join(parts))
    return "\n".join(lines) + "\n"
