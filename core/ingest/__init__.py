"""Ingestion: files and JSONL records -> :class:`graph.schemas.IngestedDocument`.

The library pipeline calls exactly this API:

- :func:`extract_file` reads one PDF, plain text, Markdown or HTML file;
- :class:`ExtractorProcess` runs :func:`extract_file` in a child process (see there why);
- :func:`collections_paused` keeps the garbage collector out of an extraction's way;
- :func:`iter_jsonl` reads a JSONL corpus, one document per record;
- :data:`SUPPORTED_SUFFIXES` lists the extensions a folder scan should pick up
  (:data:`JSONL_SUFFIXES` go to :func:`iter_jsonl`, the others to :func:`extract_file`);
  :func:`core.ingest.folders.collect_files` is that scan (and names the files it skips).

Both raise :class:`core.errors.IngestError` subclasses with the file named and what to do, and
never return a partial document. Both are pure functions of the bytes (plus settings and the
token counter): the same bytes always give the same ids and text. Thread-safe as long as
``count_tokens`` is.
"""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from core import errors
from core.errors import (
    CancelledError,
    CorruptFileError,
    EmptyFileError,
    IngestError,
    SourcebookError,
    UnsupportedFileError,
)
from core.frozen import EXTRACTOR_FLAG
from core.ingest.chunking import Block, chunk_blocks
from core.ingest.detect import (
    FILE_SUFFIXES,
    JSONL_SUFFIXES,
    SUPPORTED_SUFFIXES,
    check_size,
    detect,
)
from core.ingest.encoding import ENCODING_ASSUMED, decode_text
from core.ingest.entities import extract_mentions
from core.ingest.jsonl import JsonlRecords, canonical_record_bytes
from core.ingest.ocr import OcrProgress
from core.ingest.pdf import READ_BY_OCR, read_pdf
from core.ingest.text import TextContent, read_html, read_markdown, read_plain
from core.settings import IngestSettings
from graph.ids import document_id, sha256_bytes
from graph.schemas import Document, DocumentKind, IngestedDocument, Page, Passage
from graph.wordpack import pack_words

logger = logging.getLogger(__name__)

TokenCounter = Callable[[Sequence[str]], list[int]]

__all__ = [
    "FILE_SUFFIXES",
    "JSONL_SUFFIXES",
    "SUPPORTED_SUFFIXES",
    "ExtractorProcess",
    "JsonlRecords",
    "TokenCounter",
    "collections_paused",
    "extract_file",
    "iter_jsonl",
    "text_lost",
]


def text_lost(problem: str) -> bool:
    """Whether a document's ``problem`` says some of its text could not be read (a page with
    no text layer left unread, a damaged page), not only how it was read: pages read by OCR,
    an encoding guessed. A document whose problems all say how is whole."""
    return READ_BY_OCR not in problem and not problem.startswith(ENCODING_ASSUMED)


def _assemble(
    *,
    blocks: list[Block],
    sha: str,
    kind: DocumentKind,
    source_key: str,
    source_uri: str,
    title: str,
    pages: list[Page],
    problems: list[str],
    byte_size: int,
    settings: IngestSettings,
    count_tokens: TokenCounter,
    external_id: str | None = None,
    title_entity: str | None = None,
) -> IngestedDocument:
    doc_id = document_id(sha)
    chunked = chunk_blocks(
        blocks,
        content_sha256=sha,
        doc_id=doc_id,
        max_tokens=settings.passage_max_tokens,
        count_tokens=count_tokens,
    )
    mentions = extract_mentions(chunked.passages, title=title_entity)
    document = Document(
        doc_id=doc_id,
        source_key=source_key,
        source_uri=source_uri,
        title=title,
        kind=kind,
        content_sha256=sha,
        external_id=external_id,
        version=1,
        status="indexing",
        page_count=len(pages),
        passage_count=len(chunked.passages),
        problems=problems,
        added_at=datetime.now(UTC),
        byte_size=byte_size,
    )
    return IngestedDocument(
        document=document,
        text=chunked.text,
        pages=pages,
        passages=chunked.passages,
        mentions=mentions,
    )


def extract_file(
    path: Path,
    *,
    settings: IngestSettings,
    count_tokens: TokenCounter,
    ocr_progress: OcrProgress | None = None,
) -> IngestedDocument:
    """Read one PDF, text, Markdown or HTML file. Raises IngestError subclasses.

    Scanned PDF pages are OCRed when Tesseract is installed; ``ocr_progress(done, total)`` is
    called after each OCRed page and may raise :class:`CancelledError` to stop.
    """
    path = Path(path).expanduser().resolve()
    kind, size = detect(path, max_file_mb=settings.max_file_mb)
    if kind == "jsonl":
        raise UnsupportedFileError(
            f"{path.name} is a JSONL corpus, not a single document.",
            path=path,
            hint="Import it as a corpus (one document per record) instead.",
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UnsupportedFileError(f"Cannot read {path}: {exc}.", path=path) from exc
    if not data:
        raise EmptyFileError(f"{path.name} is empty (0 bytes).", path=path)
    sha = sha256_bytes(data)
    pages: list[Page] = []
    problems: list[str] = []
    try:
        if kind == "pdf":
            pdf = read_pdf(
                data,
                path=path,
                max_pages=settings.max_pages,
                ocr_settings=settings,
                ocr_progress=ocr_progress,
            )
            blocks, pages, problems, title = pdf.blocks, pdf.pages, pdf.problems, pdf.title
        else:
            decoded = decode_text(data, path=path)
            text = decoded.text
            content: TextContent
            if kind == "markdown":
                content = read_markdown(text)
            elif kind == "html":
                content = read_html(text)
            else:
                content = read_plain(text)
            blocks, title = content.blocks, content.title
            if decoded.note:
                problems.append(decoded.note)
            if not any(b.text.strip() for b in blocks):
                raise EmptyFileError(
                    f"{path.name} has no text to add.",
                    path=path,
                    hint="The file holds only whitespace or markup; nothing was added.",
                )
        result = _assemble(
            blocks=blocks,
            sha=sha,
            kind=kind,
            source_key=f"file:{path}",
            source_uri=str(path),
            title=title or path.stem,
            pages=pages,
            problems=problems,
            byte_size=size,
            settings=settings,
            count_tokens=count_tokens,
        )
    except (IngestError, CancelledError):
        raise
    except Exception as exc:
        logger.exception("unexpected failure reading %s", path)
        raise CorruptFileError(f"{path.name} could not be read: {exc}.", path=path) from exc
    if kind == "pdf" and not result.passages and not problems:
        result.document.problems.append("no text found in the document")
    logger.debug(
        "extracted %s: %d pages, %d passages", path, len(result.pages), len(result.passages)
    )
    return result


def iter_jsonl(
    path: Path,
    *,
    title_field: str = "title",
    text_field: str = "text",
    id_field: str | None = None,
    settings: IngestSettings,
    count_tokens: TokenCounter,
) -> JsonlRecords:
    """One document per JSONL record (see :class:`JsonlRecords` for continuing past errors).

    The file-level checks (missing, empty, too large) raise at once, before any record.
    """
    path = Path(path).expanduser().resolve()
    check_size(path, max_file_mb=settings.max_file_mb)

    def build(title: str, text: str, ext: str | None, line: int, raw: bytes) -> IngestedDocument:
        blocks: list[Block] = []
        if title:
            blocks.append(Block("heading", title, 1))
        blocks.extend(read_plain(text.replace("\r\n", "\n")).blocks)
        sha = sha256_bytes(canonical_record_bytes(title, text))
        key = ext if ext is not None else str(line)
        return _assemble(
            blocks=blocks,
            sha=sha,
            kind="jsonl",
            source_key=f"jsonl:{path}#{key}",
            source_uri=str(path),
            title=title or f"{path.stem} #{key}",
            pages=[],
            problems=[],
            byte_size=len(raw),
            settings=settings,
            count_tokens=count_tokens,
            external_id=ext,
            title_entity=title or None,
        )

    return JsonlRecords(
        path, title_field=title_field, text_field=text_field, id_field=id_field, build=build
    )


# ---------------------------------------------------------------- the collector during extraction

_gc_lock = threading.Lock()
_gc_pausers = 0
_gc_was_enabled = True


@contextlib.contextmanager
def collections_paused() -> Iterator[None]:
    """Pause automatic garbage collection while a file is extracted, then freeze what it built.

    Extraction builds ~2k tracked objects per page. Collections during it walk them again and
    again while holding the GIL: 15-90 ms pauses that stall every other thread, the desktop's
    UI thread included (``bench/ui_stall.py``; with collections paused, reading a 300-page PDF
    took 1.0 s instead of 1.55 s). Extraction makes no reference cycles (measured: nothing
    unreachable after extracting four real 10-K reports), so nothing waits to be collected.
    Afterwards ``gc.freeze()`` moves the survivors (the document) out of the collector's sight;
    reference counting frees them as usual once the add is done. The cost: cyclic garbage that
    other threads make during the pause is kept for the life of the process. Process-wide and
    reentrant (the last one out freezes and re-enables).
    """
    global _gc_pausers, _gc_was_enabled
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0:
                gc.freeze()
                if _gc_was_enabled:
                    gc.enable()


# ---------------------------------------------------------------- extraction in a child process

# The child imports only what extraction needs, so it starts in ~1 s: see
# :func:`core.frozen.serve_extractor`, which a packaged app's binary runs too.
_CHILD_MAIN = """
import sys
sys.path[:] = {path!r}
from core.frozen import serve_extractor
serve_extractor(int(sys.argv[1]))
"""
_POLL_S = 0.1


class ExtractorProcess:
    """Runs :func:`extract_file` in a child process, one file at a time.

    Why: PyMuPDF's page calls hold the GIL for their whole duration, and a large document's
    passages and word boxes are ~1M Python objects whose construction triggers garbage
    collections that hold it too; run on a thread of the desktop app, both stall its UI thread
    (measured 50-180 ms stalls during a 300-page add, ``bench/ui_stall.py``). The child has its
    own GIL and heap. This process only unpickles the finished document, whose passages carry
    their word boxes already packed (``Passage.packed_words``, ``words`` empty): with that, the
    300-page add's longest UI stall went from 67-111 ms to 15-39 ms.

    The child (``python -c``, started on the first call, kept for the next ones until
    :meth:`close`) counts word pieces with a counter it makes by calling ``counter_factory`` (a
    picklable callable), so its documents are the ones :func:`extract_file` makes here. It exits
    as soon as this process closes its connection or dies, even by ``kill -9`` (a thread of the
    child always waits on the connection). If the child dies while reading a file (a PDF that
    crashes MuPDF), that file fails with :class:`CorruptFileError`; the next call starts a new one.

    Cancellation: OCR page progress comes back as messages and is passed to ``ocr_progress`` on
    the calling thread; when that raises, or ``cancel`` is set, the call stops the child (reading
    a file holds nothing worth keeping) and raises at once.

    POSIX only (the child inherits a socket); :attr:`supported` says whether it runs here. In a
    packaged app (PyInstaller), whose ``sys.executable`` is the app's binary, the child is that
    binary started with :data:`core.frozen.EXTRACTOR_FLAG`.

    Threading contract: calls to :meth:`extract` are serialised by a lock; :meth:`close` may be
    called from any thread (a running call then fails).
    """

    supported = os.name == "posix"

    def __init__(self, counter_factory: Callable[[], TokenCounter]) -> None:
        self._factory = counter_factory
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None

    def extract(
        self,
        path: Path,
        *,
        settings: IngestSettings,
        ocr_progress: OcrProgress | None = None,
        cancel: threading.Event | None = None,
    ) -> IngestedDocument:
        """:func:`extract_file` in the child; raises what it raises."""
        path = Path(path)
        with self._lock:
            try:
                conn = self._start()
                conn.send((path, settings))
                while True:
                    if cancel is not None and cancel.is_set():
                        self._stop()
                        raise CancelledError("Adding was cancelled.")
                    if not conn.poll(_POLL_S):
                        continue
                    kind, payload = conn.recv()
                    if kind != "ocr":
                        break
                    if ocr_progress is not None:
                        try:
                            ocr_progress(*payload)
                        except BaseException:
                            self._stop()
                            raise
            except (EOFError, OSError) as exc:
                code = self._stop()
                raise CorruptFileError(
                    f"{path.name}: the document reader stopped while reading it (exit code "
                    f"{code}).",
                    path=path,
                    hint="The file may be damaged; re-download or re-export it, then add it again.",
                ) from exc
        if kind == "error":
            raise _rebuild_error(payload, path)
        doc: IngestedDocument = payload
        return doc

    def close(self) -> None:
        """Stop the child (it exits when its connection closes)."""
        self._stop()

    def _start(self) -> Connection:
        if self._conn is not None and self._proc is not None and self._proc.poll() is None:
            return self._conn
        self._stop()
        ours, theirs = Pipe()
        fd = theirs.fileno()
        try:
            if getattr(sys, "frozen", False):
                command = [sys.executable, EXTRACTOR_FLAG, str(fd)]
            else:
                command = [sys.executable, "-c", _CHILD_MAIN.format(path=sys.path), str(fd)]
            self._proc = subprocess.Popen(
                command,
                pass_fds=[fd],
                stdin=subprocess.DEVNULL,
            )
        finally:
            theirs.close()
        self._conn = ours
        ours.send(self._factory)
        logger.debug("started the extraction process %s", self._proc.pid)
        return ours

    def _stop(self) -> int | None:
        conn, proc = self._conn, self._proc
        self._conn = self._proc = None
        if conn is not None:
            conn.close()
        if proc is None:
            return None
        try:
            return proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()


_ErrorState = tuple[str, str, str | None, str]


def _rebuild_error(state: _ErrorState, path: Path) -> SourcebookError:
    """The child's error again (the classes' keyword arguments do not survive pickling)."""
    name, message, hint, err_path = state
    cls = getattr(errors, name, None)
    if cls is CancelledError:
        return CancelledError(message, hint=hint)
    if not (isinstance(cls, type) and issubclass(cls, IngestError)):
        cls = CorruptFileError
    return cls(message, path=err_path or path, hint=hint)


def _serve_parent(fd: int) -> None:
    """The child's side of :class:`ExtractorProcess`: read files, send documents or errors."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    conn = Connection(fd)
    jobs: queue.Queue[Any] = queue.Queue()

    def read() -> None:
        # Always waiting on the connection, so the child ends as soon as the parent closes it
        # or dies, even in the middle of a file.
        try:
            while True:
                jobs.put(conn.recv())
        except (EOFError, OSError):
            pass
        os._exit(0)

    threading.Thread(target=read, name="sourcebook-extract-reader", daemon=True).start()
    count_tokens: TokenCounter = jobs.get()()

    def on_ocr(done: int, of: int) -> None:
        conn.send(("ocr", (done, of)))

    while True:
        path, settings = jobs.get()
        try:
            doc = extract_file(
                path, settings=settings, count_tokens=count_tokens, ocr_progress=on_ocr
            )
        except SourcebookError as exc:
            err_path = exc.path if isinstance(exc, IngestError) else ""
            state: _ErrorState = (type(exc).__name__, exc.message, exc.hint, err_path)
            conn.send(("error", state))
        except Exception as exc:  # a parser bug must not end the child
            logger.exception("extracting %s failed", path)
            conn.send(("error", ("CorruptFileError", f"Could not read {path}: {exc}", None, "")))
        else:
            buf = io.BytesIO()
            _DocumentPickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(("done", doc))
            conn.send_bytes(buf.getbuffer())
            del doc, buf


class _DocumentPickler(pickle.Pickler):
    """Sends each passage's word boxes packed (:mod:`graph.wordpack`) instead of as ``Word``
    objects.

    A 300-page PDF has ~150k word boxes. As objects they made most of its 20 MB pickle, and
    this process spent ~0.5 s of GIL-holding Python building them again, then packed them for
    the catalog: the desktop's UI thread waited behind both. Packed here, the parent only
    copies bytes into the catalog. Any pickle loader reads it.
    """

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is Passage and obj.words:
            fields = {**dict(obj), "words": [], "packed_words": pack_words(obj.words)}
            return _packed_passage, (fields, obj.model_fields_set)
        return NotImplemented


def _packed_passage(fields: dict[str, Any], fields_set: set[str]) -> Passage:
    """A passage :class:`_DocumentPickler` sent (the child validated it already)."""
    return Passage.model_construct(fields_set, **fields)
