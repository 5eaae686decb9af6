"""Extraction artefacts taken out of a PDF's word stream, whole words at a time.

Passages keep each word's box and its offsets in the text (see ``core.ingest.chunking``), so
cleaning never edits text after the fact: it drops or splits *words* before the text is built,
and every word that stays still has a box around exactly its own characters. Three artefacts:

- dot leaders, the runs of dots joining a table-of-contents entry or a table label to its
  number ("Contractors............12"): a word that is only a leader is dropped; a leader glued
  to words is cut out, and the pieces on either side become words of their own. A piece's box
  is the union of its characters' boxes from MuPDF's character-level extraction, not a share of
  the word's width by character count: leader dots are much narrower than letters, so a
  proportional box would clip the end of the label and a highlight would not cover the word.
  (The proportional box is only a fallback when the characters cannot be matched.) A run of
  at least five dots is a leader; four or fewer may be an ellipsis ending a sentence;
- the bookmark names word processors leave in the text layer, usually in tiny type in a margin:
  an underscore and a GUID (``_9cdf804c-c003-4ebd-8997-69fb44b7fda2``) or Word's ``_Toc``,
  ``_Ref`` and ``_Hlk`` names with their digits. A bare GUID can be content (a product or
  class id in a technical text) and is kept;
- in a repaired file, words holding characters whose character map was lost (control codes,
  U+FFFD), which no reader can use. A C1 control character there is a Windows-1252 code a
  simple font's lost encoding left as it was, and is read as that character ("\x96" is "–");
  it is one character either way, so the offsets do not move.

:func:`clean_line` also says which words came right after a leader: a line whose last word is
a page number after a leader is a table-of-contents entry (:func:`toc_page`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from core.ingest.pdfrepair import bad_char

# x0, y0, x1, y1, text (a word as PyMuPDF's ``extractWORDS`` gives it)
Word = tuple[float, float, float, float, str]
# a character: text, x0, x1
Char = tuple[str, float, float]

_LEADER_CHARS = ".·․…‥⋯"
_LEADER_RUN = re.compile(r"[.·․]{5,}[.·․…‥⋯]*|[…‥⋯]{2,}[.·․…‥⋯]*")
_MIN_LEADER_DOTS = 5
_STRUCTURE_ID = re.compile(
    r"_(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|(?:Toc|Ref|Hlk)\d{5,})",
    re.IGNORECASE,
)
# arabic, roman (one case throughout) or appendix ("A-3", "F-12") page numbers
_PAGE_NUMBER = re.compile(r"\d{1,4}|[ivxlcdm]{1,7}|[IVXLCDM]{1,7}|[A-Z]{1,2}-\d{1,3}")


_C1 = re.compile("[\x80-\x9f]")


def _cp1252(m: re.Match[str]) -> str:
    try:
        return bytes([ord(m.group())]).decode("cp1252")
    except UnicodeDecodeError:  # five C1 codes have no Windows-1252 character
        return "\ufffd"


def _dots(text: str) -> int:
    """How many dots a run of leader characters stands for (an ellipsis character is three)."""
    return sum(3 if c in "…⋯" else 2 if c == "‥" else 1 for c in text)


def _leader_only(text: str) -> bool:
    return bool(text) and all(c in _LEADER_CHARS for c in text)


def _pieces(word: Word, cuts: list[tuple[int, int]], chars: list[Char] | None) -> list[Word]:
    """The parts of ``word`` between its leader runs ``cuts``, each with its own box."""
    x0, y0, x1, y1, text = word
    spans: list[tuple[int, int]] = []
    pos = 0
    for s, e in cuts:
        if s > pos:
            spans.append((pos, s))
        pos = e
    if pos < len(text):
        spans.append((pos, len(text)))
    out: list[Word] = []
    for s, e in spans:
        if chars is not None:
            out.append((chars[s][1], y0, chars[e - 1][2], y1, text[s:e]))
        else:  # characters unknown: a share of the width by character count
            step = (x1 - x0) / len(text)
            out.append((x0 + s * step, y0, x0 + e * step, y1, text[s:e]))
    return out


def _word_chars(word: Word, line_chars: list[Char]) -> list[Char] | None:
    """The characters of ``word`` among its line's characters, or None when they do not match."""
    x0, _y0, x1, _y1, text = word
    inside = [
        ch
        for ch in line_chars
        if not ch[0].isspace() and x0 - 0.5 <= (ch[1] + ch[2]) / 2 <= x1 + 0.5
    ]
    if "".join(ch[0] for ch in inside) != text:
        return None
    return inside


def clean_line(
    words: list[Word],
    line_chars: Callable[[], list[Char]] | None,
    *,
    repaired: bool = False,
) -> tuple[list[Word], set[int]]:
    """The words of one text line without artefacts, and the indices of those after a leader.

    ``line_chars`` returns the line's characters (it is called only when a word has a leader
    glued to it); None for lines whose words cannot be cut by x (vertical text): their glued
    leaders are kept. ``repaired`` (the file was damaged) turns on the clean-up of lost
    character maps described in the module docstring.
    """
    out: list[Word] = []
    after: set[int] = set()  # indices into ``out`` of words that follow a leader
    dots: list[Word] = []  # leader-only words since the last kept word
    chars: list[Char] | None = None
    for word in words:
        text = word[4]
        if repaired and _C1.search(text):
            text = _C1.sub(_cp1252, text)
            word = (*word[:4], text)
        if _STRUCTURE_ID.fullmatch(text) or (repaired and any(bad_char(c) for c in text)):
            continue
        if _leader_only(text):
            dots.append(word)
            continue
        if dots:
            if sum(_dots(w[4]) for w in dots) >= _MIN_LEADER_DOTS:
                after.add(len(out))
            else:  # too short for a leader (". . ." is an ellipsis): the dots stay
                out.extend(dots)
            dots.clear()
        cuts = [(m.start(), m.end()) for m in _LEADER_RUN.finditer(text)]
        if not cuts or line_chars is None:
            out.append(word)
            continue
        if chars is None:
            chars = line_chars()
        if cuts[0][0] == 0:
            after.add(len(out))
        for k, piece in enumerate(_pieces(word, cuts, _word_chars(word, chars))):
            if k:
                after.add(len(out))
            out.append(piece)
        if cuts[-1][1] == len(text):
            after.add(len(out))  # a leader ending the word leads to the next word
    if dots and sum(_dots(w[4]) for w in dots) < _MIN_LEADER_DOTS:
        out.extend(dots)
    return out, {i for i in after if i < len(out)}


def toc_page(words: list[Word], after_leader: bool) -> str | None:
    """The page number a table-of-contents entry line ends with, or None.

    ``words`` are a line's (or a table row's) cleaned words and ``after_leader`` tells whether
    its last word came right after a leader.
    """
    if not after_leader or len(words) < 2:
        return None
    last = words[-1][4]
    return last if _PAGE_NUMBER.fullmatch(last) else None
