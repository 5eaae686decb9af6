"""Cheap word tests the research run uses to keep a small model's output on topic.

No model and no index: content words (four letters or more, or a number of two digits or
more, minus question words) and names (capitalised words not at the start of a sentence). Both
are lower-cased sets, so tests compare them directly.
"""

from __future__ import annotations

import re

_CONTENT_WORD = re.compile(r"[^\W\d_]{4,}|\d{2,}")
_STOP_WORDS = (
    "what which where when whose who that this these those with from into about their "
    "there have does were been being than then they them also other such many much more "
    "most some same only each both after before during first last name named find search "
    "query "
)
_STOP = frozenset(_STOP_WORDS.split())
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][\w'-]+")


def content_words(text: str) -> set[str]:
    return {w for w in _CONTENT_WORD.findall(text.lower()) if w not in _STOP}


def names(text: str) -> set[str]:
    """Capitalised words not at the start of a sentence: the names a text mentions."""
    return {m.lower() for m in _NAME.findall(text.strip())}


def focus_terms(query: str, before: str, found: str, max_words: int = 12) -> str:
    """The words of ``query`` that ``before`` (the queries it builds on) did not already ask
    about, then the words ``found`` (their answers) adds: "waterfall country found Zimbabwe"
    for "the waterfall in the country where the Bubye River is found", given "Where is the
    Bubye River?" and "The Bubye River is in Zimbabwe." In the text's own order and case;
    "" when nothing is new."""
    asked = content_words(before)
    out: list[str] = []
    seen: set[str] = set()
    for text in (query, found):
        for w in _CONTENT_WORD.findall(text):
            low = w.lower()
            if low in _STOP or low in asked or low in seen:
                continue
            seen.add(low)
            out.append(w)
    return " ".join(out[:max_words])
