"""A numeric answer worked out from the passages' figures by the program, not by the model.

The 1.5B reads the right line of a statement and still gets the arithmetic wrong: with a
company's net sales for three years in front of it, it may answer a change in revenue a third
of what the figures give. Copying figures into an expression is easier for a small model
than the arithmetic, and what it copied can be checked, so the answer step writes the
calculation and it is computed here: only when it is plain arithmetic
(:func:`~core.research.arithmetic.evaluate`) and each of its figures is written in a passage
(or in the question, or is a constant such as the 100 of a percentage). The answer line then
shows the calculation, which the claim check redoes, and cites the passages that hold the
figures. Which figures it copies is still the model's choice: the 1.5B often takes a wrong row
(operating income for revenue), and the reader sees which.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.evidence import Evidence
from core.research.arithmetic import TIMES_100, evaluate, operands, sourced
from core.text import CURRENCY, NUMBER, NUMBER_RE, PER_CENT, YEAR, figures, plain_number

_YEAR = re.compile(YEAR)
_PERCENT = re.compile(PER_CENT, re.IGNORECASE)
_DECIMALS = re.compile(r"\b(zero|one|two|three|four|\d)\s+decimal", re.IGNORECASE)
_YES_NO = re.compile(r"(?:yes|no)\b", re.IGNORECASE)
_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4}


@dataclass(frozen=True)
class Worked:
    answer: str  # the model's answer, its figure replaced by the result: "16.7%"
    calculation: str  # "(52,870 - 45,310) / 45,310 * 100 = 16.7%"
    sources: list[str]  # evidence ids holding the figures, in order of use


def _spelled(number: str) -> str:
    """A figure with thousands commas, its decimals as written: "52870" -> "52,870"."""
    whole, _, frac = plain_number(number).partition(".")
    return f"{int(whole):,}" + (f".{frac}" if frac else "")


def _figures(text: str) -> set[str]:
    return set(figures(text))


def asked_decimals(question: str) -> int | None:
    """The decimals ``question`` asks for ("to two decimals": 2), or None."""
    asked = _DECIMALS.search(question)
    if asked is None:
        return None
    word = asked.group(1).lower()
    return _WORDS[word] if word in _WORDS else int(word)


def _decimals(question: str, answer_number: str | None, percent: bool, value: float) -> int:
    asked = asked_decimals(question)
    if asked is not None:
        return asked
    if answer_number and "." in answer_number:
        return len(answer_number.split(".")[1])
    if percent:
        return 1
    return 0 if float(value).is_integer() else 2


def worked_answer(
    answer: str, calculation: str, question: str, evidence: list[Evidence]
) -> Worked | None:
    """The answer worked out from ``calculation`` (an expression such as "(177866 - 135987) /
    135987 * 100", a stated result after "=" ignored), or None when it is not plain
    arithmetic on at least two figures, a figure is in no passage of ``evidence`` (nor in the
    question, nor a constant), no figure has two digits, or the answer is neither a figure nor
    a yes or no (a name with a calculation beside it).

    The result is a percentage when the expression multiplies by 100, or when the answer or
    the question speaks of one (a fraction, below 10, is then multiplied by 100); it is
    written to the decimals the question asks for ("round to one decimal place"), else as many
    as the model's answer had, else one for a percentage. The model's figure in ``answer`` is
    replaced by the result ("5.6%" -> "16.7%"); an answer without a figure ("Yes") is kept."""
    expr = " ".join(calculation.split("=")[0].split())
    value = evaluate(expr) if expr else None
    figures = operands(expr)
    if value is None or len(figures) < 2:
        return None
    needed = sourced(figures, question)
    sources: list[str] = []
    for figure in needed:
        holder = next((ev.evidence_id for ev in evidence if figure in _figures(ev.text)), None)
        if holder is None:
            return None
        sources.append(holder)
    if not any(len(f.replace(".", "")) > 1 for f in needed):
        return None  # none, or "1 + 1": digits found anywhere prove nothing
    said = next((m for m in NUMBER_RE.finditer(answer) if not _YEAR.fullmatch(m.group(0))), None)
    if said is None and answer and not _YES_NO.match(answer):
        return None  # a name or a place answered; a calculation beside it is noise
    expr = NUMBER_RE.sub(lambda m: _spelled(m.group(0)), expr)
    percent = bool(TIMES_100.search(expr))
    fraction = abs(value) < 10  # a ratio, not already a percentage or an amount
    if not percent and fraction and (_PERCENT.search(answer) or _PERCENT.search(question)):
        percent, value, expr = True, value * 100, f"({expr}) * 100"
    digits = _decimals(question, said.group(0) if said else None, percent, value)
    result = f"{value:,.{digits}f}"
    shown = result + ("%" if percent else "")
    if said is None:
        worded = answer or shown
    else:
        after = answer[said.end() :]
        mark = "%" if percent and not _PERCENT.match(after.lstrip()) else ""
        worded = answer[: said.start()] + result + mark + after
    return Worked(worded, f"{expr} = {shown}", list(dict.fromkeys(sources)))


_BARE = re.compile(rf"{CURRENCY}?\s?({NUMBER})")
_WRITTEN = re.compile(
    rf"(?:{CURRENCY}\s?)?(?<![\d.,]){NUMBER}(?![\d,])"
    rf"(?:\s?{PER_CENT}|\s(?:thousand|million|billion|trillion)s?\b)?",
    re.IGNORECASE,
)


def as_written(answer: str, texts: list[str]) -> str:
    """A bare figure answer (the 1.5B writes "35.00" for the passage's "$35 billion") as
    ``texts`` first write its value, when that is with a currency, a percent or a scale:
    "$35 billion". A bare figure names no unit: read alone it is another amount, to the reader
    and to the support check. Any other answer is kept as it is, and so is a year, and a figure
    whose first writing is bare (a table cell; a count whose value a later passage gives as a
    percentage is not that percentage)."""
    bare = _BARE.fullmatch(answer.strip())
    if bare is None or _YEAR.fullmatch(bare.group(1)):
        return answer  # not a bare figure, or a year
    value = float(plain_number(bare.group(1)))
    for text in texts:
        for m in _WRITTEN.finditer(text):
            number = NUMBER_RE.search(m.group(0))
            if number is None or float(plain_number(number.group(0))) != value:
                continue
            written = " ".join(m.group(0).split())
            return written if written != number.group(0) else answer
    return answer
