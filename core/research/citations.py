"""Citation check, the one repair pass, claim-support check and credibility scores.

A citation is valid only if its evidence id was fetched completely in this run (a span id is
valid when its passage was) and it lies inside the boundary. Invalid citations go back to the
writer once (ids that exist in the boundary are fetched instead); what still fails is removed
and recorded with the reason. A sentence citing several passages keeps those that hold what it
says (:func:`narrow_citations`); one naming what its passages lack also cites passages the run
fetched that hold it (:func:`complete_citations`). Then each cited sentence is compared with
its cited text: numbers, dates and names in the sentence must appear there
(:mod:`core.research.terms`), and the sentence must be semantically close to it (embedder cosine);
calculations it writes out are redone (:mod:`core.research.arithmetic`). Unsupported claims
are flagged, not hidden, and so are claims whose support the completion pieced together.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from datetime import UTC, datetime

import numpy as np

from core.evidence import Evidence
from core.research.arithmetic import CONSTANTS, Calculation, calculations
from core.research.schemas import CitationRecord, FlaggedClaim, RemovedCitation
from core.research.terms import key_terms, normalised, terms_missing
from core.text import NUMBER_RE, rejoined, sentence_ranges
from graph.ids import CITED_ID_RE, parse_evidence_id
from graph.schemas import Document

logger = logging.getLogger(__name__)

TOKEN = r"(?:E\d{1,3}|ev1:[0-9a-fA-F]{16}(?:#\d+-\d+)?)"
GROUP_RE = re.compile(rf"\[\s*({TOKEN}(?:\s*[,;]?\s*{TOKEN})*)\s*\](?!\()")
TOKEN_RE = re.compile(TOKEN)
# Anything in brackets that looks like an attempted evidence id but is malformed.
LOOSE_RE = re.compile(r"\[\s*(ev\d*:[^\]\s]*)\s*\]")
SIMILARITY_FLOOR = 0.2


def citation_tokens(markdown: str) -> list[str]:
    """Every citation token in order (labels like E1 and evidence ids)."""
    out: list[str] = []
    for m in GROUP_RE.finditer(markdown):
        out.extend(TOKEN_RE.findall(m.group(1)))
    out.extend(
        m.group(1) for m in LOOSE_RE.finditer(markdown) if not TOKEN_RE.fullmatch(m.group(1))
    )
    return out


_PAREN_LABELS = re.compile(r"[ \t]*\(\s*(E\d+(?:\s*(?:,|;|and)\s*E\d+)*)\s*\)")


def bracket_labels(markdown: str, labels: Collection[str]) -> str:
    """Bare evidence labels in prose ("supported by E3 and E6") as citations ("[E3] and [E6]"),
    so they are checked and numbered like the rest; the 1.5B writer named its passages so, and
    the reader saw labels that stand for nothing. Only the run's own labels are touched, and
    nothing already inside brackets. Labels in parentheses ("... courts" (E3).) become
    citations in place of the parentheses: kept, they read "[2] ([2])" once the quotation
    beside them is cited."""
    if not labels:
        return markdown

    def unparenthesized(m: re.Match[str]) -> str:
        named = re.findall(r"E\d+", m.group(1))
        if not all(n in labels for n in named):
            return m.group(0)
        return " " + "".join(f"[{n}]" for n in dict.fromkeys(named))

    markdown = _PAREN_LABELS.sub(unparenthesized, markdown)
    inside = [m.span() for m in re.finditer(r"\[[^\]\n]*\]", markdown)]

    def bracket(m: re.Match[str]) -> str:
        if m.group(0) not in labels or any(a <= m.start() < b for a, b in inside):
            return m.group(0)
        return f"[{m.group(0)}]"

    return re.sub(r"(?<![\w\[])E\d+(?![\w\]])", bracket, markdown)


_QUOTATION = re.compile(r"[\"“]([^\"“”\n]{20,}?)[\"”]")
_CITED_NEXT = re.compile(r"[\s.,;:]*\[")
QUOTE_MIN_WORDS = 6


def cite_quotations(markdown: str, texts: dict[str, str]) -> str:
    """A quotation of at least :data:`QUOTE_MIN_WORDS` words that one of ``texts`` (label ->
    passage text) holds word for word, and that no citation follows, gets that passage's label
    after its closing mark. The 1.5B writer pastes a passage inside quotation marks without
    citing it, and every sentence of the paste was flagged as uncited although it is the
    passage's own text. A quotation found in no passage is left as it is (and checked as
    any claim)."""
    flat = {label: normalised(text) for label, text in texts.items()}

    def cite(m: re.Match[str]) -> str:
        quoted = normalised(m.group(1)).strip(" .…")
        if len(quoted.split()) < QUOTE_MIN_WORDS or _CITED_NEXT.match(markdown, m.end()):
            return m.group(0)
        label = next((k for k, t in flat.items() if quoted in t), None)
        return f"{m.group(0)} [{label}]" if label else m.group(0)

    return _copied_sentences_cited(_QUOTATION.sub(cite, markdown), flat)


def _copied_sentences_cited(markdown: str, flat: dict[str, str]) -> str:
    """Each uncited sentence of at least :data:`QUOTE_MIN_WORDS` words that a passage of
    ``flat`` (label -> :func:`normalised` text) holds whole, word for word, gets that passage's
    label before its end: a small model copies a passage's sentence as its answer without
    quotation marks or a label ("1. The keeper's failure to trim the wick."), and the copy is
    that passage's claim. Only a whole sentence counts, not a phrase it borrows."""

    def cited(sentence: str, _line: str) -> str | None:
        plain = normalised(_LIST_LEAD.sub("", sentence)).rstrip(" .!?;:")
        if len(plain.split()) < QUOTE_MIN_WORDS or citation_tokens(sentence):
            return None
        label = next((k for k, t in flat.items() if plain in t), None)
        return cite_at_end(sentence, f"[{label}]") if label else None

    return rewrite_sentences(markdown, cited)


_LIST_LEAD = re.compile(r"^\s*(?:[-*•]|\d+[.)]|\*\*answer:\*\*)\s+", re.IGNORECASE)
_CLOSING = re.compile(r"[.!?;:]*\s*$")


def cite_at_end(sentence: str, cites: str) -> str:
    """``sentence`` with ``cites`` ("[E1][E2]") after its last word and before its closing
    punctuation ("Rose 4% [E1]."); after a closing quotation mark, at the very end."""
    closing = _CLOSING.search(sentence)
    cut = closing.start() if closing else len(sentence)
    head = sentence[:cut].rstrip()
    return f"{head}{'' if head.endswith(']') else ' '}{cites}{sentence[cut:].strip()}"


def rewrite_citations(markdown: str, fn: Callable[[str], str | None]) -> str:
    """Map each citation token through ``fn`` (None drops it); empty groups vanish."""

    def group(m: re.Match[str]) -> str:
        kept = [t for t in (fn(tok) for tok in TOKEN_RE.findall(m.group(1))) if t]
        return "".join(f"[{t}]" for t in dict.fromkeys(kept))

    out = GROUP_RE.sub(group, markdown)
    out = LOOSE_RE.sub(lambda m: "" if not TOKEN_RE.fullmatch(m.group(1)) else m.group(0), out)
    return re.sub(r"[ \t]+([.,;:])", r"\1", out)


class CitationChecker:
    """Decides whether a token is citable in this run.

    ``labels`` maps the writer's short labels to evidence ids; ``fetched`` looks up evidence the
    run fetched completely; ``lookup`` finds evidence in the library (None if absent) and
    ``allows`` is the boundary. Stateless apart from its inputs; safe to share.
    """

    def __init__(
        self,
        labels: dict[str, str],
        fetched: Callable[[str], Evidence | None],
        lookup: Callable[[str], Evidence | None],
        allows: Callable[[str], bool],
    ) -> None:
        self.labels = labels
        self.fetched = fetched
        self.lookup = lookup
        self.allows = allows

    def resolve(self, token: str) -> tuple[str | None, str]:
        """(canonical evidence id or None, reason when invalid)."""
        if re.fullmatch(r"E\d+", token):
            if token not in self.labels:
                return None, f"{token} is not one of the passages given to the writer"
            token = self.labels[token]
        try:
            pid, rng = parse_evidence_id(token.lower() if token.startswith("ev1:") else token)
        except ValueError:
            return None, f"{token!r} is not a valid evidence id"
        ev_id = token.lower()
        ev = self.fetched(ev_id) or (self.fetched(pid) if rng is not None else None)
        if ev is not None and self.allows(ev.doc_id):
            if rng is not None and not (0 <= rng[0] < rng[1] <= len(ev.passage_text)):
                return None, "span range outside its passage"
            return ev_id, ""
        found = self.lookup(ev_id)
        if found is None:
            return None, "no such evidence in the library"
        if not self.allows(found.doc_id):
            return None, "outside the chosen sources"
        return None, "not fetched in this run"

    def invalid(self, markdown: str) -> list[tuple[str, str]]:
        out: dict[str, str] = {}
        for tok in citation_tokens(markdown):
            ev_id, reason = self.resolve(tok)
            if ev_id is None:
                out.setdefault(tok, reason)
        return list(out.items())

    def fetchable(self, token: str) -> str | None:
        """An id that exists inside the boundary but was not fetched: the repair may fetch it."""
        ev_id, reason = self.resolve(token)
        if ev_id is None and reason == "not fetched in this run":
            return self.labels.get(token, token).lower()
        return None

    def canonicalize(self, markdown: str) -> tuple[str, list[RemovedCitation]]:
        """Replace labels by evidence ids; drop and record what is still invalid."""
        removed: dict[str, RemovedCitation] = {}

        def fn(tok: str) -> str | None:
            ev_id, reason = self.resolve(tok)
            if ev_id is None:
                removed.setdefault(tok, RemovedCitation(evidence_id=tok, reason=reason))
            return ev_id

        for tok in citation_tokens(markdown):
            if not TOKEN_RE.fullmatch(tok):
                removed.setdefault(
                    tok, RemovedCitation(evidence_id=tok, reason="malformed evidence id")
                )
        return rewrite_citations(markdown, fn), list(removed.values())


# ----------------------------------------------------------------------------- claim support


def cited_text(ev: Evidence) -> str:
    """What a citation backs: the passage, and the title and pages the Sources list shows
    (a writer may name the filing: "ACME CORP. — Form 10-K, fiscal year ended ..., p. 6")."""
    return f"{ev.title} p. {' '.join(map(str, ev.pages))}\n{ev.text}"


def _sentences(markdown: str, cites: re.Pattern[str] = CITED_ID_RE) -> Iterator[tuple[str, str]]:
    """(sentence, its line) in order, split as passages are (abbreviations and initials do not
    end a sentence: "ACME CORP. — Form 10-K", "J. Edgar Northcote"); a citation (``cites``) or
    mark standing alone after a sentence ("Claim. [id]", "Claim. ⚠") belongs to it."""
    for line in markdown.splitlines():
        sentences: list[str] = []
        for start, end in sentence_ranges(line):
            sentence = line[start:end]
            if sentences and not re.search(r"\w", cites.sub("", sentence)):
                sentences[-1] = f"{sentences[-1]} {sentence}"
            else:
                sentences.append(sentence)
        yield from ((x, line) for x in sentences)


def cited_sentences(markdown: str) -> Iterator[tuple[str, str, list[str]]]:
    """(sentence, its line, the evidence ids it cites) for each sentence of a draft whose
    citations are canonical (``[ev1:...]``), split as the claim check splits them."""
    for sentence, line in _sentences(markdown):
        yield sentence, line, list(dict.fromkeys(CITED_ID_RE.findall(sentence)))


_NUMBERED_RE = re.compile(r"\[\d{1,3}\]")
_MARKS_RE = re.compile(r"((?:[ \t]*⚠)+)")


def report_sentences(markdown: str) -> list[str]:
    """The sentences of a finished report, whose citations are numbered ([1], [2]) and whose
    flagged claims are marked ⚠, split as the claim check split them before the marks were
    added: :func:`mark_flagged` puts a mark where a flagged sentence ends, so a mark ends a
    sentence ("Claim [1]. ⚠ Next claim [2]." is the flagged "Claim [1]. ⚠" and the unflagged
    "Next claim [2].") and stays with it."""
    out: list[str] = []
    for line in markdown.splitlines():
        parts = _MARKS_RE.split(line)  # text, marks, text, marks, ..., text
        pieces: list[str] = []
        for i, part in enumerate(parts):
            if i % 2 == 0:
                pieces += [sentence for sentence, _line in _sentences(part, _NUMBERED_RE)]
            elif pieces:
                pieces[-1] = f"{pieces[-1]} {' '.join(part.split())}"
        out += pieces
    return out


def rewrite_sentences(markdown: str, fn: Callable[[str, str], str | None]) -> str:
    """``markdown`` with each sentence replaced by ``fn(sentence, its line)`` when that is not
    None; the rest, line breaks and all, is kept as it was."""
    out: list[str] = []
    done = 0  # markdown[:done] is in out
    pos = 0  # where the next sentence is looked for
    for sentence, line in _sentences(markdown):
        start = markdown.find(sentence, pos)
        if start < 0:
            continue
        pos = start + len(sentence)
        new = fn(sentence, line)
        if new is not None:
            out += [markdown[done:start], new]
            done = pos
    return "".join([*out, markdown[done:]])


def narrow_citations(
    markdown: str, evidence: Callable[[str], Evidence | None], keep_lines: str | None = None
) -> str:
    """Each sentence citing several passages keeps only those that hold all the numbers, dates
    and names it asserts, when at least one does: a small writer cites three passages for a
    name one of them holds. A sentence no single passage backs keeps its citations (each may
    hold a part: "$4.2 billion in 2022 and $3.9 billion in 2021"), and so do lines that start
    with ``keep_lines`` (the short answer line cites the hops that lead to the answer,
    not only the passage naming it)."""

    def narrowed(sentence: str, line: str) -> str | None:
        if keep_lines and line.lstrip().startswith(keep_lines):
            return None
        ids = list(dict.fromkeys(CITED_ID_RE.findall(sentence)))
        terms = key_terms(sentence)
        if len(ids) < 2 or not terms:
            return None
        held = [
            i
            for i in ids
            if (ev := evidence(i)) is not None and not terms_missing(terms, cited_text(ev))
        ]
        if not held or len(held) == len(ids):
            return None
        return _without_citations(sentence, [i for i in ids if i not in held])

    return rewrite_sentences(markdown, narrowed)


def _without_citations(sentence: str, ids: list[str]) -> str:
    """``sentence`` without its citations of ``ids``, no space left before its punctuation."""
    dropped = "|".join(re.escape(f"[{i}]") for i in ids)
    kept = re.sub(r"[ \t]{2,}", " ", re.sub(dropped, "", sentence))
    return re.sub(r"[ \t]+([.,;:]|$)", r"\1", kept)


def complete_citations(
    markdown: str,
    evidence: Callable[[str], Evidence | None],
    candidates: list[str],
    question: str = "",
    most: int = 2,
    keep: Callable[[str], bool] = lambda _line: False,
) -> tuple[str, dict[str, list[str]]]:
    """A cited sentence naming what its cited passages lack also cites passages of
    ``candidates`` (those the run fetched, the writer's first) that hold it; returns the
    markdown and, for each sentence so completed whose added passages do not hold all of it
    alone, what its own citations lacked (the claim check flags it: that the passages link
    as the sentence says is not checked).

    At most ``most`` passages are added, each taken for holding the most of what is still
    lacking, then for holding all of the sentence (a passage naming both the person and his
    country over one naming only the country), then for being cited in the report already,
    then for holding the most of the sentence. When they cannot hold all it lacks, the
    sentence is left as it is, for the claim check to flag. A small writer often cites only the
    passage about the answer, not the fetched one about the subject the sentence also names,
    or misnames what a fetched passage names ("II" written "III"): either way the passage
    naming what the sentence lacked is added, and a sentence still not held stays flagged.
    Lines ``keep`` answers true for are not completed (the answer's chain: each link must
    hold on its one passage, so one that does not is flagged, not propped up); a link whose
    cited passage lacks what it states cites instead the first candidate holding all of it,
    when one does: a small model copies a step's fact from one passage and gives the label of
    the passage beside it."""
    cited = set(CITED_ID_RE.findall(markdown))
    held_by = {
        i: cited_text(ev) for i in dict.fromkeys(candidates) if (ev := evidence(i)) is not None
    }
    assembled: dict[str, list[str]] = {}

    def completed(sentence: str, line: str) -> str | None:
        ids = list(dict.fromkeys(CITED_ID_RE.findall(sentence)))
        if not ids:
            return None
        derived = _calculated(sentence, question)[1]
        asserted = [t for t in key_terms(sentence) if t not in derived]
        found = [ev for ev in map(evidence, ids) if ev is not None]
        lacked = terms_missing(asserted, " ".join(map(cited_text, found)))
        if not lacked:
            return None
        texts = {i: text for i, text in held_by.items() if i not in ids}
        if keep(line):
            holder = next((i for i, t in texts.items() if not terms_missing(asserted, t)), None)
            if holder is None:
                return None
            return cite_at_end(_without_citations(sentence, ids), f"[{holder}]")

        def cover(i: str, wanted: list[str]) -> tuple[int, bool, bool, int]:
            held = len(asserted) - len(terms_missing(asserted, texts[i]))
            return (
                len(wanted) - len(terms_missing(wanted, texts[i])),
                held == len(asserted),
                i in cited,
                held,
            )

        added: list[str] = []
        alone = False
        missing = lacked
        while missing and len(added) < most and texts:
            best = max(texts, key=lambda i: cover(i, missing))  # the first of equals
            took = cover(best, missing)
            if took[0] == 0:
                break
            added.append(best)
            alone = alone or took[1]
            missing = terms_missing(missing, texts.pop(best))
        if missing or not added:
            return None
        end = [m.end() for m in CITED_ID_RE.finditer(sentence)][-1]
        done = sentence[:end] + "".join(f"[{i}]" for i in added) + sentence[end:]
        if not alone:
            assembled[done] = lacked
        return done

    return rewrite_sentences(markdown, completed), assembled


def _calculated(sentence: str, question: str) -> tuple[Calculation | None, set[str]]:
    """The first calculation ``sentence`` writes out that does not hold, and the terms it need
    not find in a passage: a result that holds is derived from its operands, and so are the
    constants it brings (x 100 for a percentage) and the figures it takes from the question
    (365)."""
    calcs = calculations(CITED_ID_RE.sub(" ", sentence))
    wrong = next((c for c in calcs if not c.holds), None)
    derived = {c.stated_text for c in calcs}
    used = [o for c in calcs for o in c.operands]
    derived |= {o for o in used if o in CONSTANTS}
    derived |= set(used) - set(terms_missing(used, question))
    return wrong, derived


def check_claims(
    markdown: str,
    evidence: Callable[[str], Evidence | None],
    embed: Callable[[list[str]], np.ndarray] | None,
    question: str = "",
    answer_lines: str | None = None,
    assembled: Mapping[str, list[str]] | None = None,
) -> list[FlaggedClaim]:
    """Flag cited sentences whose terms are missing from, or unlike, their cited text, and
    uncited ones that assert what neither the question nor a citation on their line holds
    (:func:`uncited_claim`).

    A line starting with ``answer_lines`` answers the question ("**Answer:** 12 metres"): it
    is compared with its cited text as the question and the answer together, which is what it
    claims; a few words alone are unlike any passage, even the one stating them.

    A sentence in ``assembled`` (:func:`complete_citations`) holds all it names only with
    passages the program added beside those the writer cited; it is flagged with what the
    writer's citations lacked."""
    flagged: list[FlaggedClaim] = []
    items: list[tuple[str, list[str], str]] = []
    claims: list[str] = []
    for sentence, line in _sentences(markdown):
        ids = list(dict.fromkeys(CITED_ID_RE.findall(sentence)))
        wrong, derived = _calculated(sentence, question)
        if wrong is not None:
            reason = f"the arithmetic does not hold: {wrong.text} (it comes to {wrong.comes_to})"
            flagged.append(FlaggedClaim(sentence=sentence, evidence_ids=ids, reason=reason))
            continue
        if not ids:
            around = [e for e in map(evidence, CITED_ID_RE.findall(line)) if e is not None]
            reason = uncited_claim(sentence, line, around, question, derived)
            if not reason and _answers(line, answer_lines) and not states_absence(sentence):
                reason = "no citation: the answer cites no passage"  # names or not, it claims
            if reason:
                flagged.append(FlaggedClaim(sentence=sentence, evidence_ids=[], reason=reason))
            continue
        found = [ev for ev in (evidence(i) for i in ids) if ev is not None]
        texts = [ev.text for ev in found]
        asserted = [t for t in key_terms(sentence) if t not in derived]
        missing = terms_missing(asserted, " ".join(map(cited_text, found)))
        if missing:
            flagged.append(
                FlaggedClaim(
                    sentence=sentence,
                    evidence_ids=ids,
                    reason="not in the cited text: " + ", ".join(missing[:6]),
                    unstated=True,
                )
            )
            continue
        if assembled and sentence in assembled:
            reason = (
                f"its own citations lack {', '.join(assembled[sentence][:6])}; the passages "
                "added for them do not hold the whole claim"
            )
            flagged.append(FlaggedClaim(sentence=sentence, evidence_ids=ids, reason=reason))
            continue
        items.append((sentence, ids, " ".join(texts)))
        claim = CITED_ID_RE.sub(" ", sentence)
        if _answers(line, answer_lines):
            claim = f"{question} {claim.replace(answer_lines or '', ' ')}"
        claims.append(claim)
    if embed is not None and items:
        vecs = embed(claims + [t[:2000] for _, _, t in items])
        n = len(items)
        for i, (sentence, ids, _t) in enumerate(items):
            sim = float(np.dot(vecs[i], vecs[n + i]))
            if sim < SIMILARITY_FLOOR:
                flagged.append(
                    FlaggedClaim(
                        sentence=sentence,
                        evidence_ids=ids,
                        reason=f"weak match with the cited text (similarity {sim:.2f})",
                    )
                )
    return flagged


def _answers(line: str, answer_lines: str | None) -> bool:
    """Whether ``line`` is the answer line (it starts with ``answer_lines``)."""
    return bool(answer_lines) and line.lstrip().startswith(answer_lines or "")


# "The passages do not state X", "X is not provided": saying what is missing needs no source.
_ABSENCE = re.compile(
    r"\bnot\s+(?:\w+ly\s+)?(?:provided|stated|mentioned|specified|given|available|found|"
    r"included|disclosed|reported|listed)\b"
    r"|\b(?:do|does|did|cannot|can't)\s+(?:not\s+)?(?:state|mention|provide|say|give|specify|"
    r"include|contain|disclose|report|determine)\b"
    r"|\bno\s+(?:information|data|details|mention)\b"
    r"|\b(?:no|none\s+of\s+the)\s+(?:\w+\s+)?(?:passages?|sources?|documents?|texts?)\b"
    r"(?!\s+of\b)",  # "no passage read names X", not "no other sources of revenue"
    re.IGNORECASE,
)


def states_absence(sentence: str) -> bool:
    """Whether ``sentence`` says what the sources lack ("The passages do not state X")."""
    return _ABSENCE.search(sentence) is not None


def claims_nothing(sentence: str, line: str) -> bool:
    """Whether ``sentence`` (on ``line``) claims nothing a passage could support: a heading, a
    table row, or a statement of what the sources lack."""
    return line.lstrip().startswith(("#", "|")) or states_absence(sentence)


def uncited_claim(
    sentence: str,
    line: str,
    line_evidence: list[Evidence],
    question: str = "",
    derived: Collection[str] = (),
) -> str:
    """Why an uncited sentence is flagged ("" when it is not): it asserts numbers, dates or
    names (:func:`key_terms`) that the question does not name ("To calculate Acme's change
    from FY2016 to FY2017, ..." restates it), and the passages cited elsewhere on its line (a
    paragraph may cite once, at its end) do not all hold them. Headings, table rows and
    statements of what the sources lack are not claims, nor are ``derived`` numbers (results
    of calculations that hold)."""
    if claims_nothing(sentence, line):
        return ""
    asserted = [t for t in key_terms(sentence) if t not in derived]
    terms = terms_missing(asserted, question)
    if not terms:
        return ""
    if not line_evidence:
        return "no citation"
    missing = terms_missing(terms, " ".join(map(cited_text, line_evidence)))
    if not missing:
        return ""
    return "no citation, and not in the line's cited text: " + ", ".join(missing[:6])


def excerpt(sentence: str, chars: int = 90) -> str:
    """A flagged sentence as the Flagged claims list quotes it: no citations, cut to ``chars``."""
    text = " ".join(CITED_ID_RE.sub("", sentence).replace("⚠", "").split())
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


def mark_flagged(markdown: str, flagged: list[FlaggedClaim]) -> str:
    """Mark each flagged sentence in place (⚠) so the reader sees it; a sentence flagged twice
    (written twice, or for two reasons) is marked at each of its places, once per flag."""
    for f in flagged:
        at = markdown.find(f.sentence)
        while at >= 0 and markdown.startswith(" ⚠", at + len(f.sentence)):
            nxt = markdown.find(f.sentence, at + 1)
            if nxt < 0:
                break
            at = nxt
        if at >= 0:
            end = at + len(f.sentence)
            markdown = f"{markdown[:end]} ⚠{markdown[end:]}"
    return markdown


REMOVED = "removed from the report: "


def without_unstated(
    markdown: str, flagged: list[FlaggedClaim], keep_lines: str
) -> tuple[str, list[FlaggedClaim]]:
    """``markdown`` without the sentences the checks find their cited passages do not state
    (:attr:`FlaggedClaim.unstated`), and ``flagged`` with those flags saying so (:data:`REMOVED`
    before the reason; the reader still sees what was said and why it went). A line starting
    with ``keep_lines`` (the answer line) keeps its sentences: a withheld answer stays in view as
    a lead. A line left with no sentence goes (a list item with its mark); a table row stays.
    A report that would be left citing nothing keeps them all, flagged: an empty report tells
    the reader less than the flags do."""
    drop = {f.sentence for f in flagged if f.unstated}
    if not drop:
        return markdown, flagged
    out: list[str] = []
    gone: set[str] = set()
    for line in markdown.split("\n"):
        if line.lstrip().startswith(keep_lines) or line.lstrip().startswith("|"):
            out.append(line)
            continue
        said = [x for x, _ln in _sentences(line)]
        kept = [x for x in said if x not in drop]
        gone |= set(said) - set(kept)
        left = line if len(kept) == len(said) else rejoined(line, kept)
        if left is not None:
            out.append(left)
    if not any(CITED_ID_RE.search(line) for line in out):
        return markdown, flagged  # nothing cited would be left: the flags stand, in view
    marked = [
        f.model_copy(update={"reason": REMOVED + f.reason, "removed": True})
        if f.sentence in gone
        else f
        for f in flagged
    ]
    return "\n".join(out), marked


# ----------------------------------------------------------------------------- credibility

_AUTHORITY = {"pdf": 0.75, "html": 0.55, "web": 0.5, "markdown": 0.5, "text": 0.5, "jsonl": 0.6}
_BIAS = re.compile(
    r"!|\b(shocking|outrageous|always|never|everyone|obviously|undeniabl\w*|disaster\w*)\b", re.I
)


def credibility(doc: Document, quotes: list[str], corroborating_docs: int) -> float:
    """A 0-1 score from authority (kind), recency, corroboration, specificity and bias signs."""
    authority = _AUTHORITY.get(doc.kind, 0.5)
    age_days = max(0.0, (datetime.now(UTC) - doc.added_at.astimezone(UTC)).days)
    recency = 0.3 if doc.superseded_by else max(0.4, 1.0 - age_days / 3650)
    corroboration = min(1.0, corroborating_docs / 2)
    text = " ".join(quotes)
    words = max(1, len(text.split()))
    specificity = min(1.0, 0.3 + 10 * len(NUMBER_RE.findall(text)) / words)
    bias = min(1.0, 20 * len(_BIAS.findall(text)) / words)
    score = (
        0.35 * authority
        + 0.15 * recency
        + 0.2 * corroboration
        + 0.2 * specificity
        + 0.1 * (1 - bias)
    )
    return round(max(0.0, min(1.0, score)), 2)


def citation_records(
    evidence: Mapping[str, Evidence],
    numbers: Mapping[str, int],
    document: Callable[[str], Document],
) -> list[CitationRecord]:
    """A record for each cited passage (evidence id -> passage), numbered by ``numbers``, in
    number order; each carries its document's :func:`credibility`, corroborated by the other
    documents cited beside it."""
    docs = {ev.doc_id for ev in evidence.values()}
    cred = {
        d: credibility(
            document(d), [e.text for e in evidence.values() if e.doc_id == d], len(docs) - 1
        )
        for d in docs
    }
    out = [
        CitationRecord(
            number=numbers[i],
            evidence_id=i,
            doc_id=ev.doc_id,
            title=ev.title,
            source_uri=ev.source_uri,
            pages=ev.pages,
            boxes=ev.boxes,
            quote=ev.text,
            content_sha256=hashlib.sha256(ev.text.encode("utf-8")).hexdigest(),
            superseded=ev.superseded,
            credibility=cred[ev.doc_id],
        )
        for i, ev in evidence.items()
    ]
    return sorted(out, key=lambda c: c.number)
