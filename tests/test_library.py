"""The library pipeline end to end: real PDFs, real SQLite, real lancedb, the real MiniLM."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from pdfgen import ALPHA, BETA, make_multipage_pdf, write_pdf

from core.errors import NotFoundError
from core.library import AddProgress
from core.service import Sourcebook
from core.vectors import opens_with

pytestmark = pytest.mark.real_model


class RecordingEmbedder:
    """The real embedder, keeping every text it is asked to embed."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim  # type: ignore[attr-defined]
        self.max_tokens = inner.max_tokens  # type: ignore[attr-defined]
        self.identity = inner.identity  # type: ignore[attr-defined]
        self.asked: list[str] = []

    def count_tokens(self, texts):  # type: ignore[no-untyped-def]
        return self.inner.count_tokens(texts)  # type: ignore[attr-defined]

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.asked.extend(texts)
        return self.inner.embed(texts)  # type: ignore[attr-defined]


def test_add_search_show_and_remove(app: Sourcebook, tmp_path: Path) -> None:
    a = write_pdf(tmp_path / "harbor.pdf", ALPHA)
    b = write_pdf(tmp_path / "rail.pdf", BETA)
    events: list[AddProgress] = []
    changes = app.add([a, b], collection="infra", progress=events.append)
    assert [r.outcome for r in changes.results] == ["added", "added"]
    assert {e.stage for e in events} >= {"indexing", "embedding", "done"}

    docs = app.documents()
    assert {d.status for d in docs} == {"ready"}
    harbor = next(d for d in docs if d.source_uri.endswith("harbor.pdf"))
    assert harbor.page_count == 2 and harbor.passage_count >= 1

    hits = app.search("seawall budget", k=3)
    assert hits and hits[0].doc_id == harbor.doc_id
    assert hits[0].page_start == 0
    hits = app.search("drainage petition flooding", k=3)
    assert hits[0].doc_id == harbor.doc_id and hits[0].page_end == 1

    # A span is page-exact even when its passage runs across a page break.
    passage = app.library.store.get_passage(hits[0].evidence_id)
    span = next(s for s in passage.spans if "drainage" in passage.text[s.start : s.end])
    ev = app.evidence(span.span_id)
    assert ev.pages == [2] and ev.boxes
    assert "drainage" in ev.text and "seawall" not in ev.text
    assert {w.page_index for w in ev.boxes} == {1}

    only_rail = app.search("seawall budget", k=5, doc_refs=["rail.pdf"])
    assert only_rail and all(h.doc_id != harbor.doc_id for h in only_rail)
    assert {c.name for c in app.collections()} == {"infra"}

    app.remove(harbor.doc_id)
    assert all(d.doc_id != harbor.doc_id for d in app.documents())
    assert all(h.doc_id != harbor.doc_id for h in app.search("seawall budget", k=5))
    with pytest.raises(NotFoundError):
        app.evidence(ev.evidence_id)


def test_readding_unchanged_is_a_noop_and_change_makes_version(
    app: Sourcebook, tmp_path: Path
) -> None:
    path = write_pdf(tmp_path / "memo.pdf", ALPHA)
    first = app.add([path]).results[0]
    again = app.add([path]).results[0]
    assert again.outcome == "unchanged" and again.doc_id == first.doc_id

    write_pdf(path, [*ALPHA, "An addendum moved the start of construction to June 2025."])
    newer = app.add([path]).results[0]
    assert newer.outcome == "new_version" and newer.superseded == first.doc_id
    docs = {d.doc_id: d for d in app.documents()}
    assert docs[first.doc_id].superseded_by == newer.doc_id
    assert docs[newer.doc_id].version == 2
    # Superseded versions are kept but not searched by default.
    assert all(h.doc_id == newer.doc_id for h in app.search("seawall", k=10))


def test_ids_are_stable_across_libraries(embedder: object, tmp_path: Path) -> None:
    path = write_pdf(tmp_path / "same.pdf", ALPHA)
    ids = []
    for name in ("one", "two"):
        sb = Sourcebook(tmp_path / name, embedder=embedder)  # type: ignore[arg-type]
        sb.add([path])
        ids.append(sorted(h.evidence_id for h in sb.search("seawall flooding", k=10)))
        sb.close()
    assert ids[0] == ids[1] and ids[0]


def test_batch_continues_past_bad_files(app: Sourcebook, tmp_path: Path) -> None:
    good = write_pdf(tmp_path / "good.pdf", BETA)
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    fake = tmp_path / "fake.pdf"
    fake.write_text("this is not a pdf at all")
    changes = app.add([empty, good, fake, tmp_path / "missing.pdf"])
    outcomes = {Path(r.source).name: r.outcome for r in changes.results}
    assert outcomes == {
        "empty.pdf": "failed",
        "good.pdf": "added",
        "fake.pdf": "failed",
        "missing.pdf": "failed",
    }
    assert all(r.error and r.hint for r in changes.failed)
    assert [d.source_uri.endswith("good.pdf") for d in app.documents()] == [True]


def test_cancel_leaves_nothing_half_added(app: Sourcebook, tmp_path: Path) -> None:
    pages = [
        f"Page {i} discusses irrigation channel {i} and its maintenance." * 8 for i in range(40)
    ]
    path = write_pdf(tmp_path / "long.pdf", pages)
    cancel = threading.Event()

    def on(ev: AddProgress) -> None:
        if ev.stage == "embedding":
            cancel.set()

    app.add([path], progress=on, cancel=cancel)
    assert app.documents() == []
    assert app.search("irrigation", mode="keyword") == []
    # ...and the same add works afterwards.
    assert app.add([path]).results[0].outcome == "added"


def test_keyword_search_before_embeddings(app: Sourcebook, tmp_path: Path) -> None:
    pages = [
        f"Section {i}: the ledger shows entry quokka{i} among routine items." * 6 for i in range(60)
    ]
    path = write_pdf(tmp_path / "ledger.pdf", pages)
    seen_while_indexing: list[bool] = []
    release = threading.Event()

    class SlowEmbedder(RecordingEmbedder):
        """The real embedder, held back until the test has searched."""

        def embed(self, texts):  # type: ignore[no-untyped-def]
            release.wait(30)
            return super().embed(texts)

    sb = Sourcebook(tmp_path / "slow", embedder=SlowEmbedder(app.embedder))  # type: ignore[arg-type]
    worker = threading.Thread(target=lambda: sb.add([path]))
    worker.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        hits = sb.search("quokka37", mode="keyword", k=1)
        if hits:
            docs = sb.documents()
            seen_while_indexing.append(docs[0].status == "indexing")
            assert hits[0].page_start <= 37 <= (hits[0].page_end or 0)
            break
        time.sleep(0.05)
    release.set()
    worker.join(60)
    assert seen_while_indexing == [True]
    assert sb.documents()[0].status == "ready"
    sb.close()


def test_a_text_repeated_across_documents_is_embedded_once(app: Sourcebook, tmp_path: Path) -> None:
    """Two years of one report share passages word for word (and title): embedded once."""
    pages = [
        f"Section {i}. The harbor fund paid {i * 7} million dollars for seawall repairs, "
        "dredging and pier inspections across the district. " * 5
        for i in range(6)
    ]
    (tmp_path / "2023").mkdir()
    (tmp_path / "2024").mkdir()
    old = write_pdf(tmp_path / "2023" / "report.pdf", pages)
    new = write_pdf(tmp_path / "2024" / "report.pdf", [*pages, "Addendum: the pier reopened."])
    recorder = RecordingEmbedder(app.embedder)
    sb = Sourcebook(tmp_path / "lib", embedder=recorder)  # type: ignore[arg-type]
    added = sb.add([old, new]).added
    asked = recorder.asked
    assert len(added) == 2
    passages = sum(d.passage_count for d in sb.documents())
    assert len(asked) == len(set(asked))
    assert len(asked) < passages
    # Each copy's passage got the vector of its text, shared or not.
    store = sb.library.store
    by_text: dict[str, list[str]] = {}
    for r in added:
        for p in store.get_document_passages(r.doc_id, full=False):
            by_text.setdefault(p.text, []).append(p.passage_id)
    shared = [ids for ids in by_text.values() if len(ids) == 2]
    assert shared
    for ids in shared:
        va, vb = store.vectors(ids).values()
        assert np.array_equal(va, vb) and np.linalg.norm(va) == pytest.approx(1.0, abs=1e-5)
    sb.close()


def test_a_passage_opening_with_its_heading_is_not_headed_by_it_again(
    app: Sourcebook, tmp_path: Path
) -> None:
    path = tmp_path / "chapters.pdf"
    make_multipage_pdf(path, 3)
    recorder = RecordingEmbedder(app.embedder)
    sb = Sourcebook(tmp_path / "lib", embedder=recorder)  # type: ignore[arg-type]
    assert sb.add([path]).added
    sb.close()
    by_chapter = {n: [t for t in recorder.asked if f"page number {n} " in t] for n in (1, 2, 3)}
    # The title (the first heading) still heads the later chapters; each heading is said once.
    assert by_chapter[2] == [
        "Chapter 1\nChapter 2\n\nThis is the body text of page number 2 in the generated report."
    ]
    assert all(t.count(f"Chapter {n}") == 1 for n, texts in by_chapter.items() for t in texts)


def test_opens_with_matches_whole_words_across_whitespace() -> None:
    assert opens_with("PART I\n\nItem 1. Business", "PART I")
    assert opens_with("Net  Income\nrose 4%", "Net Income")
    assert opens_with("Overview: the year", "Overview")
    assert not opens_with("PART III\nItem 10", "PART I")
    assert not opens_with("Net Incomes", "Net Income")
    assert not opens_with("Revenue rose", "Net Income")
