"""What the report view says about a report beyond its text: the status in words, a citation's
hover card, and the flagged claims' markers beside the sentences they concern.

``core`` marks each flagged sentence in the report with "⚠" right after it (and lists the flags
with their reasons). :func:`link_flags` turns each mark into a ``flag:<i>`` link, ``i`` being the
flagged claim it stands for (matched by the words of the sentence before the mark), so the view
can show the reason on hover and open the claim's passage on a click; :func:`sentence_start`
finds where that sentence begins, so the view can tint it.

Everything here is text in, text out (no widgets): escaped HTML for tooltips, Markdown for the
browser. Threading: pure functions, any thread.
"""

from __future__ import annotations

import html
import re

from core.service import CitationRecord, FlaggedClaim, Report

FLAG_SCHEME = "flag"
QUOTE_CHARS = 320  # the quoted words a hover card shows, cut on a word

_FLAG_MARK = re.compile(r"[ \t]*⚠")
_ID_TOKEN = re.compile(r"\s*\[(?:ev1:[^\]]*|E\d+|\d{1,4})\]")
_WORD = re.compile(r"\w+")
# A sentence ends at . ! or ? followed by space, optionally after its citations ("… [2]. Next").
_SENTENCE_END = re.compile(r"[.!?](?:[\"”’)\]]*)(?:\s*\[\d{1,4}\])*\s+")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def headline(report: Report, fallback: str) -> str:
    """The status as the first line of the report: what the reader may rely on, in words.

    ``fallback`` is the status's general wording, used where the counts add nothing."""
    if report.status == "answered":
        return "Answered: every claim is supported by its cited passage."
    counts = []
    if report.flagged_claims:
        counts.append(_plural(len(report.flagged_claims), "claim") + " flagged")
    if report.removed_citations:
        counts.append(_plural(len(report.removed_citations), "citation") + " removed")
    if not counts or report.status not in ("partial", "partial_retrieval", "budget_exhausted"):
        return fallback
    if report.status == "partial":
        return (
            "Partial answer: " + ", ".join(counts) + "; read the notes below before relying on it."
        )
    return fallback.rstrip(".") + "; " + ", ".join(counts) + "."


def _cut(text: str, chars: int) -> str:
    text = " ".join(text.split())
    if len(text) <= chars:
        return text
    piece = text[:chars]
    space = piece.rfind(" ")
    return (piece[:space] if space > chars // 2 else piece).rstrip(" ,;:") + " …"


def pages_text(pages: list[int]) -> str:
    """ "page 3", "pages 3–4", "pages 3, 7"; "" without pages (a web or text passage)."""
    if not pages:
        return ""
    if len(pages) == 1:
        return f"page {pages[0]}"
    if pages == list(range(pages[0], pages[-1] + 1)):
        return f"pages {pages[0]}–{pages[-1]}"
    return "pages " + ", ".join(map(str, pages))


def citation_tooltip(rec: CitationRecord) -> str:
    """A citation's hover card (escaped rich text): number, document, page, the quoted words."""
    where = pages_text(rec.pages)
    title = html.escape(rec.title or rec.source_uri)
    older = " (superseded version)" if rec.superseded else ""
    head = f"<b>[{rec.number}] {title}</b>{older}" + (f" — {where}" if where else "")
    quote = html.escape(_cut(rec.quote, QUOTE_CHARS))
    return (
        f"<p>{head}</p><p><i>“{quote}”</i></p>"
        "<p><small>Click to open the page with these words highlighted.</small></p>"
    )


def flag_tooltip(flag: FlaggedClaim) -> str:
    """A flagged claim's hover card: why it is flagged (escaped rich text)."""
    return (
        f"<p><b>⚠ Flagged claim</b></p><p>{html.escape(flag.reason)}</p>"
        "<p><small>Click to open the passage it cites; the list below has every flag."
        "</small></p>"
    )


def plain_claim(sentence: str) -> str:
    """A flagged sentence without its citation tokens and marks, as a reader quotes it."""
    text = _ID_TOKEN.sub("", sentence).replace("⚠", "")
    return re.sub(r"\s+([.,;:!?])", r"\1", " ".join(text.split()))


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 2}


def sentence_start(text: str, end: int) -> int:
    """Where the sentence that ends at ``end`` in ``text`` begins (after the previous sentence's
    end, or at the start of the line)."""
    head = text[:end].rstrip()
    line_start = head.rfind("\n") + 1
    # The sentence's own final stop (and citations) must not count as the previous end.
    body_end = len(head.rstrip('.!?”"’)]0123456789[ '))
    start = line_start
    for m in _SENTENCE_END.finditer(head, line_start, max(body_end, line_start)):
        start = m.end()
    return start


def link_flags(markdown: str, flagged: list[FlaggedClaim]) -> str:
    """``markdown`` with each "⚠" mark turned into a ``flag:<i>`` link to the flagged claim it
    stands for: the claim whose words overlap most with the sentence before the mark, each
    claim used once while another fits as well (a sentence written twice has two marks), none
    removed from the report."""
    if not flagged:
        return markdown
    claims = [_words(plain_claim(f.sentence)) for f in flagged]
    # a claim removed from the report has no mark in it
    shown = [i for i, f in enumerate(flagged) if not f.removed] or list(range(len(flagged)))
    used: dict[int, int] = {}
    out: list[str] = []
    last = 0
    for m in _FLAG_MARK.finditer(markdown):
        sentence = _words(markdown[sentence_start(markdown, m.start()) : m.start()])
        best = max(
            shown,
            key=lambda i: (len(sentence & claims[i]), -used.get(i, 0), -i),
        )
        used[best] = used.get(best, 0) + 1
        out.append(markdown[last : m.start()])
        out.append(f" [⚠]({FLAG_SCHEME}:{best})")
        last = m.end()
    out.append(markdown[last:])
    return "".join(out)
