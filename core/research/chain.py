"""The answer's chain: each step of the short answer stated as one fact citing one passage, and
whether that chain carries the answer.

A question that joins facts (the river of the town where someone was born) is answered in
steps. Below the answer line the report lists each step as one sentence citing the one passage
it comes from, under :data:`CHAIN_HEAD`, so the reader sees every link, and every link is
checked on its own like any claim (the claim check; the support check, one fact against one
passage, at the single-passage floor). The answer line then stands on its chain
(:func:`carries`) when every link passed, each link after the first names something the link
before it found that the question does not name (the bridge), and the last link names what the
answer asserts. Otherwise the answer line is judged as a whole against all its cited passages,
as it is without a chain: a judgment a small model finds hard when the passages must be joined.
When no link passed, it is not judged: the steps the report gives all fail.

No model and no I/O; pure functions of the report text.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Mapping

from core.evidence import Evidence
from core.ingest.entities import find_entities
from core.research.arithmetic import calculations, sourced
from core.research.citations import citation_tokens, cited_sentences, cited_text
from core.research.schemas import FlaggedClaim
from core.research.support import answer_line_sentence
from core.research.tables import row_figures
from core.research.terms import key_terms, terms_missing
from core.text import STOP_WORDS, YEAR, figures, sentence_ranges

CHAIN_HEAD = "*How the sources lead there:*"
#: Replaces :data:`CHAIN_HEAD` when the answer is withheld: the links that stand are what the
#: sources read do state.
CHAIN_HEAD_WITHHELD = "*What the sources read do state:*"
#: ... or when some link is flagged too: a head saying the sources state what it lists would
#: then contradict the flag on that link (no ⚠ in a head: a ⚠ marks a flagged sentence).
CHAIN_HEAD_WITHHELD_FLAGGED = "*What the sources read state, except where flagged:*"
_HEADS = (CHAIN_HEAD, CHAIN_HEAD_WITHHELD, CHAIN_HEAD_WITHHELD_FLAGGED)
_ITEM = "- "
_CITES = re.compile(r"\[[^\]\n]*\]")
_YEAR = re.compile(YEAR)
_NAME_OR_FIGURE = re.compile(r"\b[A-Z][\w'-]+|\d[\d,.]*\d|\d")


def chain_block(links: list[tuple[str, str]]) -> str:
    """The chain under the answer line: ``links`` are (fact, label) in step order; a fact is
    one sentence and cites its label once, at its end; a link that repeats an earlier one is
    shown once (a small model may state one fact for two steps). "" without links."""
    items: list[str] = []
    for fact, label in links:
        text = _CITES.sub("", " ".join(fact.split())).strip().rstrip(".;,: ")
        item = f"{_ITEM}{text} [{label}]."
        if text and item not in items:
            items.append(item)
    return f"{CHAIN_HEAD}\n" + "\n".join(items) if items else ""


def without_heading(fact: str, passage: str) -> str:
    """``fact`` without its passage's heading when it copied the passage's opening, heading and
    all, so that the name the heading and the sentence both start with is said twice:
    "Northport Northport is a town on the Dravin." for a passage "Northport" over "Northport is
    a town on the Dravin. ..." reads "Northport is a town on the Dravin." A fact that names its
    passage's title as its subject ("Northport lies on ...") keeps it, and so does a row copied
    from a table under a label line ("Total" over "Harbor Fees | $ 97")."""
    head, _, body = passage.strip().partition("\n\n")  # a heading is a block of its own
    head, body, said = " ".join(head.split()), " ".join(body.split()), " ".join(fact.split())
    rest = said[len(head) :].lstrip()
    first = [(re.findall(r"\w+", t[:80]) or [""])[0] for t in (head, body)]
    twice = bool(head and body and first[0]) and first[0] == first[1]
    copied = twice and said.startswith(head + " ") and body.startswith(rest[:30])
    return rest if copied else fact


def chain_lines(markdown: str) -> list[str]:
    """The lines of ``markdown``'s chain (the list items right under its head), in order."""
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        if line.strip() in _HEADS:
            out = []
            for item in lines[i + 1 :]:
                if not item.lstrip().startswith(_ITEM.strip()):
                    break
                out.append(item)
            return out
    return []


def link_sentences(markdown: str) -> list[str]:
    """The cited sentences of ``markdown``'s chain (:func:`chain_lines`), in order."""
    return [s for line in chain_lines(markdown) for s, ln, _ in cited_sentences(line) if ln == line]


def withheld_head(markdown: str, flagged: Iterable[str] = ()) -> str:
    """``markdown`` with its chain's head saying the links are what the sources state, or,
    when a link holds one of the ``flagged`` sentences, that the unmarked links are."""
    return markdown.replace(CHAIN_HEAD, _withheld(markdown, flagged), 1)


def _withheld(markdown: str, flagged: Iterable[str]) -> str:
    """The head of ``markdown``'s withheld chain: flagged when a link holds one of ``flagged``."""
    said = [f for f in flagged if f]
    mixed = any(s in line for line in chain_lines(markdown) for s in said)
    return CHAIN_HEAD_WITHHELD_FLAGGED if mixed else CHAIN_HEAD_WITHHELD


def heads_kept(markdown: str, flagged: Iterable[str] = ()) -> str:
    """``markdown`` after sentences were removed from it: its chain's head, with no link left
    under it, goes (and the blank line before it); a withheld chain's head says again whether
    a link left holds one of the ``flagged`` sentences (:func:`withheld_head`)."""
    lines = markdown.split("\n")
    at = next((i for i, line in enumerate(lines) if line.strip() in _HEADS), None)
    if at is None:
        return markdown
    if not chain_lines(markdown):
        start = at - 1 if at > 0 and not lines[at - 1].strip() else at
        return "\n".join(lines[:start] + lines[at + 1 :])
    if lines[at].strip() == CHAIN_HEAD:
        return markdown
    lines[at] = _withheld(markdown, flagged)
    return "\n".join(lines)


def _names(text: str, question: str) -> set[str]:
    """Names and figures ``text`` holds (capitalised words anywhere, figures), lower case,
    less function words and the question's own words."""
    asked = {w.lower() for w in re.findall(r"[\w'-]+", question)}
    found = {m.lower() for m in _NAME_OR_FIGURE.findall(_CITES.sub(" ", text))}
    return {w for w in found if w not in STOP_WORDS and w not in asked}


def carries(
    answer_line: str,
    markdown: str,
    question: str,
    supported: Mapping[str, float],
    answer_mark: str,
) -> float | None:
    """The support of the chain the answer line stands on (its weakest link's), or None when
    it does not stand on one. It does when ``markdown`` has a chain whose every sentence is in
    ``supported`` (each passed the checks against its own passage; sentence -> support), each
    link after the first names something of the link before it that the question does not, and
    the last link holds every name and figure the answer asserts beyond the question (an answer
    asserting nothing beyond the question, a yes or a no, is not carried by a lexical test),
    and no link before it does: an answer a link on the way already states is a step the
    chain went through, not what its last step found (the town a person was born in, given
    where the river through that town is asked).
    An answer worked out from figures stands on the links stating them (:func:`traces`)."""
    used = worked_figures(answer_line, question)
    if used:
        return traces(used, markdown, supported)
    links = chain_lines(markdown)
    sentences = link_sentences(markdown)
    if not sentences or any(s not in supported for s in sentences):
        return None
    for before, after in itertools.pairwise(links):
        if not _names(before, question) & _names(after, question):
            return None
    answer = _CITES.sub(" ", answer_line.replace(answer_mark, " "))
    asserted = terms_missing(key_terms(f"{answer_mark} {answer}"), question)
    if not asserted or terms_missing(asserted, _CITES.sub(" ", links[-1])):
        return None
    if any(not terms_missing(asserted, _CITES.sub(" ", link)) for link in links[:-1]):
        return None  # the answer is what a step on the way found
    if not of_asked_period(links[-1], answer, question):
        return None
    return min(supported[s] for s in sentences)


def of_asked_period(link: str, answer: str, question: str) -> bool:
    """False when ``link`` copies a statement row (:func:`~core.research.tables.row_figures`)
    and holds the answer's figure only under periods the question does not name, though it
    names some ("FY2019"): the row states that figure, but for another year than asked, which
    neither the link's own check nor the lexical test of the answer sees. True otherwise."""
    row = row_figures(_CITES.sub(" ", link).strip().lstrip("-* ").rstrip(". "))
    asked = set(_YEAR.findall(question))
    if row is None or not asked:
        return True
    said = set(figures(answer))
    periods = [p for p, v in row[1].items() if set(figures(v)) & said]
    return not periods or any(set(_YEAR.findall(p)) & asked for p in periods)


def worked_figures(answer_line: str, question: str) -> list[str]:
    """The figures an answer line's calculation that holds is worked out from, less constants
    (100 for a percentage, 365 days) and the question's own figures; [] when it has none."""
    calcs = calculations(_CITES.sub(" ", answer_line))
    return sourced([f for c in calcs if c.holds for f in c.operands], question)


def traces(used: list[str], markdown: str, supported: Mapping[str, float]) -> float | None:
    """The support of a worked answer's chain (its weakest link stating one of the figures
    ``used``, :func:`worked_figures`), or None when a figure is stated by no link that passed
    its checks. The
    program redid the arithmetic and found each figure in a cited passage; that the figure is
    the line item and period the question asks for (the company's sales, not a region's; this
    year's, not last year's) is what a link says and its check confirms, one figure at a time."""
    passed = {s: supported[s] for s in link_sentences(markdown) if s in supported}
    weakest: list[float] = []
    for figure in used:
        stating = [p for s, p in passed.items() if figure in figures(_CITES.sub(" ", s))]
        if not stating:
            return None
        weakest.append(max(stating))
    return min(weakest) if weakest else None


def asked_names(question: str) -> list[str]:
    """The names the question asks about, as phrases ("Tarsk Mills", not "Tarsk" and "Mills":
    a word of a name, a river's "River", is in many passages): its entities but dates and
    quantities."""
    found = (n for _, _, n, kind in find_entities(question) if kind not in ("date", "quantity"))
    return list(dict.fromkeys(found))


def unanchored(
    markdown: str, question: str, get: Callable[[str], Evidence | None], answer_mark: str
) -> FlaggedClaim | None:
    """The answer line, flagged, when the question names something (:func:`asked_names`) and no
    passage the answer line or its chain cites names any of it: nothing then ties the answer to
    what the question asks about. A small model may answer from a lookalike passage (a mill
    in another town than the one asked about, named in no passage it cites); each word of its
    one link is then in that passage, and the support check, asked whether the passages show the
    answer, may say yes. None when the question names nothing, or a cited passage names some
    of it."""
    asked = asked_names(question)
    sentence = answer_line_sentence(markdown, answer_mark)
    if not asked or sentence is None:
        return None
    cited = list(dict.fromkeys(citation_tokens(sentence)))
    for line in chain_lines(markdown):
        for _, _, ids in cited_sentences(line):
            cited.extend(i for i in ids if i not in cited)
    for ev_id in cited:
        ev = get(ev_id)
        if ev is not None and len(terms_missing(asked, cited_text(ev))) < len(asked):
            return None
    return FlaggedClaim(
        sentence=sentence,
        evidence_ids=cited,
        reason="no passage it or its chain cites names what the question asks about ("
        + ", ".join(asked[:4])
        + "), so nothing read ties the answer to it",
    )


def anchoring(
    markdown: str,
    question: str,
    get: Callable[[str], Evidence | None],
    candidates: list[str],
    answer_mark: str,
) -> str | None:
    """Of ``candidates`` (passages the run fetched), the one that ties an unanchored answer
    (:func:`unanchored`) to the question: it names something the question names and something
    the answer line, its chain or the passages they cite name beyond the question (the bridge: a
    passage on the person asked about that names the mill the answer's passage is about),
    names and dates taken whole, as :func:`asked_names` takes them. The one naming the most of
    both, the first on a tie; None when none names both."""
    asked = asked_names(question)
    lines = [ln for ln in markdown.splitlines() if ln.lstrip().startswith(answer_mark)][:1]
    lines += chain_lines(markdown)
    said = [_CITES.sub(" ", ln.replace(answer_mark, " ")) for ln in lines]
    titles: list[str] = []  # a passage's title names what it is about, whole
    for line in lines:
        for _, _, ids in cited_sentences(line):
            for cited in filter(None, map(get, ids)):
                said.append(cited.text)
                titles.append(cited.title)
    found = [*(n for text in said for _, _, n, _ in find_entities(text)), *titles]
    bridge = list(dict.fromkeys(n for n in found if terms_missing([n], question)))
    best, score = None, 0
    for ev_id in candidates:
        ev = get(ev_id)
        if ev is None:
            continue
        text = cited_text(ev)
        a = len(asked) - len(terms_missing(asked, text))
        b = len(bridge) - len(terms_missing(bridge, text))
        if a and b and a + b > score:
            best, score = ev_id, a + b
    return best


#: Names of the question a withheld answer's report gives a read passage's sentence about.
ASKED_READ_NAMES = 2
ASKED_READ_CHARS = 300  # a longer sentence is not shown whole


def unnamed_asked(markdown: str, question: str, get: Callable[[str], Evidence | None]) -> list[str]:
    """The names the question asks about (:func:`asked_names`) that no passage ``markdown``
    cites names, in the question's order."""
    cited = [ev for ev in map(get, dict.fromkeys(citation_tokens(markdown))) if ev is not None]
    texts = [cited_text(ev) for ev in cited]
    return [n for n in asked_names(question) if all(terms_missing([n], t) for t in texts)]


def asked_read(
    markdown: str,
    question: str,
    get: Callable[[str], Evidence | None],
    candidates: list[str],
) -> list[tuple[str, str]]:
    """For each of the first :data:`ASKED_READ_NAMES` names the question asks about that no
    passage the report cites names (:func:`unnamed_asked`), the first sentence naming it of the
    first of ``candidates`` (passages the run fetched, the writer's first) whose text names it,
    as (sentence, evidence id); names no candidate's sentence names are skipped. Under an
    answer its checks withhold, this is what the sources read say about what the question asks
    about: a report naming only the answer's passages leaves the reader without the start of
    the chain (the person asked about, and the town a passage read says she was born in)."""
    out: list[tuple[str, str]] = []
    for name in unnamed_asked(markdown, question, get)[:ASKED_READ_NAMES]:
        for ev_id in candidates:
            ev = get(ev_id)
            if ev is None or ev_id in (i for _, i in out):
                continue
            flat = " ".join(ev.text.split())
            said = next(
                (
                    flat[a:b]
                    for a, b in sentence_ranges(flat)
                    if b - a <= ASKED_READ_CHARS and not terms_missing([name], flat[a:b])
                ),
                None,
            )
            if said is not None:
                out.append((without_heading(said, ev.text), ev_id))
                break
    return out


def with_asked_read(markdown: str, read: list[tuple[str, str]], answer_mark: str) -> str:
    """``markdown`` with each (sentence, evidence id) of ``read`` (:func:`asked_read`) a cited
    item after its chain's links, or under its answer line (the first line starting with
    ``answer_mark``) in a chain of their own (:data:`CHAIN_HEAD_WITHHELD`: what the sources read
    do state) when it has none."""
    items = [f"{_ITEM}{_CITES.sub('', s).strip().rstrip('.;,: ')} [{i}]." for s, i in read]
    if not items:
        return markdown
    lines = markdown.split("\n")
    links = chain_lines(markdown)
    if links:
        at = max(i for i, ln in enumerate(lines) if ln in links) + 1
        return "\n".join([*lines[:at], *items, *lines[at:]])
    answer = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith(answer_mark)), -1)
    block = ["", CHAIN_HEAD_WITHHELD, *items]
    return "\n".join([*lines[: answer + 1], *block, *lines[answer + 1 :]])


def cite_on_answer_line(markdown: str, ev_id: str, answer_mark: str) -> str:
    """``markdown`` with the answer line also citing ``ev_id``, after its own citations."""
    lines = markdown.split("\n")
    for i, line in enumerate(lines):
        if line.lstrip().startswith(answer_mark):
            cites = list(re.finditer(r"\[[^\]\n]*\]", line))
            at = cites[-1].end() if cites else len(line.rstrip().rstrip("."))
            lines[i] = f"{line[:at]}[{ev_id}]{line[at:]}"
            break
    return "\n".join(lines)
