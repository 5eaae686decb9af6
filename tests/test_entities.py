"""The regex entity extractor."""

from __future__ import annotations

import time

from core.ingest.chunking import Block, chunk_blocks
from core.ingest.entities import extract_mentions, find_entities, named_entity_ids, title_names
from graph.ids import entity_id
from graph.schemas import Passage


def _types(text: str) -> dict[str, str]:
    return {name: type_ for _, _, name, type_ in find_entities(text)}


def test_kinds() -> None:
    text = (
        "In March 3, 2021, Apple Inc. and the University of Oxford met NASA officials in Paris. "
        "Dr. Jane Goodall said revenue rose 12.5% to $4.2 billion in Q2 2023, filed on Form 10-K "
        "with the SEC. The Company shipped 300 tonnes. Barack Obama visited New York in 2019."
    )
    t = _types(text)
    assert t["March 3, 2021"] == "date" and t["Q2 2023"] == "date" and t["2019"] == "date"
    assert t["Apple Inc"] == "org" and t["University of Oxford"] == "org"
    assert t["NASA"] == "acronym" and t["SEC"] == "acronym" and t["10-K"] == "acronym"
    assert t["Paris"] == "place" and t["New York"] == "place"
    assert t["Jane Goodall"] == "person" and t["Barack Obama"] in ("person", "other")
    assert t["12.5%"] == "quantity" and t["$4.2 billion"] == "quantity"
    assert t["300 tonnes"] == "quantity"
    assert "The" not in t and "In" not in t and "Company" not in t


def test_all_caps_headings_are_not_acronyms() -> None:
    t = _types("RISK FACTORS AND MANAGEMENT DISCUSSION follow. The IRS agreed.")
    assert "RISK" not in t and "FACTORS" not in t and t.get("IRS") == "acronym"


def _passages(text: str) -> list[Passage]:
    """``text`` as one document's passages (a word counts as a word piece)."""
    return chunk_blocks(
        [Block("paragraph", text)],
        content_sha256="cd" * 32,
        doc_id="doc_y",
        max_tokens=64,
        count_tokens=lambda texts: [len(t.split()) for t in texts],
    ).passages


def test_mentions_point_to_spans() -> None:
    passages = _passages("Alpha is here. The SEC met in Paris on May 5, 2020. Bye.")
    ms = extract_mentions(passages)
    p = passages[0]
    by_name = {m.name: m for m in ms}
    for name in ("SEC", "Paris", "May 5, 2020"):
        m = by_name[name]
        span = next(s for s in p.spans if s.span_id == m.span_id)
        assert p.text[m.start : m.end] == name
        assert span.start <= m.start < m.end <= span.end
        assert p.text[span.start : span.end] == "The SEC met in Paris on May 5, 2020."


def test_fast() -> None:
    text = (
        "On June 30, 2022, Corvane Systems Corporation reported revenue of $41.7 billion, up 12%, "
        "and the SEC received its Form 10-K. Oda Brenner spoke in Millbrook, Washington. "
    ) * 6
    t0 = time.perf_counter()
    for _ in range(500):
        find_entities(text)
    assert time.perf_counter() - t0 < 5.0  # ~0.5 MB of text


def test_named_entity_ids_of_a_question() -> None:
    question = "Which bridge spans the river of the province that the Marrow Canal crosses?"
    ids = named_entity_ids(question)
    assert ids == [entity_id("Marrow Canal")]
    assert named_entity_ids("what is revenue?") == []
    # a question's opening auxiliary is not part of the name it asks about
    assert named_entity_ids("Does Corvane have a widening margin?") == [entity_id("Corvane")]
    assert named_entity_ids("Has Keldar cut its debt?") == [entity_id("Keldar")]
    assert named_entity_ids("Did Marlowe Grocers grow?") == [entity_id("Marlowe Grocers")]
    assert "Will Smith" in _types("Will Smith starred in it.")


def test_a_disambiguated_title_also_names_its_bare_name() -> None:
    assert title_names("Harrow (play)") == ["Harrow (play)", "Harrow"]
    assert title_names("Lantern Road (Wes Harlan song)") == [
        "Lantern Road (Wes Harlan song)",
        "Lantern Road",
    ]
    assert title_names("Annual report") == ["Annual report"]
    assert title_names("(draft)") == ["(draft)"]
    mentions = extract_mentions(
        _passages("Harrow is a play by Oda Brenner."), title="Harrow (play)"
    )
    titles = {m.entity_id for m in mentions if m.type == "title"}
    assert titles == {entity_id("Harrow (play)"), entity_id("Harrow")}
