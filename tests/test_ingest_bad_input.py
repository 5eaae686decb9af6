"""Every bad-input case gets a clear IngestError naming the file."""

from __future__ import annotations

from pathlib import Path

import pdfgen
import pytest

from core.errors import (
    CorruptFileError,
    EmptyFileError,
    EncryptedFileError,
    FileTooLargeError,
    IngestError,
    UnsupportedFileError,
)
from core.ingest import extract_file
from core.settings import IngestSettings
from models.embedder import WordPieceCounter, minilm_dir

SETTINGS = IngestSettings()


@pytest.fixture(scope="module")
def count() -> WordPieceCounter:
    return WordPieceCounter(minilm_dir())


def _raises(path: Path, exc: type[IngestError], count: WordPieceCounter, **kw: int) -> IngestError:
    settings = IngestSettings(**kw) if kw else SETTINGS
    with pytest.raises(exc) as info:
        extract_file(path, settings=settings, count_tokens=count)
    err = info.value
    assert path.name in err.message, err.message
    assert err.path == str(path.resolve())
    assert err.hint
    return err


def test_zero_byte(tmp_path: Path, count: WordPieceCounter) -> None:
    for name in ("empty.pdf", "empty.txt"):
        p = tmp_path / name
        p.write_bytes(b"")
        _raises(p, EmptyFileError, count)


def test_corrupt_pdf(tmp_path: Path, count: WordPieceCounter) -> None:
    p = tmp_path / "corrupt.pdf"
    p.write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 20)
    _raises(p, CorruptFileError, count)


def test_truncated_pdf(tmp_path: Path, count: WordPieceCounter) -> None:
    src = tmp_path / "full.pdf"
    pdfgen.make_multipage_pdf(src, 3)
    data = src.read_bytes()
    p = tmp_path / "truncated.pdf"
    p.write_bytes(data[: len(data) // 3])
    try:
        doc = extract_file(p, settings=SETTINGS, count_tokens=count)
    except CorruptFileError as exc:
        assert "truncated.pdf" in exc.message
    else:  # MuPDF may repair it: then the damage must be reported, never silent
        assert any("damaged" in pr for pr in doc.document.problems)


def test_encrypted_pdf(tmp_path: Path, count: WordPieceCounter) -> None:
    p = tmp_path / "locked.pdf"
    pdfgen.make_encrypted_pdf(p)
    err = _raises(p, EncryptedFileError, count)
    assert "password" in err.message


def test_wrong_extension(tmp_path: Path, count: WordPieceCounter) -> None:
    p = tmp_path / "notes.pdf"
    p.write_text("just some text, not a PDF at all\n", encoding="utf-8")
    err = _raises(p, UnsupportedFileError, count)
    assert "not a PDF" in err.message
    png = tmp_path / "image.txt"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 100)
    _raises(png, UnsupportedFileError, count)
    odd = tmp_path / "sheet.xlsx"
    odd.write_bytes(b"PK\x03\x04rest")
    _raises(odd, UnsupportedFileError, count)


def test_binary_data_is_refused_with_what_to_do(tmp_path: Path, count: WordPieceCounter) -> None:
    dump = tmp_path / "dump.txt"
    dump.write_bytes(bytes(range(256)) * 20)  # zero bytes and no byte-order mark
    err = _raises(dump, UnsupportedFileError, count)
    assert "binary data" in err.message and "UTF-8" in (err.hint or "")
    noise = tmp_path / "noise.txt"
    noise.write_bytes(bytes(range(128, 256)) * 40)  # no zero byte, yet text in no encoding
    err = _raises(noise, UnsupportedFileError, count)
    assert "not text" in err.message and "UTF-8" in (err.hint or "")


def test_pdf_with_txt_extension_is_read_as_pdf(tmp_path: Path, count: WordPieceCounter) -> None:
    p = tmp_path / "report.txt"
    pdfgen.make_multipage_pdf(p, 1)
    doc = extract_file(p, settings=SETTINGS, count_tokens=count)
    assert doc.document.kind == "pdf" and doc.document.page_count == 1


def test_too_large(tmp_path: Path, count: WordPieceCounter) -> None:
    p = tmp_path / "big.txt"
    p.write_bytes(b"word " * 300_000)  # 1.5 MB
    err = _raises(p, FileTooLargeError, count, max_file_mb=1)
    assert "1 MB" in err.message


def test_too_many_pages(tmp_path: Path, count: WordPieceCounter) -> None:
    p = tmp_path / "long.pdf"
    pdfgen.make_multipage_pdf(p, 3)
    err = _raises(p, FileTooLargeError, count, max_pages=2)
    assert "3 pages" in err.message


def test_missing_and_jsonl(tmp_path: Path, count: WordPieceCounter) -> None:
    with pytest.raises(UnsupportedFileError):
        extract_file(tmp_path / "nope.pdf", settings=SETTINGS, count_tokens=count)
    j = tmp_path / "c.jsonl"
    j.write_text('{"title": "a", "text": "b"}\n', encoding="utf-8")
    _raises(j, UnsupportedFileError, count)
