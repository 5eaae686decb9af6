"""The answer's chain: each step stated as one fact citing its passage, every link checked on
its own, and the answer standing on the chain only when the chain carries it (synthetic
names; scripted choices; a real library for the run)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from research_fixtures import _pdf, act, evidence, models, notes, pid_with, plan, unverified

from core.evidence import Evidence
from core.research import chain, support
from core.research.chain import (
    CHAIN_HEAD,
    CHAIN_HEAD_WITHHELD,
    CHAIN_HEAD_WITHHELD_FLAGGED,
    carries,
    chain_block,
    chain_lines,
    without_heading,
)
from core.research.citations import REMOVED, check_claims, complete_citations, without_unstated
from core.research.schemas import FlaggedClaim, ResearchLimits
from core.service import Sourcebook
from models.llm import ChatMessage, Choice
from models.scripted import ScriptedLLM

MARK = "**Answer:**"
Q = "Which river flows through the town where Tomas Varga was born?"
FACT1 = "Tomas Varga was born in Kelmor"
FACT2 = "The Dravin River flows through Kelmor"
ID1, ID2 = "ev1:00000000000000a1", "ev1:00000000000000a2"


def report(answer: str = "the Dravin River", facts: tuple[str, ...] = (FACT1, FACT2)) -> str:
    links = [(f, [ID1, ID2][i]) for i, f in enumerate(facts)]
    return f"{MARK} {answer} [{ID2}].\n\n{chain_block(links)}\n\nKelmor lies in a valley [{ID1}]."


def link_sentences(markdown: str) -> dict[str, float]:
    """Each link sentence, supported: the first at .85, the rest at .95."""
    return {s: (0.85 if i == 0 else 0.95) for i, s in enumerate(chain.link_sentences(markdown))}


def test_chain_block_lists_one_cited_fact_per_step() -> None:
    block = chain_block(
        [("Tomas Varga was born in Kelmor [E3].", "E1"), (" ", "E2"), (FACT2, "E2")]
    )
    assert block.splitlines() == [
        CHAIN_HEAD,
        "- Tomas Varga was born in Kelmor [E1].",  # its own citation replaced by the step's
        "- The Dravin River flows through Kelmor [E2].",
    ]
    assert chain_block([]) == ""
    twice = chain_block([(FACT1, "E1"), (FACT2, "E2"), (FACT1 + ".", "E1")])
    assert twice.splitlines()[1:] == [f"- {FACT1} [E1].", f"- {FACT2} [E2]."]  # shown once
    md = report()
    assert chain_lines(md) == [f"- {FACT1} [{ID1}].", f"- {FACT2} [{ID2}]."]
    assert chain_lines(chain.withheld_head(md)) == chain_lines(md)
    assert CHAIN_HEAD_WITHHELD in chain.withheld_head(md)
    # a flagged link: the head says the unmarked links are what the sources state
    marked = chain.withheld_head(md, [f"- {FACT2} [{ID2}]."])
    assert CHAIN_HEAD_WITHHELD_FLAGGED in marked and chain_lines(marked) == chain_lines(md)
    assert CHAIN_HEAD_WITHHELD in chain.withheld_head(md, [f"{MARK} the Dravin River."])
    assert chain_lines("no chain here [ev1].") == []


def test_unstated_sentences_go_and_the_chain_head_says_what_is_left() -> None:
    ID3 = "ev1:00000000000000a3"
    md = report().replace(CHAIN_HEAD, CHAIN_HEAD_WITHHELD_FLAGGED)
    md += f" Kelmor was founded in 1901 [{ID3}]. It has a mill [{ID1}]."
    texts = {
        ID1: evidence(ID1, f"{FACT1}. Kelmor lies in a valley. It has a mill."),
        ID2: evidence(ID2, f"{FACT2}."),
        ID3: evidence(ID3, "Kelmor was founded by Ellen Park."),
    }
    flagged = check_claims(md, texts.get, None, Q, answer_lines=MARK)
    # a figure its passage lacks: unstated; the flag names what is missing
    assert [(f.unstated, f.reason) for f in flagged] == [(True, "not in the cited text: 1901")]
    weak = FlaggedClaim(sentence=f"It has a mill [{ID1}].", evidence_ids=[ID1], reason="weak")
    said = f"- {FACT2} [{ID2}]."
    no = FlaggedClaim(sentence=said, evidence_ids=[ID2], reason="no", unstated=True)
    answer = FlaggedClaim(
        sentence=f"{MARK} the Dravin River [{ID2}].", evidence_ids=[ID2], reason="a", unstated=True
    )
    text, marked = without_unstated(md, [*flagged, weak, no, answer], MARK)
    # the answer line stays (a lead); a flag finding no unstated name (a weak match) stays
    assert text.splitlines()[0] == f"{MARK} the Dravin River [{ID2}]."
    assert f"It has a mill [{ID1}]." in text and "1901" not in text and said not in text
    assert text.endswith(f"Kelmor lies in a valley [{ID1}]. It has a mill [{ID1}].")
    assert [f.reason for f in marked] == [
        f"{REMOVED}not in the cited text: 1901",
        "weak",
        f"{REMOVED}no",
        "a",
    ]
    # one link left, unflagged: the head says the sources state it
    assert chain_lines(chain.heads_kept(text, [f.sentence for f in marked])) == [
        f"- {FACT1} [{ID1}]."
    ]
    assert CHAIN_HEAD_WITHHELD in chain.heads_kept(text, [f.sentence for f in marked])
    assert CHAIN_HEAD_WITHHELD_FLAGGED in chain.heads_kept(text, [f"- {FACT1} [{ID1}]."])
    # no link left: the head goes with the blank line before it
    first = FlaggedClaim(
        sentence=f"- {FACT1} [{ID1}].", evidence_ids=[ID1], reason="x", unstated=True
    )
    bare, _ = without_unstated(text, [first], MARK)
    kept = chain.heads_kept(bare)
    assert chain_lines(kept) == [] and CHAIN_HEAD_WITHHELD not in kept
    assert kept.splitlines()[:2] == [f"{MARK} the Dravin River [{ID2}].", ""]
    # a report that would be left citing nothing keeps its flagged sentences
    alone = f"Kelmor was founded in 1901 [{ID3}]."
    assert without_unstated(alone, flagged, MARK) == (alone, flagged)
    # a stated answer's chain keeps its head; nothing unstated changes nothing
    assert chain.heads_kept(report()) == report()
    assert without_unstated(md, [weak], MARK) == (md, [weak])


def test_a_fact_that_copied_its_passages_heading_loses_it() -> None:
    passage = "Northport\n\nNorthport is a town on the Dravin River. It has a mill."
    assert without_heading("Northport Northport is a town on the Dravin River.", passage) == (
        "Northport is a town on the Dravin River."
    )
    kept = "Northport lies on the Dravin River."  # the title as its subject: not a copy
    assert without_heading(kept, passage) == kept
    assert without_heading("Northport is a town.", "Northport is a town.") == "Northport is a town."
    table = "Total\n\nHarbor Fees | $ 97\nDock Costs | $ 3"  # a label line over rows
    assert without_heading("Total Harbor Fees | $ 97", table) == "Total Harbor Fees | $ 97"
    place = "Kelmor, Dravin Valley\n\nKelmor is a mill town on the river."  # the name twice
    assert without_heading("Kelmor, Dravin Valley Kelmor is a mill town on the river", place) == (
        "Kelmor is a mill town on the river"
    )


def test_a_checked_bridged_chain_carries_the_answer_its_last_link_states() -> None:
    md = report()
    ok = link_sentences(md)
    line = md.splitlines()[0]
    assert carries(line, md, Q, ok, MARK) == 0.85  # the weakest link's support
    # a link that did not pass its own check breaks the chain
    weak = {s: p for s, p in ok.items() if FACT2 not in s}
    assert carries(line, md, Q, weak, MARK) is None
    # the answer must be what the last link states
    other = report("the Oskel River")
    assert carries(other.splitlines()[0], other, Q, link_sentences(other), MARK) is None
    # the second link must name what the first found (Kelmor), not only the question's words
    loose = report(facts=(FACT1, "The Dravin River flows through Tomas Varga's valley"))
    assert carries(loose.splitlines()[0], loose, Q, link_sentences(loose), MARK) is None
    # the answer a link on the way already states is a step the chain went through: asked
    # for the town's river, a chain ending on the town (or restating it) does not carry it
    town = report("Kelmor", facts=(FACT1, "Kelmor is a market town on a river"))
    assert carries(town.splitlines()[0], town, Q, link_sentences(town), MARK) is None
    # nor one whose first link already names the answer: the chain does not show the last
    # step finding it, right or not (the answer is then judged as any other joining passages)
    early = report(facts=("Tomas Varga was born in Kelmor by the Dravin River", FACT2))
    assert carries(early.splitlines()[0], early, Q, link_sentences(early), MARK) is None
    # a yes or no asserts nothing a passage can be searched for: not carried lexically
    yes = report("Yes")
    assert carries(yes.splitlines()[0], yes, Q, link_sentences(yes), MARK) is None
    # no chain, nothing carried
    bare = f"{MARK} the Dravin River [{ID2}]."
    assert carries(bare, bare, Q, {bare: 1.0}, MARK) is None


def test_a_withheld_answer_shows_what_a_read_passage_says_of_the_name_asked() -> None:
    withheld = f"{MARK} the Dravin River [{ID2}]. ⚠\n\nThe river reaches the sea [{ID2}]."
    assert chain.unnamed_asked(withheld, Q, _evidence) == ["Tomas Varga"]
    read = chain.asked_read(withheld, Q, _evidence, [ID2, ID1])
    assert read == [(f"{FACT1} in 1931; Kelmor lies in a valley.", ID1)]
    shown = chain.with_asked_read(withheld, read, MARK).splitlines()
    assert shown[:4] == [
        withheld.splitlines()[0],
        "",
        CHAIN_HEAD_WITHHELD,
        f"- {FACT1} in 1931; Kelmor lies in a valley [{ID1}].",
    ]
    assert shown[4:] == ["", f"The river reaches the sea [{ID2}]."]
    # a chain of its own: the sentence follows its links
    linked = chain.with_asked_read(report(), [("Kelmor lies in a valley.", ID1)], MARK)
    assert chain_lines(linked)[-1] == f"- Kelmor lies in a valley [{ID1}]."
    # the name asked is cited already, or no passage read names it: nothing to add
    assert chain.asked_read(report(), Q, _evidence, [ID1, ID2]) == []
    assert chain.asked_read(withheld, Q, _evidence, [ID2]) == []
    assert chain.with_asked_read(withheld, [], MARK) == withheld
    # under the answer line, wherever it is
    later = chain.with_asked_read(f"Kelmor\n\n{withheld}", read, MARK).splitlines()
    assert later[:3] == ["Kelmor", "", withheld.splitlines()[0]] and later[4] == CHAIN_HEAD_WITHHELD


def test_a_row_link_carries_only_the_figure_of_the_period_asked() -> None:
    asked = "What were Northport's FY2019 harbor fees (in USD thousands)?"
    row = "Harbor fees (2019: $1,250; 2018: 1,100)"

    def carried(answer: str, question: str = asked) -> float | None:
        md = f"{MARK} {answer} [{ID1}].\n\n{chain_block([(row, ID1)])}"
        return carries(md.splitlines()[0], md, question, link_sentences(md), MARK)

    assert carried("1,250") == 0.85
    assert carried("1,100") is None  # the row states it, for the year before the one asked
    assert carried("1,100", "What were Northport's harbor fees?") == 0.85  # no year asked
    assert chain.of_asked_period(f"- Tarsk Mills earned 1,100 in 2018 [{ID1}].", "1,100", asked)


def _evidence(ev_id: str) -> Evidence:
    texts = {ID1: f"{FACT1} in 1931; Kelmor lies in a valley.", ID2: f"{FACT2} to the sea."}
    return evidence(ev_id, texts[ev_id])


def _two_documents(ev_id: str) -> Evidence:
    """The passages of :func:`_evidence`, each from a document of its own."""
    return _evidence(ev_id).model_copy(update={"doc_id": f"doc-{ev_id[-2:]}"})


def _judge(
    markdown: str,
    p_yes: dict[str, float],
    *,
    get: Callable[[str], Evidence | None] = _evidence,
    joins_need_chain: bool = False,
    worked_needs_chain: bool = False,
    chained: bool = True,
    unchecked: bool = False,
) -> tuple[list[support.Judgement], list[str]]:
    """Judge with each claim's p(yes) looked up by a word it holds; returns the judgements and
    the claims the model was asked about."""
    asked: list[str] = []

    def messages(passages: str, claim: str, answer: str | None) -> list[ChatMessage]:
        return [ChatMessage(role="user", content=claim if answer is None else f"A: {answer}")]

    def choose(key: str, msgs: list[ChatMessage]) -> Choice:
        text = msgs[0].content
        asked.append(text)
        p = next((v for k, v in p_yes.items() if k in text), 0.9)
        rest = (1 - p) / 2
        return Choice(
            option="yes" if p >= 0.5 else "no", probabilities={"yes": p, "partly": rest, "no": rest}
        )

    judged = support.judge_claims(
        markdown,
        get,
        choose,
        messages,
        question=Q,
        answer_mark=MARK,
        on_chain=(
            lambda held: carries(
                next(ln for ln in markdown.splitlines() if ln.startswith(MARK)),
                markdown,
                Q,
                held,
                MARK,
            )
        )
        if chained
        else None,
        chain_links=chain.link_sentences(markdown) if unchecked else (),
        joins_need_chain=joins_need_chain,
        worked_needs_chain=worked_needs_chain,
    )
    return judged, asked


def test_a_carried_answer_stands_on_its_judged_links_without_a_joint_judgment() -> None:
    md = report()
    judged, asked = _judge(md, {"A: ": 0.1})  # the joint judgment would flag the answer
    assert not any(a.startswith("A: ") for a in asked)  # the answer line was not judged whole
    assert judged[0].sentence.startswith(MARK) and judged[0].by_chain and judged[0].supported
    assert support.flags(judged) == []


RETOLD = "The Dravin River runs by Kelmor"  # the second step in words of its own


def test_a_link_that_fails_sends_the_answer_to_the_joint_judgment() -> None:
    md = report(facts=(FACT1, RETOLD))
    judged, asked = _judge(md, {"Dravin River runs": 0.3, "A: ": 0.1})
    assert any(a.startswith("A: ") for a in asked)
    flagged = {f.sentence for f in support.flags(judged)}
    assert f"- {RETOLD} [{ID2}]." in flagged  # the weak link is flagged
    assert any(s.startswith(MARK) for s in flagged)  # and the answer, judged whole, too
    assert not judged[0].by_chain


BORN_RETOLD = "Kelmor is where Tomas Varga was born"  # the first step in words of its own


def test_link_sentences_are_the_chains_cited_sentences_in_order() -> None:
    md = report(facts=(BORN_RETOLD, RETOLD))
    assert chain.link_sentences(md) == [f"- {BORN_RETOLD} [{ID1}].", f"- {RETOLD} [{ID2}]."]
    assert chain.link_sentences(f"{MARK} the Dravin River [{ID2}].") == []  # no chain


def test_an_answer_whose_chain_has_no_checked_link_is_flagged_unjudged() -> None:
    # both links fail their own checks; the joint judgment would pass the answer
    md = report(facts=(BORN_RETOLD, RETOLD))
    p = {"Kelmor is where": 0.3, "Dravin River runs": 0.3, "A: ": 0.95}
    judged, asked = _judge(md, p, unchecked=True)
    assert not any(a.startswith("A: ") for a in asked)  # never asked as a whole
    answer = judged[0]
    assert answer.sentence.startswith(MARK) and not answer.supported
    assert answer.reason() == support.CHAIN_UNCHECKED
    # one link standing: the answer is judged whole, as before
    judged, asked = _judge(md, {**p, "Kelmor is where": 0.9}, unchecked=True)
    assert "A: the Dravin River" in asked and judged[0].supported
    # the rule off: judged whole even with no link standing
    judged, asked = _judge(md, p)
    assert "A: the Dravin River" in asked and judged[0].supported


JOINED_ANSWER = f"{MARK} the Dravin River [{ID1}][{ID2}]."


def test_an_answer_joining_documents_stands_on_its_chain_or_is_flagged_unjudged() -> None:
    # a broken chain, passages of two documents: the joint judgment would pass the answer
    md = report(facts=(FACT1, RETOLD))
    md = md.replace(md.splitlines()[0], JOINED_ANSWER)
    p = {"Dravin River runs": 0.3, "A: ": 0.95}
    judged, asked = _judge(md, p, get=_two_documents, joins_need_chain=True)
    assert not any(a.startswith("A: ") for a in asked)  # never asked as a whole
    answer = judged[0]
    assert answer.sentence.startswith(MARK) and not answer.supported and not answer.by_chain
    assert answer.reason() == support.JOIN_UNCARRIED
    assert any(f.reason == support.JOIN_UNCARRIED for f in support.flags(judged))
    # with no chain at all, the same
    bare = JOINED_ANSWER
    judged, asked = _judge(bare, p, get=_two_documents, joins_need_chain=True, chained=False)
    assert asked == [] and judged[0].reason() == support.JOIN_UNCARRIED
    # a chain that carries it still does
    md = report().replace(report().splitlines()[0], JOINED_ANSWER)
    judged, asked = _judge(md, {"A: ": 0.1}, get=_two_documents, joins_need_chain=True)
    assert judged[0].by_chain and judged[0].supported
    # passages of one document, or the rule off: the answer is judged whole, as before
    for get, rule in ((_evidence, True), (_two_documents, False)):
        judged, asked = _judge(bare, p, get=get, joins_need_chain=rule, chained=False)
        assert asked == ["A: the Dravin River"] and judged[0].supported


SALES = "Tarsk Mills' total net sales were 9,000 in 2030"
WORKED = f"{MARK} 12.5%, worked out as (9,000 - 8,000) / 8,000 * 100 = 12.5% [{ID1}]."


@pytest.mark.parametrize(
    ("facts", "p_link", "stands"),
    [
        ((SALES, "Tarsk Mills' total net sales were 8,000 in 2029"), 0.9, True),
        ((SALES, "Tarsk Mills' total net sales were 8,000 in 2029"), 0.3, False),  # a link fails
        ((SALES, "Tarsk Mills sold mostly in Vell"), 0.9, False),  # 8,000 is in no link
        ((), 0.9, False),  # no chain: nothing says what the figures are
    ],
)
def test_a_worked_answer_stands_only_on_checked_links_stating_its_figures(
    facts: tuple[str, ...], p_link: float, stands: bool
) -> None:
    md = WORKED
    if facts:
        md += "\n\n" + chain_block([(f, ID1) for f in facts])
    judged, asked = _judge(
        md, {"Tarsk Mills": p_link}, worked_needs_chain=True, chained=bool(facts)
    )
    answer = next(j for j in judged if j.sentence.startswith(MARK))
    assert not any(a.startswith("A: ") for a in asked)  # never judged as a whole
    assert answer.supported == answer.by_chain == stands
    if not stands:
        assert answer.reason() == support.WORKED_UNTRACED
    # without the rule, a calculation that holds is not judged, nor flagged
    judged, _ = _judge(md, {"Tarsk Mills": p_link}, chained=bool(facts))
    assert not any(j.sentence.startswith(MARK) for j in judged)


def test_an_answer_whose_passages_name_nothing_the_question_names_is_unanchored() -> None:
    texts = {
        ID1: evidence(ID1, "Tomas Varga was born in Kelmor in 1931."),
        ID2: evidence(ID2, "The Dravin River flows through Kelmor to the sea."),
    }
    # the chain's first link cites the passage naming the question's person: anchored
    assert chain.unanchored(report(), Q, texts.get, MARK) is None
    # one link, from the river's passage alone: nothing ties the river to the person asked about
    loose = f"{MARK} the Dravin River [{ID2}].\n\n{chain_block([(FACT2, ID2)])}"
    flag = chain.unanchored(loose, Q, texts.get, MARK)
    assert flag is not None and flag.sentence.startswith(MARK) and flag.evidence_ids == [ID2]
    assert "Tomas" in flag.reason
    # a name is matched whole: a passage on another river is not about the one asked about
    ID5 = "ev1:00000000000000a5"
    texts[ID5] = evidence(ID5, "Tarsk Mills stands on the Orle River.")
    mill = f"{MARK} Tarsk Mills [{ID5}]."
    assert chain.asked_names("Which mill stands on the Dravin River?") == ["Dravin River"]
    assert chain.unanchored(mill, "Which mill stands on the Dravin River?", texts.get, MARK)
    assert not chain.unanchored(mill, "Which mill stands on the Orle River?", texts.get, MARK)
    # a question naming nothing cannot be tied to anything: no flag
    assert chain.unanchored(loose, "which river is the longest?", texts.get, MARK) is None
    assert chain.unanchored("No answer line [x].", Q, texts.get, MARK) is None
    # a passage read that names the person and the town the link names ties them; one naming
    # only the person, or only the town, does not
    ID3, ID4 = "ev1:00000000000000a3", "ev1:00000000000000a4"
    texts[ID3] = evidence(ID3, "Tomas Varga wrote two books.")
    texts[ID4] = evidence(ID4, "Kelmor has a market.")
    assert chain.anchoring(loose, Q, texts.get, [ID3, ID4, ID2, ID1], MARK) == ID1
    assert chain.anchoring(loose, Q, texts.get, [ID3, ID4, ID2], MARK) is None
    # the bridge is a name taken whole: a word of it ("Dravin") ties nothing
    ID6 = "ev1:00000000000000a6"
    texts[ID6] = evidence(ID6, "Tomas Varga fished the Dravin in spring.")
    assert chain.anchoring(loose, Q, texts.get, [ID6], MARK) is None
    tied = chain.cite_on_answer_line(loose, ID1, MARK)
    assert tied.startswith(f"{MARK} the Dravin River [{ID2}][{ID1}].\n")
    assert chain.unanchored(tied, Q, texts.get, MARK) is None


# ----------------------------------------------------------------------------- whole runs


@pytest.fixture(scope="module")
def chain_app(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Sourcebook]:
    root = tmp_path_factory.mktemp("chain")
    app = Sourcebook(root / "home", embedder=embedder)
    notes_pdf = _pdf(
        root / "varga.pdf",
        "Regional Notes",
        [f"{FACT1} in 1931.", f"{FACT2} to the sea.", "Kelmor lies in a wide valley."],
    )
    assert not app.add([notes_pdf]).failed
    yield app
    app.close()


LIM = ResearchLimits(
    tool_loop=True, max_workers=1, max_rounds=1, read_top=0, trail=False, chain_support=True
)


def _short(steps: list[dict[str, Any]], answer: str, labels: list[str]) -> dict[str, Any]:
    return {"steps": steps, "calculation": "", "answer": answer, "labels": labels, "answered": True}


STEPS = [
    {"question": "Where was Tomas Varga born?", "answer": "Kelmor", "fact": FACT1, "label": "E1"},
    {
        "question": "Which river flows through Kelmor?",
        "answer": "the Dravin River",
        "fact": FACT2,
        "label": "E2",
    },
]


def _two_hop_run(
    app: Sourcebook,
    task: str,
    choices: list[str],
    limits: ResearchLimits = LIM,
    shorts: list[dict[str, Any]] | None = None,
) -> Any:
    born = pid_with(app, "was born in Kelmor")
    river = pid_with(app, "flows through Kelmor")
    planner = ScriptedLLM([plan(("q1", Q, []))])
    researcher = ScriptedLLM(
        [
            act("fetch_evidence", evidence_id=born),
            act("fetch_evidence", evidence_id=river),
            act("finish"),
            notes((FACT1 + ".", [born]), (FACT2 + ".", [river])),
        ]
    )
    shorts = shorts if shorts is not None else [_short(STEPS, "the Dravin River", ["E2"])]
    body = [] if "body" in limits.stages_off else ["Kelmor lies in a valley [E2]."]
    writer = ScriptedLLM([*shorts, *body])
    writer.enqueue_choices(choices)
    out = app.research(Q, models=models(planner, researcher, writer), task=task, limits=limits)
    assert writer.pending == 0 and writer.pending_choices == 0  # every judgment scripted was asked
    return out


def test_run_shows_the_chain_and_asserts_the_answer_its_checked_links_carry(
    chain_app: Sourcebook,
) -> None:
    # the links quote their passages (stated, not asked); the body sentence is judged yes; no
    # joint judgment of the answer is asked for
    out = _two_hop_run(chain_app, "chain-carried", ["yes"])
    lines = out.markdown.splitlines()
    assert lines[0].startswith("**Answer:** the Dravin River [")
    assert CHAIN_HEAD in lines
    head = lines.index(CHAIN_HEAD)
    assert lines[head + 1].startswith(f"- {FACT1} [") and lines[head + 2].startswith(f"- {FACT2} [")
    assert out.status == "answered", out.status_reasons
    assert len(out.citations) == 2


def test_run_withholds_an_answer_whose_chain_breaks_and_keeps_what_the_sources_state(
    chain_app: Sourcebook,
) -> None:
    # the first link quotes its passage (stated, not asked); the second, in words of its own,
    # is judged "no"; the body "yes"; the answer, judged whole, "no"
    retold = [STEPS[0], {**STEPS[1], "fact": RETOLD}]
    shorts = [_short(retold, "the Dravin River", ["E2"])]
    out = _two_hop_run(chain_app, "chain-broken", ["no", "yes", "no"], shorts=shorts)
    lines = out.markdown.splitlines()
    assert unverified(lines[0])
    # the link judged "no" is no longer in the report, so the head says the sources state
    # the link left; the flag says it was removed and why
    assert CHAIN_HEAD_WITHHELD in lines and CHAIN_HEAD_WITHHELD_FLAGGED not in lines
    assert lines[lines.index(CHAIN_HEAD_WITHHELD) + 1].startswith(f"- {FACT1} [")
    body = out.markdown.split("## Flagged claims")[0]
    assert RETOLD not in body
    gone = [f for f in out.flagged_claims if RETOLD in f.sentence]
    assert len(gone) == 1 and gone[0].unstated and gone[0].removed
    assert gone[0].reason.startswith(REMOVED)
    assert f"{REMOVED}the cited passages do not state this" in out.markdown
    assert any("were removed" in r for r in out.status_reasons)
    assert out.status == "insufficient_evidence"
    assert not any(FACT1 in f.sentence for f in out.flagged_claims)


def test_with_unstated_claims_off_a_broken_link_stays_in_view_flagged(
    chain_app: Sourcebook,
) -> None:
    retold = [STEPS[0], {**STEPS[1], "fact": RETOLD}]
    shorts = [_short(retold, "the Dravin River", ["E2"])]
    off = LIM.model_copy(update={"stages_off": ["unstated_claims"]})
    out = _two_hop_run(chain_app, "chain-broken-kept", ["no", "yes", "no"], off, shorts)
    lines = out.markdown.splitlines()
    assert unverified(lines[0])
    # a link is flagged, so the head does not say the sources state every link
    assert CHAIN_HEAD_WITHHELD_FLAGGED in lines
    assert CHAIN_HEAD not in lines and CHAIN_HEAD_WITHHELD not in lines
    assert any(RETOLD in ln and ln.endswith("⚠") for ln in lines)
    assert not any(f.reason.startswith(REMOVED) for f in out.flagged_claims)


def test_run_withholds_an_answer_none_of_whose_links_stands_without_judging_it_whole(
    chain_app: Sourcebook,
) -> None:
    # both links in words of their own, each judged "no"; the body "yes"; the answer is not
    # asked about as a whole (three judgments scripted, all asked)
    retold = [{**STEPS[0], "fact": BORN_RETOLD}, {**STEPS[1], "fact": RETOLD}]
    shorts = [_short(retold, "the Dravin River", ["E2"])]
    out = _two_hop_run(chain_app, "chain-unchecked", ["no", "no", "yes"], shorts=shorts)
    assert unverified(out.markdown.splitlines()[0])
    assert out.status == "insufficient_evidence"
    assert any(f.reason == support.CHAIN_UNCHECKED for f in out.flagged_claims)


def test_with_chain_support_off_the_answer_is_judged_whole(chain_app: Sourcebook) -> None:
    assert ResearchLimits().chain_support is True
    # the links quoted, the answer line judged as a whole first: "no"; the body yes
    off = LIM.model_copy(update={"chain_support": False})
    out = _two_hop_run(chain_app, "chain-off", ["no", "yes"], limits=off)
    assert unverified(out.markdown.splitlines()[0])
    assert CHAIN_HEAD_WITHHELD in out.markdown.splitlines()  # the links that stand are kept


def test_a_fragment_is_no_link() -> None:
    from core.research.writer import _links

    steps = [
        {"question": "q", "answer": "a", "fact": FACT1, "label": "E1"},
        {"question": "q", "answer": "a", "fact": "Tarsk Mills Tarsk Mills (", "label": "E2"},
        {"question": "q", "answer": "a", "fact": "Kelmor", "label": "E3"},
        {"question": "q", "answer": "a", "fact": f"{FACT2} (to the sea)", "label": "E4"},
        {"question": "q", "answer": "a", "fact": FACT2, "label": None},
    ]
    assert _links({"steps": steps}) == [(FACT1, "E1"), (f"{FACT2} (to the sea)", "E4")]


def test_a_fact_cut_at_a_space_is_no_link_when_read_again() -> None:
    from core.research.schemas import FACT_MAX, short_answer_model
    from core.research.writer import _links

    cut = f"{FACT1} in parish {'r' * FACT_MAX}"[: FACT_MAX - 1] + " "  # cut after a word
    steps = [{**STEPS[0], "fact": cut}, STEPS[1]]
    ran = _short(steps, "the Dravin River", ["E2"])
    again = short_answer_model(["E1", "E2"]).model_validate(ran).model_dump(mode="json")
    assert again["steps"][0]["fact"] == cut.rstrip()  # as a resumed run reads it
    assert _links(ran) == _links(again) == [(FACT2, "E2")]


def test_a_cut_reads_the_same_when_validated_again() -> None:
    from core.research.schemas import FACT_MAX, short_answer_model

    model = short_answer_model(["E1", "E2"])
    long_fact = f"{FACT1} in parish {'r' * FACT_MAX}"
    at_space = long_fact[: FACT_MAX - 1] + " " + long_fact  # the bound falls just after a space
    steps = [{**STEPS[0], "fact": at_space}, STEPS[1]]
    once = model.model_validate(_short(steps, "the Dravin River", ["E2"])).model_dump(mode="json")
    twice = model.model_validate(once).model_dump(mode="json")
    assert once["steps"][0]["fact"] == at_space[: FACT_MAX - 1]
    assert twice == once


def test_a_fact_cut_at_its_bound_is_no_link(chain_app: Sourcebook) -> None:
    # a small model copying its passage past the fact's bound: the cut fact states nothing whole
    copied = f"{FACT1} in 1931, " + " ".join(f"and parish record {n} says so" for n in range(8))
    steps = [{**STEPS[0], "fact": copied}, STEPS[1]]
    # (answer_subject off: the one link left does not name the person the question asks about)
    off = LIM.model_copy(update={"chain_support": False, "stages_off": ["answer_subject"]})
    out = _two_hop_run(
        chain_app,
        "chain-cut-fact",
        ["yes", "yes"],
        limits=off,
        shorts=[_short(steps, "the Dravin River", ["E2"])],
    )
    assert chain_lines(out.markdown) and all(FACT1 not in ln for ln in chain_lines(out.markdown))
    assert "parish" not in out.markdown
    assert any(FACT2 in ln for ln in chain_lines(out.markdown))


def test_the_chain_comes_from_the_answer_that_was_kept(chain_app: Sourcebook) -> None:
    # the first answer names what its passage lacks and is asked again; the retry is kept, and
    # so are its steps: the chain never argues for the answer that was dropped
    wrong_steps = [{**STEPS[0], "answer": "Oskelby", "fact": "Tomas Varga was born in Oskelby"}]
    out = _two_hop_run(
        chain_app,
        "chain-retry",
        ["yes"],
        shorts=[
            _short(wrong_steps, "the Oskel River", ["E2"]),
            _short(STEPS, "the Dravin River", ["E2"]),
        ],
    )
    assert out.markdown.splitlines()[0].startswith("**Answer:** the Dravin River [")
    assert "Oskel" not in out.markdown
    assert [ln.split(" [")[0] for ln in chain_lines(out.markdown)] == [f"- {FACT1}", f"- {FACT2}"]


def test_citations_are_not_completed_on_the_chain_lines() -> None:
    # a link names what its one passage lacks: it is flagged, not propped up by a second passage
    link = f"- Tomas Varga was born in Kelmor by the Dravin River [{ID1}]."
    md = f"{MARK} the Dravin River [{ID2}].\n\n{CHAIN_HEAD}\n{link}\n\n{link[2:]}"
    keep = set(chain_lines(md)).__contains__
    done, _ = complete_citations(md, _evidence, [ID1, ID2], Q, keep=keep)
    assert link in done.splitlines()  # the link as it was
    assert done.splitlines()[-1] == link[2:].replace(f"[{ID1}]", f"[{ID1}][{ID2}]")


def test_a_link_citing_the_passage_beside_its_own_cites_the_one_that_holds_it() -> None:
    # the model copied the fact from one passage and gave the other's label: the link cites
    # the passage holding all it states, alone, and still stands on that one passage
    md = f"{MARK} the Dravin River [{ID2}].\n\n{CHAIN_HEAD}\n- {FACT1} [{ID2}].\n- {FACT2} [{ID2}]."
    keep = set(chain_lines(md)).__contains__
    done, assembled = complete_citations(md, _evidence, [ID2, ID1], Q, keep=keep)
    assert f"- {FACT1} [{ID1}]." in done.splitlines()
    assert f"- {FACT2} [{ID2}]." in done.splitlines()  # held by its own passage: as it was
    assert done.splitlines()[0] == f"{MARK} the Dravin River [{ID2}]."
    assert not assembled
    assert not check_claims(done, _evidence, None, Q, answer_lines=MARK)
    # a citation inside the sentence moves to its end; none of its words is lost
    link = f"- Tomas Varga [{ID2}] was born in Kelmor."
    inside = f"{MARK} the Dravin River [{ID2}].\n\n{CHAIN_HEAD}\n{link}"
    done, _ = complete_citations(
        inside, _evidence, [ID2, ID1], Q, keep=chain_lines(inside).__contains__
    )
    assert done.splitlines()[-1] == f"- Tomas Varga was born in Kelmor [{ID1}]."


def test_with_the_body_off_the_answer_and_its_chain_are_the_report(chain_app: Sourcebook) -> None:
    # no body is scripted (the run asserts every scripted output was used and none more)
    limits = LIM.model_copy(update={"stages_off": ["body"]})
    out = _two_hop_run(chain_app, "chain-no-body", [], limits=limits)  # the links are quoted
    assert out.status == "answered", out.status_reasons
    lines = [ln for ln in out.markdown.split("## Sources")[0].splitlines() if ln.strip()]
    assert lines[0].startswith("**Answer:** the Dravin River [")
    assert lines[1:] == [CHAIN_HEAD, *chain_lines(out.markdown)] and len(lines) == 4


JOINED = "The Dravin River was named by Tomas Varga."  # each passage holds part of it


def _notes_body_run(
    app: Sourcebook,
    task: str,
    findings: list[tuple[str, str]],
    limits: dict[str, Any] | None = None,
) -> Any:
    """A run with ``notes_body`` on (or ``limits``), its researcher noting ``findings`` (claim,
    the text of the passage it cites) and JOINED; the writer scripted with the short answer
    alone."""
    born, river = pid_with(app, "was born in Kelmor"), pid_with(app, "flows through Kelmor")
    noted = [(claim, [pid_with(app, text)]) for claim, text in findings]
    researcher = ScriptedLLM(
        [
            act("fetch_evidence", evidence_id=born),
            act("fetch_evidence", evidence_id=river),
            act("finish"),
            notes(*noted, (JOINED, [born, river])),
        ]
    )
    writer = ScriptedLLM([_short(STEPS, "the Dravin River", ["E2"])])
    update = limits if limits is not None else {"notes_body": True}
    out = app.research(
        Q,
        models=models(ScriptedLLM([plan(("q1", Q, []))]), researcher, writer),
        task=task,
        limits=LIM.model_copy(update={**update, "chain_support": False}),
    )
    assert writer.pending == 0 and not any("Notes (data" in str(c.messages) for c in writer.history)
    return out


def test_a_notes_body_states_the_checked_findings_the_chain_does_not(chain_app: Sourcebook) -> None:
    finding = "Tomas Varga was born in Kelmor in 1931."
    out = _notes_body_run(chain_app, "notes-body", [(finding, "was born in Kelmor")])
    text = out.markdown.split("## Sources")[0]
    assert text.startswith("**Answer:** the Dravin River [")
    assert finding.rstrip(".") in text.split(CHAIN_HEAD)[1]  # under the chain, cited
    assert JOINED.rstrip(".") not in text  # a note no passage it cites holds is not stated
    # a note the chain already states adds nothing: the answer and its chain are the report,
    # not the unchecked notes the writer's fallback would list
    again = _notes_body_run(chain_app, "notes-body-chain", [(FACT1 + ".", "was born in Kelmor")])
    lines = [ln for ln in again.markdown.split("## Sources")[0].splitlines() if ln.strip()]
    assert lines[1:] == [CHAIN_HEAD, *chain_lines(again.markdown)]
    assert JOINED.rstrip(".") not in again.markdown
    done = [e.payload for e in chain_app.task_log().events("notes-body-chain")]
    assert {"stated": 0, "unheld": 1, "repeated": 1} in done


def test_past_its_prompt_bound_the_prose_gives_way_to_the_notes(chain_app: Sourcebook) -> None:
    finding = "Tomas Varga was born in Kelmor in 1931."
    assert LIM.prose_prompt_tokens and not LIM.notes_body  # the prose, while its prompt fits
    bound = {"prose_prompt_tokens": 60}  # shorter than any writer's prompt
    out = _notes_body_run(chain_app, "prose-bound", [(finding, "was born in Kelmor")], bound)
    assert finding.rstrip(".") in out.markdown.split(CHAIN_HEAD)[1]  # no prose call was made
    done = [e.payload for e in chain_app.task_log().events("prose-bound")]
    body = [p for p in done if isinstance(p, dict) and p.get("prose") is False]
    assert len(body) == 1 and body[0]["bound"] == 60 and body[0]["prompt_tokens"] > 60


def _river_only_run(app: Sourcebook, task: str, limits: ResearchLimits = LIM) -> Any:
    """The run fetches only the river's passage and answers from it, in one link."""
    river = pid_with(app, "flows through Kelmor")
    planner = ScriptedLLM([plan(("q1", Q, []))])
    researcher = ScriptedLLM(
        [act("fetch_evidence", evidence_id=river), act("finish"), notes((FACT2 + ".", [river]))]
    )
    short = _short([{**STEPS[1], "label": "E1"}], "the Dravin River", ["E1"])
    writer = ScriptedLLM([short, "Kelmor lies in a valley [E1]."])
    writer.enqueue_choices(["yes"])  # the body sentence; the answer line is not judged
    out = app.research(Q, models=models(planner, researcher, writer), task=task, limits=limits)
    assert writer.pending == 0 and writer.pending_choices == 0
    return out


def test_run_withholds_an_answer_nothing_read_ties_to_the_question(chain_app: Sourcebook) -> None:
    # one link, from the river's passage: the person the question names is in no passage read
    out = _river_only_run(chain_app, "unanchored")
    assert unverified(out.markdown.splitlines()[0])
    assert out.status == "insufficient_evidence"
    assert any("names what the question asks about" in f.reason for f in out.flagged_claims)
    events = {e.key: e.payload for e in chain_app.task_log().events("unanchored")}
    assert events["answer_subject@1"] == {"flagged": True, "tie": None}
    # the stage off: the one link carries the answer, which is stated
    off = LIM.model_copy(update={"stages_off": ["answer_subject"]})
    out = _river_only_run(chain_app, "unanchored-off", off)
    assert out.markdown.startswith("**Answer:** the Dravin River [1].")
    assert out.status == "answered", out.status_reasons


def test_run_cites_the_passage_read_that_ties_the_answer_to_the_question(
    chain_app: Sourcebook,
) -> None:
    # the one link is from the river's passage, but the run also read the passage naming the
    # person and the town the link names: the answer line cites it too (one document, one
    # number), and stands
    shorts = [_short([STEPS[1]], "the Dravin River", ["E2"])]
    out = _two_hop_run(chain_app, "tied", ["yes"], shorts=shorts)
    assert out.status == "answered", out.status_reasons
    born = pid_with(chain_app, "was born in Kelmor")
    assert born in {c.evidence_id for c in out.citations}
    events = {e.key: e.payload for e in chain_app.task_log().events("tied")}
    assert events["answer_subject@1"] == {"flagged": False, "tie": born}
