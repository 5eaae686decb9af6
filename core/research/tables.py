"""Statement rows read with their columns, for the model: "Total net sales | 41,200 | 45,310 |
52,870" under the header "2015 | 2016 | 2017" is shown as "Total net sales (2015: 41,200;
2016: 45,310; 2017: 52,870)".

A filing's statement is a table of line items by period, and a passage holds it as rows of
cells, the periods once at the top (or in a passage before, when the table runs on). Asked
for a change in revenue between two years, the 1.5B took two figures from a row twenty lines
below the header ("Operating income | 1,120 | 1,480 | 1,390") and could not tell which year
each was. With each figure beside its period, a row says what it holds on its own. A row
is not made a sentence: the answer step picks sentences by similarity to the question, and
"Percentage of total revenue" rows of another filing outranked "Total net sales" for a question
about revenue, where the whole table, read as one, was picked.

Only rows with one cell more than the header has periods are rewritten (the line item and a
figure per period); everything else is kept as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from core.text import MONTH, YEAR, plain_number

_PERIOD = re.compile(
    rf"(?:FY\s?|Q[1-4]\s?|fiscal\s+|H[12]\s?)?{YEAR}(?:\s?[-–]\s?(?:19|20)?\d\d)?"
    rf"|(?:{MONTH}\.?\s+\d{{1,2}},?\s+){YEAR}"
    rf"|{YEAR}\s*\([a-z0-9]\)",  # a footnote mark: "2019 (4)"
    re.IGNORECASE,
)
_SPACED_DOLLAR = re.compile(r"\$\s+(?=[\d(])")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.split("|")]


def header(line: str) -> list[str] | None:
    """The periods a header row names ("2015 | 2016 | 2017", "(in millions) | 2022 | 2021"),
    or None for any other line: at least two cells, after an optional leading label, and all
    of them periods."""
    cells = _cells(line)
    if len(cells) < 2:
        return None
    periods = cells[1:] if not _PERIOD.fullmatch(cells[0]) else cells
    if len(periods) < 2 or not all(_PERIOD.fullmatch(c) for c in periods):
        return None
    return periods


def runs_on(before: Iterable[str], text: str) -> list[str] | None:
    """The header a table in ``text`` carries over from the passages ``before`` it (nearest
    first): when ``text`` starts with a table row and the passage before ends in one, captions
    of the table's parts aside ("Current liabilities:"; the same table, split between
    passages), the last header there; a long statement split into more passages may hold only
    rows there, and lines that are no sentence (captions, a label run over two lines), and then
    the header is looked for in the passage before that, and so on. None when no header is
    found before a passage holding a sentence (the table began there without one) or the
    passages run out."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    first = next((ln for ln in lines if not _caption(ln)), None)
    if first is None or not _in_table(first):
        return None
    for passage in before:
        lines = [ln for ln in passage.splitlines() if ln.strip()]
        last = next((ln for ln in reversed(lines) if not _caption(ln)), None)
        if last is None or not _in_table(last):
            return None
        found = None
        for line in lines:
            found = header(line) or found
        if found or not all(_in_table(ln) or not _sentence(ln) for ln in lines):
            return found
    return None


#: Longest a caption of a table's part runs ("Cash flows from investing activities:").
CAPTION_WORDS = 10


def _in_table(line: str) -> bool:
    """Whether ``line`` is a row of a table, its cells read or run together ("Total assets |
    $ 411,976 $ 364,840")."""
    return "|" in line


def _sentence(line: str) -> bool:
    return line.strip().endswith(".")


def _caption(line: str) -> bool:
    """Whether ``line`` may caption a part of a table, not being a row: it opens the rows
    below it ("Changes in operating assets and liabilities, net of acquisitions:"), or is
    short and not a sentence ("Investing activities")."""
    text = line.strip()
    if _in_table(text):
        return False
    return text.endswith(":") or (not _sentence(text) and len(text.split()) <= CAPTION_WORDS)


def labelled_rows(text: str, carried: list[str] | None = None) -> str:
    """``text`` with each table row under a header written as its line item and a period per
    figure; ``carried`` is the header of the passages before (from :func:`runs_on`), for rows
    above this passage's own first header."""
    periods = carried
    out = []
    for line in text.splitlines():
        found = header(line)
        if found:
            periods = found
            out.append(line)
            continue
        cells = _cells(line)
        if periods and len(cells) == len(periods) + 1 and cells[0]:
            figures = [
                f"{p}: {_SPACED_DOLLAR.sub('$', v)}"
                for p, v in zip(periods, cells[1:], strict=True)
                if v
            ]
            if figures:
                out.append(f"{cells[0].rstrip(':')} ({'; '.join(figures)})")
                continue
        out.append(line)
    return "\n".join(out)


_FIGURE = re.compile(r"\s*([^:;]+?):\s*([^;]+?)\s*(?:;|$)")


def _figures_open(text: str) -> int:
    """Where the parenthesised figures closing ``text`` open, or -1 when ``text`` does not
    end in a parenthesis (a loss written "(1,283)" inside them is skipped over)."""
    if not text.endswith(")"):
        return -1
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return -1


def row_figures(text: str) -> tuple[str, dict[str, str]] | None:
    """A row as :func:`labelled_rows` writes it ("Total net sales (2016: $45,310; 2017:
    52,870)") as its line item, case folded, and its figure per period as
    :func:`~core.text.plain_number` writes it ("52870", "(1283)" for a loss), or None when
    ``text`` is not one."""
    flat = " ".join(text.split())
    start = _figures_open(flat)
    label = flat[:start].strip().rstrip(":").casefold() if start > 0 else ""
    if not any(c.isalpha() for c in label):
        return None
    pairs = _FIGURE.findall(flat[start + 1 : -1])
    if not pairs or not all(_PERIOD.fullmatch(p.strip()) for p, _ in pairs):
        return None
    return label, {p.strip(): plain_number(v) for p, v in pairs}


def states_row(claim: str, text: str) -> bool:
    """Whether ``claim`` copies a row of ``text`` (as :func:`labelled_rows` wrote it): the same
    line item and, for each period the claim names, the same figure. The row is the program's
    own reading of the passage's table, so a copy of it is stated there."""
    said = row_figures(claim.strip().rstrip("."))
    if said is None:
        return False
    label, figures = said
    rows = (row_figures(line) for line in text.splitlines())
    return any(
        row is not None and row[0] == label and all(row[1].get(p) == v for p, v in figures.items())
        for row in rows
    )
