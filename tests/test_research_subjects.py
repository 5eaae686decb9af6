"""Later hops of a multi-hop question: a plan keeps the question's subject and asks the whole
question, and a worker reads the passages about its hop's subject first (scripted models, a
small real library of encyclopedia-style passages whose titles are names)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from research_fixtures import act, models, notes, plan

from core.research.planner import cover_question, ground_plan, keep_subjects
from core.research.schemas import ResearchLimits, ResearchPlan
from core.research.words import fold, subject_names, title_named
from core.service import Sourcebook
from models.llm import ScriptedLLM

PASSAGES = {
    "Hello Love (song)": '"Hello Love" is a 1974 single by Hank Snow. It was his last number one.',
    "Hank Snow": "Hank Snow was a country musician. He lived in Madison, Tennessee when he died.",
    "Henry Worrall (artist)": "Henry Worrall was an artist and musician in Topeka, Kansas.",
    "Say Hello 2 Heaven": '"Say Hello 2 Heaven" is a song by Temple of the Dog, a tribute.',
    "Tennessee": "Tennessee is a state of the United States. North Carolina is east of it.",
    "Kansas": "Kansas is a state in the Midwest. Its capital is Topeka, where musicians lived.",
}
LIM = ResearchLimits(max_workers=1, max_rounds=1, short_answer=False, read_top=0)


def _two_hop_planner() -> ScriptedLLM:
    """Who performed Hello Love (a), then where he lived when he died (b, after a)."""
    return ScriptedLLM(
        [
            plan(
                ("a", "Who performed Hello Love?", []),
                ("b", "Where did the performer of Hello Love live when he died?", ["a"]),
            )
        ]
    )


@pytest.fixture(scope="module")
def songs_app(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Sourcebook]:
    root = tmp_path_factory.mktemp("songs")
    corpus = root / "songs.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"id": f"s{i}", "title": t, "text": x}) + "\n"
            for i, (t, x) in enumerate(PASSAGES.items())
        )
    )
    app = Sourcebook(root / "home", embedder=embedder)
    assert not app.add_jsonl(corpus, id_field="id").failed
    yield app
    app.close()


def _pid(app: Sourcebook, title: str) -> str:
    for doc in app.documents():
        if doc.title == title:
            return app.library.store.get_document_passages(doc.doc_id)[0].passage_id
    raise AssertionError(f"no document {title!r}")


def _fetches(app: Sourcebook, task: str, prefix: str) -> list[str]:
    return [
        e.payload["args"]["evidence_id"]
        for e in app.task_log().events(task)
        if e.kind == "tool_call"
        and e.key.startswith(prefix)
        and e.payload["tool"] == "fetch_evidence"
    ]


def _plan(*queries: tuple[str, list[str]]) -> ResearchPlan:
    return ResearchPlan.model_validate(
        plan(*((f"q{i}", q, deps) for i, (q, deps) in enumerate(queries, 1)))
    )


def test_subject_names_and_titles() -> None:
    question = "What kind of university did the author of Alexander and the Terrible, Horrible, No "
    question += "Good, Very Bad Day attend?"
    assert subject_names(question) == [
        "Alexander and the Terrible, Horrible, No Good, Very Bad Day"
    ]
    assert subject_names(
        "How many Publix stores are in the state where Hello Love's performer died?"
    ) == ["Publix", "Hello Love"]
    assert title_named("Aschenbrödel", fold("Who composed Aschenbrodel?"))
    assert title_named("Brother (Pearl Jam song)", fold("where the performers of Brother formed"))
    assert not title_named("Northport Harbor Report", fold("Northport harbor ships"))
    assert not title_named("Brother (Pearl Jam song)", fold("his brothers"))


def test_a_first_hop_query_without_a_subject_gets_the_questions_back() -> None:
    question = "Which university did the author of Alexander and the Terrible Day attend?"
    got = keep_subjects(
        _plan(
            ("What is the author's name?", []),
            ("Who published the Northport Review?", []),  # a subject of its own: kept
            ("What university did the author attend?", ["q1"]),  # dependent: kept
        ),
        question,
    )
    assert [q.query for q in got.queries] == [
        "What is the author's name? (Alexander and the Terrible Day)",
        "Who published the Northport Review?",
        "What university did the author attend?",
    ]
    assert keep_subjects(_plan(("who wrote it?", [])), "who wrote it?").queries[0].query == (
        "who wrote it?"
    )
    # a date or an amount is not a subject of its own
    amazon = "What is Amazon's year-over-year change in revenue from FY2016 to FY2017?"
    assert subject_names(amazon) == ["Amazon"]
    assert subject_names("How much was 30% of sales in 2019 for Pfizer?") == ["Pfizer"]
    got = keep_subjects(_plan(("What is the total revenue for FY2016?", [])), amazon)
    assert got.queries[0].query == "What is the total revenue for FY2016? (Amazon)"


def test_a_plan_that_stops_short_ends_with_the_question() -> None:
    question = "Who was in charge of the country where the composer of Aschenbrodel was a citizen?"
    short = _plan(
        ("Who was the composer of Aschenbrodel?", []),
        ("What country was the composer of Aschenbrodel associated with?", ["q1"]),
    )
    got = cover_question(short, question)
    assert [(q.id, q.query, q.depends_on) for q in got.queries[2:]] == [("q3", question, ["q2"])]
    assert cover_question(short, question, max_queries=2) == short  # within the run's limit
    # a plan that asks every content word of the question is left alone
    snow = _plan(("What is the average snowfall in Seattle?", []))
    assert cover_question(snow, "What is the average snowfall of Seattle?") == snow
    # ... also when it spells a name the way the library's title does (seen: the question
    # asked a second time, by a duplicate worker, for want of an umlaut)
    accented = _plan(("Who composed Aschenbrödel?", []), (question.replace("ro", "rö"), ["q1"]))
    assert cover_question(accented, question) == accented
    kind = _plan(("Who wrote Alexander?", []), ("What university did the author attend?", ["q1"]))
    question = "What kind of university did the author of Alexander attend?"
    assert cover_question(kind, question).queries[-1].query == question
    # two independent branches: the question builds on both
    both = cover_question(_plan(("Who composed Aschenbrodel?", []), ("Austria", [])), question)
    assert both.queries[-1].depends_on == ["q1", "q2"]
    # ground_plan applies both
    grounded = ground_plan(short, question, "")
    assert [q.query for q in grounded.queries][-1] == question


def test_worker_reads_the_subjects_passage_then_the_one_it_names(songs_app: Sourcebook) -> None:
    song, snow = _pid(songs_app, "Hello Love (song)"), _pid(songs_app, "Hank Snow")
    query = "Where did Hello Love's performer live when he died?"
    researcher = ScriptedLLM(
        [
            # the model drifts to a lookalike and searches for it
            act("discover_evidence", query="Henry Worrall artist musician Topeka"),
            act("finish"),
            notes(("Hank Snow lived in Madison, Tennessee when he died.", [snow])),
        ]
    )
    songs_app.research(
        query,
        models=models(ScriptedLLM([plan(("a", query, []))]), researcher, ScriptedLLM(["x [E1]"])),
        task="subj-link",
        limits=LIM.model_copy(update={"read_top": 2}),
    )
    # "Hello Love (song)": the query names it; "Hank Snow": the song's passage names him
    assert _fetches(songs_app, "subj-link", "r1/a/") == [song, snow]


def test_dependent_worker_reads_what_its_dependency_found_first(songs_app: Sourcebook) -> None:
    song, snow = _pid(songs_app, "Hello Love (song)"), _pid(songs_app, "Hank Snow")
    worrall = _pid(songs_app, "Henry Worrall (artist)")
    question = "Where did the performer of Hello Love live when he died?"
    planner = _two_hop_planner()
    researcher = ScriptedLLM(
        [
            act("fetch_evidence", evidence_id=song),
            act("finish"),
            notes(("Hello Love is a single by Hank Snow.", [song])),
            # b: the model searches a lookalike; its first hit must not be read first
            act("discover_evidence", query="Henry Worrall artist musician Topeka"),
            act("finish"),
            notes(("Hank Snow lived in Madison, Tennessee.", [snow])),
        ]
    )
    songs_app.research(
        question,
        models=models(planner, researcher, ScriptedLLM(["x [E1]"])),
        task="subj-bridge",
        limits=LIM.model_copy(update={"read_top": 1}),
    )
    assert researcher.pending == 0
    searched = [
        e.payload["ids"]
        for e in songs_app.task_log().events("subj-bridge")
        if e.kind == "result" and e.key.startswith("r1/b/") and "ids" in e.payload
    ]
    assert searched[-1][0] == worrall  # the drifting search ranks the lookalike first
    assert _fetches(songs_app, "subj-bridge", "r1/b/") == [snow]  # the bridge's name wins


def test_dependent_worker_reads_what_its_dependency_cited_last(songs_app: Sourcebook) -> None:
    song, snow = _pid(songs_app, "Hello Love (song)"), _pid(songs_app, "Hank Snow")
    question = "Where did the performer of Hello Love live when he died?"
    planner = _two_hop_planner()
    researcher = ScriptedLLM(
        [
            act("fetch_evidence", evidence_id=song),
            act("finish"),
            notes(("Hello Love is a single by Hank Snow.", [song])),
            act("finish"),
            notes(("Hank Snow lived in Madison, Tennessee.", [snow])),
        ]
    )
    songs_app.research(
        question,
        models=models(planner, researcher, ScriptedLLM(["x [E1]"])),
        task="subj-before",
        limits=LIM.model_copy(update={"read_top": 5}),
    )
    before, read = (_fetches(songs_app, "subj-before", f"r1/{q}/") for q in "ab")
    assert len(before) == 5 and snow in before  # a read all but one passage
    # b's query names the song, but a's finding cites its passage: read last (of six, after
    # the five b reads). a read Hank Snow's passage too but its notes say nothing of it: it
    # is b's next hop, read first.
    assert len(read) == 5 and song not in read
    assert read[0] == snow


def test_worker_reads_a_hit_a_read_passage_names_before_the_rest(songs_app: Sourcebook) -> None:
    worrall, kansas = _pid(songs_app, "Henry Worrall (artist)"), _pid(songs_app, "Kansas")
    query = "Which musician lived in Topeka?"  # names no passage's title
    researcher = ScriptedLLM(
        [
            act("fetch_evidence", evidence_id=worrall),
            act("discover_evidence", query="Hello Love single Hank Snow country"),
            act("finish"),
            notes(("Henry Worrall was a musician in Topeka.", [worrall])),
        ]
    )
    songs_app.research(
        query,
        models=models(ScriptedLLM([plan(("a", query, []))]), researcher, ScriptedLLM(["x [E1]"])),
        task="subj-named",
        limits=LIM.model_copy(update={"read_top": 2}),
    )
    searched = [
        e.payload["ids"]
        for e in songs_app.task_log().events("subj-named")
        if e.kind == "result" and e.key.startswith("r1/a/") and "ids" in e.payload
    ]
    assert searched[-1][0] != kansas  # not the best-ranked hit of the latest search
    # the passage read names Kansas: its hit is read next
    assert _fetches(songs_app, "subj-named", "r1/a/") == [worrall, kansas]


def test_a_plan_that_stops_short_runs_the_question_last(songs_app: Sourcebook) -> None:
    song, snow = _pid(songs_app, "Hello Love (song)"), _pid(songs_app, "Hank Snow")
    question = "Which state borders the east of the state where Hello Love's performer died?"
    planner = ScriptedLLM([plan(("a", "Who performed Hello Love?", []))])
    researcher = ScriptedLLM(
        [
            act("fetch_evidence", evidence_id=song),
            act("finish"),
            notes(("Hello Love is a single by Hank Snow.", [song])),
            # the appended question: its first search carries what q1 found
            act("fetch_evidence", evidence_id=snow),
            act("finish"),
            notes(("Hank Snow lived in Madison, Tennessee when he died.", [snow])),
        ]
    )
    report = songs_app.research(
        question,
        models=models(planner, researcher, ScriptedLLM(["Tennessee [E1]."])),
        task="subj-cover",
        limits=LIM,
    )
    assert researcher.pending == 0
    assert report.plan is not None
    assert [(q.query, q.depends_on) for q in report.plan.queries] == [
        ("Who performed Hello Love?", []),
        (question, ["a"]),
    ]
    first = next(
        e.payload["args"]["query"]
        for e in songs_app.task_log().events("subj-cover")
        if e.kind == "tool_call" and e.key.startswith("r1/q2/t1#")
    )
    assert first.startswith(question) and "Hank Snow" in first
