"""English text helpers shared by ingestion, research and evaluation: sentences, stop words,
months and numbers.

Each is defined once, so the chunker, the claim check and the metrics agree on what a sentence,
a function word, a month or a figure is. Plain regular expressions and word sets, no model and
no I/O; module state is read-only (thread-safe).
"""

from __future__ import annotations

import re

# ----------------------------------------------------------------------------- months

_MONTH_FORMS = (
    ("january", "jan"),
    ("february", "feb"),
    ("march", "mar"),
    ("april", "apr"),
    ("may",),
    ("june", "jun"),
    ("july", "jul"),
    ("august", "aug"),
    ("september", "sept", "sep"),
    ("october", "oct"),
    ("november", "nov"),
    ("december", "dec"),
)
MONTHS = tuple(forms[0] for forms in _MONTH_FORMS)
"""The month names in calendar order, lower case: ``MONTHS[0] == "january"``."""
MONTH_ABBREVIATIONS = frozenset(f for forms in _MONTH_FORMS for f in forms[1:])
"""Short forms of the month names ("jan", "sept"), lower case, without their full stop."""
_MONTH_NUMBER = {f: n for n, forms in enumerate(_MONTH_FORMS, 1) for f in forms}
MONTH = "(?:" + "|".join(sorted((f.title() for f in _MONTH_NUMBER), key=len, reverse=True)) + ")"
"""Pattern of a month name or its short form as capitalised ("March", "Mar", "Sept"); compile
it with ``re.IGNORECASE`` for any case. No word boundaries and no full stop: add them."""
_MONTH_WORD = re.compile(rf"\b{MONTH}\b", re.IGNORECASE)


def month_number(word: str) -> int | None:
    """1-12 for a month name or short form, any case, a full stop allowed ("Sept." -> 9);
    None for any other word."""
    return _MONTH_NUMBER.get(word.lower().rstrip("."))


def month_numbers(text: str) -> list[int]:
    """The months ``text`` names as whole words, by number, in order: "Nov. 27 and March" ->
    [11, 3]. "market" names no month; the verb "may" does name May."""
    return [_MONTH_NUMBER[m.group(0).lower()] for m in _MONTH_WORD.finditer(text)]


# ----------------------------------------------------------------------------- stop words

_STOP_TEXT = (
    "a an the this that these those "  # articles and demonstratives
    "i me my we us our you your he him his she her it its they them their "  # pronouns
    "who whom whose what which where when why how whether "  # interrogatives
    "in on at of for by with from as to into about among between over under per than "
    "during after before since "  # prepositions
    "and or nor but so yet if while whereas although though "  # conjunctions
    "is are was were be been being am do does did has have had "  # auxiliaries
    "can could shall should will would may might must "  # modals
    "not no yes also there here then both each every all some any such other another "
    "many much more most few less least several either neither same only "
    "according however moreover furthermore additionally"  # adverbs and quantifiers
)
STOP_WORDS = frozenset(_STOP_TEXT.split())
"""English function words, lower case: what a text says *with*, not what it is about. Any
rule that looks for a text's content words or names skips these."""

QUESTION_WORDS = STOP_WORDS | frozenset(
    ["find", "search", "query", "name", "named", "first", "last"]
)
""":data:`STOP_WORDS` and the words a question asks *with* ("find the name of the first
..."): a query and a finding that share only these share no subject."""

# ----------------------------------------------------------------------------- numbers

NUMBER = r"\d[\d,]*(?:\.\d+)?"
"""Pattern of a figure as written: digits, thousands commas, decimals ("52,870.5")."""
CURRENCY = r"(?:US\$|C\$|A\$|HK\$|\$|€|£|¥)"
"""Pattern of a currency sign written before an amount."""
MONEY = rf"{CURRENCY}\s?{NUMBER}"
"""Pattern of an amount of money written with its sign ("$52,870", "€ 1.5")."""
PERCENT = rf"{NUMBER}\s?(?:%|per\s?cent\b)"
"""Pattern of a percentage ("28.3%", "12 percent", "5 per cent")."""
PER_CENT = r"(?:%|\bper\s?cent)"
"""Pattern of a mention of percentages, with or without a figure: "%", "percent",
"percentage", "per cent"."""
YEAR = r"(?:19|20)\d\d"
"""Pattern of a year of the last two centuries as four digits ("1994", "2023")."""
NUMBER_RE = re.compile(NUMBER)
_NOT_DIGITS = re.compile(rf"{CURRENCY}|[,\s]")


def plain_number(number: str) -> str:
    """A figure without currency sign, thousands commas or spaces: "$ 52,870.5" -> "52870.5"."""
    return _NOT_DIGITS.sub("", number)


def figures(text: str) -> list[str]:
    """The figures written in ``text`` (:data:`NUMBER`), in order, as :func:`plain_number`
    spells them: "$52,870 and 12.5%" -> ["52870", "12.5"]."""
    return [plain_number(n) for n in NUMBER_RE.findall(text)]


# ----------------------------------------------------------------------------- sentences

SENTENCE_END = r"[.!?…]+[\"'”’)\]]*"
"""Pattern of what ends a sentence: its punctuation and any closing quotes or brackets."""
# Sentence ends: punctuation, optional closing quotes/brackets, whitespace, then a likely start.
_SENT_END = re.compile(rf"{SENTENCE_END}\s+(?=[\"'“‘(\[]?[A-Z0-9•·\-–])")
_ABBREV_TEXT = (
    "mr mrs ms dr prof sr jr st mt no nos vs etc inc corp co ltd llc plc fig figs eq eqs "
    "al e.g i.e cf approx dept univ gov u.s u.k u.n a.m p.m ph.d op vol pp ch sec art ed eds "
    "rev gen col lt sgt capt"
)
# Words whose full stop does not end a sentence ("May." does: it is a whole month name).
_ABBREV = frozenset(_ABBREV_TEXT.split()) | MONTH_ABBREVIATIONS


def sentence_ranges(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Sentence ranges inside ``text[start:end]``, trimmed of surrounding whitespace.

    A sentence ends at . ! ? or … (closing quotes and brackets kept with it) before whitespace
    and a capital, digit, bullet or dash; not after an abbreviation ("Inc.", "Sept.", "U.S."),
    an initial ("J. Smith") or a list number ("1. 2. 3.")."""
    end = len(text) if end is None else end
    out: list[tuple[int, int]] = []
    pos = start
    for m in _SENT_END.finditer(text, start, end):
        cut = m.start()
        # the token before the punctuation: skip abbreviations and initials ("J. Smith")
        ws = text.rfind(" ", pos, cut) + 1
        token = text[max(ws, pos) : cut].lower().lstrip("(\"'“")
        if token in _ABBREV or (len(token) == 1 and token.isalpha()):
            continue
        if text[cut] == "." and token.replace(".", "").isdigit() and text[m.end()].isdigit():
            continue  # "1. 2. 3." numbered items stay with their text
        seg_end = m.end()
        while seg_end > pos and text[seg_end - 1].isspace():
            seg_end -= 1
        if seg_end > pos:
            out.append((pos, seg_end))
        pos = m.end()
    while pos < end and text[pos].isspace():
        pos += 1
    tail = end
    while tail > pos and text[tail - 1].isspace():
        tail -= 1
    if tail > pos:
        out.append((pos, tail))
    return out


def line_sentence_ranges(text: str) -> list[tuple[int, int]]:
    """:func:`sentence_ranges` of ``text`` with a line break ending a sentence too (a heading or
    a list item is not joined to the sentence on the next line)."""
    ranges: list[tuple[int, int]] = []
    start = 0
    for line in text.splitlines(keepends=True):
        ranges += sentence_ranges(text, start, start + len(line))
        start += len(line)
    return ranges


#: A list item's mark at the start of a line, with the space after it ("- ", "2. ", "• ").
LIST_MARK = re.compile(r"\s*(?:[-*•]|\d+[.)])\s+")


def rejoined(line: str, kept: list[str]) -> str | None:
    """``line`` made again of ``kept``, the sentences of it that stay: its indent and list mark
    stay when its first sentence goes; None when none stays, or only a list mark would."""
    mark = LIST_MARK.match(line)
    lead = mark.group(0) if mark else line[: len(line) - len(line.lstrip())]
    rest = " ".join(k.strip() for k in kept).removeprefix(lead.strip()).lstrip()
    return lead + rest if re.search(r"\w", rest) else None


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (:func:`sentence_ranges`) as strings."""
    return [text[a:b] for a, b in sentence_ranges(text)]
