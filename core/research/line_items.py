"""Line-item searches: a query naming a financial metric also searches for the line items a
filing reports it with.

A filing's statement tables hold the numbers under their line items, not under the metric's
name: a query for a company's free cash flow ranks its cash-flow statement far below one for
"net cash provided by operating activities", which the statement says. The metrics and
their line items are data (``resources/glossary/line_items.json``); matching is by whole words
(a plural too), case aside except for acronyms ("DPO", "ROE": the word "roe" is not return on
equity).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

from core.text import STOP_WORDS, YEAR

GLOSSARY = Path(__file__).resolve().parents[2] / "resources" / "glossary" / "line_items.json"
MAX_ITEMS = 6  # line items per search: the embedder reads a short query best
_SUBJECT = re.compile(rf"\b(?:[A-Z][\w&.-]*[\w&]|(?:FY|Q[1-4])?\s?{YEAR})\b")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+)$")
_NEXT_WORD = re.compile(r"\s*([^\W\d_]+)")


def _is_subject(text: str, m: re.Match[str]) -> bool:
    """A capitalised word or a year is part of the subject unless it is a function word
    (:data:`~core.text.STOP_WORDS`: capitalised, it opens a sentence and is never its subject),
    or it opens a sentence, is no possessive, and a lower-case word follows: an instruction's
    verb ("Compute the ...", "Round to ...") is capitalised only there."""
    word = m.group(0).strip()
    if word.lower() in STOP_WORDS:
        return False
    if _SENTENCE_START.search(text[: m.start()]) and not text.startswith("'", m.end()):
        nxt = _NEXT_WORD.match(text, m.end())
        return bool(nxt and nxt.group(1)[0].isupper())
    return True


@functools.cache
def _terms() -> list[tuple[re.Pattern[str], tuple[str, ...]]]:
    data = json.loads(GLOSSARY.read_text(encoding="utf-8"))
    out = []
    for term in data["terms"]:
        for name in term["names"]:
            flags = 0 if name.isupper() else re.IGNORECASE
            pattern = re.compile(rf"(?<![\w&]){re.escape(name)}s?(?![\w&])", flags)
            out.append((pattern, tuple(term["line_items"])))
    return out


def line_item_query(query: str) -> str:
    """The query's subject (its names and years) followed by the line items of the metrics and
    statements it names; "" when it names none."""
    items: list[str] = []
    rest = query
    for pattern, line_items in _terms():
        if pattern.search(rest):
            items.extend(i for i in line_items if i not in items)
            rest = pattern.sub(" ", rest)
    if not items:
        return ""
    subject = [m.group(0).strip() for m in _SUBJECT.finditer(rest) if _is_subject(rest, m)]
    return " ".join([*dict.fromkeys(subject), *items[:MAX_ITEMS]])
