"""A fast offline entity extractor: regular expressions and a few word lists, no model.

It finds what analysts search and link by: dates (years, "March 3, 2021", "Q2 2023", "FY2024"),
quantities (money, percentages, numbers with units or scale words), acronyms ("NASA", "SEC",
"10-K"), and capitalised multi-word names, typed as ``org`` (suffixes such as Inc., Corp.,
University, Department), ``place`` (a small gazetteer and words such as River or County),
``person`` (an honorific before it, or two or three plain capitalised words) or ``other``.
Sentence-initial common words, title-case table labels and all-caps headings are skipped.

Precision over recall: a wrong entity links unrelated passages in the graph. Each mention keeps
the span that contains it and its offsets in the passage text. Runs at several MB/s of text.
Thread-safe: module state is read-only compiled patterns and frozen sets.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from core.text import MONEY, MONTH, MONTHS, NUMBER, PERCENT, STOP_WORDS
from graph.ids import entity_id
from graph.schemas import EntityMention, Passage


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _placeset(text: str) -> frozenset[str]:
    return frozenset(name.strip().lower() for name in text.split(","))


_DATE = re.compile(
    r"(?=[\dA-Zfst])(?:"
    + "|".join(
        (
            rf"\b{MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b",
            rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+{MONTH}\.?,?\s+\d{{4}}\b",
            rf"\b{MONTH}\.?,?\s+\d{{4}}\b",
            r"\b(?:Q[1-4]|[1-4]Q|H[12])\s?(?:FY\s?)?'?(?:\d{4}|\d{2})\b",
            r"\b(?:[Ff]irst|[Ss]econd|[Tt]hird|[Ff]ourth)\s+quarter\s+(?:of\s+)?(?:fiscal\s+)?\d{4}\b",
            r"\b(?:FY|[Ff]iscal\s+(?:[Yy]ear\s+)?)'?(?:\d{4}|\d{2})\b",
            r"\b\d{4}-\d{2}-\d{2}\b",
            r"\b\d{1,2}/\d{1,2}/(?:\d{4}|\d{2})\b",
            r"(?<![\$\d.,])\b(?:1[6-9]\d\d|20\d\d)s?\b(?![\d%]|[.,]\d|\s?(?:million|billion|%))",
        )
    )
    + ")"
)
_SCALE = r"(?:trillion|billion|million|thousand|bn|mn|tn|[MBK]\b)"
_UNIT = (
    r"(?:km|kilomet(?:er|re)s?|miles?|met(?:er|re)s?|cm|mm|kg|kilograms?|grams?|tons?|tonnes?|"
    r"lbs?|pounds|ounces|oz|barrels|bbl|MW|GW|kW|kWh|MWh|GWh|TWh|hectares|acres|square\s+feet|"
    r"sq\.?\s?ft|employees|people|persons|users|customers|members|subscribers|shares|units|"
    r"stores|locations|countries|years|months|weeks|days|hours|minutes|°[CF]|degrees)"
)
_QUANTITY = re.compile(
    r"(?=[\d$€£¥UCAH])(?:"
    + "|".join(
        (
            rf"{MONEY}(?:\s?{_SCALE})?",
            rf"\b{NUMBER}\s?(?:{_SCALE}\s)?(?:dollars|euros|pounds sterling|yen|USD|EUR|GBP)\b",
            rf"\b{PERCENT}",
            rf"\b{NUMBER}\s?(?:basis\s+points|bps)\b",
            rf"\b{NUMBER}\s(?:{_SCALE}\s)?{_UNIT}\b",
            rf"\b{NUMBER}\s(?:trillion|billion|million)\b",
        )
    )
    + ")"
)
_ACRONYM = re.compile(
    r"\b(?:[A-Z][A-Z0-9&]{1,7}s?|(?:[A-Z]\.){2,4}|\d{1,2}-[A-Z]{1,2}|[A-Z]-\d{1,2})(?![\w-])"
)
_ROMAN = re.compile(r"^[IVXLC]+$")
_ACRONYM_STOP = _wordset("AM PM OK NO II III IV VI VII VIII IX XI XII AND THE OF FOR ")

_CAP = r"(?:[A-Z][a-z]+(?:[-'’][A-Za-z]+)*|[A-Z][a-z]*[A-Z][a-z]+[A-Za-z]*|[A-Z]\.)"
_CONN = r"(?:of|the|and|for|de|del|da|van|von|der|la|le|du|&)"
_SUFFIX = r"(?:Inc\.?|Corp\.?|Co\.|Ltd\.?|LLC|L\.P\.|LP|PLC|plc|N\.A\.|S\.A\.|AG|GmbH|Jr\.|Sr\.)"
_NAME = re.compile(rf"\b{_CAP}(?:\s+(?:{_CONN}\s+){{0,2}}{_CAP})*(?:,?\s+{_SUFFIX})?")

# Function words (:data:`~core.text.STOP_WORDS`) never begin or end a name, except those that
# do: "Will Smith", "Theresa May", "Thomas More", "Under Armour", "My Fair Lady", a king's "I".
_IN_NAMES = _wordset(
    "i me my may will might more most much many other another same only be being under over per yes"
)
_FUNCTION = STOP_WORDS - _IN_NAMES
# Words too common to make a name on their own: a capitalised run made half of them is a
# heading or a table label. "of" is left out: it joins names ("Isle of Man").
_COMMON = (
    (_FUNCTION - {"of"})
    | frozenset(MONTHS)
    | _wordset(
        "many much more most other another yes none "
        "one two three four five six seven eight nine ten first second third last "
        "next new see refer note notes item items part parts table tables figure figures "
        "section sections chapter page pages total net gross income revenue revenues "
        "sales cash operating financial statements statement assets asset liabilities "
        "equity interest tax taxes expense expenses costs cost share shares stock common "
        "year years ended ending quarter months fiscal annual report consolidated balance "
        "sheet sheets flows flow capital current profit loss losses earnings per diluted "
        "basic comprehensive accumulated deferred goodwill intangible property equipment "
        "inventory inventories accounts receivable payable debt credit risk risks factors "
        "market markets business products product segment segments information summary "
        "overview introduction conclusion conclusions abstract results methods method "
        "related work data model models appendix references general management legal "
        "proceedings properties controls procedures exhibits exhibit signatures executive "
        "compensation security ownership certain relationships principal fees index "
        "contents unaudited audited adjusted non reported basis continuing "
        "discontinued operations activities investing financing provided used beginning "
        "end period increase decrease change changes other others senior notes due long "
        "short term fair value based lease leases leased total approximately including "
        "includes include included following monday tuesday wednesday thursday friday "
        "saturday sunday mr mrs ms dr company form act indenture "
        "trustee officer level facility agreement rule rules plan plans securities "
        "registrant issuer guarantor holder holders article schedule borrower lender agent "
        "government federal international internet indicate designed vice chief director "
        "directors president inc com corp ltd llc co "
    )
)
# A name's leading and trailing words that are not part of it ("The", "In", "Our").
_LEADING = _FUNCTION | {"&", "see", "refer"}
_ORG_WORDS = _wordset(
    "inc inc. corp corp. corporation company co. ltd ltd. llc plc group holdings bank "
    "university institute department agency association foundation council commission "
    "committee board ministry bureau authority administration society party fund "
    "trust partners technologies systems laboratories labs airlines college school "
    "hospital museum court congress senate parliament service services office "
    "federation union organization organisation network press reserve exchange club "
    "church army navy academy enterprises industries motors pharmaceuticals brands "
    "capital "
)
_PLACE_WORDS = _wordset(
    "river mountain mountains lake island islands county city state province valley "
    "bay sea ocean street avenue road desert peninsula gulf strait coast region "
    "district "
)
_PLACES = _placeset(
    "Africa,Asia,Europe,North America,South America,Latin America,Antarctica,Oceania,"
    "Middle East,United States,United Kingdom,England,Scotland,Wales,Ireland,Canada,"
    "Mexico,Brazil,Argentina,Chile,Peru,Colombia,France,Germany,Italy,Spain,Portugal,"
    "Netherlands,Belgium,Switzerland,Austria,Sweden,Norway,Denmark,Finland,Poland,Russia,"
    "Ukraine,Turkey,Greece,Israel,Egypt,Nigeria,Kenya,South Africa,Ethiopia,Morocco,"
    "Saudi Arabia,Iran,Iraq,India,Pakistan,Bangladesh,China,Japan,Korea,South Korea,"
    "North Korea,Taiwan,Vietnam,Thailand,Indonesia,Malaysia,Singapore,Philippines,"
    "Australia,New Zealand,Hong Kong,Alabama,Alaska,Arizona,Arkansas,California,Colorado,"
    "Connecticut,Delaware,Florida,Georgia,Hawaii,Idaho,Illinois,Indiana,Iowa,Kansas,"
    "Kentucky,Louisiana,Maine,Maryland,Massachusetts,Michigan,Minnesota,Mississippi,"
    "Missouri,Montana,Nebraska,Nevada,New Hampshire,New Jersey,New Mexico,New York,"
    "North Carolina,North Dakota,Ohio,Oklahoma,Oregon,Pennsylvania,Rhode Island,"
    "South Carolina,South Dakota,Tennessee,Texas,Utah,Vermont,Virginia,Washington,"
    "West Virginia,Wisconsin,Wyoming,London,Paris,Berlin,Rome,Madrid,Moscow,Beijing,"
    "Shanghai,Tokyo,Delhi,Mumbai,Sydney,Toronto,Chicago,Los Angeles,San Francisco,Boston,"
    "Seattle,Houston,Dallas,Atlanta,Miami,Denver,Philadelphia,Detroit,Washington D.C.,"
    "Silicon Valley,Wall Street"
)
_HONORIFIC = re.compile(
    r"(?:Mr|Mrs|Ms|Dr|Prof|Sir|Lady|Lord|President|Senator|Governor|Judge|Justice|King|Queen|"
    r"Prince|Princess|Chairman|Secretary|General|Captain|Rep|Sen|Gov)\.?\s+$"
)
_FIRST_NAMES = _wordset(
    "james john robert michael william david richard joseph thomas charles christopher "
    "daniel matthew anthony mark donald steven paul andrew joshua kenneth kevin brian george "
    "timothy ronald edward jason jeffrey ryan jacob gary nicholas eric jonathan stephen larry "
    "justin scott brandon benjamin samuel frank gregory raymond alexander patrick jack dennis "
    "jerry tyler aaron jose adam henry nathan douglas zachary peter kyle walter ethan jeremy "
    "harold keith christian roger noah gerald carl terry sean austin arthur lawrence jesse "
    "dylan bryan joe jordan billy bruce albert willie gabriel logan alan juan wayne roy ralph "
    "randy eugene vincent russell elijah louis bobby philip johnny tim jeff andy "
    "warren bill steve mary patricia jennifer linda elizabeth barbara susan jessica sarah "
    "karen nancy lisa betty margaret sandra ashley kimberly emily donna michelle dorothy carol "
    "amanda melissa deborah stephanie rebecca sharon laura cynthia kathleen amy shirley angela "
    "helen anna brenda pamela nicole emma samantha katherine christine debra rachel catherine "
    "carolyn janet ruth maria heather diane virginia julie joyce victoria olivia kelly "
    "christina "
    "lauren joan evelyn judith megan cheryl andrea hannah martha jacqueline frances gloria ann "
    "teresa kathryn sara janice jean alice madison doris abigail julia judy grace denise amber "
    "marilyn beverly danielle theresa sophia marie diana brittany natalie isabella charlotte "
    "rose alexis kayla hillary ursula"
)
_SENT_START = re.compile(r"(?:^|[.!?:;|]\s+|\n\s*|[\"“(]\s*)$")


def _overlaps(taken: list[tuple[int, int]], s: int, e: int) -> bool:
    return any(s < te and ts < e for ts, te in taken)


def _classify_name(text: str, start: int, name: str) -> tuple[str, str] | None:
    """(normalised name, type) for a capitalised run, or None to skip it."""
    if name.endswith(("'s", "’s")):
        name = name[:-2]
    tokens = name.split()
    # strip leading function words ("The", "In", "Our") and dangling connectors
    while tokens and tokens[0].lower() in _LEADING:
        start += len(tokens[0])
        tokens = tokens[1:]
    while tokens and tokens[-1].lower() in _LEADING:
        tokens = tokens[:-1]
    if not tokens:
        return None
    caps = [t for t in tokens if t[:1].isupper()]
    if len(caps) > 6:
        return None  # a title-case heading, not a name
    lowered = [t.lower().rstrip(".,") for t in tokens]
    clean = " ".join(tokens).rstrip(",")
    low = clean.lower()
    if low in _PLACES:
        return clean, "place"
    if any(t in _ORG_WORDS for t in lowered) and len(tokens) > 1:
        return clean, "org"
    common = sum(1 for t in lowered if t in _COMMON)
    if common * 2 >= len(caps):
        return None
    before = text[max(0, start - 20) : start]
    if lowered[-1] in _PLACE_WORDS and len(tokens) > 1:
        return clean, "place"
    if _HONORIFIC.search(before):
        return clean, "person"
    if len(tokens) == 1:
        if len(clean) < 3 or _SENT_START.search(text[max(0, start - 4) : start]):
            return None
        return clean, "other"
    if (
        2 <= len(tokens) <= 4
        and all(t[:1].isupper() for t in tokens)
        and (lowered[0] in _FIRST_NAMES or any(len(t) == 2 and t[1] == "." for t in tokens[1:]))
    ):
        return clean, "person"
    return clean, "other"


def find_entities(text: str) -> list[tuple[int, int, str, str]]:
    """``(start, end, name, type)`` of the entities in ``text``, in text order, not overlapping."""
    found: list[tuple[int, int, str, str]] = []
    taken: list[tuple[int, int]] = []
    for m in _DATE.finditer(text):
        found.append((m.start(), m.end(), " ".join(m.group().split()), "date"))
        taken.append((m.start(), m.end()))
    for m in _QUANTITY.finditer(text):
        if not _overlaps(taken, m.start(), m.end()):
            found.append((m.start(), m.end(), " ".join(m.group().split()), "quantity"))
            taken.append((m.start(), m.end()))
    for m in _ACRONYM.finditer(text):
        word = m.group()
        s, e = m.start(), m.end()
        if word in _ACRONYM_STOP or _ROMAN.match(word) or _overlaps(taken, s, e):
            continue
        if word.lower() in _COMMON:
            continue
        if word.isalpha() and sum(c.isupper() for c in word) < 2:
            continue
        # all-caps runs ("RISK FACTORS") are headings, not acronyms
        prev_word = (text[max(0, s - 20) : s].split()[-1:] or [""])[0].strip(".,;:()'’")
        next_word = (text[e : e + 20].split()[:1] or [""])[0].strip(".,;:()'’")
        if any(w.isalpha() and w.isupper() and len(w) >= 3 for w in (prev_word, next_word)):
            continue
        found.append(
            (s, e, word.rstrip("s") if word.endswith("s") and len(word) > 3 else word, "acronym")
        )
        taken.append((s, e))
    for m in _NAME.finditer(text):
        s, e = m.start(), m.end()
        if _overlaps(taken, s, e):
            continue
        pieces = [(s, m.group())]
        if " and " in m.group() and not any(
            t.lower().rstrip(".,") in _ORG_WORDS for t in m.group().split()
        ):
            pieces = []  # "Acme and Globex": two names
            pos = s
            for part in m.group().split(" and "):
                pieces.append((pos, part))
                pos += len(part) + 5
        for ps, part in pieces:
            got = _classify_name(text, ps, part)
            if got is None:
                continue
            name, type_ = got
            ns = text.find(name, ps, ps + len(part))
            if ns < 0:
                continue
            found.append((ns, ns + len(name), name, type_))
            taken.append((ns, ns + len(name)))
    found.sort()
    return found


_DISAMBIGUATED = re.compile(r"^(?P<name>[^()]+?)\s+\([^()]+\)$")


def title_names(title: str) -> list[str]:
    """The names a title gives its document: the title, and for a disambiguated title such as
    "Northport (novel)" or "Harbour (song)" also the bare name, as text calls it."""
    m = _DISAMBIGUATED.match(title.strip())
    return [title, m.group("name")] if m else [title]


def extract_mentions(
    passages: Sequence[Passage], *, title: str | None = None
) -> list[EntityMention]:
    """Entity mentions of every passage; with ``title``, also a 'title' entity in the first span.

    One mention per entity and span (repeats inside a sentence add nothing to the graph).
    """
    out: list[EntityMention] = []
    for p in passages:
        if not p.spans:
            continue
        seen: set[tuple[str, str]] = set()
        starts = [sp.start for sp in p.spans]
        if title and p.ordinal == 0:
            sp = p.spans[0]
            for name in title_names(title):
                t_end = sp.start + len(name) if p.text.startswith(name, sp.start) else sp.end
                eid = entity_id(name)
                seen.add((eid, sp.span_id))
                out.append(
                    EntityMention(
                        entity_id=eid,
                        name=name,
                        type="title",
                        passage_id=p.passage_id,
                        span_id=sp.span_id,
                        start=sp.start,
                        end=t_end,
                    )
                )
        k = 0
        for s, e, name, type_ in find_entities(p.text):
            while k + 1 < len(starts) and starts[k + 1] <= s:
                k += 1
            sp = p.spans[k]
            eid = entity_id(name)
            if (eid, sp.span_id) in seen:
                continue
            seen.add((eid, sp.span_id))
            out.append(
                EntityMention.model_construct(
                    entity_id=eid,
                    name=name,
                    type=type_,
                    passage_id=p.passage_id,
                    span_id=sp.span_id,
                    start=s,
                    end=e,
                )
            )
    return out


def named_entity_ids(text: str) -> list[str]:
    """Graph ids of the entities ``text`` names (a search query), without repeats."""
    return list(dict.fromkeys(entity_id(name) for _s, _e, name, _t in find_entities(text)))
