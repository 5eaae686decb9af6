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
from models.scripted import ScriptedLLM

PASSAGES = {
    "Lantern Road (song)": '"Lantern Road" is a 1971 single by Wes Harlan. It was his last hit.',
    "Wes Harlan": "Wes Harlan was a country singer. He was born in Millbrook, Carvel.",
    "Ned Brockway (painter)": "Ned Brockway was a painter and musician in Dunmore, Askerland.",
    "Lantern Light Waltz": '"Lantern Light Waltz" is a tribute the Fenwick Choir recorded.',
    "Carvel": "Carvel is a state of the Union, governed from Dellmont.",
    "Askerland": "Askerland is a plains state. Its capital is Dunmore, where musicians lived.",
}
LIM = ResearchLimits(tool_loop=True, max_workers=1, max_rounds=1, short_answer=False, read_top=0)


def _two_hop_planner() -> ScriptedLLM:
    """Who sang Lantern Road (a), then where he was born (b, after a)."""
    return ScriptedLLM(
        [
            plan(
                ("a", "Who sang Lantern Road?", []),
                ("b", "Where was the singer of Lantern Road born?", ["a"]),
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
    question = "Which college did the author of Mabel and the Wet, Windy, Not Very Nice Week "
    question += "go to?"
    assert subject_names(question) == ["Mabel and the Wet, Windy, Not Very Nice Week"]
    assert subject_names(
        "How many Marlowe Grocers shops opened in the state where Lantern Road's singer was born?"
    ) == ["Marlowe Grocers", "Lantern Road"]
    assert title_named("Wolkenhärfe", fold("Who composed Wolkenharfe?"))
    assert title_named("Harrow (Fenwick Choir song)", fold("where the singers of Harrow formed"))
    assert not title_named("Northport Harbor Report", fold("Northport harbor ships"))
    assert not title_named("Harrow (Fenwick Choir song)", fold("his harrows"))


def test_a_first_hop_query_without_a_subject_gets_the_questions_back() -> None:
    question = "Which college did the author of Mabel and the Windy Week go to?"
    got = keep_subjects(
        _plan(
            ("What is the author's name?", []),
            ("Who published the Northport Review?", []),  # a subject of its own: kept
            ("What college did the author go to?", ["q1"]),  # dependent: kept
        ),
        question,
    )
    assert [q.query for q in got.queries] == [
        "What is the author's name? (Mabel and the Windy Week)",
        "Who published the Northport Review?",
        "What college did the author go to?",
    ]
    assert keep_subjects(_plan(("who wrote it?", [])), "who wrote it?").queries[0].query == (
        "who wrote it?"
    )
    # a date or an amount is not a subject of its own
    growth = "By how much did Corvane's revenue grow from FY2016 to FY2017?"
    assert subject_names(growth) == ["Corvane"]
    assert subject_names("How much was 30% of sales in 2019 for Keldar?") == ["Keldar"]
    got = keep_subjects(_plan(("What is the total revenue for FY2016?", [])), growth)
    assert got.queries[0].query == "What is the total revenue for FY2016? (Corvane)"


def test_a_plan_that_stops_short_ends_with_the_question() -> None:
    question = "Who led the city where the composer of Wolkenharfe was born?"
    short = _plan(
        ("Who was the composer of Wolkenharfe?", []),
        ("Where was the composer of Wolkenharfe born?", ["q1"]),
    )
    got = cover_question(short, question)
    assert [(q.id, q.query, q.depends_on) for q in got.queries[2:]] == [("q3", question, ["q2"])]
    assert cover_question(short, question, max_queries=2) == short  # within the run's limit
    # a plan that asks every content word of the question is left alone
    rain = _plan(("What is the average rainfall in Port Ellery?", []))
    assert cover_question(rain, "What is the average rainfall of Port Ellery?") == rain
    # ... also when it spells a name the way the library's title does (seen: the question
    # asked a second time, by a duplicate worker, for want of an umlaut)
    accented = _plan(("Who composed Wolkenhärfe?", []), (question.replace("arfe", "ärfe"), ["q1"]))
    assert cover_question(accented, question) == accented
    kind = _plan(("Who wrote Mabel?", []), ("What college did the author go to?", ["q1"]))
    question = "What kind of college did the author of Mabel go to?"
    assert cover_question(kind, question).queries[-1].query == question
    # two independent branches: the question builds on both
    both = cover_question(_plan(("Who composed Wolkenharfe?", []), ("Ostmark", [])), question)
    assert both.queries[-1].depends_on == ["q1", "q2"]
    # ground_plan applies both
    grounded = ground_plan(short, question, "")
    assert [q.query for q in grounded.queries][-1] == question


def test_worker_reads_the_subjects_passage_then_the_one_it_names(songs_app: Sourcebook) -> None:
    song, singer = _pid(songs_app, "Lantern Road (song)"), _pid(songs_app, "Wes Harlan")
    query = "Where was Lantern Road's singer born?"
    researcher = ScriptedLLM(
        [
            # the model drifts to a lookalike and searches for it
            act("discover_evidence", query="Ned Brockway painter musician Dunmore"),
            act("finish"),
            notes(("Wes Harlan was born in Millbrook, Carvel.", [singer])),
        ]
    )
    songs_app.research(
        query,
        models=models(ScriptedLLM([plan(("a", query, []))]), researcher, ScriptedLLM(["x [E1]"])),
        task="subj-link",
        limits=LIM.model_copy(update={"read_top": 2}),
    )
    # "Lantern Road (song)": the query names it; "Wes Harlan": the song's passage names him
    assert _fetches(songs_app, "subj-link", "r1/a/") == [song, singer]


def test_dependent_worker_reads_what_its_dependency_found_first(songs_app: Sourcebook) -> None:
    song, singer = _pid(songs_app, "Lantern Road (song)"), _pid(songs_app, "Wes Harlan")
    painter = _pid(songs_app, "Ned Brockway (painter)")
    question = "Where was the singer of Lantern Road born?"
    planner = _two_hop_planner()
    researcher = ScriptedLLM(
        [
            act("fetch_evidence", evidence_id=song),
            act("finish"),
            notes(("Lantern Road is a single by Wes Harlan.", [song])),
            # b: the model searches a lookalike; its first hit must not be read first
            act("discover_evidence", query="Ned Brockway painter musician Dunmore"),
            act("finish"),
            notes(("Wes Harlan was born in Millbrook, Carvel.", [singer])),
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
    assert searched[-1][0] == painter  # the drifting search ranks the lookalike first
    assert _fetches(songs_app, "subj-bridge", "r1/b/") == [singer]  # the bridge's name wins


def test_dependent_worker_reads_what_its_dependency_cited_last(songs_app: Sourcebook) -> None:
    song, singer = _pid(songs_app, "Lantern Road (song)"), _pid(songs_app, "Wes Harlan")
    question = "Where was the singer of Lantern Road born?"
    planner = _two_hop_planner()
    researcher = ScriptedLLM(
        [
            act("fetch_evidence", evidence_id=song),
            act("finish"),
            notes(("Lantern Road is a single by Wes Harlan.", [song])),
            act("finish"),
            notes(("Wes Harlan was born in Millbrook, Carvel.", [singer])),
        ]
    )
    songs_app.research(
        question,
        models=models(planner, researcher, ScriptedLLM(["x [E1]"])),
        task="subj-before",
        limits=LIM.model_copy(update={"read_top": 5}),
    )
    before, read = (_fetches(songs_app, "subj-before", f"r1/{q}/") for q in "ab")
    assert len(before) == 5 and singer in before  # a read all but one passage
    # b's query names the song, but a's finding cites its passage: read last (of six, after
    # the five b reads). a read Wes Harlan's passage too but its notes say nothing of it: it
    # is b's next hop, read first.
    assert len(read) == 5 and song not in read
    assert read[0] == singer


def test_worker_reads_a_hit_a_read_passage_names_before_the_rest(songs_app: Sourcebook) -> None:
    painter, state = _pid(songs_app, "Ned Brockway (painter)"), _pid(songs_app, "Askerland")
    query = "Which musician lived in Dunmore?"  # names no passage's title
    researcher = ScriptedLLM(
        [
            act("fetch_evidence", evidence_id=painter),
            act("discover_evidence", query="Lantern Road single Wes Harlan country"),
            act("finish"),
            notes(("Ned Brockway was a musician in Dunmore.", [painter])),
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
    assert searched[-1][0] != state  # not the best-ranked hit of the latest search
    # the passage read names Askerland: its hit is read next
    assert _fetches(songs_app, "subj-named", "r1/a/") == [painter, state]


def test_a_plan_that_stops_short_runs_the_question_last(songs_app: Sourcebook) -> None:
    song, singer = _pid(songs_app, "Lantern Road (song)"), _pid(songs_app, "Wes Harlan")
    question = "Which city governs the state where Lantern Road's singer was born?"
    planner = ScriptedLLM([plan(("a", "Who sang Lantern Road?", []))])
    researcher = ScriptedLLM(
        [
            act("fetch_evidence", evidence_id=song),
            act("finish"),
            notes(("Lantern Road is a single by Wes Harlan.", [song])),
            # the appended question: its first search carries what q1 found
            act("fetch_evidence", evidence_id=singer),
            act("finish"),
            notes(("Wes Harlan was born in Millbrook, Carvel.", [singer])),
        ]
    )
    report = songs_app.research(
        question,
        models=models(planner, researcher, ScriptedLLM(["Dellmont [E1]."])),
        task="subj-cover",
        limits=LIM,
    )
    assert researcher.pending == 0
    assert report.plan is not None
    assert [(q.query, q.depends_on) for q in report.plan.queries] == [
        ("Who sang Lantern Road?", []),
        (question, ["a"]),
    ]
    first = next(
        e.payload["args"]["query"]
        for e in songs_app.task_log().events("subj-cover")
        if e.kind == "tool_call" and e.key.startswith("r1/q2/t1#")
    )
    assert first.startswith(question) and "Wes Harlan" in first
