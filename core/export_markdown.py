"""A report's Markdown, parsed once for every rich export (HTML, PDF, DOCX).

markdown-it-py (CommonMark, with GFM tables and strikethrough) parses the text; raw HTML is off,
so any tag a model or a passage wrote stays visible text. Three rules run on the parsed tokens
before any writer sees them:

- a link whose target is not a safe http(s) URL (see :func:`core.research.sanitize.safe_url`)
  loses its target and keeps its words; an image becomes its alt text (nothing is loaded);
- a citation ``[n]`` in running text becomes a link to ``#src-n`` with class ``cite``;
- heading levels move down one (the exported file's ``h1`` is the question), and the items of
  the ordered list under a "Sources" heading carry their number (``meta["source"]``).

The HTML is then passed through nh3 (the Ammonia sanitiser) with a short allow-list of tags and
attributes, so that even a mistake in these rules cannot let a script, style or event handler
through.

Threading: the parser is built per call and shares nothing.
"""

from __future__ import annotations

import re
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

from core.research.sanitize import safe_url

_CITE_RE = re.compile(r"\[(\d+)\]")

ALLOWED_TAGS = {
    *(f"h{n}" for n in range(1, 7)),
    *("p", "ul", "ol", "li", "a", "strong", "em", "s", "del", "code", "pre", "blockquote"),
    *("table", "thead", "tbody", "tr", "th", "td", "hr", "br"),
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "class"},
    "li": {"id"},
    "ol": {"start"},
    "th": {"style"},
    "td": {"style"},
}


def _safe_target(href: str) -> bool:
    return href.startswith("#src-") or safe_url(href)


def _links_and_images(children: list[Token]) -> list[Token]:
    """Unsafe links keep their words only; images become their alt text."""
    out: list[Token] = []
    dropped: list[bool] = []  # one flag per open link: was it dropped?
    for tok in children:
        if tok.type == "link_open":
            keep = _safe_target(str(tok.attrGet("href") or ""))
            dropped.append(not keep)
            if keep:
                out.append(tok)
        elif tok.type == "link_close":
            if not (dropped.pop() if dropped else True):
                out.append(tok)
        elif tok.type == "image":
            alt = Token("text", "", 0)
            alt.content = "".join(c.content for c in tok.children or []) or tok.content
            out.append(alt)
        else:
            out.append(tok)
    return out


def _citations(children: list[Token]) -> list[Token]:
    """``[n]`` in text outside links -> ``<a class="cite" href="#src-n">[n]</a>``."""
    merged: list[Token] = []
    for tok in children:  # the text rule may split "[1]" into several text tokens
        if tok.type == "text" and merged and merged[-1].type == "text":
            merged[-1].content += tok.content
        else:
            merged.append(tok)
    out: list[Token] = []
    in_link = 0
    for tok in merged:
        in_link += tok.type == "link_open"
        in_link -= tok.type == "link_close"
        if tok.type != "text" or in_link or not _CITE_RE.search(tok.content):
            out.append(tok)
            continue
        pos = 0
        for m in _CITE_RE.finditer(tok.content):
            if m.start() > pos:
                out.append(_text(tok.content[pos : m.start()]))
            link = Token("link_open", "a", 1)
            link.attrs = {"href": f"#src-{m.group(1)}", "class": "cite"}
            link.meta = {"cite": int(m.group(1))}
            out += [link, _text(m.group(0)), Token("link_close", "a", -1)]
            pos = m.end()
        if pos < len(tok.content):
            out.append(_text(tok.content[pos:]))
    return out


def _text(content: str) -> Token:
    tok = Token("text", "", 0)
    tok.content = content
    return tok


def _report_rules(state: StateCore) -> None:
    in_sources = False
    tokens = state.tokens
    for i, tok in enumerate(tokens):
        if tok.type in ("heading_open", "heading_close"):
            level = min(int(tok.tag[1]) + 1, 6)
            tok.tag = f"h{level}"
            if tok.type == "heading_open" and i + 1 < len(tokens):
                in_sources = tokens[i + 1].content.strip().lower() == "sources"
        elif tok.type == "list_item_open" and in_sources and tok.info.isdigit():
            tok.meta = {**(tok.meta or {}), "source": int(tok.info)}
        elif tok.type == "inline" and tok.children is not None:
            tok.children = _citations(_links_and_images(tok.children))


class _ReportMarkdown(MarkdownIt):
    def validateLink(self, url: str) -> bool:
        # every link is parsed, then judged by _links_and_images: a link refused here would
        # stay in the text as "[words](target)", target and all
        return True


def parser() -> MarkdownIt:
    """The configured parser (see the module docstring)."""
    md = _ReportMarkdown("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.core.ruler.push("sourcebook_report", _report_rules)
    return md


def parse(markdown: str) -> list[Token]:
    """The report's block tokens after the rules above (the DOCX writer walks these)."""
    return parser().parse(markdown)


def markdown_to_html(markdown: str, *, source_ids: str = "src-") -> str:
    """The report body as sanitised HTML; the Sources list items get ``id=source_ids + n``."""
    md = parser()
    tokens = md.parse(markdown)
    for tok in tokens:
        number = (tok.meta or {}).get("source")
        if tok.type == "list_item_open" and number is not None:
            tok.attrSet("id", f"{source_ids}{number}")
    rendered: str = md.renderer.render(tokens, md.options, {})
    return clean(rendered)


def clean(fragment: str) -> str:
    """``fragment`` with only the allowed tags and attributes, http(s) and ``#`` links."""
    kwargs: dict[str, Any] = {
        "tags": ALLOWED_TAGS,
        "attributes": ALLOWED_ATTRIBUTES,
        "url_schemes": {"http", "https"},
        "link_rel": None,
        "strip_comments": True,
        "filter_style_properties": {"text-align"},
    }
    cleaned: str = nh3.clean(fragment, **kwargs)
    return cleaned
