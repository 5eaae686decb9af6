"""The lancedb index: one table ``passages`` with text, vector and filter columns.

Facts this module relies on (checked against lancedb 0.40):
- the native full-text index (``create_index("text", config=FTS())``) also searches rows added
  after it was built (they are scanned flat until ``optimize()`` folds them in), so keyword
  search works the moment ``stage`` has appended a document's rows;
- rows whose ``vector`` is null are skipped by vector search, so staged-but-not-embedded rows
  need no placeholder vector; an ``embedded`` bool column is kept for counting and filters;
- ``merge_insert("passage_id")`` with only (passage_id, embedded, vector) updates those columns.

Vector search is brute force until ``ann_threshold`` embedded rows; then an ANN index (HNSW
over scalar-quantised vectors, one graph) is built once, folded forward by ``optimize()``, and
rebuilt when the table has doubled or the index would get more than ``MAX_ANN_SEGMENTS``
segments: ``optimize()`` indexes the rows added since the last one as a new segment (lancedb
0.40 has no option to merge them), and a query walks every segment's graph. At 100k passages an
index of six segments answered in 11.8 ms p50, one of a single segment in 5.9 ms, two 7.4, three
8.2 (top-50 query, same process, load ~4.5 on 2 cores; bench/search_latency.py's library). So
that a run of small adds (``Library.add`` forces a ``maintain`` after each) cannot rebuild the
whole index every other time, the rebuild waits until the index has grown by
``ANN_REBUILD_GROWTH`` since it was built, or it has ``ANN_MAX_SEGMENTS_HARD`` segments.

The ANN index uses the ``dot`` metric, not ``cosine``: vectors are stored L2-normalised, where
the two agree, and a ``cosine`` index reports (without a refine step, which cost +8 ms p50 at
100k) the squared L2 distance of the normalised vectors, 2 x the cosine distance (lancedb issue
#3530), which skewed the dense scores hybrid fusion normalises (MuSiQue hybrid recall@5 .67 ->
.51 with a cosine index); a ``dot`` index reports 1 - dot. A cosine index left by an older
version is queried with ``refine_factor(1)`` (exact distances) until ``maintain`` rebuilds it.

Searches return lancedb row ids, not ``passage_id``s: fetching a string column for the 50
candidates of each list cost 1.3-4 ms per list at 100k passages, more than half of a keyword
query. An in-memory map (row id -> passage_id, one sorted array, ~7 MB per 100k passages) turns
them back into ids. Row ids are row addresses here, and they change when rows are rewritten
(``set_vectors`` merges, ``optimize`` compacts), so the map is only trusted for the table version
it was read at. All writes go through this object, which counts them like a sequence lock (odd:
a write is in progress); a search uses the map only if the count equals the map's before and
after its query, and otherwise fetches ``passage_id``s as before and has the map re-read in the
background. So a stale map is never used, and a library being written to is searched as fast
as before.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.background_loop import LOOP
from lancedb.index import FTS, BTree, HnswSq

from graph.errors import GraphError
from graph.schemas import Passage

logger = logging.getLogger(__name__)

TABLE = "passages"
ANN_METRIC: Literal["dot"] = "dot"
# A flat scan reads and scores every vector each query: at 10k passages 16 ms p50 against 6 for
# the HNSW index (vector top-50, same process, load ~5 on 2 cores), and it grows linearly.
ANN_THRESHOLD = 10_000
MAX_ANN_SEGMENTS = 2
ANN_REBUILD_GROWTH = 0.1
ANN_MAX_SEGMENTS_HARD = 8


@dataclass(frozen=True)
class RowMap:
    """lancedb row id -> passage_id, valid for the write count ``gen`` it was read at."""

    gen: int
    rowids: np.ndarray  # sorted uint64
    passage_ids: np.ndarray  # object array of str, in the order of ``rowids``

    def lookup(self, rowids: np.ndarray) -> list[str] | None:
        """The passage ids of some row ids, or None if one is unknown (never guess)."""
        if not len(self.rowids):
            return None if len(rowids) else []
        at = np.searchsorted(self.rowids, rowids)
        at = np.minimum(at, len(self.rowids) - 1)
        if not np.array_equal(self.rowids[at], rowids):
            return None
        ids: list[str] = self.passage_ids[at].tolist()
        return ids


def _batches(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str], negate: bool = False) -> str:
    vals = ",".join(sql_str(v) for v in values)
    return f"{column} {'NOT IN' if negate else 'IN'} ({vals})"


class PassageIndex:
    """lancedb table of passages: full-text and vector search with doc_id prefilters.

    Why: the catalog is the source of truth; this is the derived, rebuildable search index.
    Threading: writes (add, set_vectors, delete, maintain) come from the store's single writer
    thread; searches may run concurrently from other threads (lancedb tables are safe for
    concurrent reads; the small bookkeeping here is guarded by a lock).
    """

    def __init__(
        self,
        path: Path,
        vector_dim: int,
        *,
        ann_threshold: int = ANN_THRESHOLD,
        optimize_every: int = 10_000,
    ) -> None:
        self.vector_dim = vector_dim
        self.ann_threshold = ann_threshold
        self.optimize_every = optimize_every
        self._lock = threading.Lock()
        self._rows_since_optimize = 0
        # writes so far, counted twice (odd while one is in progress); see the module docstring
        self._gen = 0
        self._rowmap: RowMap | None = None
        self._rowmap_reading = False
        self._rowmap_thread: threading.Thread | None = None
        self._closed = False
        self.use_rowmap = True  # False: always fetch passage_ids (bench/search_latency.py)
        self._schema = pa.schema(
            [
                pa.field("passage_id", pa.string(), nullable=False),
                pa.field("doc_id", pa.string(), nullable=False),
                pa.field("ordinal", pa.int32(), nullable=False),
                pa.field("text", pa.string(), nullable=False),
                pa.field("embedded", pa.bool_(), nullable=False),
                pa.field("vector", pa.list_(pa.float32(), vector_dim), nullable=True),
            ]
        )
        try:
            path.mkdir(parents=True, exist_ok=True)
            self._db = lancedb.connect(str(path))
            if TABLE in self._db.list_tables().tables:
                self._table = self._db.open_table(TABLE)
                field = self._table.schema.field("vector")
                dim = field.type.list_size
                if dim != vector_dim:
                    raise GraphError(
                        f"the index at {path} holds {dim}-dimensional vectors but the embedder "
                        f"gives {vector_dim}: remove the index folder to rebuild it"
                    )
            else:
                self._table = self._db.create_table(TABLE, schema=self._schema)
            # the AsyncTable the sync one wraps (bound to lancedb's background loop ``LOOP``)
            self._atable: Any = cast(Any, self._table)._table
            names = {i.name for i in self._table.list_indices()}
            if "text_idx" not in names:
                self._table.create_index("text", config=FTS(), name="text_idx")
            for col in ("passage_id", "doc_id"):
                if f"{col}_idx" not in names:
                    self._table.create_index(col, config=BTree(), name=f"{col}_idx")
            self._read_ann_stats()
            self._ann_built_rows = self._ann_rows
        except GraphError:
            raise
        except Exception as exc:  # lancedb raises ValueError/RuntimeError/OSError
            raise GraphError(f"cannot open the index {path}: {exc}") from exc

    # -- bookkeeping ------------------------------------------------------------------------

    def _read_ann_stats(self) -> int:
        """Refresh what is known of the ANN index; returns its rows not yet indexed."""
        self._ann_rows, self._ann_segments, self._ann_metric, unindexed = 0, 0, None, 0
        for info in self._table.list_indices():
            if info.name == "vector_idx":
                stats = self._table.index_stats("vector_idx")
                if stats is not None:
                    self._ann_rows = stats.num_indexed_rows
                    self._ann_segments = stats.num_indices or 1
                    self._ann_metric = stats.distance_type
                    unindexed = stats.num_unindexed_rows
        return unindexed

    def ann_segments(self) -> int:
        """How many segments the ANN index has (0: no index)."""
        return self._ann_segments

    def has_ann_index(self) -> bool:
        return self._ann_rows > 0

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Wrap every write to the table: row ids read before it may not hold after it."""
        with self._lock:
            self._gen += 1
        try:
            yield
        finally:
            with self._lock:
                self._gen += 1

    def _rowmap_now(self) -> RowMap | None:
        """The row map if it holds for the table as it is, else None (and a re-read starts)."""
        if not self.use_rowmap:
            return None
        rowmap = self._rowmap
        if rowmap is not None and rowmap.gen == self._gen:
            return rowmap
        self._start_rowmap_read()
        return None

    def _start_rowmap_read(self) -> None:
        with self._lock:
            if self._closed or self._rowmap_reading or self._gen % 2:
                return
            self._rowmap_reading = True
            self._rowmap_thread = threading.Thread(
                target=self._read_rowmap, name="rowmap", daemon=True
            )
            self._rowmap_thread.start()

    def close(self, timeout: float = 60.0) -> None:
        """Start no more background reads and wait for the one running. A lancedb query still
        running in a daemon thread when the interpreter finalises aborts the process (lancedb's
        native threads hand the result back to a Python that is shutting down: "Fatal Python
        error: PyGILState_Release", seen about once in 70 CLI searches)."""
        with self._lock:
            self._closed = True
            thread = self._rowmap_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                logger.warning("the row map read did not finish within %.0f s", timeout)

    def _read_rowmap(self) -> None:
        try:
            gen = self._gen
            tab = self._table.search().select(["passage_id"]).with_row_id(True).limit(None)
            data = tab.to_arrow()
            rowids = data.column("_rowid").to_numpy()
            order = np.argsort(rowids, kind="stable")
            pids = np.array(data.column("passage_id").to_pylist(), dtype=object)
            with self._lock:
                if self._gen == gen and gen % 2 == 0:
                    self._rowmap = RowMap(gen, rowids[order], pids[order])
        except Exception:  # a closed or removed library: searches keep the slow path
            logger.debug("could not read the row map", exc_info=True)
        finally:
            with self._lock:
                self._rowmap_reading = False

    def wait_rowmap(self, timeout: float = 10.0) -> bool:
        """Block until the row map holds for the current table (for benchmarks and tests)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._rowmap_now() is not None:
                return True
            time.sleep(0.005)
        return False

    def count(self, where: str | None = None) -> int:
        return int(self._table.count_rows(where))

    def doc_ids(self) -> set[str]:
        """Every doc_id present in the index (a scan of one column)."""
        tab = self._table.search().select(["doc_id"]).limit(None).to_arrow()
        return set(tab.column("doc_id").unique().to_pylist())

    # -- writes -----------------------------------------------------------------------------

    def add_passages(self, by_doc: dict[str, list[Passage]]) -> None:
        """Append documents' passages (no vectors yet) in one write; replaces rows left by a
        failed try."""
        passages = [p for ps in by_doc.values() for p in ps]
        if not passages:
            return
        with self._writing():
            for doc_ids in _batches(list(by_doc), 500):
                where = sql_in("doc_id", doc_ids)
                if self._table.count_rows(where):
                    self._table.delete(where)
        n = len(passages)
        table = pa.table(
            {
                "passage_id": [p.passage_id for p in passages],
                "doc_id": [p.doc_id for p in passages],
                "ordinal": pa.array([p.ordinal for p in passages], pa.int32()),
                "text": [p.text for p in passages],
                "embedded": [False] * n,
                "vector": pa.nulls(n, pa.list_(pa.float32(), self.vector_dim)),
            },
            schema=self._schema,
        )
        with self._writing():
            self._table.add(table)
        with self._lock:
            self._rows_since_optimize += n

    def set_vectors(self, passage_ids: list[str], vectors: np.ndarray) -> None:
        vecs = np.array(vectors, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape != (len(passage_ids), self.vector_dim):
            raise GraphError(
                f"expected vectors of shape ({len(passage_ids)}, {self.vector_dim}), "
                f"got {vecs.shape}"
            )
        if not passage_ids:
            return
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        vecs /= np.where(norms > 0, norms, 1.0)  # the dot-metric ANN index needs unit vectors
        upd = pa.table(
            {
                "passage_id": passage_ids,
                "embedded": [True] * len(passage_ids),
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(vecs.ravel()), self.vector_dim
                ),
            }
        )
        with self._writing():
            self._table.merge_insert("passage_id").when_matched_update_all().execute(upd)

    def delete_docs(self, doc_ids: Iterable[str]) -> None:
        with self._writing():
            for batch in _batches(list(doc_ids), 500):
                self._table.delete(sql_in("doc_id", batch))

    def maintain(self, force: bool = False, *, retrain: bool = False) -> dict[str, float]:
        """Compact and fold new rows into the indexes; build or retrain the ANN index.

        Cheap to call often: does nothing until ``optimize_every`` rows arrived (or ``force``).
        ``retrain`` rebuilds an ANN index whatever its size (its quantiser was learnt from
        vectors that have since been replaced). The index is also rebuilt, instead of gaining
        a segment, when folding the new rows in would give it more than ``MAX_ANN_SEGMENTS``
        segments (see the module docstring). Returns what it did, with seconds spent.
        """
        done: dict[str, float] = {}
        with self._lock:
            pending = self._rows_since_optimize
        if not force and not retrain and pending < self.optimize_every:
            return done
        embedded = self.count("embedded")
        unindexed = self._read_ann_stats()
        segments = self._ann_segments + (1 if unindexed else 0)  # after optimize()
        grown = embedded - self._ann_built_rows >= ANN_REBUILD_GROWTH * self._ann_built_rows
        too_many_segments = (segments > MAX_ANN_SEGMENTS and grown) or (
            segments > ANN_MAX_SEGMENTS_HARD
        )
        if embedded >= self.ann_threshold and (
            self._ann_rows == 0
            or embedded >= 2 * self._ann_rows
            or retrain
            or too_many_segments
            or self._ann_metric != ANN_METRIC
        ):
            t0 = time.perf_counter()
            with self._writing():
                self._table.create_index(
                    "vector",
                    config=HnswSq(
                        distance_type=ANN_METRIC, num_partitions=1, m=16, ef_construction=100
                    ),
                    name="vector_idx",
                    replace=True,
                )
            self._read_ann_stats()
            self._ann_built_rows = self._ann_rows
            done["ann_build_s"] = time.perf_counter() - t0
            logger.info(
                "built the ANN index over %s vectors in %.1f s", embedded, done["ann_build_s"]
            )
        t0 = time.perf_counter()
        with self._writing():
            self._table.optimize()
        with self._lock:
            self._rows_since_optimize = 0
        self._read_ann_stats()
        done["optimize_s"] = time.perf_counter() - t0
        logger.info("optimized the index (%s new rows) in %.1f s", pending, done["optimize_s"])
        return done

    # -- reads ------------------------------------------------------------------------------

    # The sync lancedb API costs one event-loop round trip per query; the two candidate lists of
    # a hybrid search are fetched with one ``asyncio.gather`` on lancedb's own background loop
    # (the sync table wraps an AsyncTable bound to it), which halves hybrid latency.

    async def _ids_and(self, make: Callable[[], Any], column: str) -> tuple[list[str], np.ndarray]:
        """Run the search query ``make()`` builds; (passage ids, its ``column`` of scores),
        best first.

        Asks for row ids when the row map holds for the table, else for ``passage_id``s (see
        the module docstring); a write that lands during the query sends it the slow way.
        """
        # The score column is named in the projection: lance adds it anyway for now, but warns
        # on stderr at every query that left it out (a future version will drop it).
        rowmap = self._rowmap_now()
        if rowmap is not None:
            tab = await make().select([column]).with_row_id().to_arrow()
            ids = (
                rowmap.lookup(tab.column("_rowid").to_numpy()) if self._gen == rowmap.gen else None
            )
            if ids is not None:
                return ids, tab.column(column).to_numpy()
            self._start_rowmap_read()
        tab = await make().select(["passage_id", column]).to_arrow()
        return tab.column("passage_id").to_pylist(), tab.column(column).to_numpy()

    async def _vector_async(
        self, vector: np.ndarray, limit: int, where: str | None, exact: bool = False
    ) -> list[tuple[str, float]]:
        v = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(v))
        metric = self._ann_metric if self._ann_rows and not exact else "cosine"
        ann = bool(self._ann_rows) and not exact

        def make() -> Any:
            q = (
                self._atable.query()
                .nearest_to(v / norm if norm > 0 else v)
                .column("vector")
                .distance_type(metric)
                .limit(limit)
            )
            if exact:
                q = q.bypass_vector_index()
            elif ann:
                q = q.ef(max(64, 2 * limit))
                if metric != ANN_METRIC:  # an older cosine index: see the module docstring
                    q = q.refine_factor(1)
            return q.where(where) if where else q

        ids, dist = await self._ids_and(make, "_distance")
        return [(pid, 1.0 - float(d)) for pid, d in zip(ids, dist, strict=True)]

    async def _keyword_async(
        self, text: str, limit: int, where: str | None
    ) -> list[tuple[str, float]]:
        if not any(ch.isalnum() for ch in text):
            return []

        def make() -> Any:
            q = self._atable.query().nearest_to_text(text).limit(limit)
            return q.where(where) if where else q

        ids, scores = await self._ids_and(make, "_score")
        return [(pid, float(sc)) for pid, sc in zip(ids, scores, strict=True)]

    async def _both_async(
        self, vector: np.ndarray, text: str, limit: int, where: str | None
    ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        dense, kw = await asyncio.gather(
            self._vector_async(vector, limit, where), self._keyword_async(text, limit, where)
        )
        return dense, kw

    def vector_search(
        self, vector: np.ndarray, limit: int, where: str | None, *, exact: bool = False
    ) -> list[tuple[str, float]]:
        """(passage_id, cosine similarity), best first; ``exact`` bypasses the ANN index (a
        full scan, to measure the index's recall)."""
        result: list[tuple[str, float]] = LOOP.run(self._vector_async(vector, limit, where, exact))
        return result

    def keyword_search(self, text: str, limit: int, where: str | None) -> list[tuple[str, float]]:
        """(passage_id, BM25 score), best first. Empty for a query with no searchable word."""
        result: list[tuple[str, float]] = LOOP.run(self._keyword_async(text, limit, where))
        return result

    def hybrid_candidates(
        self, vector: np.ndarray, text: str, limit: int, where: str | None
    ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        """Both candidate lists, fetched concurrently."""
        result: tuple[list[tuple[str, float]], list[tuple[str, float]]] = LOOP.run(
            self._both_async(vector, text, limit, where)
        )
        return result

    def vectors_for(self, passage_ids: list[str]) -> dict[str, np.ndarray]:
        """The stored vectors of some passages (those not embedded yet are absent)."""
        out: dict[str, np.ndarray] = {}
        for i in range(0, len(passage_ids), 500):
            chunk = passage_ids[i : i + 500]
            tab = (
                self._table.search()
                .where(sql_in("passage_id", chunk) + " AND embedded")
                .select(["passage_id", "vector"])
                .limit(len(chunk))
                .to_arrow()
            )
            if tab.num_rows == 0:
                continue
            flat = tab.column("vector").combine_chunks().flatten().to_numpy()
            mat = flat.reshape(tab.num_rows, self.vector_dim)
            for pid, row in zip(tab.column("passage_id").to_pylist(), mat, strict=True):
                out[pid] = row
        return out
