"""The library: adding documents (extract -> stage -> embed -> ready), search, evidence lookup.

Adding is pipelined: a reader thread extracts the next file while this thread stores and embeds
the current one, so PyMuPDF and the embedder overlap on the two cores. With the real embedders
the reader hands each file to a child process (:class:`core.ingest.ExtractorProcess`): PyMuPDF
and the building of a document's objects then never hold this process's GIL, which the
desktop's UI thread shares. A document is staged (keyword-searchable, status ``indexing``) as
soon as its text is extracted; it becomes ``ready`` in one catalog transaction after its vectors
are written. A crash in between leaves a version that is swept when the library next opens, so
the same add simply runs again.

Threading contract: a :class:`Library` is used from one thread at a time for writes (the
service runs them on its single writer executor); ``search`` and the read methods may be
called from other threads (the graph store serialises its own connections).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from core import vectors
from core.errors import (
    CancelledError,
    IngestError,
    SourcebookError,
    UnsupportedFileError,
    translate_errors,
)
from core.evidence import Evidence, evidence_of
from core.ingest import (
    ExtractorProcess,
    TokenCounter,
    collections_paused,
    extract_file,
    iter_jsonl,
)
from core.ingest.entities import named_entity_ids
from core.ingest.folders import collect_files, is_readable_type
from core.ingest.web import fetch_url, looks_like_url
from core.settings import Settings
from core.vectors import EmbedOnce, ReembedResult, embedding_text
from graph.ids import parse_evidence_id
from graph.schemas import Document, IngestedDocument, SearchFilters, SearchHit
from graph.store import GraphStore
from models.embedder import Embedder, OnnxEmbedder, SentenceTransformerEmbedder, WordPieceCounter

logger = logging.getLogger(__name__)

AddOutcome = Literal["added", "new_version", "unchanged", "failed", "cancelled"]
ProgressStage = Literal["extracting", "indexing", "embedding", "done"]


class AddResult(BaseModel):
    """What happened to one source of an add."""

    source: str
    outcome: AddOutcome
    doc_id: str | None = None
    title: str | None = None
    superseded: str | None = None
    error: str | None = None
    hint: str | None = None
    problems: list[str] = Field(default_factory=list)


class LibraryChanges(BaseModel):
    """What an operation changed, so views can decide whether to refresh."""

    results: list[AddResult] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(
        default_factory=list,
        description="Files inside added folders that were not read: their type is unsupported.",
    )

    @property
    def added(self) -> list[AddResult]:
        return [r for r in self.results if r.outcome in ("added", "new_version")]

    @property
    def failed(self) -> list[AddResult]:
        return [r for r in self.results if r.outcome == "failed"]


class AddProgress(BaseModel):
    source: str
    stage: ProgressStage
    index: int = Field(description="0-based position of this source in the batch.")
    total: int
    done: int = 0
    of: int = 0


ProgressFn = Callable[[AddProgress], None]


@dataclass
class _Job:
    source: str
    index: int
    doc: IngestedDocument | None = None
    error: SourcebookError | None = None


class Library:
    """Adds documents to the graph store and answers searches. See the module docstring.

    The library knows which embedder made its vectors (:mod:`core.vectors`): when that is not
    the current one, adds are refused (:class:`EmbedderMismatchError`) until :meth:`reembed`.
    """

    def __init__(self, root: Path, settings: Settings, embedder: Embedder) -> None:
        self.root = root
        self.settings = settings
        self.embedder = embedder
        root.mkdir(parents=True, exist_ok=True)
        with translate_errors():
            self.store = GraphStore.open(root, vector_dim=embedder.dim)
        try:
            self._mismatch = vectors.check(self.store, embedder.identity)
        except BaseException:
            self.store.close()
            raise
        self._mismatch_logged = False
        factory = _child_token_counter(embedder)
        self._extractor = ExtractorProcess(factory) if factory is not None else None

    def close(self) -> None:
        if self._extractor is not None:
            self._extractor.close()
        self.store.close()

    # ---------------------------------------------------------------- the embedder

    @property
    def embedder_mismatch(self) -> str | None:
        """When the vectors were made by another embedder than the current one: a sentence
        saying which, and what to do; else ``None``."""
        return None if self._mismatch is None else str(self._mismatch)

    def _refuse_if_mismatched(self) -> None:
        if self._mismatch is not None:  # look again: the library may have been emptied
            self._mismatch = vectors.check(self.store, self.embedder.identity)
        if self._mismatch is not None:
            raise self._mismatch.error()

    def reembed(
        self, *, progress: ProgressFn | None = None, cancel: threading.Event | None = None
    ) -> ReembedResult:
        """Recompute every passage's vector with the current embedder and record it as the
        one that made them (only once all are written: a cancelled or crashed run leaves the
        mismatch flagged, and running it again finishes the job). Progress comes as stage
        ``embedding`` with ``done``/``of`` passages; a set ``cancel`` raises CancelledError."""

        def on_batch(doc: Document, done: int, of: int) -> None:
            if progress is not None:
                progress(
                    AddProgress(
                        source=doc.title, stage="embedding", index=0, total=0, done=done, of=of
                    )
                )

        batch = max(self.settings.ingest.embed_batch_size, 1) * 4
        result = vectors.reembed_vectors(
            self.store,
            self.embedder,
            partial(embedding_text, self.embedder),
            batch=batch,
            on_batch=on_batch,
            cancel=cancel,
        )
        self._mismatch, self._mismatch_logged = None, False
        return result

    # ---------------------------------------------------------------- adding

    def add_paths(
        self,
        paths: Sequence[Path | str],
        *,
        collection: str | None = None,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> LibraryChanges:
        """Add files, folders and URLs (``http(s)://`` strings, fetched only when
        ``web.enabled``). A bad source is reported in the result; the batch goes on. Files of
        folders whose type is not supported are listed in ``skipped``."""
        self._refuse_if_mismatched()
        files: list[Path | str] = []
        skipped: list[str] = []
        for p in paths:
            if isinstance(p, str) and looks_like_url(p):
                files.append(p.strip())
            else:
                found = collect_files([Path(p)])
                files.extend(found.files)
                skipped.extend(str(f) for f in found.skipped)
        jobs = self._extract_in_background(files, cancel, progress)
        changes = self._store_jobs(jobs, len(files), collection, progress, cancel)
        changes.skipped = skipped
        return changes

    def add_jsonl(
        self,
        path: Path,
        *,
        title_field: str = "title",
        text_field: str = "text",
        id_field: str | None = None,
        collection: str | None = None,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> LibraryChanges:
        """Import one document per JSONL record (the record's id becomes the external id)."""
        self._refuse_if_mismatched()

        def records() -> Iterator[_Job]:
            docs = iter_jsonl(
                path,
                title_field=title_field,
                text_field=text_field,
                id_field=id_field,
                settings=self.settings.ingest,
                count_tokens=self.embedder.count_tokens,
            )
            i = 0
            while True:
                try:
                    doc = next(docs)
                except StopIteration:
                    return
                except IngestError as exc:
                    yield _Job(source=f"{path}:{i + 1}", index=i, error=exc)
                else:
                    yield _Job(source=doc.document.source_key, index=i, doc=doc)
                i += 1

        return self._store_jobs(records(), 0, collection, progress, cancel, group=256)

    def _extract_in_background(
        self,
        files: Sequence[Path | str],
        cancel: threading.Event | None,
        progress: ProgressFn | None = None,
    ) -> Iterator[_Job]:
        """Extract files (and fetch URLs) on a reader thread, at most two ahead of the consumer.

        OCR of scanned pages runs here too; its page progress is reported from this thread as
        stage ``extracting`` (``done``/``of`` pages), and a set ``cancel`` stops it between pages.
        """
        q: queue.Queue[_Job | None] = queue.Queue(maxsize=2)
        stop = threading.Event()

        def reader() -> None:
            try:
                for i, f in enumerate(files):
                    if stop.is_set() or (cancel is not None and cancel.is_set()):
                        break
                    job = _Job(source=str(f), index=i)

                    def on_ocr(done: int, of: int, job: _Job = job) -> None:
                        if cancel is not None and cancel.is_set():
                            raise CancelledError("Adding was cancelled.")
                        self._report(progress, job, len(files), "extracting", done, of)

                    try:
                        job.doc = self._extract_one(f, on_ocr, cancel)
                    except SourcebookError as exc:
                        job.error = exc
                    except Exception as exc:  # a parser bug must not kill the batch
                        logger.exception("extracting %s failed", f)
                        job.error = IngestError(f"Could not read {f}: {exc}", path=f)
                    q.put(job)
            finally:
                q.put(None)

        t = threading.Thread(target=reader, name="sourcebook-extract", daemon=True)
        t.start()
        try:
            while (job := q.get()) is not None:
                yield job
        finally:
            # The consumer may stop early (cancel, error): stop the reader after its current
            # file, and drain so it is never stuck on put().
            stop.set()
            while t.is_alive():
                with contextlib.suppress(queue.Empty):
                    q.get(timeout=0.1)
            t.join()

    def _extract_one(
        self,
        path: Path | str,
        ocr_progress: Callable[[int, int], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> IngestedDocument:
        if isinstance(path, str):
            return fetch_url(
                path,
                self.settings,
                count_tokens=self.embedder.count_tokens,
                store_dir=self.root / "web",
                ocr_progress=ocr_progress,
            )
        if not path.exists():
            raise IngestError(f"{path} does not exist.", path=path, hint="Check the path.")
        # Without an extension, extraction sniffs the bytes and says what they are.
        if path.suffix and not is_readable_type(path):
            raise UnsupportedFileError(f"{path.name}: unsupported file type.", path=path)
        with collections_paused():
            if self._extractor is not None:
                return self._extractor.extract(
                    path, settings=self.settings.ingest, ocr_progress=ocr_progress, cancel=cancel
                )
            return extract_file(
                path,
                settings=self.settings.ingest,
                count_tokens=self.embedder.count_tokens,
                ocr_progress=ocr_progress,
            )

    def _store_jobs(
        self,
        jobs: Iterable[_Job],
        total: int,
        collection: str | None,
        progress: ProgressFn | None,
        cancel: threading.Event | None,
        group: int = 1,
    ) -> LibraryChanges:
        changes = LibraryChanges()
        pending: list[_Job] = []
        embed = EmbedOnce(self.embedder)

        def flush() -> None:
            if pending:
                changes.results.extend(self._store_group(pending, total, embed, progress, cancel))
                pending.clear()

        for job in jobs:
            if cancel is not None and cancel.is_set():
                break
            if job.error is not None:
                err = job.error
                changes.results.append(
                    AddResult(source=job.source, outcome="failed", error=err.message, hint=err.hint)
                )
                continue
            pending.append(job)
            if len(pending) >= group:
                flush()
        flush()
        if changes.added:
            # Fold the new rows into the full-text and vector indexes and compact the table:
            # unindexed rows are searched by brute force (a 2k-row library went 136 -> 43 ms).
            with translate_errors():
                self.store.maintain(force=True)
        if cancel is not None and cancel.is_set():
            logger.info("add cancelled; nothing of the cancelled documents was kept")
        if collection:
            ids = [r.doc_id for r in changes.results if r.doc_id and r.outcome != "failed"]
            with translate_errors():
                self.store.create_collection(collection)
                self.store.add_to_collection(collection, ids)
        return changes

    def _store_group(
        self,
        jobs: list[_Job],
        total: int,
        embed: EmbedOnce,
        progress: ProgressFn | None,
        cancel: threading.Event | None,
    ) -> list[AddResult]:
        """Stage, embed and mark ready a group of extracted documents."""
        results: list[AddResult] = []
        todo: list[tuple[_Job, IngestedDocument, Document | None]] = []
        seen: set[str] = set()
        with translate_errors():
            for job in jobs:
                doc = job.doc
                assert doc is not None
                d = doc.document
                existing = self.store.find_by_sha(d.content_sha256)
                if existing is not None or d.doc_id in seen:
                    results.append(
                        AddResult(
                            source=job.source,
                            outcome="unchanged",
                            doc_id=d.doc_id,
                            title=d.title,
                            problems=d.problems,
                        )
                    )
                    continue
                seen.add(d.doc_id)
                previous = self.store.latest_for_source(d.source_key)
                if previous is not None:
                    d.version = previous.version + 1
                todo.append((job, doc, previous))
            if not todo:
                return results
            for job, _, _ in todo:
                self._report(progress, job, total, "indexing")
            self.store.stage_many([doc for _, doc, _ in todo])
            for _, doc, _ in todo:
                _drop_word_boxes(doc)
            try:
                self._embed_group(todo, total, embed, progress, cancel)
                if cancel is not None and cancel.is_set():
                    raise CancelledError("Adding was cancelled.")
            except BaseException as exc:
                for _, doc, _ in todo:
                    self.store.remove(doc.document.doc_id)
                if not isinstance(exc, CancelledError):
                    raise
                return [
                    *results,
                    *(AddResult(source=job.source, outcome="cancelled") for job, _, _ in todo),
                ]
            for job, doc, previous in todo:
                d = self.store.mark_ready(
                    doc.document.doc_id, supersedes=previous.doc_id if previous else None
                )
                self._report(progress, job, total, "done")
                results.append(
                    AddResult(
                        source=job.source,
                        outcome="new_version" if previous else "added",
                        doc_id=d.doc_id,
                        title=d.title,
                        superseded=previous.doc_id if previous else None,
                        problems=d.problems,
                    )
                )
        return results

    def _embed_group(
        self,
        todo: list[tuple[_Job, IngestedDocument, Document | None]],
        total: int,
        embed: EmbedOnce,
        progress: ProgressFn | None,
        cancel: threading.Event | None,
    ) -> None:
        """Embed every passage of the group in large batches (the embedder sorts them by word
        pieces); a text already embedded in this add is not embedded again."""
        passages = [(doc.document, p) for _, doc, _ in todo for p in doc.passages]
        batch = max(self.settings.ingest.embed_batch_size, 1) * 4
        job = todo[0][0]
        for start in range(0, len(passages), batch):
            if cancel is not None and cancel.is_set():
                raise CancelledError("Adding was cancelled.")
            part = passages[start : start + batch]
            chunk = [p for _, p in part]
            vectors = embed([embedding_text(self.embedder, d, p) for d, p in part])
            self.store.set_vectors([p.passage_id for p in chunk], vectors)
            self._report(progress, job, total, "embedding", start + len(chunk), len(passages))

    @staticmethod
    def _report(
        progress: ProgressFn | None,
        job: _Job,
        total: int,
        stage: ProgressStage,
        done: int = 0,
        of: int = 0,
    ) -> None:
        if progress is not None:
            progress(
                AddProgress(
                    source=job.source, stage=stage, index=job.index, total=total, done=done, of=of
                )
            )

    # ---------------------------------------------------------------- reading

    def documents(self, *, include_superseded: bool = True) -> list[Document]:
        with translate_errors():
            return self.store.list_documents(include_superseded=include_superseded)

    def remove(self, doc_ref: str) -> LibraryChanges:
        doc = self.resolve_document(doc_ref)
        with translate_errors():
            self.store.remove(doc.doc_id)
        if self._mismatch is not None:  # an emptied library takes the current embedder
            self._mismatch = vectors.check(self.store, self.embedder.identity)
        return LibraryChanges(removed=[doc.doc_id])

    def resolve_document(self, ref: str) -> Document:
        """A document by id, id prefix, exact title or source path."""
        from core.errors import NotFoundError

        docs = self.documents()
        for match in (
            [d for d in docs if d.doc_id == ref],
            [d for d in docs if d.doc_id.startswith(ref)],
            [d for d in docs if d.title == ref or d.source_uri == ref],
            [d for d in docs if Path(d.source_uri).name == ref],
        ):
            current = [d for d in match if d.superseded_by is None] or match
            if len(current) == 1:
                return current[0]
            if len(current) > 1:
                from core.errors import ConfigError

                raise ConfigError(
                    f"{ref!r} matches {len(current)} documents.",
                    hint="Use the document id shown by `sourcebook docs`.",
                )
        raise NotFoundError(f"No document matches {ref!r}.")

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        doc_refs: Sequence[str] = (),
        collections: Sequence[str] = (),
        graph: bool | None = None,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
    ) -> list[SearchHit]:
        k = k or self.settings.retrieval.default_k
        filters = SearchFilters(
            doc_ids=[self.resolve_document(r).doc_id for r in doc_refs] or None,
            collections=list(collections) or None,
        )
        vector: np.ndarray | None = None
        if mode != "keyword":
            if self._mismatch is not None and not self._mismatch_logged:
                # Once per library: the CLI shows warnings on stderr, the log keeps them.
                self._mismatch_logged = True
                logger.warning("vector search compares unlike vectors. %s", self._mismatch)
            vector = self.embedder.embed([query])[0]
        use_graph = self.settings.retrieval.graph_expansion if graph is None else graph
        entities = named_entity_ids(query) if use_graph else []
        with translate_errors():
            return self.store.search(
                query, vector, k=k, filters=filters, mode=mode, graph=use_graph, entities=entities
            )

    def evidence(self, evidence_id: str) -> Evidence:
        """The passage or span an evidence id names, with its pages and word boxes."""
        from core.errors import NotFoundError

        try:
            pid, rng = parse_evidence_id(evidence_id.strip())
        except ValueError as exc:
            raise NotFoundError(
                f"{evidence_id!r} is not an evidence id.",
                hint="Evidence ids look like ev1:0123456789abcdef or ev1:…#12-80.",
            ) from exc
        with translate_errors():
            passage = self.store.get_passage(pid)
            doc = self.store.get_document(passage.doc_id)
        start, end = rng if rng is not None else (0, len(passage.text))
        if not (0 <= start < end <= len(passage.text)):
            raise NotFoundError(f"{evidence_id}: the range is outside the passage.")
        return evidence_of(evidence_id, passage, doc, start, end)


def _child_token_counter(embedder: Embedder) -> Callable[[], TokenCounter] | None:
    """How an extraction process makes a counter equal to ``embedder.count_tokens``.

    The real MiniLM backends count with a :class:`WordPieceCounter` over their model folder,
    which a child process can load itself. Other embedders (test fakes) have no such recipe:
    their files are extracted on the reader thread, as everywhere the child cannot run.
    """
    if ExtractorProcess.supported and isinstance(
        embedder, SentenceTransformerEmbedder | OnnxEmbedder
    ):
        return partial(WordPieceCounter, embedder.model_dir)
    return None


def _drop_word_boxes(doc: IngestedDocument) -> None:
    """Free a staged document's word boxes: the catalog holds them, embedding needs only text.

    A 300-page PDF has ~150k ``Word`` models (each a dict, a set and a tuple of floats). Freed
    all at once, at the end of the add, the deallocation ran for ~80 ms in one C call holding
    the GIL, and the UI thread stalled; freed one passage at a time, the GIL changes hands
    between passages.
    """
    for p in doc.passages:
        p.words, p.packed_words = [], None
