"""The support check: whether each cited claim's passages state it, judged by meaning.

The lexical checks (:func:`core.research.citations.check_claims`) ask whether a claim's names
and figures appear in its cited text; that is necessary, not support: "Ana was born in 1975
[1]" passes beside a passage saying she was born in 1961 and moved in 1975. Here the model
reads each claim that passed them with its cited passages and is asked one constrained
question, "do the passages state the claim? yes / partly / no"; no token is written: its
probabilities for the three first words are read (:meth:`models.llm.LLM.choose`), and ``p(yes)``
is the claim's support: "partly" (a part stated, or facts joined that the passages do not connect)
is not support. A claim below its floor (:data:`SUPPORT_FLOOR` for one passage,
:data:`ANSWER_FLOOR` for several) is flagged, the verdict and its support in the reason.

An answer line ("**Answer:** Oslo [2]") is judged as the answer to the question, which is what
it claims, unless it stands on its chain (:mod:`core.research.chain`): the links below it, one
fact and one passage each, are judged first, and when they all pass, join, and end in the
answer, the answer is not judged again as a whole; an answer joining passages of several
documents that its chain does not carry is flagged without that judgment, which for such
answers is no better than chance (:data:`ANSWER_FLOOR`), and so is an answer of whose chain no
link passed (:data:`CHAIN_UNCHECKED`). A sentence quoting its passage word
for word is not judged (:func:`quoted`), nor is one whose written-out calculation holds: the
program redid the arithmetic, and the claim check found each operand in the cited text. That
does not make the operands the line items and periods asked for, so an answer line worked out
from figures stands only on checked links stating each of them
(:func:`core.research.chain.traces`), or is flagged. A
passage longer than :data:`PASSAGE_CHARS` is shown as its sentences (a table's rows) most like
the claim, in passage order, so one judgement reads a few hundred tokens.

An answer line that passed is asked one more question, without its passages: is it the kind of
thing the question asks for (a person for "who", a year for "when"; :func:`kind_flag`)? A small
model given passages full of figures may answer a question about a place with one of them, and
then judge that its passages state that figure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from core.evidence import Evidence
from core.research.arithmetic import calculations
from core.research.citations import cited_sentences, excerpt
from core.research.schemas import WORKED_AS, FlaggedClaim
from core.research.tables import states_row
from core.text import sentence_ranges
from models.llm import ChatMessage, Choice

OPTIONS = ("yes", "partly", "no")
#: Support (the model's probability of "yes") below which a claim citing one passage is flagged,
#: and below which an answer line (asked with the question: ``support_answer.jinja``) or a claim
#: joining several passages is. Measured on synthetic cases (``bench/support_judge.py
#: --calibrate``, ``bench/results/support_calibration.json``, fit on one seed, checked on
#: another): on an encyclopedia-like passage, right claims score .68-.98 and wrong ones .10-.93
#: (AUC .88); 0.8 keeps 79% of the right ones and flags 75% of the wrong (held out), where even
#: odds flags a quarter. Right two-hop answers score .14-.65 and wrong ones .13-.46: even odds
#: flagged every wrong answer held out; the fitting seed's best floor (0.44) passed one there and
#: a lower one (0.40) asserted four wrong MuSiQue answers instead of two, so it stays. On real
#: answer lines (dev sets, session 34's series): where the answer is looked up in one filing
#: (FinanceBench Ask: 4 right, 24 wrong) every right answer scored above every wrong one (AUC
#: 1.0), but where hops are joined (MuSiQue research: 4 right, 10 wrong) AUC .43, no better than
#: chance: there it keeps confidently wrong answers few mostly by passing few answers
#: (``bench/results/answer_likelihood_not_kept.json``).
SUPPORT_FLOOR = 0.8
#: p(yes) under which a claim judged "no" counts as unstated (:attr:`FlaggedClaim.unstated`) and
#: leaves the report (stage ``unstated_claims``), a heavier step than a flag, so it takes a
#: surer "no": in the calibration above no right single claim scored under .68 and a quarter of
#: the wrong ones under .2 (both seeds); on the dev runs' statement tables the judge said "no"
#: at .28-.42 to claims a reader finds right.
UNSTATED_BELOW = 0.2
ANSWER_FLOOR = 0.5
#: Why an answer joining passages of several documents is flagged unjudged when no chain of
#: checked links carries it: judged as a whole, such answers score no better than chance (above).
JOIN_UNCARRIED = (
    "the answer joins facts from several sources, and no chain of checked steps leads to it "
    "(each step one fact its own passage states, each naming what the step before found, the "
    "answer stated by the last step and by none before it)"
)
#: Why a worked answer is flagged when a figure it is worked out from is stated by no checked
#: link: the figures are in its passages, but nothing checked says they are the ones asked for.
WORKED_UNTRACED = (
    "a figure it is worked out from is not stated by a checked step below it (which line item "
    "and period the figure is, from its passage), so it may be the wrong line or year"
)
#: Why an answer line with a chain under it is flagged unjudged when no link of that chain passed
#: its checks: the steps it lists are how the report says it got there, and none of them stands.
CHAIN_UNCHECKED = (
    "none of the steps listed under it passed its checks, so nothing checked leads to this answer"
)
#: Claims judged per report, the answer line first; the rest keep the lexical checks alone.
MAX_CLAIMS = 12
PASSAGE_CHARS = 900
UNIT_CHARS = 300

ChooseFn = Callable[[str, list[ChatMessage]], Choice]
#: (passages, claim, answer): the prompt; ``answer`` is set for the answer line, which is asked
#: about as the answer to the question, not as a claim.
MessagesFn = Callable[[str, str, str | None], list[ChatMessage]]
EmbedFn = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class Judgement:
    sentence: str
    evidence_ids: list[str]
    choice: Choice
    floor: float = SUPPORT_FLOOR
    by_chain: bool = False  # an answer line carried by its chain of checked links, not judged
    unjudged: str = ""  # why an answer line was flagged without a judgment (its support is 0)
    quoted: bool = False  # the sentence is its passage's own words: stated, not judged

    @property
    def support(self) -> float:
        return self.choice.probabilities.get("yes", 0.0)

    @property
    def supported(self) -> bool:
        return self.support >= self.floor

    def reason(self) -> str:
        if self.unjudged:
            return self.unjudged
        says = {
            "no": "the cited passages do not state this",
            "partly": "the cited passages state only part of this",
        }.get(self.choice.option, "the support check is not sure the cited passages state this")
        return f"{says} (support check: {self.choice.option}, p(yes) {self.support:.2f})"


def plain_claim(sentence: str) -> str:
    """A sentence as the judge reads it: no citations, marks or Markdown emphasis."""
    return excerpt(sentence, chars=4000).replace("**", "").strip()


def answer_of(sentence: str, answer_mark: str) -> str:
    """The answer an answer line gives, without its mark, citations or final stop."""
    return plain_claim(sentence.replace(answer_mark, " ")).rstrip(".")


def claim_for(sentence: str, line: str, question: str, answer_mark: str) -> str:
    """What a sentence claims: itself, or for the answer line, the answer to the question."""
    if answer_mark and line.lstrip().startswith(answer_mark):
        return f'The answer to the question "{question}" is: {answer_of(sentence, answer_mark)}.'
    return plain_claim(sentence)


def _units(text: str) -> list[str]:
    """A passage in pieces of at most :data:`UNIT_CHARS`: its sentences, and a longer one (a
    table's rows run together) cut at line breaks, then between words."""
    out: list[str] = []
    for a, b in sentence_ranges(text):
        for line in text[a:b].splitlines():
            words = line.split()
            piece: list[str] = []
            for w in words:
                if piece and len(" ".join([*piece, w])) > UNIT_CHARS:
                    out.append(" ".join(piece))
                    piece = []
                piece.append(w)
            if piece:
                out.append(" ".join(piece))
    return out


def passage_view(ev: Evidence, claim: str, embed: EmbedFn | None) -> str:
    """The passage, or when long its pieces (:func:`_units`) most like ``claim`` up to
    :data:`PASSAGE_CHARS`, in passage order, cuts marked with an ellipsis."""
    flat = " ".join(ev.text.split())
    if len(flat) <= PASSAGE_CHARS:
        return flat
    units = _units(ev.text)
    if embed is None or len(units) < 2:
        return flat[: PASSAGE_CHARS - 1] + "…"
    vecs = np.asarray(embed([claim, *units]), dtype=np.float32)
    order = np.argsort(-(vecs[1:] @ vecs[0]), kind="stable").tolist()
    kept: list[int] = []
    used = 0
    for i in order:
        if used + len(units[i]) > PASSAGE_CHARS:
            continue
        kept.append(i)
        used += len(units[i]) + 3
    kept.sort()
    out: list[str] = []
    prev = -1
    for i in kept:
        if i != prev + 1:  # a cut before this piece
            out.append("…")
        out.append(units[i])
        prev = i
    return " ".join(out)


def quoted(sentence: str, passages: list[Evidence]) -> bool:
    """Whether ``sentence`` (citations and Markdown aside) is word for word in one of
    ``passages``, or copies a statement row of one as the model was shown it (the line item
    and the figures of the periods it names: :func:`~core.research.tables.states_row`): a
    passage states its own words, so the model is not asked. The 1.5B judge was unsure of rows
    copied whole ("Harbor fees (2019: 1,250)") beside the row itself."""
    plain = plain_claim(sentence).lstrip("- ")
    said = " ".join(plain.split()).rstrip(".").casefold()
    if len(said) < 20:
        return False
    return any(
        said in " ".join(ev.text.split()).casefold() or states_row(plain, ev.text)
        for ev in passages
    )


def judge_claims(
    markdown: str,
    evidence: Callable[[str], Evidence | None],
    choose: ChooseFn,
    messages: MessagesFn,
    *,
    question: str = "",
    answer_mark: str = "",
    skip: set[str] | None = None,
    embed: EmbedFn | None = None,
    on_chain: Callable[[dict[str, float]], float | None] | None = None,
    chain_links: Sequence[str] = (),
    joins_need_chain: bool = False,
    worked_needs_chain: bool = False,
) -> list[Judgement]:
    """Judge every cited sentence of ``markdown`` not in ``skip`` (those already flagged),
    the answer line first, at most :data:`MAX_CLAIMS`. ``messages`` renders the prompt
    (:data:`MessagesFn`); ``choose(key, messages)`` asks the model (keys are stable per
    claim, so a resumed run reuses its judgements).

    With ``on_chain``, the other sentences are judged first and ``on_chain(supported)`` (the
    sentences that passed, with their support) gives the support of the answer line's chain
    of checked links (:func:`core.research.chain.carries`), or None when the chain does not
    carry it; if it does, the answer line is not judged as a whole. With ``joins_need_chain``,
    an answer line citing passages of more than one document is never judged as a whole: its
    chain carries it or it is flagged (:data:`JOIN_UNCARRIED`). With ``worked_needs_chain``, an
    answer line worked out from figures (its calculation holds) is not passed unjudged as the
    body's calculations are: its chain carries it (``on_chain``: a checked link states each
    figure) or it is flagged (:data:`WORKED_UNTRACED`). With ``chain_links`` (the chain's cited
    sentences), an answer line its chain does not carry is flagged unjudged
    (:data:`CHAIN_UNCHECKED`) when not one of them passed: the report's own steps to the answer
    all fail, so a judgment of the answer as a whole is not asked for."""
    todo: list[tuple[str, str, list[str]]] = []
    worked: tuple[str, str, list[str]] | None = None
    for sentence, line, ids in cited_sentences(markdown):
        if not ids or (skip and sentence in skip):
            continue
        first = bool(answer_mark) and line.lstrip().startswith(answer_mark)
        if any(c.holds for c in calculations(sentence)):
            if first and worked_needs_chain:
                worked = (sentence, line, ids)
            continue  # the program redid the arithmetic, and the claim check found its figures
        item = (sentence, line, ids)
        todo.insert(0, item) if first else todo.append(item)
    todo = todo[: MAX_CLAIMS - (worked is not None)]
    answer_item = worked or (
        todo[0] if todo and answer_mark and todo[0][1].lstrip().startswith(answer_mark) else None
    )
    if answer_item is not None and (on_chain is not None or chain_links or worked is not None):
        # the answer line last: its chain's links decide first
        todo = [*(t for t in todo if t != answer_item), answer_item]
    out: list[Judgement] = []
    for sentence, line, ids in todo:
        found = [ev for ev in map(evidence, ids) if ev is not None]
        if not found:
            continue
        if on_chain is not None and (sentence, line, ids) == answer_item:
            weakest = on_chain({j.sentence: j.support for j in out if j.supported})
            if weakest is not None:
                choice = Choice(option="yes", probabilities={"yes": weakest})
                carried = Judgement(sentence, ids, choice, ANSWER_FLOOR, by_chain=True)
                out.insert(0, carried)
                continue
        if worked is not None and (sentence, line, ids) == worked:
            none = Choice(option="no", probabilities={"yes": 0.0})
            out.insert(0, Judgement(sentence, ids, none, ANSWER_FLOOR, unjudged=WORKED_UNTRACED))
            continue
        if (
            joins_need_chain
            and (sentence, line, ids) == answer_item
            and len({ev.doc_id for ev in found}) > 1
        ):
            none = Choice(option="no", probabilities={"yes": 0.0})
            out.insert(0, Judgement(sentence, ids, none, ANSWER_FLOOR, unjudged=JOIN_UNCARRIED))
            continue
        if (
            chain_links
            and (sentence, line, ids) == answer_item
            and not any(j.supported and j.sentence in chain_links for j in out)
        ):
            none = Choice(option="no", probabilities={"yes": 0.0})
            out.insert(0, Judgement(sentence, ids, none, ANSWER_FLOOR, unjudged=CHAIN_UNCHECKED))
            continue
        is_answer = bool(answer_mark) and line.lstrip().startswith(answer_mark)
        if not is_answer and quoted(sentence, found):
            said = Choice(option="yes", probabilities={"yes": 1.0})
            out.append(Judgement(sentence, ids, said, quoted=True))
            continue
        claim = claim_for(sentence, line, question, answer_mark)
        answer = answer_of(sentence, answer_mark) if is_answer else None
        passages = "\n\n".join(
            f"[{i}] {ev.title}\n{passage_view(ev, claim, embed)}"
            for i, ev in enumerate(found, start=1)
        )
        digest = hashlib.sha256(f"{claim}\n{' '.join(ids)}".encode()).hexdigest()[:16]
        choice = choose(f"support/{digest}", messages(passages, claim, answer))
        floor = ANSWER_FLOOR if is_answer or len(found) > 1 else SUPPORT_FLOOR
        judged = Judgement(sentence=sentence, evidence_ids=ids, choice=choice, floor=floor)
        out.insert(0, judged) if is_answer else out.append(judged)
    return out


#: p(yes) below which an answer line is flagged as not the kind of thing its question asks for
#: (``answer_kind.jinja``). On synthetic pairs (``bench/answer_kind.py``,
#: ``bench/results/answer_kind.json``): answers of the kind asked average .76 and none is
#: flagged; a year, a figure or a name where another kind is asked for average .29 and 26 of 36
#: are flagged. An organization where a person is asked for is not told apart ("who" may ask
#: for either).
KIND_FLOOR = 0.5
KIND_OPTIONS = ("yes", "no")


def answer_line_sentence(markdown: str, answer_mark: str) -> str | None:
    """The first cited sentence of ``markdown``'s answer line, or None when it has none."""
    for sentence, line, ids in cited_sentences(markdown):
        if ids and line.lstrip().startswith(answer_mark):
            return sentence
    return None


def kind_flag(
    sentence: str,
    answer_mark: str,
    choose: Callable[[str, list[ChatMessage]], Choice],
    messages: Callable[[str], list[ChatMessage]],
) -> tuple[FlaggedClaim | None, float]:
    """Whether the answer that answer-line ``sentence`` gives is the kind of thing the question
    asks for ("Tomas Varga" for "who founded ...?", not "Dravin Works"): ``messages(answer)``
    renders the prompt, ``choose(key, messages)`` asks the model. Returns the flag (None when
    the answer is of the kind asked) and p(yes). Whether the answer is true is not asked: that
    is the support check's."""
    answer = answer_of(sentence, answer_mark).split(WORKED_AS)[0].strip()
    digest = hashlib.sha256(answer.encode()).hexdigest()[:16]
    choice = choose(f"kind/{digest}", messages(answer))
    p = choice.probabilities.get("yes", 0.0)
    if p >= KIND_FLOOR:
        return None, p
    reason = (
        f"the answer is not the kind of thing the question asks for (kind check: p(yes) {p:.2f})"
    )
    return _flagged(sentence, reason), p


def _flagged(sentence: str, reason: str) -> FlaggedClaim:
    """``sentence`` flagged for ``reason``, with the evidence ids it cites."""
    ids = [i for _s, _l, cited in cited_sentences(sentence) for i in cited]
    return FlaggedClaim(sentence=sentence, evidence_ids=ids, reason=reason)


#: p(change) below which an answer worked out as the relative change of a figure
#: (:func:`core.research.arithmetic.is_change`) is flagged: the model, reading the question
#: (``asks_change.jinja``), takes it to ask for something else. On synthetic questions
#: (``bench/worked_change.py``, ``bench/results/worked_change.json``) the 1.5B gives questions
#: asking for a change .75-.89 and others (a ratio, a margin, a share, one figure) .27-.43,
#: every change question above every other; a question's instructions pull it down a little,
#: so the floor sits below the middle, flagging only what the model reads as another question
#: (22 of 24 there).
CHANGE_FLOOR = 0.4
CHANGE_OPTIONS = ("change", "other")


def change_flag(
    sentence: str,
    choose: Callable[[str, list[ChatMessage]], Choice],
    messages: list[ChatMessage],
) -> tuple[FlaggedClaim | None, float]:
    """Whether a worked-out answer line (``sentence``) whose calculation is a relative change
    answers a question that asks for one: the 1.5B writes a growth rate out of habit, the
    change of one line item between two years where the question asks for the ratio of two
    items or a margin, and every other check passes (each figure is stated by a checked link,
    the arithmetic holds). ``messages`` asks the model whether the question asks for a change
    between two periods; ``choose(key, messages)`` asks it. Returns the flag (None when it
    does) and p(change)."""
    digest = hashlib.sha256(messages[-1].content.encode()).hexdigest()[:16]
    choice = choose(f"asks_change/{digest}", messages)
    p = choice.probabilities.get("change", 0.0)
    if p >= CHANGE_FLOOR:
        return None, p
    reason = (
        "the answer is worked out as the change of a figure between two periods, and the "
        f"question asks for something else (change check: p(change) {p:.2f})"
    )
    return _flagged(sentence, reason), p


def flags(judgements: list[Judgement]) -> list[FlaggedClaim]:
    """The judgements below the floor, as flagged claims."""
    return [
        FlaggedClaim(
            sentence=j.sentence,
            evidence_ids=j.evidence_ids,
            reason=j.reason(),
            unstated=not j.unjudged and j.choice.option == "no" and j.support < UNSTATED_BELOW,
        )
        for j in judgements
        if not j.supported
    ]
