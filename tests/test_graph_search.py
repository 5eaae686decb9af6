"""Hybrid fusion and graph expansion, with a real lancedb index under tmp_path."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from graph import Document, EntityMention, GraphStore, IngestedDocument, Passage, SearchFilters
from graph.ids import document_id, entity_id, passage_id, sha256_bytes, span_id
from graph.search import ALPHA, TitlePrior, fuse, make_snippet

DIM = 8


def unit(seed: str, dim: int = DIM) -> np.ndarray:
    rng = np.random.default_rng(int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16))
    v = rng.standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def mix(a: np.ndarray, b: np.ndarray, t: float) -> np.ndarray:
    """A unit vector with cosine ~t to ``a`` (b is noise)."""
    b = b - (b @ a) * a
    b = b / np.linalg.norm(b)
    v = t * a + np.sqrt(max(0.0, 1 - t * t)) * b
    return (v / np.linalg.norm(v)).astype(np.float32)


def make_doc(
    name: str, texts: list[str], entities: dict[int, list[str]] | None = None
) -> IngestedDocument:
    sha = sha256_bytes(("\n".join(texts) + name).encode())
    doc_id = document_id(sha)
    passages, mentions, offset = [], [], 0
    for i, text in enumerate(texts):
        pid = passage_id(sha, i, text)
        passages.append(
            Passage(
                passage_id=pid,
                doc_id=doc_id,
                ordinal=i,
                text=text,
                page_start=i,
                page_end=i,
                char_start=offset,
                char_end=offset + len(text),
            )
        )
        for ename in (entities or {}).get(i, []):
            mentions.append(
                EntityMention(
                    entity_id=entity_id(ename),
                    name=ename,
                    type="other",
                    passage_id=pid,
                    span_id=span_id(pid, 0, len(text)),
                    start=0,
                    end=len(ename),
                )
            )
        offset += len(text) + 1
    document = Document(
        doc_id=doc_id,
        source_key=name,
        source_uri=name,
        title=name,
        kind="text",
        content_sha256=sha,
        added_at=datetime.now(UTC),
    )
    return IngestedDocument(
        document=document, text="\n".join(texts), passages=passages, mentions=mentions
    )


def add(store: GraphStore, doc: IngestedDocument, vecs: np.ndarray) -> None:
    store.stage(doc)
    store.set_vectors([p.passage_id for p in doc.passages], vecs)
    store.mark_ready(doc.document.doc_id)


@pytest.fixture
def store(tmp_path: Path) -> GraphStore:
    s = GraphStore.open(tmp_path / "lib", vector_dim=DIM)
    yield s
    s.close()


# -- fusion, pure ------------------------------------------------------------------------------


def test_fuse_best_dense_hit_scores_at_least_alpha() -> None:
    dense = [("a", 0.9), ("b", 0.5), ("c", 0.4)]
    keyword = [("x", 12.0), ("y", 11.0), ("c", 3.0)]
    fused, score = fuse(dense, keyword, depth=3)
    assert fused["a"].score >= ALPHA
    # keyword-only hits get the dense floor; a weak dense list doesn't let them win
    order = sorted(fused.values(), key=lambda s: -s.score)
    assert order[0].passage_id == "a"
    # a passage found by both lists beats one found by keywords alone at similar strength
    assert score(0.5, 11.0) > fused["y"].score
    # only one list: its own normalised score
    only_kw, _ = fuse([], keyword, depth=3)
    assert only_kw["x"].score == pytest.approx(1.0)


def test_fuse_strong_keyword_hit_enters_when_dense_is_flat() -> None:
    dense = [(f"d{i}", 0.50 - 0.001 * i) for i in range(10)]
    keyword = [("kw", 20.0), ("d9", 2.0)]
    fused, _ = fuse(dense, keyword, depth=10)
    top5 = [s.passage_id for s in sorted(fused.values(), key=lambda s: -s.score)[:5]]
    assert "kw" in top5
    # with a steep dense list the same keyword-only hit stays out of the top 5
    steep = [(f"d{i}", 0.9 - 0.05 * i) for i in range(10)]
    fused, _ = fuse(steep, keyword, depth=10)
    top5 = [s.passage_id for s in sorted(fused.values(), key=lambda s: -s.score)[:5]]
    assert "kw" not in top5


def test_snippet_centres_on_query_words() -> None:
    text = "lorem ipsum " * 60 + "the lighthouse keeper " + "dolor sit " * 60
    snip = make_snippet(text, "lighthouse", size=120)
    assert "lighthouse" in snip and snip.startswith("…") and snip.endswith("…")
    assert make_snippet("short", "x") == "short"


def test_title_prior_weighs_the_words_that_tell_titles_apart() -> None:
    titles = {
        "corvane": "CORVANE INC. — Form 10-K, fiscal year ended December 30, 2022",
        "marlowe": "MARLOWE GROCERS, INC. — Form 10-K, fiscal year ended January 30, 2023",
        "3m": "3M COMPANY — Form 10-K, fiscal year ended December 31, 2022",
        "city": "City",
        "kc": "Kansas City",
    }
    prior = TitlePrior(titles)
    w = prior.weights("Did Corvane's operating margin widen in FY2022?")
    assert max(w, key=w.__getitem__) == "corvane" and w["corvane"] > 0.5
    # the year alone names both 2022 filings, weakly
    assert 0 < w["3m"] < w["corvane"] and "marlowe" not in w
    assert set(prior.weights("What was 3M's capital expenditure?")) == {"3m"}
    # words every title has ("Form 10-K", "Fiscal Year") name no document
    filings = TitlePrior({k: v for k, v in titles.items() if "Form" in v})
    assert filings.weights("Which Form 10-K covers the Fiscal Year?") == {}
    # in a written question only capitalised words and numbers name titles ...
    assert set(prior.weights("Which city hosts the Kansas City Chiefs?")) == {"kc", "city"}
    assert prior.weights("Which city is the largest?") == {}
    # ... a query typed in lower case keeps every word
    assert set(prior.weights("corvane operating margin")) == {"corvane"}
    # a question's opening word is no name, even where a title holds it
    film = TitlePrior({"film": "What Lies Beneath", "other": "Beneath the Planet of the Apes"})
    assert film.weights("What is the capital of France?") == {}


# -- through the store ---------------------------------------------------------------------


def test_title_prior_puts_the_named_documents_passages_first(store: GraphStore) -> None:
    q = unit("margins")
    text = "We report our operating margin for the year in the table below."
    # the same sentence in two companies' filings; the other company's is a little nearer
    corvane = make_doc("CORVANE INC. — Form 10-K, fiscal year ended December 30, 2022", [text])
    marlowe = make_doc(
        "MARLOWE GROCERS, INC. — Form 10-K, fiscal year ended January 30, 2023", [text]
    )
    add(store, corvane, np.stack([mix(q, unit("a"), 0.80)]))
    add(store, marlowe, np.stack([mix(q, unit("b"), 0.84)]))
    plain = store.search("What was the operating margin?", q, k=2)
    assert plain[0].doc_id == marlowe.document.doc_id
    for mode in ("hybrid", "vector", "keyword"):
        named = store.search("What was Corvane's operating margin?", q, k=2, mode=mode)
        assert named[0].doc_id == corvane.document.doc_id, mode
    # graph expansion keeps the order the prior gave
    graphed = store.search("What was Corvane's operating margin?", q, k=2, graph=True)
    assert graphed[0].doc_id == corvane.document.doc_id
    # a document added later is named at once (the prior follows the library)
    late = make_doc("CVS HEALTH CORP — Form 10-K, fiscal year ended December 31, 2022", [text])
    add(store, late, np.stack([mix(q, unit("c"), 0.78)]))
    assert store.search("CVS operating margin", q, k=3)[0].doc_id == late.document.doc_id


def test_hybrid_never_loses_a_strong_dense_hit(store: GraphStore) -> None:
    q = unit("query")
    # one passage that means the query but shares no words with it; many that repeat the
    # query words but mean something else
    texts = ["A harbour pilot guides vessels into port."] + [
        f"Quarterly revenue revenue growth growth report number {i}." for i in range(30)
    ]
    vecs = [mix(q, unit("strong"), 0.95)] + [mix(q, unit(f"n{i}"), 0.1) for i in range(30)]
    doc = make_doc("ships", texts)
    add(store, doc, np.stack(vecs))
    strong = doc.passages[0].passage_id
    vector_only = store.search("revenue growth", q, k=3, mode="vector")
    assert vector_only[0].evidence_id == strong
    hybrid = store.search("revenue growth", q, k=3)
    assert hybrid[0].evidence_id == strong
    assert hybrid[0].signals == ["vector"]
    assert all(h.signals for h in hybrid)
    keyword = store.search("revenue growth", q, k=3, mode="keyword")
    assert strong not in {h.evidence_id for h in keyword}


def test_hybrid_rewards_agreement(store: GraphStore) -> None:
    q = unit("query2")
    texts = [
        "Alpha text one.",
        "Beta text two.",
        "The lighthouse keeper of Nantes.",
        "Gamma text three.",
        "Delta text four.",
    ]
    sims = [0.80, 0.78, 0.74, 0.72, 0.70]
    vecs = np.stack([mix(q, unit(f"m{i}"), s) for i, s in enumerate(sims)])
    doc = make_doc("mix", texts)
    add(store, doc, vecs)
    vector_only = store.search("lighthouse keeper", q, k=5, mode="vector")
    assert vector_only[2].evidence_id == doc.passages[2].passage_id
    hybrid = store.search("lighthouse keeper", q, k=5)
    assert hybrid[0].evidence_id == doc.passages[2].passage_id
    assert set(hybrid[0].signals) == {"vector", "keyword"}


def test_graph_expansion_adds_bridge_passages(store: GraphStore) -> None:
    """Multi-hop: the query matches hop 1; hop 2 shares an entity with it and only that."""
    q = unit("who directed")
    hop1 = make_doc(
        "film",
        [
            "The film Night Train was directed by Ada Moreau.",
            "It premiered in Cannes.",
            "Critics praised its music.",
        ],
        entities={0: ["Night Train", "Ada Moreau"]},
    )
    hop2 = make_doc(
        "person",
        ["Ada Moreau was born in Lyon in 1931.", "She studied painting."],
        entities={0: ["Ada Moreau", "Lyon"]},
    )
    noise_texts = [f"Unrelated note number {i} about gardens." for i in range(20)]
    noise = make_doc("noise", noise_texts)
    add(
        store,
        hop1,
        np.stack([mix(q, unit("h1"), 0.9), mix(q, unit("h1b"), 0.2), mix(q, unit("h1c"), 0.1)]),
    )
    add(store, hop2, np.stack([mix(q, unit("h2"), 0.3), mix(q, unit("h2b"), 0.05)]))
    add(store, noise, np.stack([mix(q, unit(f"z{i}"), 0.4 + 0.005 * i) for i in range(20)]))
    bridge = hop2.passages[0].passage_id
    plain = store.search("film Night Train director", q, k=4)
    assert plain[0].evidence_id == hop1.passages[0].passage_id
    assert bridge not in {h.evidence_id for h in plain}
    expanded = store.search("film Night Train director", q, k=4, graph=True)
    assert expanded[0].evidence_id == hop1.passages[0].passage_id  # top hit kept in place
    by_id = {h.evidence_id: h for h in expanded}
    assert bridge in by_id and "graph" in by_id[bridge].signals
    # expansion respects the scope; neighbours of the top hit come with the graph signal
    scoped = store.search(
        "film Night Train director",
        q,
        k=3,
        graph=True,
        filters=SearchFilters(doc_ids=[hop1.document.doc_id]),
    )
    assert {h.doc_id for h in scoped} == {hop1.document.doc_id}
    assert scoped[0].evidence_id == hop1.passages[0].passage_id
    assert "graph" in scoped[2].signals  # the next passage of a seed


def test_graph_expansion_seeds_on_entities_the_query_names(store: GraphStore) -> None:
    """HippoRAG's seeding: the passage naming the query's entity enters the results though
    the vector list ranks twenty noise passages above it."""
    q = unit("bridge")
    named = make_doc(
        "river",
        ["The Marrow River flows through Ostmark.", "Its basin is dry."],
        entities={0: ["Marrow River", "Ostmark"]},
    )
    add(store, named, np.stack([mix(q, unit("r1"), 0.45), mix(q, unit("r2"), 0.05)]))
    for i in range(20):  # separate documents: no next-passage links among them
        noise = make_doc(f"noise {i}", [f"A bridge note number {i}."])
        add(store, noise, np.stack([mix(q, unit(f"w{i}"), 0.5 + 0.005 * i)]))
    river = named.passages[0].passage_id
    text = "bridge in the province of the Marrow River"
    without = {h.evidence_id for h in store.search(text, q, k=6, mode="vector", graph=True)}
    assert river not in without
    hits = store.search(
        text, q, k=6, mode="vector", graph=True, entities=[entity_id("Marrow River")]
    )
    found = {h.evidence_id: h for h in hits}
    assert river in found and "graph" in found[river].signals
    # an entity the library does not know changes nothing
    unknown = store.search(text, q, k=6, mode="vector", graph=True, entities=[entity_id("Nile")])
    assert {h.evidence_id for h in unknown} == without


def test_ann_index_and_optimize_keep_results(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    with GraphStore.open(
        tmp_path / "lib", vector_dim=DIM, ann_threshold=600, optimize_every=300
    ) as s:
        docs = []
        for d in range(8):
            texts = [f"document {d} passage {i} word{rng.integers(0, 50)}" for i in range(100)]
            doc = make_doc(f"d{d}", texts)
            v = rng.standard_normal((100, DIM)).astype(np.float32)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            add(s, doc, v)
            docs.append((doc, v))
        st = s.stats()
        assert st["index_ann"] == 1 and st["index_embedded"] == 800
        doc, v = docs[5]
        hits = s.search("", v[17], k=5, mode="vector")
        assert hits[0].evidence_id == doc.passages[17].passage_id
        hits = s.search("passage 17", v[17], k=5)
        assert hits[0].evidence_id == doc.passages[17].passage_id
        s.maintain(force=True)
        hits = s.search("", v[17], k=5, mode="vector")
        assert hits[0].evidence_id == doc.passages[17].passage_id
