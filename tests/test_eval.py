"""`sourcebook eval`: the metrics on hand-made examples, the whole command on a tiny MuSiQue-format
corpus and a tiny FinanceBench-format folder with scripted models, and a cheap run on
../shared/eval when it is present."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import shared_eval
from pdfgen import make_multipage_pdf, write_pdf
from research_fixtures import act, notes, plan, run_cli

from core.errors import ConfigError, NotFoundError
from core.eval import Evaluator
from core.eval_data import load_questions, page_unit
from core.eval_metrics import (
    exact_match,
    normalize_answer,
    numeric_match,
    precision,
    recall,
    recall_at,
    score_answer,
    sentences,
    text_held,
    token_f1,
)
from core.research.schemas import CitationRecord, Report
from core.service import Sourcebook
from core.settings import ResearchLimits, Settings
from models.scripted import ScriptedLLM

# ----------------------------------------------------------------------------- metrics


def test_normalisation_em_f1_with_aliases() -> None:
    assert normalize_answer("The  Treaty, of Rome!") == "treaty of rome"
    golds = ["H. Orrin Vale", "Orrin Vale"]
    assert exact_match("the h orrin vale", golds) == 1.0
    assert exact_match("Orrin Vale.", golds) == 1.0
    assert exact_match("Vale", golds) == 0.0
    # "Orrin Vale was first" vs alias "Orrin Vale": P = 2/4, R = 1 -> F1 = 2/3
    assert token_f1("Orrin Vale was first", golds) == pytest.approx(2 / 3)
    assert token_f1("nothing in common", golds) == 0.0
    assert token_f1("", ["x"]) == 0.0


def test_answer_extraction_first_and_best_sentence() -> None:
    md = (
        "# Answer\n\n**The first mayor was H. Orrin Vale** [1]. He was a naturalist [2].\n"
        "- Orrin Vale [1]\n\n## Sources\n\n1. Orrin Vale — p. 1\n"
    )
    assert sentences(md) == [
        "The first mayor was H. Orrin Vale.",
        "He was a naturalist.",
        "Orrin Vale",
    ]
    s = score_answer(md, ["H. Orrin Vale", "Orrin Vale"])
    assert s.first == "The first mayor was H. Orrin Vale."
    # first: [first, mayor, was, h, orrin, vale] vs [h, orrin, vale]: P 1/2, R 1
    assert s.first_f1 == pytest.approx(2 / 3) and s.first_em == 0.0
    assert s.best == "Orrin Vale" and s.best_em == 1.0 and s.best_f1 == 1.0
    assert score_answer("", ["x"]).first_f1 == 0.0
    # the report's short answer line: its "Answer:" label is not part of the answer
    short = score_answer("**Answer:** H. Orrin Vale [1].\n\nHe founded it [1].", ["Orrin Vale"])
    assert short.first == "H. Orrin Vale." and short.first_f1 == pytest.approx(0.8)
    assert score_answer("**Answer:** Ostmark [2].", ["Ostmark"]).first_em == 1.0


def test_recall_precision_and_numbers() -> None:
    assert recall({"a", "b", "x"}, ["a", "b", "c", "d"]) == 0.5
    assert precision({"a", "b", "x", "y"}, ["a"]) == 0.25
    assert recall(set(), []) is None and precision(set(), ["a"]) is None
    assert recall_at(["x", "a", "a", "b", "c"], ["a", "b"], 2) == 0.5  # distinct: x, a
    assert recall_at(["x", "a", "a", "b", "c"], ["a", "b"], 3) == 1.0
    assert numeric_match("Revenue grew to $7,312 million [1].", "$7312.00") is True
    assert numeric_match("It was 25.3% [2].", "24.6%") is False  # outside 1 %
    assert numeric_match("It was 24.7% [2].", "24.6%") is True  # inside 1 %
    assert numeric_match("Cited [12] only.", "12") is False  # citation markers are not numbers
    assert numeric_match("anything", "Yes, it did.") is None
    # years and enumerators are not quantities: "steady in FY 2021" states no number to match
    assert numeric_match("Sales in FY 2021 were flat.", "Volumes held steady in FY 2021.") is None
    assert numeric_match("In FY 2020 it bought (1) Fernwood.", "(1) Halden Labs, 2020") is None
    # ... but an amount that reads like a year is one
    assert numeric_match("Adj. EBITDA was $2,019 million in 2021.", "$2,019mn in FY 2021") is True
    assert numeric_match("It opened in 2019.", "$2,019mn in FY 2021") is False
    # nor is the day of a date: a gold answer naming one asks for no number
    assert numeric_match("Tarsk Mills.", "Tarsk Mills, from March 30, 2023 onward.") is None
    assert numeric_match("Tarsk Mills.", "Tarsk Mills (since 1 Sept. 2022)") is None
    assert numeric_match("It was 30 units.", "It sold 30 units in March 2023.") is True
    assert numeric_match("About $30 million.", "May revenue was $30 million.") is True


def test_text_held_on_page() -> None:
    page = "Consolidated statements\nRevenue 12,904 11,377\nNet income 3,618"
    assert text_held("Revenue 12,904  11,377", page) == (True, 1.0)
    held, cov = text_held("Net income 3,618 Revenue", page)  # re-ordered: all words present
    assert held and cov == 1.0
    held, cov = text_held("Net income 9,999 and more text here", page)
    assert not held and cov == pytest.approx(2 / 8)
    assert text_held("rev", page)[0] is False  # words, not sub-strings


# ----------------------------------------------------------------------------- fixtures

CORPUS = [
    ("p1", "Foo Bridge", "The Foo Bridge was built by the Bar Guild."),
    ("p2", "Bar Guild", "The Bar Guild was founded in 1901. Its first master: Alice Grant."),
    ("p3", "Baz River", "The Baz River flows through Quxland, a small northern country."),
    ("p4", "Quxland", "Quxland's capital is the river port of Glimmerhaven."),
    ("p5", "Zed Mountain", "Zed Mountain is the tallest peak of the Ommer range."),
]


def _hop(answer: str, gold: str) -> dict[str, str]:
    return {"sub_question": "...", "sub_answer": answer, "gold_passage_id": gold}


Q1 = "Who was the first master of the guild that built the Foo Bridge?"
Q2 = "What is the capital of the country the Baz River flows through?"
MUSIQUE = [
    {
        "qid": "2hop__1",
        "question": Q1,
        "answer": "Alice Grant",
        "answer_aliases": ["A. Grant"],
        "gold_passage_ids": ["p1", "p2"],
        "decomposition": [_hop("Bar Guild", "p1"), _hop("Alice Grant", "p2")],
    },
    {
        "qid": "2hop__2",
        "question": Q2,
        "answer": "Glimmerhaven",
        "answer_aliases": [],
        "gold_passage_ids": ["p3", "p4"],
        "decomposition": [_hop("Quxland", "p3"), _hop("Glimmerhaven", "p4")],
    },
]
# read_top=0: the scripted workers read exactly what their scripts fetch
SETTINGS = Settings(
    research=ResearchLimits(
        tool_loop=True, max_workers=1, max_rounds=1, read_top=0, short_answer=False
    )
)


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _musique_files(root: Path) -> tuple[Path, Path]:
    corpus = _jsonl(
        root / "corpus.jsonl", [{"passage_id": i, "title": t, "text": x} for i, t, x in CORPUS]
    )
    return _jsonl(root / "questions.jsonl", MUSIQUE), corpus


def _ids_by_external(root: Path, embedder: Any, corpus: Path) -> dict[str, str]:
    """Evidence ids are derived from content: a scratch library gives the ids the evaluation
    library will have, so the scripted models can name them."""
    scratch = Sourcebook(root / "scratch", embedder=embedder)
    try:
        scratch.add_jsonl(corpus, id_field="passage_id")
        out = {}
        for d in scratch.documents():
            passages = scratch.library.store.get_document_passages(d.doc_id)
            assert len(passages) == 1
            out[str(d.external_id)] = passages[0].passage_id
        return out
    finally:
        scratch.close()


def _models(plans: list[Any], researcher: list[Any], writer: list[Any]) -> dict[str, Any]:
    planner = ScriptedLLM(plans)
    return {
        "planner": planner,
        "researcher": ScriptedLLM(researcher),
        "writer": ScriptedLLM(writer),
        "default": planner,
    }


def _ids_by_page(root: Path, embedder: Any, docs: Path) -> dict[tuple[str, int], str]:
    """As :func:`_ids_by_external`, for a folder of PDFs: (file stem, 0-based page) -> id."""
    scratch = Sourcebook(root / "scratch", embedder=embedder)
    try:
        scratch.add([docs])
        return {
            (Path(d.source_uri).stem, p.page_start): p.passage_id
            for d in scratch.documents()
            for p in scratch.library.store.get_document_passages(d.doc_id)
            if p.page_start is not None
        }
    finally:
        scratch.close()


# ----------------------------------------------------------------------------- MuSiQue


def test_eval_musique_command(
    tmp_path: Path, embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    questions, corpus = _musique_files(tmp_path)
    ev = _ids_by_external(tmp_path, embedder, corpus)
    llms = _models(
        [plan(("q1", Q1, [])), plan(("q1", Q2, []))],
        [
            # question 1: reads the second hop's passage and an unrelated one
            act("fetch_evidence", evidence_id=ev["p2"]),
            act("fetch_evidence", evidence_id=ev["p5"]),
            act("finish"),
            notes(("Alice Grant was the first master of the Bar Guild.", [ev["p2"]])),
            # question 2: reads both gold passages
            act("fetch_evidence", evidence_id=ev["p3"]),
            act("fetch_evidence", evidence_id=ev["p4"]),
            act("finish"),
            notes(("Quxland's capital is Glimmerhaven.", [ev["p4"]])),
        ],
        [
            f"Alice Grant was the first master of the Bar Guild [{ev['p2']}]. "
            f"Zed Mountain is the tallest peak of the Ommer range [{ev['p5']}].",
            f"Glimmerhaven [{ev['p4']}]. The Baz River flows through Quxland [{ev['p3']}].",
        ],
    )
    app = Sourcebook(tmp_path / "home", settings=SETTINGS, embedder=embedder)
    out = tmp_path / "res.json"
    lib = tmp_path / "evallib"
    code = run_cli(
        app,
        ["eval", str(questions), "--corpus", str(corpus), "--library", str(lib), "--out", str(out)],
        llms,
    )
    printed = capsys.readouterr()
    assert code == 0, printed.err
    data = json.loads(out.read_text())
    s = data["summary"]
    q1, q2 = data["questions"]
    assert s["dataset"] == "musique" and s["questions"] == 2 and s["unmapped_gold"] == []
    assert data["ingest"]["added"] == 5
    # baseline: 5 documents, so the top 10 hold every gold passage
    assert s["baseline_recall"]["@10"] == 1.0
    # question 1 fetched p2 (gold, hop 2) and p5: half the gold, one hop of two
    assert q1["fetched"] == 2 and q1["fetched_recall"] == 0.5 and q1["fetched_gold"] == ["p2"]
    assert q1["hops_fetched"] == [False, True]
    # first sentence "Alice Grant was the first master of the Bar Guild":
    # 8 tokens after normalisation, 2 of them gold: F1 = 2 * (2/8) / (2/8 + 1) = 0.4
    assert q1["answer"]["first_em"] == 0.0 and q1["answer"]["first_f1"] == pytest.approx(0.4)
    assert q1["citation_precision"] == 0.5 and q1["citation_recall"] == 0.5
    assert q2["fetched_recall"] == 1.0 and q2["hops_fetched"] == [True, True]
    assert q2["answer"]["first"] == "Glimmerhaven." and q2["answer"]["first_em"] == 1.0
    assert q2["citation_precision"] == 1.0 and q2["citation_recall"] == 1.0
    assert s["fetched_recall"] == 0.75 and s["em_first"] == 0.5
    assert s["seen_recall"] == 1.0  # the searches showed all five passages; the run read three
    assert s["f1_first"] == pytest.approx(0.7) and s["citation_recall"] == 0.75
    assert s["hop_recall_fetched"] == {"hop1": 0.5, "hop2": 1.0, "all": 0.75}
    assert s["quote_accuracy"] == 1.0 and s["page_accuracy"] is None
    assert s["invalid_citations"] == 0 and s["targets"]["invalid_citations"]["met"]
    assert s["targets"]["fetched_recall"]["met"] is False  # 0.75 < 0.85
    # trust: both answers asserted; question 1's (F1 0.4) is confidently wrong
    assert q1["trust"]["asserted"] and not q1["trust"]["right"]
    assert q2["trust"]["asserted"] and q2["trust"]["right"]
    assert s["trust"]["asserted"] == 2 and s["trust"]["confidently_wrong"] == 1
    assert s["trust"]["selective_accuracy"] == 0.5
    assert "trust: 2 answer(s) asserted, 0 abstained, 1 confidently wrong" in printed.out
    assert q1["task"] == "eval-scripted-2hop__1" and q1["seconds"] > 0  # eval-MODEL[-TAG]-QID
    assert "2hop__1" in printed.out and "target fetched_recall: 0.75" in printed.out
    # the library and its task log were kept: a rerun reuses the finished runs (no model calls)
    app2 = Sourcebook(tmp_path / "home", settings=SETTINGS, embedder=embedder)
    idle = _models([], [], [])
    shared = tmp_path / "shareable.json"
    rerun = ["eval", str(questions), "--library", str(lib), "--limit", "1", "--out", str(shared)]
    assert run_cli(app2, [*rerun, "--shareable"], idle) == 0
    again = capsys.readouterr()
    assert "using the 5 documents already there" in again.err
    assert all(not m.history for m in idle.values())
    # --shareable: the same figures, without the question, its answer, the report or a path
    kept = json.loads(shared.read_text())
    assert kept["summary"]["library"] == "evallib" and Q1 not in shared.read_text()
    row = kept["questions"][0]
    assert "question" not in row and "gold_answer" not in row and row["reused"]
    assert "report_markdown" not in row and set(row["answer"]) == {
        "first_em",
        "first_f1",
        "best_em",
        "best_f1",
    }
    apart = {"question", "gold_answer", "plan_queries", "seconds", "reused", "report_markdown"}
    assert {k: v for k, v in row.items() if k not in apart | {"answer"}} == {
        k: v for k, v in q1.items() if k not in apart | {"answer"}
    }
    # the full result, reports and all, is kept with the evaluation library (for eval-rescore)
    full = json.loads((lib / "results" / "shareable.json").read_text())
    assert full["questions"][0]["report_markdown"] and Q1 in json.dumps(full)
    assert f"full result (reports, questions) to {lib / 'results'}" in again.err
    app.close()
    app2.close()


def test_eval_replay_reuses_another_series_research_and_runs_only_the_writing(
    tmp_path: Path, embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    questions, corpus = _musique_files(tmp_path)
    ev = _ids_by_external(tmp_path, embedder, corpus)
    first = _models(
        [plan(("q1", Q1, []))],
        [
            act("fetch_evidence", evidence_id=ev["p2"]),
            act("finish"),
            notes(("Alice Grant was the first master of the Bar Guild.", [ev["p2"]])),
        ],
        [f"The Bar Guild's first master was Alice Grant [{ev['p2']}]."],
    )
    app = Sourcebook(tmp_path / "home", settings=SETTINGS, embedder=embedder)
    lib = tmp_path / "evallib"
    base = ["eval", str(questions), "--corpus", str(corpus), "--library", str(lib), "--limit", "1"]
    assert run_cli(app, [*base, "--tag", "a"], first) == 0
    # the same research, another writer's draft, the support check off: only the writer runs
    second = _models([], [], [f"Alice Grant [{ev['p2']}]."])
    out = tmp_path / "b.json"
    argv = [*base, "--tag", "b", "--replay", "a", "--off", "support_check", "--out", str(out)]
    assert run_cli(app, argv, second) == 0, capsys.readouterr().err
    row = json.loads(out.read_text())["questions"][0]
    assert row["task"] == "eval-scripted-b-2hop__1"
    assert row["replayed_from"] == "eval-scripted-a-2hop__1" and row["error"] is None
    assert row["report_markdown"].startswith("Alice Grant [1].")
    assert row["fetched_gold"] == ["p2"] and row["seconds"] > 0
    assert not second["planner"].history and not second["researcher"].history
    assert [c.kind for c in second["writer"].history] == ["stream"]  # no support check
    # --replay-from citations: the draft is reused too; only the checks run (the judge asked)
    third = _models([], [], [])
    out3 = tmp_path / "e.json"
    argv = [*base, "--tag", "e", "--replay", "a", "--replay-from", "citations", "--out", str(out3)]
    assert run_cli(app, argv, third) == 0, capsys.readouterr().err
    row = json.loads(out3.read_text())["questions"][0]
    assert row["report_markdown"].startswith("The Bar Guild's first master was Alice Grant [1].")
    assert {c.kind for c in third["writer"].history} == {"choose"}
    # a series cannot replay itself, and a missing series says so per question
    with pytest.raises(ConfigError, match="--replay names the series"):
        run_cli(app, [*base, "--tag", "c", "--replay", "c"], _models([], [], []))
    out2 = tmp_path / "d.json"
    assert run_cli(
        app, [*base, "--tag", "d", "--replay", "nope", "--out", str(out2)], _models([], [], [])
    ) in (0, 1)
    (missing,) = json.loads(out2.read_text())["questions"]
    assert "cannot replay eval-scripted-nope-2hop__1" in missing["error"]
    app.close()


def test_check_citations_finds_invalid(tmp_path: Path, embedder: Any) -> None:
    _questions, corpus = _musique_files(tmp_path)
    app = Sourcebook(tmp_path / "lib", settings=SETTINGS, embedder=embedder)
    app.add_jsonl(corpus, id_field="passage_id")
    evaluator = Evaluator(app, "musique", {}, ks=[5], task_prefix="t", corpus=corpus)
    good, stale = (app.evidence(evaluator_id(app, x)) for x in ("p2", "p4"))

    def rec(n: int, ev: Any, quote: str | None = None) -> CitationRecord:
        import hashlib

        q = quote if quote is not None else ev.text
        return CitationRecord(
            number=n,
            evidence_id=ev.evidence_id,
            doc_id=ev.doc_id,
            title=ev.title,
            source_uri=ev.source_uri,
            quote=q,
            content_sha256=hashlib.sha256(q.encode()).hexdigest(),
        )

    report = Report(
        task="t",
        question="q",
        status="answered",
        markdown="Alice Grant [1]. Quxland [2]. Ghost [3]. Left [E4].\n\n## Sources\n\n1. x [9]\n",
        citations=[rec(1, good), rec(2, stale, quote="Quxland has no capital at all.")],
    )
    checks, problems = evaluator.check_citations(report, {good.evidence_id}, {"p2"})
    assert [c.gold for c in checks] == [True, False]
    assert checks[0].problem == "" and checks[0].source_ok is True and checks[0].where == "record"
    assert checks[1].problem == "quote differs from the evidence text"
    assert checks[1].source_ok is False  # the tampered quote is not in the corpus record
    assert sorted(problems) == sorted(
        [
            "[3] has no citation record",
            "raw citation token left: [E4]",
            f"[2] {stale.evidence_id}: quote differs from the evidence text",
        ]
    )
    # a genuine quote that the run never fetched is invalid too
    _, problems = evaluator.check_citations(
        report.model_copy(update={"citations": [rec(1, good), rec(2, stale)]}),
        {good.evidence_id},
        {"p2"},
    )
    assert f"[2] {stale.evidence_id}: not fetched in this run" in problems
    app.close()


def evaluator_id(app: Sourcebook, external: str) -> str:
    for d in app.documents():
        if d.external_id == external:
            return app.library.store.get_document_passages(d.doc_id)[0].passage_id
    raise AssertionError(external)


# ----------------------------------------------------------------------------- FinanceBench


def test_eval_financebench_command(
    tmp_path: Path, embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "pdfs"
    docs.mkdir()
    texts = make_multipage_pdf(docs / "ACME_2023_10K.pdf", 4)
    by_page = {page: i for (_, page), i in _ids_by_page(tmp_path, embedder, docs).items()}
    assert texts[2] and 2 in by_page and 0 in by_page
    q = "What does page three of the ACME report say?"
    rows = [
        {
            "financebench_id": "fb_1",
            "doc_name": "ACME_2023_10K",
            "question": q,
            "answer": "It is the body text of page number 3.",
            "evidence": [
                {"evidence_text": texts[2], "doc_name": "ACME_2023_10K", "evidence_page_num": 2}
            ],
        }
    ]
    questions = _jsonl(tmp_path / "fb.jsonl", rows)
    llms = _models(
        [plan(("q1", q, []))],
        [
            act("fetch_evidence", evidence_id=by_page[2]),
            act("fetch_evidence", evidence_id=by_page[0]),
            act("finish"),
            notes(("Page 3 holds the body text of page number 3.", [by_page[2]])),
        ],
        [
            f"This is the body text of page number 3 [{by_page[2]}]. "
            f"Page 1 is the body text of page number 1 [{by_page[0]}]."
        ],
    )
    app = Sourcebook(tmp_path / "home", settings=SETTINGS, embedder=embedder)
    out = tmp_path / "fb.json"
    code = run_cli(app, ["eval", str(questions), "--docs", str(docs), "--out", str(out)], llms)
    printed = capsys.readouterr()
    assert code == 0, printed.err
    data = json.loads(out.read_text())
    s, r = data["summary"], data["questions"][0]
    assert s["dataset"] == "financebench" and s["unmapped_gold"] == []
    assert r["fetched_recall"] == 1.0 and r["fetched_gold"] == [page_unit("ACME_2023_10K", 2)]
    # cited pages 3 and 1 (0-based 2 and 0): one of two is the gold page, the gold page is cited
    assert r["citation_precision"] == 0.5 and r["citation_recall"] == 1.0
    assert [c["units"] for c in r["checks"]] == [["ACME_2023_10K@2"], ["ACME_2023_10K@0"]]
    assert all(c["where"] == "page" and c["source_ok"] for c in r["checks"])
    assert s["page_accuracy"] == 1.0 and s["invalid_citations"] == 0
    assert r["numeric_match"] is True  # "3" of the gold answer is in the report
    assert s["baseline_recall"]["@10"] == 1.0  # four one-page passages: all in the top 10
    assert "financebench: 1 question(s)" in printed.out
    # the temporary library is gone
    assert not Path(s["library"]).exists()
    app.close()


def test_eval_own_docs_bounds_each_run_to_the_filing_its_question_names(
    tmp_path: Path, embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "pdfs"
    docs.mkdir()
    texts = make_multipage_pdf(docs / "ACME_2023_10K.pdf", 2)
    write_pdf(docs / "ZENITH_2023_10K.pdf", ["Zenith Corp revenue was 999 million dollars."])
    ids = _ids_by_page(tmp_path, embedder, docs)
    acme, zenith = ids[("ACME_2023_10K", 1)], ids[("ZENITH_2023_10K", 0)]
    q = "What was the revenue on page two?"
    row = {
        "financebench_id": "fb_2",
        "doc_name": "ACME_2023_10K",
        "question": q,
        "answer": "Page number 2.",
        "evidence": [
            {"evidence_text": texts[1], "doc_name": "ACME_2023_10K", "evidence_page_num": 1}
        ],
    }
    questions = _jsonl(tmp_path / "fb.jsonl", [row])
    assert load_questions(questions)[1][0].docs == ["ACME_2023_10K"]
    llms = _models(
        [plan(("q1", q, []))],
        [
            act("fetch_evidence", evidence_id=zenith),
            act("fetch_evidence", evidence_id=acme),
            act("finish"),
            notes(("Page 2 holds the body text of page number 2.", [acme])),
        ],
        [f"Revenue was 999 million dollars [{zenith}]. Page 2 is about page number 2 [{acme}]."]
        * 2,  # the draft, then the repair pass keeping the citation it cannot back
    )
    home = tmp_path / "home"
    app = Sourcebook(home, settings=SETTINGS, embedder=embedder)
    out, lab = tmp_path / "fb.json", tmp_path / "lab"
    argv = ["eval", str(questions), "--docs", str(docs), "--library", str(lab), "--out", str(out)]
    assert run_cli(app, [*argv, "--own-docs"], llms) == 0, capsys.readouterr().err
    data = json.loads(out.read_text())
    r = data["questions"][0]
    assert data["scope"] == "own-docs" and r["task"].endswith("-own-docs-fb_2")
    assert "each within its own filing" in capsys.readouterr().out
    # the other filing was neither found nor fetched, so its citation is removed
    lab_app = Sourcebook(lab, settings=SETTINGS, embedder=embedder)
    saved = lab_app.task_log()
    events = saved.events(r["task"])
    tools = [e.payload for e in events if isinstance(e.payload, dict) and "ids" in e.payload]
    saved.close()
    lab_app.close()
    assert any(t["tool"] == "discover_evidence" for t in tools)
    assert [t["tool"] for t in tools if acme in t["ids"]][-1] == "fetch_evidence"
    assert all(zenith not in t["ids"] for t in tools)
    assert r["citations"] == 1 and r["removed_citations"] == 1
    assert r["fetched_gold"] == [page_unit("ACME_2023_10K", 1)]
    # a question about a filing the library lacks fails before any run starts
    row["doc_name"] = "MISSING_10K"
    row["evidence"][0]["doc_name"] = "MISSING_10K"
    _jsonl(questions, [row])
    with pytest.raises(NotFoundError, match="MISSING_10K"):
        run_cli(app, [*argv, "--own-docs"], _models([], [], []))
    app.close()


def test_a_series_name_too_long_to_keep_whole_keeps_its_tag_and_scope_apart() -> None:
    from core.cli_research import SERIES_CHARS, _series

    one = "tiny-model-q4"
    assert _series(one, "run a", False) == "eval-tiny-model-q4-run-a"  # names that fit: as ever
    assert _series(one, "run a", True) == "eval-tiny-model-q4-run-a-own-docs"
    mixed = "alpha-small-instruct-q4_k_m, alpha-large-instruct-q4_k_m"  # two role models
    names = {_series(mixed, tag, docs) for tag in ("run a", "run b") for docs in (False, True)}
    assert len(names) == 4  # a cut name still tells the series apart
    assert all(len(n) == len("eval-") + SERIES_CHARS and n.startswith("eval-alpha") for n in names)
    assert _series(mixed, "run a", False) == _series(mixed, "run a", False)  # and is stable


def test_eval_usage_errors(tmp_path: Path, embedder: Any) -> None:

    questions, corpus = _musique_files(tmp_path)
    app = Sourcebook(tmp_path / "home", settings=SETTINGS, embedder=embedder)
    with pytest.raises(ConfigError, match="corpus"):
        run_cli(app, ["eval", str(questions)], _models([], [], []))
    bad = _jsonl(tmp_path / "bad.jsonl", [{"question": "x"}])
    with pytest.raises(ConfigError, match="Unknown question format"):
        run_cli(app, ["eval", str(bad)], _models([], [], []))
    with pytest.raises(ConfigError, match="--k"):
        run_cli(app, ["eval", str(questions), "--k", "0,a"], _models([], [], []))
    with pytest.raises(ConfigError, match="--shareable") as no_out:
        run_cli(app, ["eval", str(questions), "--shareable"], _models([], [], []))
    assert no_out.value.hint == "Add --out FILE.json."
    # a question id without its prefix: the error names the ids that hold it
    only = ["eval", str(questions), "--corpus", str(corpus), "--only", "1"]
    with pytest.raises(NotFoundError, match="No question with id 1") as missing:
        run_cli(app, only, _models([], [], []))
    assert missing.value.hint == "Did you mean 2hop__1?"
    with pytest.raises(NotFoundError) as missing:
        run_cli(app, [*only[:-1], "q9"], _models([], [], []))
    assert missing.value.hint == "Ids are the file's question ids, such as 2hop__1."
    with pytest.raises(ConfigError, match="Only FinanceBench"):
        run_cli(
            app,
            ["eval", str(questions), "--corpus", str(corpus), "--own-docs"],
            _models([], [], []),
        )
    app.close()


# ----------------------------------------------------------------------------- shared data


def test_shared_eval_formats_load() -> None:
    """The real files load as they are, with gold that maps onto their corpus / PDFs."""
    mq = shared_eval("musique", "dev_questions.jsonl")
    dataset, qs = load_questions(mq)
    assert dataset == "musique" and len(qs) >= 10
    ids = {json.loads(x)["passage_id"] for x in (mq.parent / "corpus.jsonl").open()}
    assert all(set(q.gold) <= ids and q.hops and set(q.hops) <= set(q.gold) for q in qs)
    fb = shared_eval("financebench", "dev_questions.jsonl")
    dataset, qs = load_questions(fb)
    stems = {p.stem for p in (fb.parent / "pdfs").glob("*.pdf")}
    assert dataset == "financebench"
    assert all(u.rsplit("@", 1)[0] in stems for q in qs for u in q.gold)
    assert all(q.docs and set(q.docs) <= stems for q in qs)  # --own-docs finds every filing


@pytest.mark.slow
def test_shared_musique_one_question(
    tmp_path: Path, embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """One real MuSiQue question through the whole command, on the real records of its own
    context (20 paragraphs, gold included) with scripted models that read the best hits."""
    mq = shared_eval("musique")
    first = json.loads((mq / "dev_questions.jsonl").read_text().splitlines()[0])
    context = set(first["context_passage_ids"])
    records = [json.loads(x) for x in (mq / "corpus.jsonl").open()]
    corpus = _jsonl(tmp_path / "corpus.jsonl", [r for r in records if r["passage_id"] in context])
    bad = "not json"
    llms = _models(
        [bad, bad],  # the planner fails twice: the recorded fallback plan (the question) runs
        [bad] * 20,  # invalid actions: the default actions read the best hits, then finish
        ["I could not tell."],  # uncited: the researchers' extractive findings stand in
    )
    app = Sourcebook(tmp_path / "home", settings=SETTINGS, embedder=embedder)
    out = tmp_path / "one.json"
    argv = ["eval", str(mq / "dev_questions.jsonl"), "--corpus", str(corpus), "--limit", "1"]
    code = run_cli(app, [*argv, "--out", str(out)], llms)
    assert code == 0, capsys.readouterr().err
    data = json.loads(out.read_text())
    r = data["questions"][0]
    assert data["ingest"]["added"] == len(context) and data["summary"]["unmapped_gold"] == []
    assert r["qid"] == first["qid"] and r["invalid_citations"] == 0
    assert r["fetched"] >= 1 and r["citations"] >= 1 and r["quote_accuracy"] == 1.0
    assert set(r["baseline_recall"]) == {"@2", "@5", "@10"}
    app.close()
