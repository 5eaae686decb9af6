"""Titles from a document's front matter, where its first heading is only a letterhead.

SEC filings (10-K, 10-Q, 8-K ...) open with the same cover page: the agency's name in the
largest type, then the form, the period and the registrant. Their first heading is "UNITED
STATES SECURITIES AND EXCHANGE COMMISSION", which gave ten of the twenty FinanceBench filings the
same title in the library list, the Sources lists and the research router. The cover's fields
make a title an analyst recognises: "ACME CORP. — Form 10-Q, quarterly period ended
June 30, 2023".
"""

from __future__ import annotations

import re

_AGENCY = re.compile(r"securities\s+and\s+exchange\s+commission", re.I)
_FORM = re.compile(r"^form\s+(\d{1,2}-[a-z]{1,2}(?:/a)?|[sf]-\d{1,2}(?:/a)?|def\s*14a)$", re.I)
_REGISTRANT_NOTE = re.compile(r"^\(\s*exact\s+name\s+of\s+registrant", re.I)
_FILE_NUMBER = re.compile(r"^commission\s+file\s+(?:no\.?|number)\b", re.I)
_DATE = r"([A-Z][a-z]+\.?\s+\d{1,2},\s+\d{4})"
_PERIOD = re.compile(
    r"for\s+the\s+(fiscal\s+year|quarterly\s+period|year|quarter)\s+ended\s+" + _DATE, re.I
)
_A_DATE = re.compile(_DATE)
_REPORT_DATE = re.compile(r"date\s+of\s+report[^:]*:\s*" + _DATE, re.I)
COVER_LINES = 80  # a cover page's fields are all near its top
_NAME_LINES = 2


def sec_cover_title(lines: list[str]) -> str | None:
    """ "REGISTRANT — Form X, period" for the first page of an SEC filing, else None.

    ``lines`` are the first page's text lines in reading order. The registrant is the line (or
    two wrapped lines) above "(Exact name of registrant as specified in its charter)", or, on
    covers without that note, the first line after the commission file number. The period is
    the fiscal year or quarter the report covers, or an 8-K's date of report. A cover without
    a form or a registrant gives None (the caller keeps its other title).
    """
    lines = [" ".join(line.split()) for line in lines[:COVER_LINES]]
    lines = [line for line in lines if line]
    text = " ".join(lines)
    if not _AGENCY.search(text):
        return None
    form = next((m.group(1).upper() for line in lines if (m := _FORM.match(line))), None)
    registrant = _registrant(lines)
    if form is None or registrant is None:
        return None
    title = f"{registrant} — Form {form}"
    if m := _PERIOD.search(text):
        title += f", {' '.join(m.group(1).lower().split())} ended {m.group(2)}"
    elif m := _REPORT_DATE.search(text):
        title += f", report dated {' '.join(m.group(1).split())}"
    return title[:200]


def _registrant(lines: list[str]) -> str | None:
    for i in range(1, len(lines)):
        # the note may wrap: "(Exact" / "name of registrant as specified in its charter)"
        if _REGISTRANT_NOTE.match(" ".join(lines[i : i + 2])):
            parts: list[str] = []
            for prev in reversed(lines[max(0, i - _NAME_LINES) : i]):
                if not _name_part(prev):
                    break
                parts.insert(0, prev)  # a name set in narrow type wraps: "ACME" / "PLC"
            if parts:
                return " ".join(parts)
    for i, line in enumerate(lines):
        if _FILE_NUMBER.match(line):
            after = [cand for cand in lines[i + 1 : i + 4] if _name_part(cand)]
            return after[0] if after else None
    return None


def _name_part(line: str) -> bool:
    """Whether a cover line can be (part of) the registrant's name."""
    return (
        any(c.isalpha() for c in line)
        and len(line) <= 120
        and not line.startswith("(")
        and ":" not in line
        and ")" not in line
        and not _A_DATE.search(line)
        and not _FORM.match(line)
        and not _FILE_NUMBER.match(line)
        and not _AGENCY.search(line)
    )
