"""Line items, and what is worked out from them, read off the statement rows that name them,
by the program.

Asked for one line item of a company's statement in one year "in USD millions", the 1.5B had
the statement's row before it and answered with the difference of two other rows. A
question asking for one line item in one period needs no model: the row whose line item the
question names holds the figure under the period the question names. The answer states it in
the unit the question asks for, the conversion shown as a calculation the claim check redoes
("1,250,400 / 1,000 = 1,250.4" off a table in thousands), and its chain is the row as
:func:`~core.research.tables.labelled_rows` writes it, which the support check reads as
stated. So are the questions one or two such rows answer as surely: the line item's change
between two years as a percentage (:func:`changed`), a ratio with one common definition in one
year (:data:`METRICS`, :func:`worked_metric`), whether either rose or fell
(:func:`asked_trend`), and a measure the question itself defines in terms of line items
(:func:`asked_definition`, :func:`worked_definition`).

The program answers only when the question asks for nothing else (:data:`_NOT_ONE_ROW`: no
average, no segment, no quarter, no reason), and every row naming the line item most fully in
the financial statements read (not a note's table, not a cash-flow statement's changes) holds
the same figure for the years asked; otherwise the model answers, as before.

No model and no I/O; pure functions of the question and the passages' texts.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.research.arithmetic import evaluate
from core.research.tables import header, row_figures
from core.research.worked import asked_decimals
from core.text import NUMBER, STOP_WORDS, YEAR, plain_number, split_sentences

#: A question about a part of the company or of the year (a quarter's column and the year to
#: date's may both carry the year), or for a choice or a reason, is not answered off
#: consolidated rows ...
_NOT_THE_YEAR_WORDS = (
    r"segment|region|division|geographic|product|category|q[1-4]|h[12]|quarter(?:ly)?|half"
    r"|months|which|why"
)
#: ... nor, off one row, a question asking for something worked out from figures.
_NOT_ONE_ROW = re.compile(
    r"\b(?:ratio|margin|proportion|share of|average|difference|compare[sd]?|versus|vs|more"
    r"|less|higher|lower|turnover|conversion|days|rate|yield|cagr|times|per employee"
    rf"|{_NOT_THE_YEAR_WORDS})\b",
    re.IGNORECASE,
)
_NOT_THE_YEAR = re.compile(rf"\b(?:{_NOT_THE_YEAR_WORDS})\b", re.IGNORECASE)
#: Words of a rise, and of a fall.
_UP = re.compile(
    r"\b(?:improv\w*|increas\w*|grow\w*|grew|rise[sn]?|rising|rose|higher|expand\w*)\b",
    re.IGNORECASE,
)
_DOWN = re.compile(
    r"\b(?:declin\w*|decreas\w*|drop\w*|fall\w*|fell|lower|shrink\w*|deteriorat\w*"
    r"|worsen\w*)\b",
    re.IGNORECASE,
)
#: One row does answer a line item's change between two years asked as a percentage
#: (:data:`_PERCENT`): a change, a rise or a fall.
_CHANGE = re.compile(rf"\bchange[sd]?\b|{_UP.pattern}|{_DOWN.pattern}", re.IGNORECASE)
#: A question for yes or no ("Did ...?", "Is ... improving?") is not answered with a figure.
_YES_NO = re.compile(
    r"(?:^|[.?!]\s+)(?:do|does|did|is|are|was|were|has|have|had|can|could|will|would|should)\b",
    re.IGNORECASE,
)
_PERCENT = re.compile(r"%|\bpercent(?:s|age)?\b", re.IGNORECASE)
#: A question for one year's figure asks for an amount: in a unit it names, or "how much".
_AMOUNT = re.compile(r"\b(?:how much|amount|(?:thousand|million|billion)s?)\b", re.IGNORECASE)
#: A financial statement's name, or that of the table of selected data drawn from them: what
#: a question points to ("Base your answer on the balance sheet") names no line item (a row
#: labelled "Balance" is not what it asks for), and a row under it is a statement's.
_STATEMENT = re.compile(
    r"\b(?:balance sheets?|P&L|(?:income|cash[- ]flows?|operations|earnings) statements?"
    r"|statements? of (?:consolidated )?(?:income|operations|earnings|cash flows?"
    r"|financial position|comprehensive (?:income|loss)|(?:stockholders|shareholders)'? equity)"
    r"|selected (?:consolidated )?financial data)",
    re.IGNORECASE,
)
#: A part of the company: a line naming a statement and one titles that part's figures.
_PART = re.compile(r"\b(?:segments?|divisions?|regions?)\b", re.IGNORECASE)
_CHANGES = re.compile(r"\bchanges? in\b", re.IGNORECASE)
#: A cell holding an amount, as row_figures spells it ("1250", "(1283)"): not "—" for none, nor
#: a percentage.
_AMOUNT_CELL = re.compile(r"\(?-?\d+(?:\.\d+)?\)?")
_TOTAL = re.compile(r"(?:total|net cash|cash)\b", re.IGNORECASE)
_YEAR = re.compile(rf"(?<!\d){YEAR}(?!\d)")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")  # "Kelmor's" one word
_SCALE = re.compile(r"\bin\s+(thousands|millions|billions)\b", re.IGNORECASE)
_ASKED_SCALE = re.compile(r"\b(thousand|million|billion)s?\b", re.IGNORECASE)
_ASKED_DOLLARS = re.compile(r"\$|\bUSD\b|\bdollars?\b", re.IGNORECASE)
#: Words that name no line item on their own: a row labelled "Total" is a total of something.
_GENERIC = STOP_WORDS | {"total", "net", "other", "subtotal"}
#: ... and may stand beside a line item's name in a question: "the total amount of Harbor fees",
#: "unadjusted operating income" (as the statement reports it).
_BESIDE = STOP_WORDS | {
    "total",
    "amount",
    "figure",
    "value",
    "reported",
    "unadjusted",
    "fiscal",
    "year",
    "end",
}
#: The names one line item goes by ("capital expenditures", "purchases of property and
#: equipment"): data, as the metrics' line items are (:mod:`core.research.line_items`).
ROW_NAMES = Path(__file__).resolve().parents[2] / "resources" / "glossary" / "row_names.json"
#: The ratios a question may ask for in one year and how each is worked out from rows.
METRICS = ROW_NAMES.with_name("metrics.json")
_POWER = {"thousand": 3, "million": 6, "billion": 9}
_OF = re.compile(r"\s+of\s", re.IGNORECASE)


@dataclass(frozen=True)
class Read:
    row: str  # the row as labelled_rows writes it: "Harbor fees (2019: 1,250; 2018: 1,100)"
    evidence_id: str
    figures: tuple[str, ...]  # per year asked, as row_figures spells it: "1250", "(1283)"
    scale: str | None  # the table's unit: "thousand", "million", "billion"; None unknown
    spent: bool = False  # a line item of money spent (:func:`spent`): its figure's sign aside


#: A sentence that opens with "If" asks for something else only on a condition ("If the
#: margin is not a useful measure here, say why"): the question is in the sentences before it.
_CONDITION = re.compile(r"if\b", re.IGNORECASE)


def asked_part(question: str) -> str:
    """``question`` without the sentences after its first that open with "If": what it asks
    for when their condition does not hold, which is what the rows can answer."""
    sentences = split_sentences(question)
    kept = sentences[:1] + [s for s in sentences[1:] if not _CONDITION.match(s.strip())]
    return " ".join(s.strip() for s in kept) if len(kept) < len(sentences) else question


def asked_years(question: str) -> tuple[str, ...] | None:
    """The years whose figures of one row answer ``question``, or None when it asks for
    anything else (:data:`_NOT_ONE_ROW`, :data:`_YES_NO`): its one year when it asks for an amount
    (:data:`_AMOUNT`) and no change; the two, earlier first, when it asks for the change
    between them as a percentage."""
    years = sorted(set(_YEAR.findall(question)))
    if _NOT_ONE_ROW.search(question) or _YES_NO.search(question.strip()):
        return None
    change, percent = bool(_CHANGE.search(question)), bool(_PERCENT.search(question))
    if len(years) == 1 and not change and not percent and _AMOUNT.search(question):
        return (years[0],)
    if len(years) == 2 and change and percent:
        return (years[0], years[1])
    return None


def _word(word: str) -> str:
    """A word folded as a name of a line item is matched: case and a plural aside."""
    w = word.casefold()
    return w[:-3] + "y" if w.endswith("ies") else w.removesuffix("s")


def _words(text: str) -> tuple[str, ...]:
    return tuple(_word(w) for w in _WORD.findall(text) if not w.isdigit())


@functools.cache
def _row_names() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ROW_NAMES.read_text(encoding="utf-8"))
    return data


@functools.cache
def _spent_names() -> frozenset[tuple[str, ...]]:
    items = _row_names()["spent"]["items"]
    return frozenset(n for item in items for n in _groups()[_words(item)])


def spent(label: str) -> bool:
    """Whether a row labelled ``label`` holds money spent (:data:`ROW_NAMES`' "spent"), by its
    name or the name it qualifies (:func:`_heads`): shown in parentheses, it is no less spent."""
    return bool(({_words(label)} | _heads(label)) & _spent_names())


@functools.cache
def _groups() -> dict[tuple[str, ...], frozenset[tuple[str, ...]]]:
    """Each name of a line item (:data:`ROW_NAMES`) and all the names of its line item."""
    out: dict[tuple[str, ...], frozenset[tuple[str, ...]]] = {}
    for group in _row_names()["groups"]:
        names = frozenset(_words(n) for n in group)
        for name in names:
            out[name] = out.get(name, frozenset()) | names
    return out


def _asked(question: str) -> list[list[tuple[str, bool]]]:
    """The question's words between the statements it names, each folded (:func:`_word`) with
    whether it may stand beside a line item's name without making it another line item's: a
    function word, "total" or "amount", a name (capitalised), a period ("FY2019"), a word of
    its change, rise or fall ("rising Harbor fees", "Harbor fees changed")."""
    parts = []
    for part in _STATEMENT.split(question):
        words = [w for w in _WORD.findall(part) if not w.isdigit()]
        parts.append([(_word(w), _beside(w)) for w in words])
    return parts


def _beside(word: str) -> bool:
    return (
        _word(word) in _BESIDE
        or word[0].isupper()
        or any(c.isdigit() for c in word)
        or bool(_CHANGE.fullmatch(word) or _COMPARED.fullmatch(word))
    )


def _names(
    name: tuple[str, ...], asked: list[list[tuple[str, bool]]], free_after: bool = False
) -> bool:
    """Whether the question names ``name`` as a line item of its own: its words together,
    with nothing beside them but words that leave it one ("Harbor fees" is not named in
    "Harbor fees receivable")."""
    n = len(name)
    for part in asked:
        words = [w for w, _ in part]
        for i in range(len(part) - n + 1):
            if tuple(words[i : i + n]) != name:
                continue
            before = i == 0 or part[i - 1][1]
            after = free_after or i + n == len(part) or part[i + n][1]
            if before and after:
                return True
    return False


def _named(label: str, asked: list[list[tuple[str, bool]]]) -> tuple[int, int]:
    """How fully the question names the row's line item ``label``: (the words of the fullest
    name it uses for it, the row's or another of its line item's (:data:`ROW_NAMES`), the
    words of the row's label), or (0, 0) when it names it by none, or the label names
    nothing on its own ("Total"). A label qualifying a line item's name (:func:`_heads`) names
    that item, below any row labelled with one of its names."""
    words = _words(label)
    if not words or all(w in _GENERIC for w in words):
        return 0, 0
    used = [
        len(name) for name in {words} | _groups().get(words, frozenset()) if _names(name, asked)
    ]
    if used:
        return max(used), len(words)
    used = [
        len(name)
        for head in _heads(label)
        for name in _groups().get(head, frozenset())
        if _names(name, asked)
    ]
    return (max(used), 0) if used else (0, 0)


def _heads(label: str) -> set[tuple[str, ...]]:
    """The names of two words or more a row's ``label`` opens with before qualifying them:
    up to its first comma ("Accounts receivable, net of allowances of $12"), up to its first
    "of" ("Depreciation and amortization of property and equipment"), after "Total"."""
    cut = label.split(",", 1)[0]
    heads = {cut, _OF.split(cut, maxsplit=1)[0], re.sub(r"^total\s+", "", label, flags=re.I)}
    return {words for words in map(_words, heads) if len(words) > 1}


def text_above(before_row: str, passages_before: Iterable[str]) -> Iterator[str]:
    """The text above a row in its table: its passage's up to it, then the passages before
    (nearest first) as far as the one holding the table's header."""
    for text in (before_row, *passages_before):
        yield text
        if any(header(line) for line in text.splitlines()):
            return


def scale_of(above: Iterable[str]) -> str | None:
    """The unit of the table a row sits in: the last "in thousands" (millions, billions)
    written in the text ``above`` it (:func:`text_above`, nearest first); None when none says."""
    for text in above:
        found: list[str] = _SCALE.findall(text)
        if found:
            return found[-1].casefold().removesuffix("s")
    return None


def among_changes(above: Iterable[str]) -> bool:
    """Whether a row below the texts ``above`` (oldest first) sits among a statement's
    changes ("Changes in operating assets and liabilities:" and the rows under it, up to
    their total): there "Accounts payable" is the year's change, not the balance."""
    open_ = False
    for text in above:
        for line in text.splitlines():
            row = row_figures(line.strip())
            if row is None and "|" not in line and any(c.isalpha() for c in line):
                open_ = bool(_CHANGES.search(line))  # a heading: of changes or of another part
            elif row is not None and _TOTAL.match(row[0]):
                open_ = False  # the changes' total closes them
    return open_


def in_statement(heading: str, above: Iterable[str]) -> bool:
    """Whether a row sits in one of the financial statements (:data:`_STATEMENT`), as its
    passage's heading or the text ``above`` it (:func:`text_above`) says: a note's table has rows
    of the same names ("Depreciation and amortization" among deferred tax assets) holding
    other figures. A line naming a statement and a part of the company ("Selected financial
    data for the Northport segment") titles that part's figures, not the company's."""
    return any(
        _STATEMENT.search(line) and not _PART.search(line)
        for text in (heading, *above)
        for line in text.splitlines()
    )


def rows_naming(
    question: str, years: tuple[str, ...], text: str
) -> list[tuple[tuple[int, int], str, tuple[str, ...], int]]:
    """The rows of ``text`` (as labelled_rows writes them) whose line item ``question`` names,
    with one amount (:data:`_AMOUNT_CELL`) for each of ``years``: (how fully it names it,
    :func:`_named`; the row, the figures, where the row starts in ``text``)."""
    asked = _asked(question)
    out = []
    pos = 0
    for line in text.splitlines(keepends=True):
        read = row_figures(line.strip())
        if read is not None:
            label, periods = read
            named = _named(label, asked)
            held = [{v for p, v in periods.items() if y in _YEAR.findall(p)} for y in years]
            amounts = all(_AMOUNT_CELL.fullmatch(v) for h in held for v in h)
            if named[0] and amounts and all(len(h) == 1 for h in held):
                out.append((named, line.strip(), tuple(h.pop() for h in held), pos))
        pos += len(line)
    return out


def readings(
    question: str,
    years: tuple[str, ...],
    evidence_id: str,
    text: str,
    passages_before: Iterable[str] = (),
    heading: str = "",
) -> list[tuple[tuple[int, int], Read]]:
    """The rows of one passage's ``text`` (as labelled_rows writes it) naming what
    ``question`` asks for in ``years``, in a financial statement (:func:`in_statement`, its
    passage under ``heading``) and not among its changes (:func:`among_changes`), each with
    how fully the question names its line item (:func:`_named`) and its table's unit
    (:func:`scale_of`; none for a count of shares or an amount per share, which an "in
    millions" above the table does not scale)."""
    rows = rows_naming(question, years, text)
    before = list(passages_before) if rows else []
    out = []
    for named, row, figures, pos in rows:
        above = list(text_above(text[:pos], before))
        if not in_statement(heading, above):
            continue
        label = row_figures(row)
        total = label is not None and _TOTAL.match(label[0])
        if not total and among_changes(reversed(above)):
            continue
        shares = label is not None and "share" in _words(label[0])
        scale = None if shares else scale_of(above)
        out.append((named, Read(row, evidence_id, figures, scale, bool(label and spent(label[0])))))
    return out


def one_reading(reads: list[tuple[tuple[int, int], Read]]) -> Read | None:
    """Of the rows read (with how many words of their line item the question names), the one
    naming it most fully, or None when there is none or such rows differ on a figure."""
    if not reads:
        return None
    most = max(n for n, _ in reads)
    best = [r for n, r in reads if n == most]
    if len({r.figures for r in best}) != 1:
        return None
    return best[0]


def _spelled(value: float, decimals: int) -> str:
    text = f"{abs(value):,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return ("-" if value < 0 else "") + text


def _value(figure: str, spent: bool = False) -> tuple[float, str, int]:
    """A row's figure ("(1283)" a loss) as its value, written with thousands commas, and its
    decimals; a figure of money ``spent`` as the amount spent, whatever its sign."""
    digits = figure.strip("()-")
    value = float(digits) * (-1 if figure[:1] in "(-" and not spent else 1)
    decimals = len(digits.partition(".")[2])
    return value, _spelled(value, decimals), decimals


def stated(read: Read, question: str) -> tuple[str, str]:
    """The answer to ``question`` off ``read``'s row (its one year's figure), and the
    calculation converting it to the unit asked ("" when none is needed): ("$1,250.4
    million", "1,250,400 / 1,000 = 1,250.4")."""
    value, written, decimals = _value(read.figures[0], read.spent)
    sign = "$" if "$" in read.row or _ASKED_DOLLARS.search(question) else ""
    asked = _ASKED_SCALE.search(question)
    want = asked.group(1).casefold() if asked else read.scale
    if read.scale is None or want is None or want == read.scale:
        unit = f" {read.scale}" if read.scale else ""
        return f"{sign}{written}{unit}".replace("$-", "-$"), ""
    shift = _POWER[read.scale] - _POWER[want]
    steps = " / 1,000" * (-shift // 3) if shift < 0 else " * 1,000" * (shift // 3)
    result = _spelled(value * 10.0**shift, max(0, -shift) + decimals)
    answer = f"{sign}{result} {want}".replace("$-", "-$")
    return answer, f"{written}{steps} = {result}"


def changed(read: Read, question: str) -> tuple[str, str] | None:
    """The change between ``read``'s two figures (the earlier year's first) as a percentage
    of the earlier, to the decimals ``question`` asks for (else one), and its calculation:
    ("16.7%", "(52,870 - 45,310) / 45,310 * 100 = 16.7%"); None when the earlier is not above
    0 (a change from a loss is no percentage a reader can use)."""
    (old, old_text, _), (new, new_text, _) = map(_value, read.figures)
    if old <= 0:
        return None
    digits = asked_decimals(question)
    result = f"{(new - old) / old * 100:,.{1 if digits is None else digits}f}%"
    return result, f"({new_text} - {old_text}) / {old_text} * 100 = {result}"


@dataclass(frozen=True)
class Metric:
    name: str  # as the data names it: "operating margin"
    of: tuple[str, ...]  # the line items it is worked out from, by one of their names
    formula: str  # "{0} / {1} * 100"
    percent: bool
    higher_better: bool  # whether a rise is an improvement


@functools.cache
def _metrics() -> list[tuple[tuple[str, ...], Metric]]:
    """Each name of each ratio (:data:`METRICS`), folded, the longest names first."""
    data = json.loads(METRICS.read_text(encoding="utf-8"))
    out: list[tuple[tuple[str, ...], Metric]] = []
    for m in data["metrics"]:
        metric = Metric(
            m["names"][0], tuple(m["of"]), m["formula"], m["percent"], m["higher_better"]
        )
        out.extend((_words(name), metric) for name in m["names"])
    return sorted(out, key=lambda pair: -len(pair[0]))


def asked_metric(question: str) -> tuple[Metric, str] | None:
    """The ratio ``question`` asks for (:data:`METRICS`) and its one year, when it asks for
    nothing else (:data:`_NOT_ONE_ROW` but for the ratio's own words; no change, no
    average, no yes or no), else None."""
    years: set[str] = set(_YEAR.findall(question))
    if len(years) != 1 or _CHANGE.search(question) or _YES_NO.search(question.strip()):
        return None
    named = _metric_named(question)
    if named is None or _asks_else(question, set(named[0])):
        return None
    return named[1], years.pop()


def _metric_named(question: str, free_after: bool = False) -> tuple[tuple[str, ...], Metric] | None:
    """The ratio ``question`` names (its longest name that it names, :func:`_names`), with
    that name's words."""
    asked = _asked(question)
    return next(((n, m) for n, m in _metrics() if _names(n, asked, free_after)), None)


def _asks_else(question: str, allowed: set[str]) -> bool:
    """Whether ``question`` asks for more than rows answer (:data:`_NOT_ONE_ROW`), the words
    ``allowed`` (folded: a ratio's own "margin") aside."""
    return bool({_word(m.group(0)) for m in _NOT_ONE_ROW.finditer(question)} - allowed)


def worked_metric(
    metric: Metric, reads: list[Read], question: str, at: int = 0
) -> tuple[str, str] | None:
    """``metric`` worked out from ``reads`` (a row for each line item it is worked out from,
    in order; the figures of their ``at``-th year asked), to the decimals ``question`` asks
    for (else one for a percentage, two for a ratio), and its calculation: ("9.0%", "450 /
    5,000 * 100 = 9.0%"); None when the rows are of tables in different units, or a figure
    is not above 0 (a loss, a negative expense: no common reading of the ratio)."""
    if len({r.scale for r in reads}) != 1:
        return None
    values = [_value(r.figures[at], r.spent) for r in reads]
    if any(v <= 0 for v, _, _ in values):
        return None
    expr = metric.formula.format(*(written for _, written, _ in values))
    value = evaluate(expr)
    if value is None:
        return None
    digits = asked_decimals(question)
    if digits is None:
        digits = 1 if metric.percent else 2
    result = f"{value:,.{digits}f}" + ("%" if metric.percent else "")
    return result, f"{expr} = {result}"


#: Where a question defines what it asks for: "Harbor turnover is defined as: ...".
_DEFINED = re.compile(r"\b(?:defined|calculated|computed)\s+as\b:?\s*", re.IGNORECASE)
#: The end of the definition's sentence: a full stop before the next sentence, or a "?".
_DEFINITION_END = re.compile(r"\.\s+(?=[A-Z])|\.?\s*$|\?")
#: Operators and parentheses between a definition's terms; a minus only between spaces
#: ("long-term debt" is one term).
_OPERATOR = re.compile(r"\s*([()*/+×÷]|(?<=\s)[-–](?=\s))\s*")
_FY = r"(?:FY\s?|fiscal\s+(?:year\s+)?)?"
_TWO_YEARS = rf"\s+between\s+{_FY}(?P<a>{YEAR})\s+and\s+{_FY}(?P<b>{YEAR})"
_AVERAGE_OF = re.compile(rf"average\s+(?:of\s+)?(?:the\s+)?(?P<item>.+?){_TWO_YEARS}", re.I)
_CHANGE_OF = re.compile(rf"change\s+in\s+(?:the\s+)?(?P<item>.+?){_TWO_YEARS}", re.I)
_ONE_YEAR = re.compile(
    rf"^(?:the\s+)?{_FY}(?P<y>{YEAR})\s+|\s+(?:in|for|of)\s+{_FY}(?P<z>{YEAR})$", re.I
)


@dataclass(frozen=True)
class Term:
    """A line item a definition works with: its figure in one year, or the average of, or the
    change between, its figures in two (the earlier first)."""

    item: str
    years: tuple[str, ...]
    kind: str  # "figure", "average", "change"


@dataclass(frozen=True)
class Definition:
    parts: tuple[str | Term, ...]  # operators, parentheses and numbers as written; terms
    percent: bool  # the question asks for a percentage

    @property
    def terms(self) -> list[Term]:
        return [p for p in self.parts if isinstance(p, Term)]


def asked_definition(question: str) -> Definition | None:
    """The definition ``question`` gives of what it asks for ("DIO is defined as: 365 *
    (average inventory between FY2018 and FY2019) / (FY2019 cost of sales)"): its
    operators, parentheses and numbers as written and a :class:`Term` for each line item; a
    term naming no year is of the one year the question asks about. None when it gives none,
    asks about a part of the company or of the year (:data:`_NOT_THE_YEAR`), or a term is not
    a line item in one year or the average of or change between two."""
    m = _DEFINED.search(question)
    if m is None or _NOT_THE_YEAR.search(question):
        return None
    text = question[m.end() :]
    end = _DEFINITION_END.search(text)
    asked = set(_YEAR.findall(question[: m.start()]))
    parts: list[str | Term] = []
    for chunk in _OPERATOR.split(text[: end.start() if end else None]):
        chunk = chunk.strip()
        if not chunk:
            continue
        if _OPERATOR.fullmatch(f" {chunk} ") or re.fullmatch(NUMBER, chunk):
            parts.append(chunk.replace("×", "*").replace("÷", "/").replace("–", "-"))
            continue
        term = _term(chunk, asked)
        if term is None:
            return None
        parts.append(term)
    found = Definition(tuple(parts), bool(_PERCENT.search(question[: m.start()])))
    if not found.terms or evaluate(_expression(found, ["1"] * len(found.terms))) is None:
        return None
    return found


def _term(chunk: str, asked: set[str]) -> Term | None:
    for pattern, kind in ((_AVERAGE_OF, "average"), (_CHANGE_OF, "change")):
        m = pattern.fullmatch(chunk)
        if m:
            return Term(m.group("item"), tuple(sorted((m.group("a"), m.group("b")))), kind)
    m = _ONE_YEAR.search(chunk)
    year = (m.group("y") or m.group("z")) if m else (next(iter(asked)) if len(asked) == 1 else None)
    item = _ONE_YEAR.sub("", chunk).strip()
    if year is None or _YEAR.search(item) or not _words(item):
        return None
    return Term(item, (year,), "figure")


def _expression(definition: Definition, written: list[str]) -> str:
    """The definition's expression with each term as ``written`` (in order), in parentheses
    when it is worked out ("(1,100 + 1,250) / 2") and the definition does not put it in them."""
    terms = iter(written)
    parts = definition.parts
    out = []
    for i, part in enumerate(parts):
        if isinstance(part, str):
            out.append(part)
            continue
        text = next(terms)
        enclosed = parts[i - 1 : i] == ("(",) and parts[i + 1 : i + 2] == (")",)
        out.append(text if enclosed or part.kind == "figure" else f"({text})")
    return " ".join(out).replace("( ", "(").replace(" )", ")")


def worked_definition(
    definition: Definition, reads: list[Read], question: str
) -> tuple[str, str] | None:
    """``definition`` (:func:`asked_definition`) worked out from ``reads`` (a row for each of
    its terms, in order, with the figures of the term's years), to the decimals ``question``
    asks for (else two), a percentage when it asks for one (times 100 when the definition is
    a fraction); and its calculation. None when the rows are of tables in different units or
    it cannot be worked out (a division by zero)."""
    if len({r.scale for r in reads}) != 1:
        return None
    written = []
    for term, read in zip(definition.terms, reads, strict=True):
        figures = [_value(f, read.spent)[1] for f in read.figures]
        if term.kind == "average":
            written.append(f"({figures[0]} + {figures[1]}) / 2")
        elif term.kind == "change":
            written.append(f"{figures[1]} - {figures[0]}")
        else:
            written.append(figures[0])
    expr = _expression(definition, written)
    if definition.percent and "100" not in definition.parts:
        expr = f"({expr}) * 100"
    value = evaluate(expr)
    if value is None:
        return None
    digits = asked_decimals(question)
    result = f"{value:,.{2 if digits is None else digits}f}" + ("%" if definition.percent else "")
    return result, f"{expr} = {result}"


@functools.cache
def _item_words() -> frozenset[str]:
    """The words of the line items' and ratios' names ("EBITDA", "Revenue"), folded: capitalised
    in a question, they name what is asked for, not whose."""
    names = [n for group in _groups().values() for n in group]
    return frozenset(w for n in [*names, *(name for name, _ in _metrics())] for w in n)


_SENTENCE_OPEN = re.compile(r"(?:^|[.?!:;]\s+)$")
_QUARTERLY = re.compile(r"\b10-Q\b|\bquarterly\b", re.IGNORECASE)
_CURRENCY_CODE = re.compile(r"(?:USD|US|EUR|GBP|JPY|CNY)$")


def filing_asked(question: str, title: str) -> bool:
    """Whether a filing titled ``title`` may hold the row ``question`` asks for: not a
    quarterly report (its columns are a quarter's or the year to date's, never a fiscal
    year's), and its title holds every one of the question's names (capitalised words not
    opening a sentence, not function words, periods, currencies, words of a line item's
    name or an abbreviation in parentheses). A statement row of another company's filing
    holds another company's figure, and a consolidated row is not what a question naming a
    part of the company ("Kelmor's Northport FY2019 net sales") asks for."""
    if _QUARTERLY.search(title):
        return False
    names = []
    for m in _WORD.finditer(question):
        word = re.sub(r"['’]s?$", "", m.group(0))
        if (
            len(word) > 1
            and word[:1].isupper()
            and not _SENTENCE_OPEN.search(question[: m.start()])
            and question[m.start() - 1 : m.end() + 1] != f"({m.group(0)})"  # "(DIO)"
            and word.casefold() not in STOP_WORDS
            and not any(c.isdigit() for c in word)
            and not _CURRENCY_CODE.match(word)
            and _word(word) not in _item_words()
        ):
            names.append(word.casefold())
    return all(n in title.casefold() for n in names)


#: Words that judge a change rather than measure it: a rise is an improvement only for a
#: ratio that is better higher.
_JUDGING = re.compile(r"\b(?:improv\w*|deteriorat\w*|worsen\w*)\b", re.IGNORECASE)
_COMPARED = re.compile(r"compar\w*|versus|vs", re.IGNORECASE)
#: Words of a trend question that are not a question about something else.
_DIRECTION = {"higher", "lower", "more", "less", "compare", "compared", "versu", "v"}


@dataclass(frozen=True)
class Trend:
    up: bool  # the question asks whether it rose (improved), else whether it fell
    metric: Metric | None  # the ratio asked about; None: the line item the question names
    years: tuple[str, str]  # the earlier, the later


def asked_trend(question: str) -> Trend | None:
    """A yes-or-no question whether a ratio (:data:`METRICS`) or one line item rose or fell
    between two years ("Did Kelmor's operating margin improve in FY2019?": against the year
    before), when it asks for nothing else (:data:`_NOT_ONE_ROW`, but for the ratio's own words
    and the direction); "improve" only of a ratio that is better higher. Else None."""
    q = question.strip()
    up, down = bool(_UP.search(q)), bool(_DOWN.search(q))
    if not _YES_NO.search(q) or up == down:
        return None
    years = sorted(set(_YEAR.findall(q)))
    if len(years) == 1:
        years = [str(int(years[0]) - 1), years[0]]
    if len(years) != 2:
        return None
    named = _metric_named(q, free_after=True)
    if _asks_else(q, (set(named[0]) if named else set()) | _DIRECTION):
        return None
    metric = named[1] if named else None
    if _JUDGING.search(q) and (metric is None or not metric.higher_better):
        return None
    return Trend(up, metric, (years[0], years[1]))


def trend_answer(trend: Trend, reads: list[Read], question: str) -> tuple[str, str] | None:
    """Yes or no to ``trend`` off ``reads`` (the rows of its ratio's line items, or of its
    line item, each with the figures of both years), and what it rests on: the ratio worked
    out for each year ("450 / 5,000 * 100 = 9.0% in 2019 against 480 / 4,800 * 100 = 10.0% in
    2018"), or the row's two figures; None when they cannot be worked out or are
    equal as shown."""
    later, earlier = trend.years[1], trend.years[0]
    if trend.metric is not None:
        new = worked_metric(trend.metric, reads, question, at=1)
        old = worked_metric(trend.metric, reads, question, at=0)
        if new is None or old is None:
            return None
        values = [float(plain_number(r.rstrip("%"))) for r, _ in (old, new)]
        shown = f"{new[1]} in {later} against {old[1]} in {earlier}"
    else:
        (v_old, w_old, _), (v_new, w_new, _) = (_value(f, reads[0].spent) for f in reads[0].figures)
        values = [v_old, v_new]
        shown = f"{w_new} in {later} against {w_old} in {earlier}"
    if values[0] == values[1]:
        return None
    return ("Yes" if (values[1] > values[0]) == trend.up else "No"), shown
