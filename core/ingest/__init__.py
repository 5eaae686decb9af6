"""Ingestion: files and JSONL records -> :class:`graph.schemas.IngestedDocument`.

The library pipeline calls exactly this API:

- :func:`extract_file` reads one PDF, plain text, Markdown or HTML file;
- :func:`iter_jsonl` reads a JSONL corpus, one document per record;
- :data:`SUPPORTED_SUFFIXES` lists the extensions a folder scan should pick up
  (:data:`JSONL_SUFFIXES` go to :func:`iter_jsonl`, the others to :func:`extract_file`).

Both raise :class:`core.errors.IngestError` subclasses with the file named and what to do, and
never return a partial document. Both are pure functions of the bytes (plus settings and the
token counter): the same bytes always give the same ids and text. Thread-safe as long as
``count_tokens`` is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from core.errors import (
    CancelledError,
    CorruptFileError,
    EmptyFileError,
    IngestError,
    UnsupportedFileError,
)
from core.ingest.chunking import Block, chunk_blocks
from core.ingest.detect import (
    FILE_SUFFIXES,
    JSONL_SUFFIXES,
    SUPPORTED_SUFFIXES,
    check_size,
    detect,
)
from core.ingest.entities import extract_mentions
from core.ingest.jsonl import JsonlRecords, canonical_record_bytes
from core.ingest.ocr import OcrProgress
from core.ingest.pdf import read_pdf
from core.ingest.text import TextContent, decode_text, read_html, read_markdown, read_plain
from core.settings import IngestSettings
from graph.ids import document_id, sha256_bytes
from graph.schemas import Document, DocumentKind, IngestedDocument, Page

logger = logging.getLogger(__name__)

TokenCounter = Callable[[Sequence[str]], list[int]]

__all__ = [
    "FILE_SUFFIXES",
    "JSONL_SUFFIXES",
    "SUPPORTED_SUFFIXES",
    "JsonlRecords",
    "TokenCounter",
    "extract_file",
    "iter_jsonl",
]


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
            text = decode_text(data, path=path)
            content: TextContent
            if kind == "markdown":
                content = read_markdown(text)
            elif kind == "html":
                content = read_html(text)
            else:
                content = read_plain(text)
            blocks, title = content.blocks, content.title
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
