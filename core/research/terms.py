"""The terms a claim asserts (numbers, dates, names) and whether a text holds them.

The claim check's first, lexical filter (:mod:`core.research.citations`): each term a cited
sentence asserts must appear in its cited text, compared case, accents and thousands commas
aside; a month may appear as its short form or a numeric date, a place as its demonym. The
chain and consistency checks compare answers with questions and passages the same way.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

from core.research.words import fold
from core.text import MONTHS, STOP_WORDS, figures, month_numbers
from graph.ids import CITED_ID_RE


def normalised(text: str) -> str:
    """Lower case, accents folded ("Sao Tome" is the passage's "São Tomé"), no
    thousands commas, one space between words."""
    return " ".join(fold(text.replace(",", "").replace("\u2019", "'")).split())


_NUMERIC_DATE_RE = re.compile(
    r"\b(\d{1,2})/\d{1,2}/\d{2,4}\b"  # 11/27/2007 (US month first)
    r"|\b\d{4}-(\d{1,2})-\d{1,2}\b"  # 2007-11-27
)


def _has_month(month: str, cited: str) -> bool:
    """A month name counts as present when the cited text names it or its short form as a
    word (Nov, Sept; not the "mar" of "market") or writes a numeric date in that month
    (11/27/2007, 2007-11-27)."""
    n = MONTHS.index(month) + 1
    if n in month_numbers(cited):
        return True
    return any(int(m.group(1) or m.group(2)) == n for m in _NUMERIC_DATE_RE.finditer(cited))


DEMONYMS = Path(__file__).resolve().parents[2] / "resources" / "glossary" / "demonyms.json"


@functools.cache
def _same_place() -> dict[str, tuple[str, ...]]:
    """Place or demonym -> the other words naming it ("france" -> ("french",))."""
    out: dict[str, set[str]] = {}
    for names in json.loads(DEMONYMS.read_text(encoding="utf-8"))["names"]:
        for name in names:
            out.setdefault(name, set()).update(n for n in names if n != name)
    return {k: tuple(sorted(v)) for k, v in out.items()}


_ZEROS = re.compile(r"(\d)\.?0+$")  # the zeros closing a figure's decimals: "35.00", "2.50"


def _held_figure(figure: str, cited: str) -> bool:
    """Whether ``cited`` writes ``figure`` (a :func:`~core.text.figures` spelling with decimals)
    without the zeros that close its decimals, as a figure of its own: "35.00" is the passage's
    "$35 billion", "2.50" its "2.5%", but not its "35.5" or "2035"."""
    if "." not in figure or not _ZEROS.search(figure):
        return False
    short = _ZEROS.sub(r"\1", figure)
    return re.search(rf"(?<![\d.]){re.escape(short)}(?!\.?\d)", cited) is not None


def _present(term: str, cited: str) -> bool:
    """Whether the normalised ``cited`` text holds ``term``: as written, or for a figure
    without the zeros closing its decimals, or for a month its abbreviation or a numeric date,
    or for a place its demonym and the other way round (the claim's "France" is the passage's
    "French painter")."""
    t = normalised(term)
    if t in MONTHS:
        return _has_month(t, cited)
    if t in cited or _held_figure(t, cited):
        return True
    return any(re.search(rf"\b{re.escape(o)}\b", cited) for o in _same_place().get(t, ()))


def terms_missing(terms: list[str], text: str) -> list[str]:
    """The ``terms`` (from :func:`key_terms`) that ``text`` does not hold, compared as the
    claim check compares them (case, accents and thousands commas aside)."""
    held = normalised(text)
    return [t for t in terms if not _present(t, held)]


def key_terms(sentence: str) -> list[str]:
    """Numbers, dates and names a cited sentence asserts."""
    plain = CITED_ID_RE.sub(" ", sentence)
    # list markers and headings ("- ", "> ", "## ", "2. ", "3) "), not a figure opening the
    # sentence: "1,254 tonnes" asserts 1,254, not 254
    plain = re.sub(r"^\s*(?:(?:[>*#\-]+|\d{1,2}[.)])(?:\s+|$))*", " ", plain)
    plain = re.sub(r"^\s*step\s+\d+\s*[:.)]", " ", plain, flags=re.I)  # "Step 2:" numbers a step
    terms: list[str] = figures(plain)
    words = re.findall(r"[^\W\d_](?:[^\W\d_]|['\-])+", plain)  # "Brückner", not "Br"
    for i, w in enumerate(words):
        low = w.lower()
        if low in MONTHS:
            terms.append(low)
        elif w[0].isupper() and i > 0 and low not in STOP_WORDS and len(w) > 2:
            terms.append(re.sub(r"'s$", "", w, flags=re.I).strip("'"))  # ACME's names ACME
    return list(dict.fromkeys(t for t in terms if t))
