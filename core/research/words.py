"""Cheap word tests the research run uses to keep a small model's output on topic.

No model and no index: content words (four letters or more, or a number of two digits or
more, minus :data:`~core.text.QUESTION_WORDS`) and names (capitalised words not at the start
of a sentence). Both are lower-cased sets, so tests compare them directly.
"""

from __future__ import annotations

import re
import unicodedata

from core.ingest.entities import find_entities, title_names
from core.text import QUESTION_WORDS

_CONTENT_WORD = re.compile(r"[^\W\d_]{4,}|\d{2,}")
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][\w'-]+")


def content_words(text: str) -> set[str]:
    """Folded (:func:`fold`): a question's "Sao Tome" is the passage title's "São Tomé", which
    the planner copies."""
    return {w for w in _CONTENT_WORD.findall(fold(text)) if w not in QUESTION_WORDS}


def names(text: str) -> set[str]:
    """Capitalised words not at the start of a sentence: the names a text mentions."""
    return {m.lower() for m in _NAME.findall(text.strip())}


def focus_terms(query: str, before: str, found: str, max_words: int = 12) -> str:
    """The words of ``query`` that ``before`` (the queries it builds on) did not already ask
    about, then the words ``found`` (their answers) adds: "lighthouse country found Norland"
    for "the lighthouse in the country where the Eastline railway is found", given "Where is
    the Eastline railway?" and "The Eastline railway is in Norland." In the text's own order
    and case; "" when nothing is new."""
    asked = content_words(before)
    out: list[str] = []
    seen: set[str] = set()
    for text in (query, found):
        for w in _CONTENT_WORD.findall(text):
            low = fold(w)
            if low in QUESTION_WORDS or low in asked or low in seen:
                continue
            seen.add(low)
            out.append(w)
    return " ".join(out[:max_words])


_SOURCES = r"(?:passages?|texts?|sources?|documents?|evidence|results?|context)"
# "X is not explicitly stated in the given passages" -> "X"
_NOT_IN_SOURCES = re.compile(
    r"\s+(?:is|are|was|were)\s+not\s+(?:\w+ly\s+)?"
    r"(?:stated|mentioned|specified|provided|given|found|listed|named|identified|available)"
    rf"(?:\s+(?:in|by)\s+(?:any\s+of\s+)?(?:the\s+)?(?:\w+\s+)?{_SOURCES})?\s*$",
    re.IGNORECASE,
)
# "The passage does not provide information about X" -> "X"
_SOURCES_LACK = re.compile(
    rf"^(?:the\s+)?(?:\w+\s+)?{_SOURCES}\s+(?:does|do|did)\s+not\s+"
    r"(?:provide|give|contain|include|mention|state|say|specify)\s+"
    r"(?:any\s+)?(?:information|details|data)?\s*(?:about|on|regarding|of|for)?\s*",
    re.IGNORECASE,
)


def gap_query(gap: str) -> str:
    """What a worker's gap says is missing, as a search: "The country where the composer of
    Northport was a citizen is not mentioned in the given passages" -> "The country where the
    composer of Northport was a citizen". Searched whole, its "not mentioned in the given
    passages" weighs in both the keyword and the dense search, though it names nothing the run
    lacks. Any other gap is kept as it is."""
    text = " ".join(gap.split()).rstrip(" .")
    lacks = _SOURCES_LACK.match(text)
    if lacks and lacks.end() < len(text):
        text = text[lacks.end() :]
    cut = _NOT_IN_SOURCES.sub("", text).strip(" ,;:")
    return cut if len(cut) >= 3 else text


# Between two names of one title ("Tom and the Long, Cold, Very Dark Night"): punctuation and
# at most three short words.
_NAME_GAP = re.compile(r"[\s,:;'-]*(?:\w{1,4}[\s,:;'-]+){0,3}")


_NOT_SUBJECTS = frozenset({"date", "quantity"})


def fold(text: str) -> str:
    """Lower-cased, accents removed: "São Tomé" and "Sao Tome" compare equal."""
    return unaccented(text.lower())


def unaccented(text: str) -> str:
    """Accents removed, case kept: "Brückner" -> "Bruckner"."""
    norm = unicodedata.normalize("NFKD", text)
    return "".join(c for c in norm if not unicodedata.combining(c))


def subject_names(text: str) -> list[str]:
    """The named subjects of ``text``, names split only by short words joined: a question's
    "Tom and the Long, Cold, Very Dark Night" is one subject, its "Acme" and "Northport" two.
    Dates and quantities are not subjects: "What is the total revenue for FY2016?" names
    none."""
    out: list[tuple[int, int]] = []
    joinable = False
    for start, end, _name, kind in find_entities(text):
        if kind in _NOT_SUBJECTS:  # "FY2016" names when, "30%" how much: neither names what
            joinable = False
            continue
        if joinable and _NAME_GAP.fullmatch(text[out[-1][1] : start]):
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
        joinable = True
    return list(dict.fromkeys(text[s:e] for s, e in out))


def names_in(name: str, text: str) -> bool:
    """Whether folded ``text`` names ``name`` as whole words (both compared folded)."""
    key = fold(name).strip()
    return len(key) >= 3 and re.search(rf"(?<!\w){re.escape(key)}(?!\w)", text) is not None


def title_named(title: str, text: str) -> bool:
    """Whether folded ``text`` names a document by its title or, for a disambiguated title
    ("Northport (song)"), by its bare name."""
    return any(names_in(n, text) for n in title_names(title))
