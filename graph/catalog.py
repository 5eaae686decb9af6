"""The SQLite catalog: the source of truth for documents, pages, passages, entities, collections.

The lancedb index and the networkx view are derived from it. The catalog runs in WAL mode with
foreign keys on; deleting a document cascades to its pages, passages, spans, mentions, co-mention
edges and collection memberships.

Passage words are stored packed: one little-endian record per word (page index, start, end as
int32, the rectangle as four float64), 44 bytes a word. Lists (heading path, problems) are JSON.
The tables are in :mod:`graph.catalog_schema`.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from itertools import combinations
from pathlib import Path
from typing import Any

from graph.catalog_schema import DOC_COLS, PASSAGE_COLS, SCHEMA, SCHEMA_VERSION
from graph.errors import GraphError, NotFoundInGraph
from graph.schemas import Collection, Document, IngestedDocument, Page, Passage, Span
from graph.wordpack import pack_words, unpack_words

logger = logging.getLogger(__name__)


def _doc_from_row(row: sqlite3.Row) -> Document:
    return Document(
        doc_id=row["doc_id"],
        source_key=row["source_key"],
        source_uri=row["source_uri"],
        title=row["title"],
        kind=row["kind"],
        content_sha256=row["content_sha256"],
        external_id=row["external_id"],
        version=row["version"],
        status=row["status"],
        superseded_by=row["superseded_by"],
        page_count=row["page_count"],
        passage_count=row["passage_count"],
        problems=json.loads(row["problems"]),
        added_at=datetime.fromisoformat(row["added_at"]),
        byte_size=row["byte_size"],
    )


def _placeholders(n: int) -> str:
    return ",".join("?" * n)


class Catalog:
    """SQLite access for the graph store.

    Why: one place owns the schema, the transactions and the row <-> record mapping.
    Threading: one connection opened with ``check_same_thread=False`` and guarded by a
    re-entrant lock, so the single writer thread and any number of search threads may call it;
    every method holds the lock for its whole statement or transaction. Searches touch the
    catalog only for small keyed look-ups, so the lock is not a bottleneck.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.RLock()
        try:
            self._conn = sqlite3.connect(
                str(path), check_same_thread=False, isolation_level=None, timeout=30.0
            )
            self._conn.row_factory = sqlite3.Row
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.Error as exc:
            raise GraphError(f"cannot open the catalog {path}: {exc}") from exc

    # -- plumbing ---------------------------------------------------------------------------

    def _migrate(self) -> None:
        with self._lock:
            self._conn.executescript(SCHEMA)  # idempotent: CREATE ... IF NOT EXISTS
        with self.transaction() as c:
            row = c.execute("SELECT version FROM schema_version").fetchone()
            if row is None:
                c.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            elif row[0] > SCHEMA_VERSION:
                raise GraphError(
                    f"the catalog {self.path} has schema version {row[0]}, newer than this "
                    f"program's {SCHEMA_VERSION}; update Sourcebook"
                )

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run statements in one IMMEDIATE transaction (rolled back on any exception)."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _query(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise GraphError(f"catalog query failed: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- library facts ----------------------------------------------------------------------
    # ``library_meta`` holds small facts about the whole library (e.g. which embedder made its
    # vectors). Added without a schema version bump: older programs ignore the table.

    def get_meta(self, key: str) -> str | None:
        rows = self._query("SELECT value FROM library_meta WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        try:
            with self.transaction() as c:
                c.execute(
                    "INSERT INTO library_meta (key, value) VALUES (?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (key, value),
                )
        except sqlite3.Error as exc:
            raise GraphError(f"could not record {key!r} in the catalog: {exc}") from exc

    # -- writes -----------------------------------------------------------------------------

    def insert_staged(self, ingested: IngestedDocument) -> None:
        """Insert a whole document version with status 'indexing', in one transaction."""
        d = ingested.document
        doc_id = d.doc_id
        edges: Counter[tuple[str, str]] = Counter()
        by_passage: dict[str, set[str]] = {}
        for m in ingested.mentions:
            by_passage.setdefault(m.passage_id, set()).add(m.entity_id)
        for ents in by_passage.values():
            for a, b in combinations(sorted(ents), 2):
                edges[(a, b)] += 1
        entities = {m.entity_id: (m.name, m.type) for m in ingested.mentions}
        with self.transaction() as c:
            c.execute(
                f"INSERT INTO documents ({DOC_COLS}) VALUES ({_placeholders(15)})",
                (
                    doc_id,
                    d.source_key,
                    d.source_uri,
                    d.title,
                    d.kind,
                    d.content_sha256,
                    d.external_id,
                    d.version,
                    "indexing",
                    None,
                    d.page_count or len(ingested.pages),
                    len(ingested.passages),
                    json.dumps(d.problems),
                    d.added_at.isoformat(),
                    d.byte_size,
                ),
            )
            c.execute(
                "INSERT INTO document_texts (doc_id, text_z) VALUES (?, ?)",
                (doc_id, zlib.compress(ingested.text.encode(), 6)),
            )
            c.executemany(
                "INSERT INTO pages VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (doc_id, p.page_index, p.width, p.height, p.char_count, int(p.has_text_layer))
                    for p in ingested.pages
                ],
            )
            c.executemany(
                f"INSERT INTO passages ({PASSAGE_COLS}) VALUES ({_placeholders(11)})",
                [
                    (
                        p.passage_id,
                        doc_id,
                        p.ordinal,
                        p.text,
                        json.dumps(p.heading_path),
                        p.page_start,
                        p.page_end,
                        p.char_start,
                        p.char_end,
                        p.token_count,
                        p.packed_words if p.packed_words is not None else pack_words(p.words),
                    )
                    for p in ingested.passages
                ],
            )
            c.executemany(
                'INSERT INTO spans (span_id, passage_id, start, "end") VALUES (?, ?, ?, ?)',
                [
                    (s.span_id, s.passage_id, s.start, s.end)
                    for p in ingested.passages
                    for s in p.spans
                ],
            )
            c.executemany(
                "INSERT OR IGNORE INTO entities (entity_id, name, type) VALUES (?, ?, ?)",
                [(eid, name, type_) for eid, (name, type_) in entities.items()],
            )
            c.executemany(
                'INSERT OR IGNORE INTO mentions (entity_id, passage_id, span_id, start, "end") '
                "VALUES (?, ?, ?, ?, ?)",
                [(m.entity_id, m.passage_id, m.span_id, m.start, m.end) for m in ingested.mentions],
            )
            c.executemany(
                "INSERT INTO entity_edges (doc_id, a, b, weight) VALUES (?, ?, ?, ?)",
                [(doc_id, a, b, w) for (a, b), w in edges.items()],
            )

    def mark_ready(self, doc_id: str, supersedes: str | None) -> None:
        with self.transaction() as c:
            cur = c.execute("UPDATE documents SET status = 'ready' WHERE doc_id = ?", (doc_id,))
            if cur.rowcount == 0:
                raise NotFoundInGraph(f"no document {doc_id}")
            if supersedes is not None:
                cur = c.execute(
                    "UPDATE documents SET superseded_by = ? WHERE doc_id = ?",
                    (doc_id, supersedes),
                )
                if cur.rowcount == 0:
                    raise NotFoundInGraph(f"no document {supersedes} to supersede")

    def delete_documents(self, doc_ids: list[str]) -> None:
        if not doc_ids:
            return
        with self.transaction() as c:
            c.execute(
                f"DELETE FROM documents WHERE doc_id IN ({_placeholders(len(doc_ids))})",
                doc_ids,
            )
            c.execute(
                "DELETE FROM entities WHERE entity_id NOT IN (SELECT entity_id FROM mentions)"
            )

    def not_ready_doc_ids(self) -> list[str]:
        return [r[0] for r in self._query("SELECT doc_id FROM documents WHERE status != 'ready'")]

    # -- documents --------------------------------------------------------------------------

    def get_document(self, doc_id: str) -> Document:
        rows = self._query(f"SELECT {DOC_COLS} FROM documents WHERE doc_id = ?", (doc_id,))
        if not rows:
            raise NotFoundInGraph(f"no document {doc_id}")
        return _doc_from_row(rows[0])

    def find_by_sha(self, sha: str) -> Document | None:
        rows = self._query(
            f"SELECT {DOC_COLS} FROM documents WHERE content_sha256 = ? LIMIT 1", (sha,)
        )
        return _doc_from_row(rows[0]) if rows else None

    def latest_for_source(self, source_key: str) -> Document | None:
        rows = self._query(
            f"SELECT {DOC_COLS} FROM documents WHERE source_key = ? AND status = 'ready' "
            "AND superseded_by IS NULL ORDER BY version DESC, added_at DESC LIMIT 1",
            (source_key,),
        )
        return _doc_from_row(rows[0]) if rows else None

    def list_documents(self, include_superseded: bool) -> list[Document]:
        where = "" if include_superseded else "WHERE superseded_by IS NULL"
        rows = self._query(f"SELECT {DOC_COLS} FROM documents {where} ORDER BY added_at, doc_id")
        return [_doc_from_row(r) for r in rows]

    def document_text(self, doc_id: str) -> str:
        rows = self._query("SELECT text_z FROM document_texts WHERE doc_id = ?", (doc_id,))
        if not rows:
            raise NotFoundInGraph(f"no document {doc_id}")
        return zlib.decompress(rows[0][0]).decode()

    def doc_summaries(self) -> dict[str, tuple[str, str, str | None]]:
        """doc_id -> (title, status, superseded_by) for every document."""
        rows = self._query("SELECT doc_id, title, status, superseded_by FROM documents")
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    def get_pages(self, doc_id: str) -> list[Page]:
        self.get_document(doc_id)
        rows = self._query(
            "SELECT page_index, width, height, char_count, has_text_layer FROM pages "
            "WHERE doc_id = ? ORDER BY page_index",
            (doc_id,),
        )
        return [
            Page(
                page_index=r[0], width=r[1], height=r[2], char_count=r[3], has_text_layer=bool(r[4])
            )
            for r in rows
        ]

    # -- passages ---------------------------------------------------------------------------

    def _spans_for(self, passage_ids: list[str]) -> dict[str, list[Span]]:
        out: dict[str, list[Span]] = {}
        for chunk in _chunks(passage_ids, 500):
            rows = self._query(
                f'SELECT span_id, passage_id, start, "end" FROM spans WHERE passage_id IN '
                f"({_placeholders(len(chunk))}) ORDER BY passage_id, start",
                chunk,
            )
            for r in rows:
                out.setdefault(r[1], []).append(
                    Span(span_id=r[0], passage_id=r[1], start=r[2], end=r[3])
                )
        return out

    @staticmethod
    def _passage_from_row(row: sqlite3.Row, spans: list[Span], full: bool) -> Passage:
        return Passage(
            passage_id=row["passage_id"],
            doc_id=row["doc_id"],
            ordinal=row["ordinal"],
            text=row["text"],
            heading_path=json.loads(row["heading_path"]),
            page_start=row["page_start"],
            page_end=row["page_end"],
            char_start=row["char_start"],
            char_end=row["char_end"],
            token_count=row["token_count"],
            words=unpack_words(row["words"]) if full else [],
            spans=spans,
        )

    def get_passage(self, passage_id: str) -> Passage:
        rows = self._query(
            f"SELECT {PASSAGE_COLS} FROM passages WHERE passage_id = ?", (passage_id,)
        )
        if not rows:
            raise NotFoundInGraph(f"no passage {passage_id}")
        spans = self._spans_for([passage_id]).get(passage_id, [])
        return self._passage_from_row(rows[0], spans, full=True)

    def get_document_passages(self, doc_id: str, *, full: bool = True) -> list[Passage]:
        """A document's passages in order; without words and spans unless ``full``."""
        self.get_document(doc_id)
        cols = PASSAGE_COLS if full else PASSAGE_COLS.replace("words", "x'' AS words")
        rows = self._query(
            f"SELECT {cols} FROM passages WHERE doc_id = ? ORDER BY ordinal", (doc_id,)
        )
        spans = self._spans_for([r["passage_id"] for r in rows]) if full else {}
        return [self._passage_from_row(r, spans.get(r["passage_id"], []), full) for r in rows]

    def passage_meta(self, passage_ids: list[str]) -> dict[str, Passage]:
        """Passages by id without words and spans (for search hits)."""
        out: dict[str, Passage] = {}
        for chunk in _chunks(passage_ids, 500):
            rows = self._query(
                f"SELECT passage_id, doc_id, ordinal, text, heading_path, page_start, page_end, "
                f"char_start, char_end, token_count, x'' AS words FROM passages "
                f"WHERE passage_id IN ({_placeholders(len(chunk))})",
                chunk,
            )
            for r in rows:
                out[r["passage_id"]] = self._passage_from_row(r, [], full=False)
        return out

    def doc_ids_of(self, passage_ids: list[str]) -> dict[str, str]:
        """passage_id -> doc_id for the passages that exist."""
        out: dict[str, str] = {}
        for chunk in _chunks(passage_ids, 500):
            rows = self._query(
                f"SELECT passage_id, doc_id FROM passages "
                f"WHERE passage_id IN ({_placeholders(len(chunk))})",
                chunk,
            )
            out.update((r[0], r[1]) for r in rows)
        return out

    def neighbours(self, passage_id: str) -> dict[str, str | None]:
        rows = self._query(
            "SELECT doc_id, ordinal FROM passages WHERE passage_id = ?", (passage_id,)
        )
        if not rows:
            raise NotFoundInGraph(f"no passage {passage_id}")
        doc_id, ordinal = rows[0][0], rows[0][1]
        found = {
            r[1]: r[0]
            for r in self._query(
                "SELECT passage_id, ordinal FROM passages WHERE doc_id = ? AND ordinal IN (?, ?)",
                (doc_id, ordinal - 1, ordinal + 1),
            )
        }
        return {
            "previous": found.get(ordinal - 1),
            "next": found.get(ordinal + 1),
            "parent": doc_id,
        }

    def passages_for_view(self, doc_id: str | None = None) -> list[sqlite3.Row]:
        """(doc_id, passage_id, ordinal, page_start, page_end) of ready documents."""
        sql = (
            "SELECT p.doc_id, p.passage_id, p.ordinal, p.page_start, p.page_end FROM passages p "
            "JOIN documents d ON d.doc_id = p.doc_id WHERE d.status = 'ready'"
        )
        if doc_id is None:
            return self._query(sql + " ORDER BY p.doc_id, p.ordinal")
        return self._query(sql + " AND p.doc_id = ? ORDER BY p.ordinal", (doc_id,))

    def mentions_for_view(self, doc_id: str | None = None) -> list[tuple[str, str, int]]:
        """(passage_id, entity_id, mention count) for ready documents."""
        sql = (
            "SELECT m.passage_id, m.entity_id, COUNT(*) FROM mentions m "
            "JOIN passages p ON p.passage_id = m.passage_id "
            "JOIN documents d ON d.doc_id = p.doc_id WHERE d.status = 'ready'"
        )
        params: tuple[str, ...] = ()
        if doc_id is not None:
            sql += " AND d.doc_id = ?"
            params = (doc_id,)
        return [(r[0], r[1], r[2]) for r in self._query(sql + " GROUP BY 1, 2", params)]

    def entity_edges(self, doc_id: str | None = None) -> list[tuple[str, str, int]]:
        """Co-mention edges (a, b, weight), summed over ready documents (or of one doc)."""
        if doc_id is not None:
            rows = self._query("SELECT a, b, weight FROM entity_edges WHERE doc_id = ?", (doc_id,))
        else:
            rows = self._query(
                "SELECT e.a, e.b, SUM(e.weight) FROM entity_edges e JOIN documents d "
                "ON d.doc_id = e.doc_id WHERE d.status = 'ready' GROUP BY e.a, e.b"
            )
        return [(r[0], r[1], int(r[2])) for r in rows]

    def has_passages(self) -> bool:
        return bool(self._query("SELECT 1 FROM passages LIMIT 1"))

    def passage_ids(self, doc_id: str) -> list[str]:
        return [
            r[0]
            for r in self._query(
                "SELECT passage_id FROM passages WHERE doc_id = ? ORDER BY ordinal", (doc_id,)
            )
        ]

    def all_page_indexes(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for r in self._query("SELECT doc_id, page_index FROM pages ORDER BY doc_id, page_index"):
            out.setdefault(r[0], []).append(r[1])
        return out

    def page_indexes(self, doc_id: str) -> list[int]:
        return [
            r[0]
            for r in self._query(
                "SELECT page_index FROM pages WHERE doc_id = ? ORDER BY page_index", (doc_id,)
            )
        ]

    # -- entities ---------------------------------------------------------------------------

    def find_entities(self, query: str, limit: int) -> list[tuple[str, str, str, int]]:
        pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self._query(
            "SELECT e.entity_id, e.name, e.type, COUNT(DISTINCT m.passage_id) AS n "
            "FROM entities e JOIN mentions m ON m.entity_id = e.entity_id "
            "WHERE e.name LIKE ? ESCAPE '\\' GROUP BY e.entity_id "
            "ORDER BY (lower(e.name) = lower(?)) DESC, n DESC, e.name LIMIT ?",
            (pattern, query, limit),
        )
        return [(r[0], r[1], r[2], int(r[3])) for r in rows]

    def passages_for_entity(self, entity_id: str) -> list[str]:
        rows = self._query(
            "SELECT DISTINCT m.passage_id FROM mentions m JOIN passages p "
            "ON p.passage_id = m.passage_id WHERE m.entity_id = ? ORDER BY p.doc_id, p.ordinal",
            (entity_id,),
        )
        if not rows and not self._query("SELECT 1 FROM entities WHERE entity_id = ?", (entity_id,)):
            raise NotFoundInGraph(f"no entity {entity_id}")
        return [r[0] for r in rows]

    # -- collections ------------------------------------------------------------------------

    def create_collection(self, name: str) -> None:
        with self.transaction() as c:
            c.execute(
                "INSERT OR IGNORE INTO collections (name, created_at) VALUES (?, ?)",
                (name, datetime.now().astimezone().isoformat()),
            )

    def _require_collection(self, c: sqlite3.Connection, name: str) -> None:
        if c.execute("SELECT 1 FROM collections WHERE name = ?", (name,)).fetchone() is None:
            raise NotFoundInGraph(f"no collection {name!r}")

    def add_to_collection(self, name: str, doc_ids: list[str]) -> None:
        with self.transaction() as c:
            self._require_collection(c, name)
            for doc_id in doc_ids:
                if (
                    c.execute("SELECT 1 FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
                    is None
                ):
                    raise NotFoundInGraph(f"no document {doc_id}")
                c.execute(
                    "INSERT OR IGNORE INTO collection_members (name, doc_id) VALUES (?, ?)",
                    (name, doc_id),
                )

    def remove_from_collection(self, name: str, doc_ids: list[str]) -> None:
        with self.transaction() as c:
            self._require_collection(c, name)
            c.executemany(
                "DELETE FROM collection_members WHERE name = ? AND doc_id = ?",
                [(name, d) for d in doc_ids],
            )

    def delete_collection(self, name: str) -> None:
        with self.transaction() as c:
            self._require_collection(c, name)
            c.execute("DELETE FROM collections WHERE name = ?", (name,))

    def list_collections(self) -> list[Collection]:
        rows = self._query(
            "SELECT c.name, m.doc_id FROM collections c LEFT JOIN collection_members m "
            "ON m.name = c.name ORDER BY c.name, m.doc_id"
        )
        out: dict[str, Collection] = {}
        for r in rows:
            col = out.setdefault(r[0], Collection(name=r[0]))
            if r[1] is not None:
                col.doc_ids.append(r[1])
        return list(out.values())

    def collection_doc_ids(self, names: list[str]) -> set[str]:
        known = {
            r[0]
            for r in self._query(
                f"SELECT name FROM collections WHERE name IN ({_placeholders(len(names))})", names
            )
        }
        missing = [n for n in names if n not in known]
        if missing:
            raise NotFoundInGraph(f"no collection {missing[0]!r}")
        rows = self._query(
            f"SELECT DISTINCT doc_id FROM collection_members WHERE name IN "
            f"({_placeholders(len(names))})",
            names,
        )
        return {r[0] for r in rows}

    # -- stats ------------------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for key, sql in (
            ("documents", "SELECT COUNT(*) FROM documents"),
            ("documents_ready", "SELECT COUNT(*) FROM documents WHERE status = 'ready'"),
            (
                "documents_superseded",
                "SELECT COUNT(*) FROM documents WHERE superseded_by IS NOT NULL",
            ),
            ("pages", "SELECT COUNT(*) FROM pages"),
            ("passages", "SELECT COUNT(*) FROM passages"),
            ("spans", "SELECT COUNT(*) FROM spans"),
            ("entities", "SELECT COUNT(*) FROM entities"),
            ("mentions", "SELECT COUNT(*) FROM mentions"),
            ("entity_edges", "SELECT COUNT(*) FROM entity_edges"),
            ("collections", "SELECT COUNT(*) FROM collections"),
        ):
            out[key] = int(self._query(sql)[0][0])
        return out


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
