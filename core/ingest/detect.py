"""What kind of file is this? Sniff magic bytes and the extension, and refuse early.

The size and zero-byte checks run on ``stat()`` before the file is read, so a 10 GB file is
refused without touching its bytes. The kind is decided by content first (a PDF is a PDF whatever
its name) and the extension second; a file whose bytes contradict its extension is refused with
a message that says so.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

from core.errors import EmptyFileError, FileTooLargeError, UnsupportedFileError
from core.ingest.encoding import NOT_TEXT_HINT, bom_encoding

logger = logging.getLogger(__name__)

FileKind = Literal["pdf", "text", "markdown", "html", "jsonl"]

PDF_SUFFIXES = frozenset({".pdf"})
TEXT_SUFFIXES = frozenset({".txt", ".text"})
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml"})
JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson"})
FILE_SUFFIXES = PDF_SUFFIXES | TEXT_SUFFIXES | MARKDOWN_SUFFIXES | HTML_SUFFIXES
SUPPORTED_SUFFIXES = FILE_SUFFIXES | JSONL_SUFFIXES

SNIFF_BYTES = 4096
_UNKNOWN_BINARY = "binary data"
_RENAME_HINT = "Rename it to its real extension or convert it to PDF or text."
# Magic numbers of common binary formats a user may drop on the library by mistake.
_BINARY_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"PK\x03\x04", "a ZIP archive (or an Office document)"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\xd0\xcf\x11\xe0", "an old Office document"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"7z\xbc\xaf", "a 7-Zip archive"),
    (b"Rar!", "a RAR archive"),
    (b"\x7fELF", "a program"),
    (b"MZ", "a Windows program"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
)


def check_size(path: Path, *, max_file_mb: int) -> int:
    """Return the file's size in bytes; refuse missing, empty and too-large files."""
    try:
        st = path.stat()
    except OSError as exc:
        raise UnsupportedFileError(
            f"Cannot read {path}: {exc.strerror or exc}.",
            path=path,
            hint="Check that the file exists and that you may read it.",
        ) from exc
    if not path.is_file():
        raise UnsupportedFileError(f"{path} is not a regular file.", path=path)
    if st.st_size == 0:
        raise EmptyFileError(f"{path.name} is empty (0 bytes).", path=path)
    limit = max_file_mb * 1024 * 1024
    if st.st_size > limit:
        raise FileTooLargeError(
            f"{path.name} is {st.st_size / 1024 / 1024:,.1f} MB, over the {max_file_mb} MB limit.",
            path=path,
        )
    return st.st_size


def _looks_binary(head: bytes) -> str | None:
    """A description of the binary format ``head`` starts with, or None if it may be text."""
    if bom_encoding(head) is not None:
        return None  # marked Unicode text; UTF-16 and UTF-32 are full of zero bytes
    for magic, what in _BINARY_MAGIC:
        if head.startswith(magic):
            return what
    if b"\x00" in head:
        return _UNKNOWN_BINARY
    return None


def sniff_kind(path: Path, head: bytes) -> FileKind:
    """Decide the kind from the first bytes and the extension, or raise UnsupportedFileError."""
    suffix = path.suffix.lower()
    is_pdf = b"%PDF-" in head[:1024]
    if is_pdf:
        if suffix and suffix not in PDF_SUFFIXES:
            logger.info("%s is a PDF despite its %s extension; reading it as PDF", path, suffix)
        return "pdf"
    if suffix in PDF_SUFFIXES:
        binary = _looks_binary(head)
        found = binary or "text"
        raise UnsupportedFileError(
            f"{path.name} has a .pdf extension but is not a PDF (it looks like {found}).",
            path=path,
            hint="Rename it to its real extension, or re-export it as PDF.",
        )
    if suffix not in SUPPORTED_SUFFIXES and suffix != "":
        raise UnsupportedFileError(f"{path.name}: {suffix} files are not supported.", path=path)
    binary = _looks_binary(head)
    if binary is not None:
        # Zero bytes without a known format may still be text: UTF-16 or UTF-32 without a
        # byte-order mark looks like this.
        hint = NOT_TEXT_HINT if binary == _UNKNOWN_BINARY else _RENAME_HINT
        raise UnsupportedFileError(
            f"{path.name} is {binary}, not a text file"
            + (f" as its {suffix} extension says." if suffix else "."),
            path=path,
            hint=hint,
        )
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in HTML_SUFFIXES:
        return "html"
    if suffix in JSONL_SUFFIXES:
        return "jsonl"
    if suffix == "":
        low = head[:512].lstrip().lower()
        if low.startswith((b"<!doctype html", b"<html")):
            return "html"
    return "text"


def detect(path: Path, *, max_file_mb: int) -> tuple[FileKind, int]:
    """Check size and sniff the kind of ``path``: ``(kind, byte_size)``. Raises IngestError."""
    size = check_size(path, max_file_mb=max_file_mb)
    try:
        with path.open("rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError as exc:
        raise UnsupportedFileError(f"Cannot read {path}: {exc}.", path=path) from exc
    return sniff_kind(path, head), size
