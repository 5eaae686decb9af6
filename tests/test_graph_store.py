"""GraphStore with a real SQLite catalog and a real lancedb index under tmp_path."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from graph import (
    Document,
    EntityMention,
    GraphError,
    GraphStore,
    IngestedDocument,
    NotFoundInGraph,
    Page,
    Passage,
    SearchFilters,
    Span,
    Word,
)
from graph.ids import document_id, entity_id, passage_id, sha256_bytes, span_id
from graph.index import PassageIndex

DIM = 8


def make_doc(
    name: str,
    texts: list[str],
    *,
    source_key: str | None = None,
    version: int = 1,
    entities: dict[int, list[tuple[str, str]]] | None = None,
) -> IngestedDocument:
    """A synthetic document: one passage per text, one page per passage, words with boxes."""
    sha = sha256_bytes(("\n".join(texts) + name).encode())
    doc_id = document_id(sha)
    passages: list[Passage] = []
    mentions: list[EntityMention] = []
    offset = 0
    for i, text in enumerate(texts):
        pid = passage_id(sha, i, text)
        words: list[Word] = []
        pos = 0
        for j, w in enumerate(text.split()):
            start = text.index(w, pos)
            pos = start + len(w)
            words.append(
                Word(
                    page_index=i,
                    start=start,
                    end=pos,
                    rect=(10.0 * j, 20.5, 10.0 * j + 9.25, 30.125),
                )
            )
        sid = span_id(pid, 0, len(text))
        passages.append(
            Passage(
                passage_id=pid,
                doc_id=doc_id,
                ordinal=i,
                text=text,
                heading_path=[name, f"section {i}"],
                page_start=i,
                page_end=i,
                char_start=offset,
                char_end=offset + len(text),
                token_count=len(words),
                words=words,
                spans=[Span(span_id=sid, passage_id=pid, start=0, end=len(text))],
            )
        )
        for ename, etype in (entities or {}).get(i, []):
            start = text.find(ename)
            mentions.append(
                EntityMention(
                    entity_id=entity_id(ename),
                    name=ename,
                    type=etype,
                    passage_id=pid,
                    span_id=sid,
                    start=max(start, 0),
                    end=max(start, 0) + len(ename),
                )
            )
        offset += len(text) + 1
    document = Document(
        doc_id=doc_id,
        source_key=source_key or name,
        source_uri=f"/tmp/{name}.pdf",
        title=name.title(),
        kind="pdf",
        content_sha256=sha,
        version=version,
        page_count=len(texts),
        problems=["page 3 has no text layer"] if len(texts) > 2 else [],
        added_at=datetime.now(UTC),
        byte_size=1234,
    )
    return IngestedDocument(
        document=document,
        text="\n".join(texts),
        pages=[
            Page(page_index=i, width=612.0, height=792.0, char_count=len(t), has_text_layer=i != 2)
            for i, t in enumerate(texts)
        ],
        passages=passages,
        mentions=mentions,
    )


def unit(seed: str, dim: int = DIM) -> np.ndarray:
    rng = np.random.default_rng(int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16))
    v = rng.standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def vectors_for(doc: IngestedDocument) -> np.ndarray:
    return np.stack([unit(p.text) for p in doc.passages])


def add(store: GraphStore, doc: IngestedDocument, supersedes: str | None = None) -> Document:
    store.stage(doc)
    store.set_vectors([p.passage_id for p in doc.passages], vectors_for(doc))
    return store.mark_ready(doc.document.doc_id, supersedes=supersedes)


TEXTS = [
    "The Federal Reserve raised interest rates in March.",
    "Inflation in the euro area slowed to two percent.",
    "Unemployment claims fell sharply during the summer.",
    "The central bank of Japan kept its policy unchanged.",
]


@pytest.fixture
def store(tmp_path: Path) -> GraphStore:
    s = GraphStore.open(tmp_path / "lib", vector_dim=DIM)
    yield s
    s.close()


def test_open_creates_files_and_wal(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    with GraphStore.open(root, vector_dim=DIM) as s:
        assert (root / "catalog.sqlite").exists()
        assert (root / "index").is_dir()
        assert s.stats()["documents"] == 0
        mode = s._catalog._query("PRAGMA journal_mode")[0][0]
        assert mode == "wal"
        assert s._catalog._query("PRAGMA foreign_keys")[0][0] == 1
        assert s._catalog._query("SELECT version FROM schema_version")[0][0] == 1


def test_stage_keyword_before_vectors(store: GraphStore) -> None:
    doc = make_doc("economy", TEXTS)
    store.stage(doc)
    d = store.get_document(doc.document.doc_id)
    assert d.status == "indexing"
    assert d.passage_count == 4 and d.page_count == 4
    hits = store.search("inflation euro", None, k=5)
    assert hits and hits[0].evidence_id == doc.passages[1].passage_id
    assert hits[0].signals == ["keyword"]
    assert hits[0].title == "Economy" and hits[0].page_start == 1
    # hybrid with a query vector still finds the not-yet-embedded passage by keyword
    hits = store.search("inflation euro", unit("q"), k=5, mode="hybrid")
    assert hits[0].evidence_id == doc.passages[1].passage_id
    assert store.search("inflation", unit("q"), k=5, mode="vector") == []


def test_vectors_ready_and_roundtrip(store: GraphStore) -> None:
    doc = make_doc("economy", TEXTS, entities={0: [("Federal Reserve", "org")]})
    ready = add(store, doc)
    assert ready.status == "ready" and ready.problems == ["page 3 has no text layer"]
    target = doc.passages[2]
    hits = store.search("", unit(target.text), k=3, mode="vector")
    assert hits[0].evidence_id == target.passage_id and hits[0].signals == ["vector"]
    got = store.get_passage(target.passage_id)
    assert got == target  # words (float boxes), spans and heading path survive exactly
    assert store.get_document_passages(doc.document.doc_id) == doc.passages
    pages = store.get_pages(doc.document.doc_id)
    assert [p.has_text_layer for p in pages] == [True, True, False, True]
    assert store.get_document_text(doc.document.doc_id) == doc.text
    assert store.neighbours(target.passage_id) == {
        "previous": doc.passages[1].passage_id,
        "next": doc.passages[3].passage_id,
        "parent": doc.document.doc_id,
    }
    assert store.neighbours(doc.passages[0].passage_id)["previous"] is None
    assert store.find_by_sha(doc.document.content_sha256) == ready
    with pytest.raises(NotFoundInGraph):
        store.get_passage("ev1:0000000000000000")
    with pytest.raises(NotFoundInGraph):
        store.get_document("doc_nope")
    with pytest.raises(GraphError):
        store.stage(doc)  # already there


def test_set_vectors_in_batches_and_bad_shape(store: GraphStore) -> None:
    doc = make_doc("economy", TEXTS)
    store.stage(doc)
    ids = [p.passage_id for p in doc.passages]
    vecs = vectors_for(doc)
    store.set_vectors(ids[:2], vecs[:2])
    store.set_vectors(ids[2:], vecs[2:])
    with pytest.raises(GraphError):
        store.set_vectors(ids[:2], vecs[:1])
    store.mark_ready(doc.document.doc_id)
    assert store.stats()["index_embedded"] == 4
    hits = store.search("", vecs[3], k=1, mode="vector")
    assert hits[0].evidence_id == ids[3]


def test_versions_and_supersede(store: GraphStore) -> None:
    v1 = make_doc("report", TEXTS, source_key="/docs/report.pdf")
    add(store, v1)
    assert store.latest_for_source("/docs/report.pdf").doc_id == v1.document.doc_id
    v2 = make_doc(
        "report",
        [*TEXTS[:3], "Revised: the Bank of Japan raised rates."],
        source_key="/docs/report.pdf",
        version=2,
    )
    add(store, v2, supersedes=v1.document.doc_id)
    assert store.get_document(v1.document.doc_id).superseded_by == v2.document.doc_id
    assert store.latest_for_source("/docs/report.pdf").doc_id == v2.document.doc_id
    assert len(store.list_documents()) == 2
    assert [d.doc_id for d in store.list_documents(include_superseded=False)] == [
        v2.document.doc_id
    ]
    hits = store.search("Federal Reserve", unit("x"), k=10)
    assert hits and all(h.doc_id == v2.document.doc_id for h in hits)
    hits = store.search(
        "Federal Reserve", unit("x"), k=10, filters=SearchFilters(include_superseded=True)
    )
    assert {h.doc_id for h in hits} == {v1.document.doc_id, v2.document.doc_id}
    assert any(h.superseded for h in hits)
    # removing the newest version brings the old one back as current
    store.remove(v2.document.doc_id)
    assert store.get_document(v1.document.doc_id).superseded_by is None
    assert store.latest_for_source("/docs/report.pdf").doc_id == v1.document.doc_id


def test_filters_doc_and_collection(store: GraphStore) -> None:
    a = make_doc("alpha", ["Rates rose in March.", "Rates fell in May."])
    b = make_doc("beta", ["Rates were flat in June.", "Gold prices rose."])
    add(store, a)
    add(store, b)
    hits = store.search(
        "rates", unit("r"), k=10, filters=SearchFilters(doc_ids=[b.document.doc_id])
    )
    assert hits and {h.doc_id for h in hits} == {b.document.doc_id}
    store.create_collection("asia")
    store.add_to_collection("asia", [a.document.doc_id])
    hits = store.search("rates", unit("r"), k=10, filters=SearchFilters(collections=["asia"]))
    assert hits and {h.doc_id for h in hits} == {a.document.doc_id}
    hits = store.search(
        "rates",
        unit("r"),
        k=10,
        filters=SearchFilters(collections=["asia"], doc_ids=[b.document.doc_id]),
    )
    assert hits == []
    with pytest.raises(NotFoundInGraph):
        store.search("rates", None, filters=SearchFilters(collections=["nope"]))


def test_collections(store: GraphStore) -> None:
    a = make_doc("alpha", ["One passage here."])
    b = make_doc("beta", ["Another passage there."])
    add(store, a)
    add(store, b)
    store.create_collection("c1")
    store.create_collection("c1")  # idempotent
    store.add_to_collection("c1", [a.document.doc_id, b.document.doc_id])
    store.add_to_collection("c1", [a.document.doc_id])
    assert store.list_collections()[0].doc_ids == sorted([a.document.doc_id, b.document.doc_id])
    store.remove_from_collection("c1", [a.document.doc_id])
    assert store.list_collections()[0].doc_ids == [b.document.doc_id]
    with pytest.raises(NotFoundInGraph):
        store.add_to_collection("c1", ["doc_missing"])
    with pytest.raises(NotFoundInGraph):
        store.add_to_collection("c2", [a.document.doc_id])
    store.remove(b.document.doc_id)
    assert store.list_collections()[0].doc_ids == []
    store.delete_collection("c1")
    assert store.list_collections() == []


def test_remove_everything(store: GraphStore) -> None:
    doc = make_doc(
        "economy",
        TEXTS,
        entities={0: [("Federal Reserve", "org")], 1: [("Federal Reserve", "org"), ("ECB", "org")]},
    )
    add(store, doc)
    before = store.stats()
    assert before["entities"] == 2 and before["entity_edges"] == 1
    store.remove(doc.document.doc_id)
    s = store.stats()
    for key in (
        "documents",
        "passages",
        "spans",
        "pages",
        "entities",
        "mentions",
        "entity_edges",
        "index_rows",
        "view_nodes",
        "view_edges",
    ):
        assert s[key] == 0, key
    assert store.search("inflation", unit("q"), k=5) == []
    with pytest.raises(NotFoundInGraph):
        store.remove(doc.document.doc_id)


def test_sweep_staged_not_ready(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    good = make_doc("good", ["Good text about harbours."])
    half = make_doc("half", ["Half text about harbours."])
    with GraphStore.open(root, vector_dim=DIM) as s:
        add(s, good)
        s.stage(half)
        assert s.get_document(half.document.doc_id).status == "indexing"
    with GraphStore.open(root, vector_dim=DIM) as s:
        assert [d.doc_id for d in s.list_documents()] == [good.document.doc_id]
        assert s.stats()["index_rows"] == 1
        assert {h.doc_id for h in s.search("harbours", None)} == {good.document.doc_id}
        add(s, half)  # the same add is accepted again
        assert s.get_document(half.document.doc_id).status == "ready"


def test_sweep_index_rows_only(tmp_path: Path) -> None:
    """A crash after the index rows were written but before the catalog transaction."""
    root = tmp_path / "lib"
    orphan = make_doc("orphan", ["Orphan text about lighthouses.", "More lighthouses."])
    GraphStore.open(root, vector_dim=DIM).close()
    idx = PassageIndex(root / "index", DIM)
    idx.add_passages({orphan.document.doc_id: orphan.passages})
    assert idx.count() == 2
    with GraphStore.open(root, vector_dim=DIM) as s:
        assert s.stats()["index_rows"] == 0
        assert s.search("lighthouses", None) == []
        add(s, orphan)
        assert len(s.search("lighthouses", None)) == 2


def test_reopen_rebuilds_view_and_dim_mismatch(tmp_path: Path) -> None:
    root = tmp_path / "lib"
    doc = make_doc("economy", TEXTS, entities={0: [("Japan", "place")], 3: [("Japan", "place")]})
    with GraphStore.open(root, vector_dim=DIM) as s:
        add(s, doc)
        before = s.stats()
    with GraphStore.open(root, vector_dim=DIM) as s:
        after = s.stats()
        assert after["view_nodes"] == before["view_nodes"]
        assert after["view_edges"] == before["view_edges"]
    with pytest.raises(GraphError):
        GraphStore.open(root, vector_dim=16)


def test_entities_and_explore(store: GraphStore) -> None:
    a = make_doc(
        "alpha",
        TEXTS,
        entities={0: [("Federal Reserve", "org"), ("March", "date")], 3: [("Japan", "place")]},
    )
    b = make_doc(
        "beta",
        ["The Federal Reserve met again.", "Nothing related here.", "Weather was fine."],
        entities={0: [("Federal Reserve", "org")]},
    )
    add(store, a)
    add(store, b)
    found = store.find_entities("federal")
    assert found[0][1:] == ("Federal Reserve", "org", 2)
    eid = found[0][0]
    assert set(store.passages_for_entity(eid)) == {
        a.passages[0].passage_id,
        b.passages[0].passage_id,
    }
    near = store.explore(a.passages[0].passage_id, limit=5)
    assert b.passages[0].passage_id in near  # shares an entity, across documents
    assert a.passages[1].passage_id in near  # the next passage
    assert b.passages[2].passage_id not in near
    with pytest.raises(NotFoundInGraph):
        store.passages_for_entity("ent_000000000000")
