"""Sanitizer and citation-check units: hostile links, renumbering, claim terms, schemas."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError
from research_fixtures import evidence

from core.research.citations import (
    check_claims,
    citation_tokens,
    cite_quotations,
    rewrite_citations,
)
from core.research.planner import (
    batches,
    fallback_plan,
    ground_plan,
    normalize_plan,
    salvage_plan,
)
from core.research.sanitize import renumber, safe_url, sanitize_links
from core.research.schemas import ResearchPlan, action_model, notes_model
from core.research.terms import key_terms

HOSTILE = [
    "javascript:alert(1)",
    "JaVaScRiPt:alert(document.cookie)",
    "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
    "file:///etc/passwd",
    "ftp://example.com/file",
    "vbscript:msgbox(1)",
    "http://127.0.0.1/admin",
    "http://[::1]/x",
    "http://10.0.0.5:8080/",
    "http://0x7f.0x0.0x0.0x1/",
    "https://bit.ly/3xYz",
    "https://t.co/abc",
    "https://tinyurl.com/y3k",
    "https://www.bit.ly/abc",
    "https://example.com/report…",
    "https://example.com/report...",
    "https://example.com/a%2",
    "https://user:pass@example.com/",
    "https://example.com@evil.com/",
    "http://localhost:8000/",
    "//example.com/x",
    "https:///nohost",
    "https://exa mple.com/",
]
SAFE = [
    "https://www.nara.gov/reports/2022.pdf",
    "http://example.org/a?b=1#c",
    "https://sub.example.co.uk/x%20y",
]


@pytest.mark.parametrize("url", HOSTILE)
def test_hostile_urls_rejected(url: str) -> None:
    assert not safe_url(url)


@pytest.mark.parametrize("url", SAFE)
def test_safe_urls_kept(url: str) -> None:
    assert safe_url(url)


def test_sanitize_links_in_markdown() -> None:
    md = (
        "See [the report](javascript:alert(1)) and [NARA](https://www.nara.gov/x) "
        "or <http://192.168.1.1/> or https://bit.ly/abc or file:///etc/passwd. "
        "![img](https://example.com/pixel.png) <script>alert(1)</script> "
        "[data](data:text/html,hi) <img src=x onerror=alert(1)> cite [ev1:0123456789abcdef]."
    )
    out = sanitize_links(md)
    for bad in (
        "javascript:",
        "192.168",
        "bit.ly",
        "file:",
        "data:",
        "<script",
        "<img",
        "pixel.png",
    ):
        assert bad not in out, bad
    assert "[NARA](https://www.nara.gov/x)" in out
    assert "the report" in out and "[ev1:0123456789abcdef]" in out
    assert "&lt;script&gt;" in out


def test_renumber_first_use_and_same_document_shares_number() -> None:
    a1, a2, b1 = "ev1:" + "a" * 16, "ev1:" + "a" * 15 + "b", "ev1:" + "b" * 16
    doc = {a1: "docA", a2: "docA", b1: "docB"}
    text, numbers = renumber(f"B first [{b1}]. A [{a1}][{a2}]. Again B [{b1}].", doc.__getitem__)
    assert text == "B first [1]. A [2]. Again B [1]."
    assert numbers == {b1: 1, a1: 2, a2: 2}
    # the 1.5B's answer line "[E1][E2][E3]" with E1 and E3 from one document: [1][2], not [1][2][1]
    text, _ = renumber(f"3.2 metres [{a1}][{b1}][{a2}]. In [3] of [{b1}][{a1}].", doc.__getitem__)
    assert text == "3.2 metres [1][2]. In [3] of [2][1]."


def test_citation_tokens_and_rewrite() -> None:
    md = "X [E1, E2]. Y [ev1:0123456789abcdef#3-9]. Z [ev1:zz]. Link [a](https://x.org). [E3]"
    toks = citation_tokens(md)
    assert toks[:4] == ["E1", "E2", "ev1:0123456789abcdef#3-9", "E3"] and "ev1:zz" in toks
    out = rewrite_citations(md, lambda t: None if t == "E2" else t.upper())
    assert (
        "[E1]." in out and "E2" not in out and "ev1:zz" not in out and "[a](https://x.org)" in out
    )


def test_key_terms() -> None:
    terms = key_terms(
        "In March 2019 the Northport harbor handled 4,200 ships [ev1:0123456789abcdef]."
    )
    assert {"march", "2019", "4200", "Northport"} <= set(terms)
    assert "In" not in terms
    # a possessive names the same thing as the name: "KELDAR's" is backed by "KELDAR PLC"
    assert key_terms("Sales grew at KELDAR's plants and at Jones' mill.") == ["KELDAR", "Jones"]
    # a step's number is not a claim, and a name is whole when it has an accent (the 1.5B's
    # "Step 2: ..." was flagged for "2", and an accented title for the part before its accent)
    assert key_terms("Step 2: Then the composer of Wolkenhärfe.") == ["Wolkenhärfe"]
    # a list's marks are no figures; a figure opening a sentence is, whole
    assert key_terms("- 2. 1,254 tonnes went to Kelmor.") == ["1254", "Kelmor"]
    assert key_terms("3) 1.5 million in 2021") == ["1.5", "2021"]
    assert key_terms("## 2021 results") == ["2021"]


def test_claims_compare_names_with_accents_folded() -> None:
    """The writer spelled a name as the question did, "Morikawa Toru"; the cited passage says
    "Tōru"."""
    ev = evidence(
        "ev1:0123456789abcdef",
        "Morikawa Tōru was born in Kitahama, a port shelled by the cruiser Aldmere in 1904.",
        title="Morikawa Tōru",
    )
    ok = "The birthplace of Toru was shelled by the cruiser Aldmere [ev1:0123456789abcdef]."
    assert check_claims(ok, lambda _id: ev, None) == []
    bad = ok.replace("Aldmere", "Brightwater")
    assert [f.reason for f in check_claims(bad, lambda _id: ev, None)] == [
        "not in the cited text: Brightwater"
    ]


def test_llm_schemas_bound_and_enum() -> None:
    ids = ["ev1:" + "a" * 16, "ev1:" + "b" * 16]
    Action = action_model(ids)
    assert Action.model_validate(
        {"thought": "t", "action": "fetch_evidence", "evidence_id": ids[0]}
    )
    with pytest.raises(ValidationError):
        Action.model_validate({"action": "fetch_evidence", "evidence_id": "ev1:" + "c" * 16})
    with pytest.raises(ValidationError):
        Action.model_validate({"action": "finish", "extra": 1})
    # long text is cut to its bound (stated in the schema, not a grammar-heavy maxLength)
    assert len(Action.model_validate({"action": "finish", "thought": "x" * 400}).thought) == 300
    assert "at most 300 characters" in str(Action.model_json_schema())
    # the bound copied into the text by a small model is dropped, the content kept
    echo = Action.model_validate(
        {"action": "finish", "thought": "The band formed in Port Ellery is at most 300 characters."}
    )
    assert echo.thought == "The band formed in Port Ellery."
    Notes = notes_model(ids)
    schema = str(Notes.model_json_schema())
    assert ids[0] in schema and "enum" in schema
    with pytest.raises(ValidationError):
        Notes.model_validate(
            {
                "findings": [{"claim": "abc", "evidence_ids": ["ev1:" + "c" * 16]}],
                "sufficient": True,
            }
        )
    with pytest.raises(ValidationError):
        ResearchPlan.model_validate(
            {"task_analysis": "a", "queries": [{"id": "q", "query": "abc"}] * 6}
        )


def test_plan_normalization_and_batches() -> None:
    plan = ResearchPlan.model_validate(
        {
            "task_analysis": "a",
            "queries": [
                {"id": "a", "query": "first", "depends_on": ["b"]},
                {"id": "b", "query": "second", "depends_on": ["a", "zz"]},
                {"id": "a", "query": "third", "depends_on": []},
            ],
        }
    )
    fixed = normalize_plan(plan)
    ids = [q.id for q in fixed.queries]
    assert len(set(ids)) == 3 and "zz" not in str(fixed)
    layers = batches(fixed, set())
    flat = [q.id for layer in layers for q in layer]
    assert sorted(flat) == sorted(ids)  # cycle broken, everything runs once
    for i, layer in enumerate(layers):
        earlier = {q.id for lay in layers[:i] for q in lay}
        assert all(set(q.depends_on) <= earlier for q in layer)
    assert fallback_plan("What?").queries[0].query == "What?"


def test_a_query_asked_twice_runs_once() -> None:
    twice = "What is the name of the engineer who built Kessel Harbour?"
    plan = ResearchPlan.model_validate(
        {
            "task_analysis": "a",
            "queries": [
                {"id": "a", "query": "Which harbour does the ferry leave from?"},
                {"id": "b", "query": twice, "depends_on": ["a"]},
                {"id": "c", "query": "When was it founded?", "depends_on": ["e"]},
                {"id": "d", "query": twice.upper().replace("?", " ?"), "depends_on": ["b"]},
                {
                    "id": "e",
                    "query": "what is the name of the Engineer who built Kessel harbour",
                },
            ],
        }
    )
    fixed = normalize_plan(plan)
    assert [(q.id, q.depends_on) for q in fixed.queries] == [("a", []), ("b", ["a"]), ("c", ["b"])]


def _plan_text(*queries: dict[str, Any]) -> str:
    """A plan as the 1.5B planner writes it: indented, queries before components."""
    return json.dumps({"task_analysis": "Split it.", "queries": list(queries)}, indent=2)


def test_salvage_keeps_the_complete_queries_of_a_cut_plan() -> None:
    q1 = {"id": "q1", "query": "Who was Edwin Marsh (rower)?", "purpose": "who"}
    q2 = {"id": "q2", "query": "Which other club did he row for?", "depends_on": ["q1"]}
    q3 = {"id": "q3", "query": "When was that club founded?", "depends_on": ["q2"]}
    text = _plan_text(q1, q2, q3)
    cut = text[: text.index('"When was')]  # the token limit, inside the third query
    with pytest.raises(ValidationError):
        ResearchPlan.model_validate_json(cut)
    plan = salvage_plan(cut)
    assert plan is not None
    assert [(q.id, q.query, q.depends_on) for q in plan.queries] == [
        ("q1", q1["query"], []),
        ("q2", q2["query"], ["q1"]),
    ]
    # the whole answer, if it came back invalid for another reason, keeps all three
    whole = salvage_plan(text + "\n}")
    assert whole is not None and len(whole.queries) == 3
    assert len(salvage_plan(text, max_queries=2).queries) == 2  # type: ignore[union-attr]


def test_salvage_skips_invalid_queries_and_finds_nothing_where_nothing_is() -> None:
    bad = {"id": "q1", "query": "?"}  # too short to search
    good = {
        "id": "q2",
        "query": "When was the Corran Rowing Club founded?",
        "preferred_tool": "explore",
    }
    plan = salvage_plan(_plan_text(bad, good))
    assert plan is not None and [q.query for q in plan.queries] == [good["query"]]
    assert salvage_plan(_plan_text(bad)) is None
    assert salvage_plan('{"task_analysis": "x", "queries": [{"id": "q1", "que') is None
    assert salvage_plan("not json at all") is None
    assert salvage_plan("") is None


def test_plan_queries_copied_from_elsewhere_are_dropped() -> None:
    """What the 1.5B planner did: a query lifted from the prompt's wording, not the question."""
    question = "Which engineer built the harbour that the Tidewater ferry leaves from?"
    plan = ResearchPlan.model_validate(
        {
            "task_analysis": "a",
            "queries": [
                {"id": "q1", "query": "Which harbour does the Tidewater ferry leave from?"},
                {"id": "q2", "query": "Where was the founder of product P born?"},
                {
                    "id": "q3",
                    "query": "Who designed Kessel Harbour?",
                    "depends_on": ["q2"],
                },
            ],
        }
    )
    found = "The Tidewater ferry leaves from Kessel Harbour."
    # max_queries=2: the question itself is not appended after the two grounded queries
    grounded = ground_plan(plan, question, found, 2)
    assert [q.query for q in grounded.queries] == [
        "Which harbour does the Tidewater ferry leave from?",
        "Who designed Kessel Harbour?",  # grounded by the discovery results
    ]
    assert grounded.queries[1].depends_on == []  # its dropped dependency is gone
    guessed = plan.model_copy(
        update={
            "components": [
                "The engineer of the harbour was Hollis Crane.",  # a guess
                "Name of the harbour",
                "Year Kessel Harbour was built",
            ],
            "constraints": ["Only sources after 2001", "Ignore Wikipedia"],
        }
    )
    kept = ground_plan(guessed, question, found)
    assert kept.components == [
        "Name of the harbour",
        "Year Kessel Harbour was built",
    ]
    assert kept.constraints == ["Only sources after 2001"]
    nothing = ground_plan(plan, "Qqq zzz?", "")
    assert [q.query for q in nothing.queries] == ["Qqq zzz?"]


def test_plain_colons_are_not_links() -> None:
    text = "Goal:increase access. Ratio 3:1. Time:10am. Note: fine."
    assert sanitize_links(text) == text
    assert "[link removed]" in sanitize_links("go to JavaScript:alert(1) or hxxp://x.y/z")


def test_citation_after_the_full_stop_belongs_to_the_sentence() -> None:
    from core.research.citations import check_claims

    ev_id = "ev1:" + "a" * 16
    ev = evidence(ev_id, "It handled 4,200 ships in 2019.")
    flagged = check_claims(f"It handled 4,200 ships in 2019. [{ev_id}]", {ev_id: ev}.get, None)
    assert flagged == []
    flagged = check_claims(f"It handled 5,000 ships. [{ev_id}]", {ev_id: ev}.get, None)
    assert flagged and "5000" in flagged[0].reason


@pytest.mark.parametrize(
    ("cited", "ok"),
    [
        ("Date & Time: 11/27/2007, 1100 MST", True),  # numeric US date in that month
        ("Issued 2007-11-27.", True),
        ("On Nov. 27, 2007 it happened.", True),
        ("Date & Time: 10/27/2007, 1100 MST", False),  # another month: still flagged
        ("In 2007, on the 27th.", False),
    ],
)
def test_month_names_match_numeric_dates(cited: str, ok: bool) -> None:
    from core.research.citations import check_claims

    ev_id = "ev1:" + "b" * 16
    ev = evidence(ev_id, cited)
    flagged = check_claims(f"It happened on November 27, 2007. [{ev_id}]", {ev_id: ev}.get, None)
    assert (flagged == []) is ok, flagged
    if not ok:
        assert "november" in flagged[0].reason


def test_an_uncited_sentence_that_asserts_facts_is_flagged() -> None:
    from core.research.citations import check_claims, excerpt

    ev_id = "ev1:" + "d" * 16
    ev = evidence(ev_id, "Corvane reported revenue of $9,412 million in fiscal 2022.")
    md = (
        f"Corvane reported revenue of $9,412 million [{ev_id}]. Its margin rose to 31.4% in 2022.\n"
        "The passage states that Corvane Pulse drove the growth.\n"
        "The passages do not state Corvane's operating margin for 2021.\n"
        "## Corvane in 2022\n| Revenue | 9,412 |\nThis is useful context.\n"
        f"Revenue was reported in fiscal 2022. Corvane reported it [{ev_id}]."
    )
    flagged = check_claims(md, {ev_id: ev}.get, None)
    assert [(excerpt(f.sentence), f.reason, f.evidence_ids) for f in flagged] == [
        (
            "Its margin rose to 31.4% in 2022.",
            "no citation, and not in the line's cited text: 31.4",
            [],
        ),
        ("The passage states that Corvane Pulse drove the growth.", "no citation", []),
    ]
    # restating the question asserts nothing new
    question = "What was Corvane's margin in 2022?"
    restated = "To find Corvane's margin in 2022, we read the filing. Corvane Pulse helped."
    (flag,) = check_claims(restated, {ev_id: ev}.get, None, question)
    assert flag.sentence == "Corvane Pulse helped."
    assert excerpt(f"A claim [{ev_id}]. ⚠") == "A claim."
    # an answer line claims, names or none: uncited, it is flagged (unless it says what lacks)
    answer = "**Answer:** the keeper's failure to trim the wick.\nIt went out at dusk."
    (flag,) = check_claims(answer, {ev_id: ev}.get, None, "Why did the lamp fail?", "**Answer:**")
    assert flag.reason.startswith("no citation") and "keeper" in flag.sentence
    lacking = "**Answer:** The passages do not state why the lamp failed."
    assert check_claims(lacking, {ev_id: ev}.get, None, "Why?", "**Answer:**") == []
    # a title the writer copies is backed by the cited passage's document; abbreviations and
    # initials do not cut sentences
    title = "CORVANE SYSTEMS INC. — Form 10-K, fiscal year ended October 28, 2022"
    ev = evidence(ev_id, "Revenue rose in fiscal 2022.", title=title, pages=(6,))
    line = f"- [{ev_id}] {title}, p. 6: rose."
    assert check_claims(line, {ev_id: ev}.get, None) == []
    assert excerpt("word " * 40, chars=20) == "word word word word…"


def test_each_place_of_a_sentence_flagged_twice_is_marked() -> None:
    from core.research.citations import mark_flagged
    from core.research.schemas import FlaggedClaim

    flag = FlaggedClaim(sentence="Revenue rose 9%.", evidence_ids=[], reason="no citation")
    md = "Revenue rose 9%. Costs fell.\nRevenue rose 9%."
    assert mark_flagged(md, [flag, flag]) == "Revenue rose 9%. ⚠ Costs fell.\nRevenue rose 9%. ⚠"
    assert mark_flagged("Revenue rose 9%.", [flag, flag]) == "Revenue rose 9%. ⚠ ⚠"


def test_an_initial_does_not_end_the_sentence_a_citation_checks() -> None:
    from core.research.citations import check_claims

    ev_id = "ev1:" + "c" * 16
    ev = evidence(ev_id, "J. Edgar Northcote drew the Kessel plans in 1911.")
    claim = f"The founder of the Northport Society was J. Edgar Northcote [{ev_id}]."
    (flag,) = check_claims(claim, {ev_id: ev}.get, None)
    assert flag.sentence == claim  # the whole sentence, not "Edgar Northcote [...]."
    assert "Northport" in flag.reason and "Society" in flag.reason
    ok = f"J. Edgar Northcote drew the Kessel plans in 1911 [{ev_id}]. U.S. readers liked it."
    assert check_claims(ok, {ev_id: ev}.get, None) == []


FILING = (
    "Harbor Ledger is the foundation of our Corvane Freight products, with a shared record "
    "that turns shipment data from across Corvane tools and partner software into complete "
    "cargo histories. Corvane cargo histories are updated as each vessel reports and include "
    "route forecasts to plan the right berth for every arrival at the port."
)


def test_a_verbatim_quotation_gets_its_passage_citation() -> None:
    """What the 1.5B writer did on annual reports: a passage pasted in quotation marks, uncited,
    every sentence of it flagged."""
    texts = {"E1": "Revenue grew 12% in fiscal 2022.", "E2": FILING}
    pasted = " ".join(FILING.split()[:30])  # the writer saw the passage with spaces flattened
    draft = f'The filing says that "{pasted}" and more. Margins improved [E1].'
    got = cite_quotations(draft, texts)
    assert got == f'The filing says that "{pasted}" [E2] and more. Margins improved [E1].'
    # curly marks, a trailing ellipsis, other case and line breaks in the passage still match
    curly = f"It reads “{FILING.split('. ')[1].upper()}…”."
    assert cite_quotations(curly, texts).endswith("…” [E2].")
    # left alone: a quotation already cited, one too short, and one that no passage holds
    for kept in (
        f'The filing says "{pasted}" [E2].',
        f'The filing says "{pasted}", [E1].',
        'They call it "a shared record".',
        '"Corvane cargo histories are updated every hour with route forecasts."',
        f'Unclosed "{pasted}',
    ):
        assert cite_quotations(kept, texts) == kept


def test_a_sentence_copied_whole_without_quotation_marks_gets_its_passage_citation() -> None:
    texts = {"E1": "Revenue grew 12% in fiscal 2022.", "E2": FILING}
    copied = FILING.split(". ")[1].rstrip(".")  # "Corvane cargo histories are updated as ..."
    draft = f"1. {copied}.\n**Answer:** {copied}\nThe filing says that cargo histories matter."
    assert cite_quotations(draft, texts).splitlines() == [
        f"1. {copied} [E2].",
        f"**Answer:** {copied} [E2]",
        "The filing says that cargo histories matter.",  # borrows a phrase: no copy
    ]
    for kept in (
        f"{copied} [E1].",  # cited already: the checks judge its own citation
        "Revenue grew 12% in 2022.",  # too short to tell a copy
        f"{copied} and the port grew.",  # not a sentence the passage holds whole
    ):
        assert cite_quotations(kept, texts) == kept


def test_a_cited_quotation_clears_the_uncited_flags_of_its_sentences() -> None:
    ev = evidence("ev1:0123456789abcdef", FILING, title="CORVANE SYSTEMS INC. 10-K", pages=(6,))
    draft = f'Corvane describes its platform: "{FILING}"'
    question = "How does Corvane track its cargo?"
    before = check_claims(draft, lambda _id: None, None, question)
    assert before and all(f.reason.startswith("no citation") for f in before)
    cited = cite_quotations(draft, {"ev1:0123456789abcdef": FILING})
    assert cited.endswith('" [ev1:0123456789abcdef]')
    assert check_claims(cited, lambda _id: ev, None, question) == []


def test_a_sentence_keeps_the_citations_that_hold_what_it_says() -> None:
    from core.research.citations import narrow_citations

    a, b, c = ("ev1:" + x * 16 for x in "abc")
    passages = {
        a: evidence(a, "Corran Falls lies in Valdoria."),
        b: evidence(b, "The Marrow River is in Valdoria."),
        c: evidence(c, "Tessel Falls is in Ostmark."),
    }
    text = (
        f"**Answer:** Corran Falls [{a}][{b}].\n\n"
        f"Corran Falls is in Valdoria [{b}] [{a}][{c}].\n"
        f"The Marrow River and Corran Falls are in Valdoria [{a}][{b}].\n"
        f"It is in Valdoria [{a}]."
    )
    assert narrow_citations(text, passages.get, keep_lines="**Answer:**") == (
        # the answer line cites its hops; a claim no one passage holds keeps both parts
        f"**Answer:** Corran Falls [{a}][{b}].\n\n"
        f"Corran Falls is in Valdoria [{a}].\n"
        f"The Marrow River and Corran Falls are in Valdoria [{a}][{b}].\n"
        f"It is in Valdoria [{a}]."
    )
    assert narrow_citations(text, passages.get).startswith(f"**Answer:** Corran Falls [{a}].")


def test_a_sentence_naming_what_its_citations_lack_also_cites_a_fetched_passage_holding_it() -> (
    None
):
    """A sentence naming a person and a ship cited the ship's passage only; the passage on the
    person was fetched beside it."""
    from core.research.citations import complete_citations

    ship, toru, film, town, other = ("ev1:" + x * 16 for x in "abcde")
    passages = {
        ship: evidence(ship, "The cruiser Aldmere shelled the harbour forts."),
        film: evidence(film, "Morikawa Toru starred in a film."),
        toru: evidence(toru, "Morikawa Tōru was a rower born in Kitahama."),
        town: evidence(town, "Kitahama is a town in Japan."),
        other: evidence(other, "The cruiser was built at the Corran yard."),
    }
    fetched = [film, toru, town, other, ship]

    def complete(text: str, most: int = 2) -> tuple[str, dict[str, list[str]]]:
        return complete_citations(text, passages.get, fetched, most=most)

    # a passage holding all the sentence says is taken over one holding only what it lacks,
    # even one the report cites already; the claim check then finds all it names in what it
    # cites
    born = f"Sources say Morikawa Toru was born in Kitahama [{town}]."
    done = f"Sources say Morikawa Toru was born in Kitahama [{town}][{toru}]."
    assert complete(f"**Answer:** Toru [{film}].\n\n{born} It [{other}].") == (
        f"**Answer:** Toru [{film}].\n\n{done} It [{other}].",
        {},
    )
    assert check_claims(done, passages.get, None) == []
    # a sentence whose names only the added passage and the writer's together hold gets the
    # passage, and is flagged: that they link as it says is not checked
    shelled = f"The ship that shelled Morikawa Toru's birthplace was the Aldmere [{ship}]."
    text, assembled = complete(shelled)
    assert text == shelled.replace(f"[{ship}]", f"[{ship}][{film}]")
    assert assembled == {text: ["Morikawa", "Toru"]}
    assert [f.reason for f in check_claims(text, passages.get, None, assembled=assembled)] == [
        "its own citations lack Morikawa, Toru; the passages added for them do not hold the "
        "whole claim"
    ]
    # two passages together, when no one holds all it lacks; never more than ``most``
    two = f"Morikawa Toru starred in a film in Japan [{ship}]."
    assert complete(two)[0] == f"Morikawa Toru starred in a film in Japan [{ship}][{film}][{town}]."
    assert complete(two, most=1) == (two, {})
    # of passages holding as much of it, one the report cites already
    starred = f"Then Morikawa Toru starred [{ship}]."
    assert complete(starred)[0] == f"Then Morikawa Toru starred [{ship}][{film}]."
    rowed = f"He rowed [{toru}]. "
    assert complete(rowed + starred)[0] == f"{rowed}Then Morikawa Toru starred [{ship}][{toru}]."
    # what no fetched passage holds is left for the claim check to flag
    made_up = f"Morikawa Toru sailed the Aldmere in 1952 [{ship}]."
    assert complete(made_up) == (made_up, {})
    assert [f.reason for f in check_claims(made_up, passages.get, None)] == [
        "not in the cited text: 1952, Toru"
    ]
    # an uncited sentence is the claim check's to judge
    bare = "Morikawa Toru was born in Kitahama."
    assert complete(bare) == (bare, {})


def test_the_answer_line_is_checked_as_the_answer_to_the_question(embedder: Any) -> None:
    """Three words are unlike any passage: an answer line of a measure alone has almost no
    similarity with the passage stating it, and was flagged; as the question's answer it is
    close."""
    ev_id = "ev1:" + "5" * 16
    town = evidence(
        ev_id,
        "Port Ellery sees some frost each winter but hard freezes are rare. "
        "Average annual rainfall, as measured at the harbour station, is 41.2 inches (104.6 cm). "
        "Rain on more than twenty days of one month has been recorded only four times.",
        title="Port Ellery",
    )
    question = "What is the usual yearly rainfall in the town where the Corran Rowing Club began?"
    line = f"**Answer:** 41.2 inches (104.6 cm) [{ev_id}]."
    alone = check_claims(line, {ev_id: town}.get, embedder.embed, question)
    assert [f.reason.split(" (")[0] for f in alone] == ["weak match with the cited text"]
    assert check_claims(line, {ev_id: town}.get, embedder.embed, question, "**Answer:**") == []
    # an answer its passage does not hold is still flagged, as the answer it is
    wrong = line.replace("41.2 inches (104.6 cm)", "12 inches")
    reasons = [
        f.reason for f in check_claims(wrong, {ev_id: town}.get, None, question, "**Answer:**")
    ]
    assert reasons == ["not in the cited text: 12"]


def test_a_place_is_held_by_its_demonym_and_the_other_way_round() -> None:
    """The 1.5B answered a country from a passage naming only its demonym ("a Danish
    dramatist"), and was flagged."""
    ev_id = "ev1:" + "6" * 16
    play = evidence(ev_id, "Oda Brenner, a Danish dramatist, set The Salt Ledger in Venice.")
    get = {ev_id: play}.get
    assert check_claims(f"Brenner was a citizen of Denmark [{ev_id}].", get, None) == []
    assert check_claims(f"The Salt Ledger is set in a Venetian town [{ev_id}].", get, None) == []
    flagged = check_claims(f"Brenner was a citizen of Portugal [{ev_id}].", get, None)
    assert [f.reason for f in flagged] == ["not in the cited text: Portugal"]
    # whole words only: "romance" does not name Rome
    novel = evidence(ev_id, "The Salt Ledger is a romance by a playwright.")
    flagged = check_claims(f"The Salt Ledger is set in Rome [{ev_id}].", {ev_id: novel}.get, None)
    assert [f.reason for f in flagged] == ["not in the cited text: Rome"]


def test_a_figure_is_held_without_the_zeros_closing_its_decimals() -> None:
    """A model answering "to two decimals" writes "35.00" for the passage's "$35 billion"; the
    figure is the same, another figure is not."""
    ev_id = "ev1:" + "7" * 16
    ev = evidence(ev_id, "Kelmor expects a gain of about $35 billion and 2.5% growth.")
    get = {ev_id: ev}.get
    assert check_claims(f"Kelmor expects a gain of 35.00 [{ev_id}].", get, None) == []
    assert check_claims(f"Kelmor expects growth of 2.50% [{ev_id}].", get, None) == []
    for claim, missing in [("35.50", "35.50"), ("3.00", "3.00"), ("25.0", "25.0")]:
        flagged = check_claims(f"Kelmor expects a gain of {claim} [{ev_id}].", get, None)
        assert [f.reason for f in flagged] == [f"not in the cited text: {missing}"]
