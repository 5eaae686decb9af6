"""``GraphStore``: the one object the rest of Sourcebook uses to keep and search the library.

Layout under ``root``: ``catalog.sqlite`` (the source of truth, WAL) and ``index/`` (lancedb).

Crash safety. ``stage`` writes the index rows first, then the catalog rows with status
'indexing' in one transaction; ``mark_ready`` flips the status (and the superseded version's
``superseded_by``) in one transaction. At ``open`` every catalog document not 'ready' is deleted,
and so are index rows whose document is not a ready catalog document. So a ``kill -9`` at any
point leaves either nothing of the document or all of it, and the same add can run again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from graph.catalog import Catalog
from graph.errors import GraphError
from graph.index import ANN_THRESHOLD, PassageIndex, sql_in
from graph.schemas import (
    Collection,
    Document,
    IngestedDocument,
    Page,
    Passage,
    SearchFilters,
    SearchHit,
)
from graph.search import Searcher, SearchMode, TitlePrior
from graph.view import GraphView

logger = logging.getLogger(__name__)

_DocInfo = tuple[str, str, str | None]  # title, status, superseded_by


class GraphStore:
    """The library's store: SQLite catalog + lancedb index + networkx view, kept consistent.

    Why: ingestion, search and the research tools need one facade that hides the three stores
    and their commit order.
    Threading: one GraphStore per process. Writes (stage, set_vectors, mark_ready, remove,
    collections, maintain) must come from a single writer thread (the app's executor).
    Reads and searches may come from any thread at the same time: the catalog uses one
    connection guarded by a lock, lancedb tables allow concurrent reads, the view has its own
    lock, and the document cache below is replaced under a lock.
    """

    def __init__(self, root: Path, catalog: Catalog, index: PassageIndex, view: GraphView) -> None:
        self.root = root
        self._catalog = catalog
        self._index = index
        self._view = view
        self._searcher = Searcher(index, view)
        self._lock = threading.Lock()
        self._docs: dict[str, _DocInfo] = catalog.doc_summaries()
        self._title_prior: tuple[dict[str, _DocInfo], TitlePrior] | None = None
        self._closed = False

    # -- lifecycle --------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        root: Path,
        *,
        vector_dim: int,
        ann_threshold: int = ANN_THRESHOLD,
        optimize_every: int = 10_000,
    ) -> GraphStore:
        """Open (or create) the store, sweep unfinished versions and build the view."""
        t0 = time.perf_counter()
        root.mkdir(parents=True, exist_ok=True)
        catalog = Catalog(root / "catalog.sqlite")
        try:
            index = PassageIndex(
                root / "index",
                vector_dim,
                ann_threshold=ann_threshold,
                optimize_every=optimize_every,
            )
            stale = catalog.not_ready_doc_ids()
            ready = {
                d for d, (_t, status, _s) in catalog.doc_summaries().items() if status == "ready"
            }
            orphans = index.doc_ids() - ready
            if orphans:
                index.delete_docs(orphans)
            if stale:
                catalog.delete_documents(stale)
            if stale or orphans:
                logger.warning(
                    "swept %s unfinished document version(s) from the catalog and %s from "
                    "the index",
                    len(stale),
                    len(orphans),
                )
            view = cls._build_view(catalog)
        except BaseException:
            catalog.close()
            raise
        store = cls(root, catalog, index, view)
        logger.info(
            "opened the library at %s in %.2f s (%s)", root, time.perf_counter() - t0, view.stats()
        )
        return store

    @staticmethod
    def _build_view(catalog: Catalog) -> GraphView:
        view = GraphView()
        rows = catalog.passages_for_view()
        by_doc: dict[str, list[tuple[str, int, int | None, int | None]]] = {}
        for r in rows:
            by_doc.setdefault(r[0], []).append((r[1], r[2], r[3], r[4]))
        pages = catalog.all_page_indexes()
        for doc_id, passages in by_doc.items():
            view.add_document(doc_id, pages.get(doc_id, []), passages, [], [])
        view.add_links(catalog.mentions_for_view(), catalog.entity_edges())
        return view

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._searcher.close()
        self._catalog.close()

    def __enter__(self) -> GraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- versions ---------------------------------------------------------------------------

    def find_by_sha(self, content_sha256: str) -> Document | None:
        return self._catalog.find_by_sha(content_sha256)

    def latest_for_source(self, source_key: str) -> Document | None:
        return self._catalog.latest_for_source(source_key)

    def stage(self, doc: IngestedDocument) -> None:
        """Stage one document version; see :meth:`stage_many`."""
        self.stage_many([doc])

    def stage_many(self, docs: list[IngestedDocument]) -> None:
        """Index rows first (one lancedb write for the batch), then each document's catalog rows
        (status 'indexing') in one transaction each. Keyword search finds them on return."""
        for doc in docs:
            doc_id = doc.document.doc_id
            if doc_id in self._docs:
                raise GraphError(f"document {doc_id} is already in the library")
            for p in doc.passages:
                if p.doc_id != doc_id:
                    raise GraphError(f"passage {p.passage_id} belongs to {p.doc_id}, not {doc_id}")
        ids = [d.document.doc_id for d in docs]
        t0 = time.perf_counter()
        try:
            self._index.add_passages({d.document.doc_id: d.passages for d in docs})
            for doc in docs:
                self._catalog.insert_staged(doc)
        except BaseException as exc:
            try:
                self._catalog.delete_documents(ids)
                self._index.delete_docs(ids)
            except Exception:  # the sweep at next open removes them
                logger.exception("could not remove the rows of failed %s", ids)
            if isinstance(exc, GraphError | KeyboardInterrupt):
                raise
            raise GraphError(f"could not store {docs[0].document.title!r}: {exc}") from exc
        with self._lock:
            self._docs = {
                **self._docs,
                **{d.document.doc_id: (d.document.title, "indexing", None) for d in docs},
            }
        logger.info(
            "staged %s document(s), %s passages in %.2f s",
            len(docs),
            sum(len(d.passages) for d in docs),
            time.perf_counter() - t0,
        )

    def set_vectors(self, passage_ids: list[str], vectors: np.ndarray) -> None:
        """Store vectors (float32, L2-normalised) of staged passages; callable in batches."""
        try:
            self._index.set_vectors(passage_ids, vectors)
        except GraphError:
            raise
        except Exception as exc:
            raise GraphError(f"could not store {len(passage_ids)} vectors: {exc}") from exc

    def mark_ready(self, doc_id: str, *, supersedes: str | None = None) -> Document:
        self._catalog.mark_ready(doc_id, supersedes)
        with self._lock:
            docs = dict(self._docs)
            title = docs[doc_id][0] if doc_id in docs else ""
            docs[doc_id] = (title, "ready", None)
            if supersedes is not None and supersedes in docs:
                docs[supersedes] = (docs[supersedes][0], docs[supersedes][1], doc_id)
            self._docs = docs
        self._add_to_view(doc_id)
        try:
            self._index.maintain()
        except Exception:  # an index optimisation failing must not fail the add
            logger.exception("index maintenance failed")
        return self._catalog.get_document(doc_id)

    def _add_to_view(self, doc_id: str) -> None:
        rows = self._catalog.passages_for_view(doc_id)
        self._view.add_document(
            doc_id,
            self._catalog.page_indexes(doc_id),
            [(r[1], r[2], r[3], r[4]) for r in rows],
            self._catalog.mentions_for_view(doc_id),
            self._catalog.entity_edges(doc_id),
        )

    def remove(self, doc_id: str) -> None:
        self._catalog.get_document(doc_id)  # NotFoundInGraph
        passage_ids = self._catalog.passage_ids(doc_id)
        edges = self._catalog.entity_edges(doc_id)
        # catalog first: a crash after it leaves only index rows, which the next open sweeps
        self._catalog.delete_documents([doc_id])
        self._view.remove_document(doc_id, passage_ids, edges)
        self._index.delete_docs([doc_id])
        with self._lock:
            self._docs = self._catalog.doc_summaries()

    def maintain(self, force: bool = False, *, retrain: bool = False) -> dict[str, float]:
        """Compact the index, fold in new rows, build the ANN index when large enough
        (``retrain``: build it anew, e.g. after every vector was replaced)."""
        return self._index.maintain(force=force, retrain=retrain)

    # -- library facts ----------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """A fact recorded about the whole library (``None`` if never recorded)."""
        return self._catalog.get_meta(key)

    def set_meta(self, key: str, value: str) -> None:
        self._catalog.set_meta(key, value)

    def has_passages(self) -> bool:
        """Whether any document version (superseded ones included) has passages."""
        return self._catalog.has_passages()

    def vectors(self, passage_ids: list[str]) -> dict[str, np.ndarray]:
        """The stored vectors of some passages (those without one are absent)."""
        return self._index.vectors_for(passage_ids)

    # -- reading ----------------------------------------------------------------------------

    def list_documents(self, *, include_superseded: bool = True) -> list[Document]:
        return self._catalog.list_documents(include_superseded)

    def get_document(self, doc_id: str) -> Document:
        return self._catalog.get_document(doc_id)

    def get_document_text(self, doc_id: str) -> str:
        return self._catalog.document_text(doc_id)

    def get_pages(self, doc_id: str) -> list[Page]:
        return self._catalog.get_pages(doc_id)

    def get_passage(self, passage_id: str) -> Passage:
        return self._catalog.get_passage(passage_id)

    def get_document_passages(self, doc_id: str, *, full: bool = True) -> list[Passage]:
        """A document's passages in order; without words and spans unless ``full``."""
        return self._catalog.get_document_passages(doc_id, full=full)

    def neighbours(self, passage_id: str) -> dict[str, str | None]:
        return self._catalog.neighbours(passage_id)

    # -- collections ------------------------------------------------------------------------

    def create_collection(self, name: str) -> None:
        self._catalog.create_collection(name)

    def add_to_collection(self, name: str, doc_ids: list[str]) -> None:
        self._catalog.add_to_collection(name, doc_ids)

    def remove_from_collection(self, name: str, doc_ids: list[str]) -> None:
        self._catalog.remove_from_collection(name, doc_ids)

    def delete_collection(self, name: str) -> None:
        self._catalog.delete_collection(name)

    def list_collections(self) -> list[Collection]:
        return self._catalog.list_collections()

    # -- entities and graph -----------------------------------------------------------------

    def find_entities(self, query: str, limit: int = 20) -> list[tuple[str, str, str, int]]:
        """(entity_id, name, type, passage count) whose name contains ``query``."""
        return self._catalog.find_entities(query, limit)

    def passages_for_entity(self, entity_id: str) -> list[str]:
        return self._catalog.passages_for_entity(entity_id)

    def explore(self, passage_id: str, limit: int = 10) -> list[str]:
        """Passages near ``passage_id`` in the graph (neighbours, entity-sharing), ranked by
        personalized PageRank; superseded versions are left out."""
        self._catalog.get_passage(passage_id)  # NotFoundInGraph
        ranked = self._view.explore(passage_id, 4 * limit)
        meta = self._catalog.passage_meta(ranked)
        docs = self._docs
        out = [
            p for p in ranked if p in meta and docs.get(meta[p].doc_id, ("", "", None))[2] is None
        ]
        return out[:limit]

    # -- search -----------------------------------------------------------------------------

    def _scope(self, filters: SearchFilters) -> tuple[str | None, set[str] | None, set[str]]:
        """(lancedb where clause, allowed doc ids or None for all, excluded doc ids)."""
        docs = self._docs
        allowed: set[str] | None = None
        if filters.doc_ids is not None:
            allowed = set(filters.doc_ids)
        if filters.collections is not None:
            in_cols = self._catalog.collection_doc_ids(filters.collections)
            allowed = in_cols if allowed is None else allowed & in_cols
        excluded: set[str] = set()
        if not filters.include_superseded:
            excluded = {d for d, (_t, _s, sup) in docs.items() if sup is not None}
        if allowed is not None:
            allowed -= excluded
            return (sql_in("doc_id", sorted(allowed)) if allowed else "false"), allowed, excluded
        if excluded:
            return sql_in("doc_id", sorted(excluded), negate=True), None, excluded
        return None, None, excluded

    def search(
        self,
        text: str,
        vector: np.ndarray | None,
        *,
        k: int = 10,
        filters: SearchFilters | None = None,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
        graph: bool = False,
        entities: Sequence[str] = (),
    ) -> list[SearchHit]:
        """Top ``k`` passages for a query (see :mod:`graph.search` for the ranking).

        ``entities`` are the ids of entities the query names; graph expansion seeds on them too.
        """
        if k <= 0:
            return []
        if mode == "vector" and vector is None:
            raise GraphError("a vector search needs a query vector")
        filters = filters or SearchFilters()
        where, allowed, excluded = self._scope(filters)
        if allowed is not None and not allowed:
            return []
        search_mode: SearchMode = mode

        def doc_allowed(doc_id: str) -> bool:
            if doc_id in excluded:
                return False
            return allowed is None or doc_id in allowed

        try:
            top, meta = self._searcher.rank(
                text,
                vector,
                k=k,
                where=where,
                mode=search_mode,
                graph=graph,
                passage_meta=self._catalog.passage_meta,
                doc_allowed=doc_allowed,
                entities=entities,
                title_prior=self._titles().weights(text),
                doc_of=self._catalog.doc_ids_of,
            )
        except GraphError:
            raise
        except Exception as exc:
            raise GraphError(f"search failed: {exc}") from exc
        docs = self._docs
        hits: list[SearchHit] = []
        for s in top:
            p = meta[s.passage_id]
            title, _status, sup = docs.get(p.doc_id, ("", "", None))
            hits.append(self._searcher.to_hit(s, p, title, sup is not None, text))
        return hits

    def _titles(self) -> TitlePrior:
        """The title prior of the current documents (rebuilt when the document set changed)."""
        docs = self._docs
        cached = self._title_prior
        if cached is None or cached[0] is not docs:
            cached = (docs, TitlePrior({d: info[0] for d, info in docs.items()}))
            self._title_prior = cached
        return cached[1]

    def stats(self) -> dict[str, int]:
        out = self._catalog.stats()
        out["index_rows"] = self._index.count()
        out["index_embedded"] = self._index.count("embedded")
        out["index_ann"] = int(self._index.has_ann_index())
        out.update(self._view.stats())
        return out
