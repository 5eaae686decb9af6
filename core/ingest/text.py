"""Plain text, Markdown and local HTML into blocks (headings, paragraphs, tables, line groups).

Text documents have no pages and no word boxes: their passages carry character offsets only.
HTML is parsed with selectolax (lexbor); scripts, styles, navigation and other non-content
elements are dropped, ``h1``-``h6`` become headings, table rows become ``cell | cell`` lines.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from selectolax.lexbor import LexborHTMLParser, LexborNode

from core.ingest.chunking import Block

logger = logging.getLogger(__name__)


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MD_EMPH = re.compile(r"(\*\*|__|`)")
_WS = re.compile(r"\s+")

_DROP_TAGS = (
    "script",
    "style",
    "nav",
    "noscript",
    "template",
    "svg",
    "iframe",
    "button",
    "select",
    "head",
    "object",
    "canvas",
)
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BLOCK_TAGS = _wordset(
    "p div section article main aside header footer li ul ol dl dd dt blockquote "
    "figure figcaption caption address body form fieldset details summary hr br "
)


@dataclass(slots=True)
class TextContent:
    blocks: list[Block]
    title: str | None


def _clean(s: str) -> str:
    return _WS.sub(" ", s).strip()


def read_plain(text: str) -> TextContent:
    """Paragraphs are separated by blank lines; lines of a paragraph are joined."""
    blocks: list[Block] = []
    for para in re.split(r"\n\s*\n", text):
        lines = [ln.rstrip() for ln in para.split("\n") if ln.strip()]
        if not lines:
            continue
        if any("\t" in ln or " | " in ln for ln in lines) or all(
            _LIST_ITEM.match(ln) for ln in lines
        ):
            blocks.append(Block("lines", "\n".join(_clean(ln) for ln in lines)))
        else:
            blocks.append(Block("paragraph", _clean(" ".join(lines))))
    return TextContent(blocks, None)


def _md_inline(s: str) -> str:
    return _clean(_MD_EMPH.sub("", _MD_LINK.sub(r"\1", s)))


def read_markdown(text: str) -> TextContent:
    blocks: list[Block] = []
    para: list[str] = []
    table: list[str] = []
    title: str | None = None

    def flush() -> None:
        if para:
            blocks.append(Block("paragraph", _md_inline(" ".join(para))))
            para.clear()
        if table:
            blocks.append(Block("table", "\n".join(table)))
            table.clear()

    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            flush()
            fence = _FENCE.match(line).group(1)  # type: ignore[union-attr]
            code: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith(fence):
                code.append(lines[i].rstrip())
                i += 1
            body = "\n".join(c for c in code if c.strip())
            if body:
                blocks.append(Block("lines", body))
            i += 1
            continue
        m = _ATX.match(line)
        if m:
            flush()
            heading = _md_inline(m.group(2))
            if heading:
                blocks.append(Block("heading", heading, len(m.group(1))))
                title = title or heading
            i += 1
            continue
        if (
            para
            and len(para) == 1
            and _SETEXT.match(line)
            and not _LIST_ITEM.match(para[0])
            and line.strip()
        ):
            heading = _md_inline(para[0])
            para.clear()
            flush()
            blocks.append(Block("heading", heading, 1 if line.strip()[0] == "=" else 2))
            title = title or heading
            i += 1
            continue
        stripped = line.strip()
        if stripped.startswith("|"):
            if para:
                blocks.append(Block("paragraph", _md_inline(" ".join(para))))
                para.clear()
            if not _TABLE_SEP.match(stripped):
                cells = [_md_inline(c) for c in stripped.strip("|").split("|")]
                table.append(" | ".join(cells))
            i += 1
            continue
        if not stripped:
            flush()
        elif _LIST_ITEM.match(line):
            flush()
            para.append(stripped)
        else:
            if table:
                flush()
            para.append(stripped)
        i += 1
    flush()
    return TextContent(blocks, title)


def read_html(text: str) -> TextContent:
    tree = LexborHTMLParser(text)
    title_node = tree.css_first("title")
    title = _clean(title_node.text()) if title_node is not None else None
    for tag in _DROP_TAGS:
        for node in tree.css(tag):
            node.decompose()
    return _html_blocks(tree.body or tree.root, title)


_WEB_DROP = (
    "nav, aside, form, dialog, menu, [hidden], [aria-hidden=true], [role=navigation], "
    "[role=banner], [role=contentinfo], [role=complementary], [role=search], [role=dialog]"
)


def read_web_html(text: str) -> TextContent:
    """A fetched web page's main content: like :func:`read_html`, minus the boilerplate.

    The content root is ``<main>`` (or ``[role=main]``, or the only ``<article>``), else the
    body. Navigation, asides, forms, hidden elements and the page-level ``<header>`` and
    ``<footer>`` (those outside ``<main>``/``<article>``) are dropped; headings are kept. The
    title is the page's ``og:title``, else its ``<title>``, else its first ``<h1>``.
    """
    tree = LexborHTMLParser(text)
    og = tree.css_first('meta[property="og:title"]')
    og_title = _clean(og.attributes.get("content") or "") if og is not None else ""
    title_node = tree.css_first("title")
    title = og_title or (_clean(title_node.text()) if title_node is not None else "") or None
    for tag in _DROP_TAGS:
        for node in tree.css(tag):
            node.decompose()
    _decompose_outermost(tree.css(_WEB_DROP))
    page_level: list[LexborNode] = []
    for node in tree.css("header, footer"):
        parent = node.parent
        while parent is not None and parent.tag not in ("main", "article"):
            parent = parent.parent
        if parent is None:
            page_level.append(node)
    _decompose_outermost(page_level)
    articles = tree.css("article")
    root = (
        tree.css_first("main")
        or tree.css_first("[role=main]")
        or (articles[0] if len(articles) == 1 else None)
        or tree.body
        or tree.root
    )
    return _html_blocks(root, title)


def _decompose_outermost(nodes: list[LexborNode]) -> None:
    """Remove nodes, skipping those inside another removed one (already freed with it)."""
    ids = {n.mem_id for n in nodes}
    for node in nodes:
        parent = node.parent
        while parent is not None and parent.mem_id not in ids:
            parent = parent.parent
        if parent is None:
            node.decompose()


def _html_blocks(root: LexborNode | None, title: str | None) -> TextContent:
    blocks: list[Block] = []
    buf: list[str] = []
    first_h1: str | None = None

    def flush() -> None:
        s = _clean("".join(buf))
        if s:
            blocks.append(Block("paragraph", s))
        buf.clear()

    if root is None:
        return TextContent(blocks, title or None)
    # iterative walk: (node, exiting)
    stack: list[tuple[LexborNode, bool]] = [(root, False)]
    while stack:
        node, exiting = stack.pop()
        tag = node.tag or ""
        if exiting:
            if tag in _BLOCK_TAGS:
                flush()
            continue
        if tag == "-text":
            buf.append(node.text_content or "")
            continue
        if tag.startswith("-"):  # comments and the like
            continue
        if tag in _HEADINGS:
            flush()
            h = _clean(node.text(deep=True, separator=" "))
            if h:
                blocks.append(Block("heading", h, _HEADINGS[tag]))
                if tag == "h1" and first_h1 is None:
                    first_h1 = h
            continue
        if tag == "table":
            flush()
            rows: list[str] = []
            for tr in node.css("tr"):
                cells = [_clean(c.text(deep=True, separator=" ")) for c in tr.css("th, td")]
                if any(cells):
                    rows.append(" | ".join(cells))
            if rows:
                blocks.append(Block("table", "\n".join(rows)))
            continue
        if tag == "pre":
            flush()
            body = "\n".join(ln.rstrip() for ln in node.text(deep=True).split("\n") if ln.strip())
            if body:
                blocks.append(Block("lines", body))
            continue
        if tag in _BLOCK_TAGS:
            flush()
            buf.append(" ")
        stack.append((node, True))
        children: list[LexborNode] = []
        child = node.child
        while child is not None:
            children.append(child)
            child = child.next
        stack.extend((c, False) for c in reversed(children))
    flush()
    return TextContent(blocks, title or first_h1)
