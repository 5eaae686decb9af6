"""Every bad-input case gets a clear IngestError naming the file."""

from __future__ import annotations

import re
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
from core.ingest.pdfclean import clean_line
from core.render import render_pdf_page
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


def test_truncated_pdf_keeps_readable_pages(tmp_path: Path, count: WordPieceCounter) -> None:
    src = tmp_path / "full.pdf"
    sentences = pdfgen.make_multipage_pdf(src, 7)
    data = src.read_bytes()
    p = tmp_path / "truncated.pdf"
    p.write_bytes(data[: len(data) // 2])  # an interrupted download
    doc = extract_file(p, settings=SETTINGS, count_tokens=count)
    (problem,) = doc.document.problems
    m = re.match(r"repaired: (\d) of 7 pages readable \(the file looks truncated\)", problem)
    assert m, problem
    readable = int(m.group(1))
    assert 2 <= readable < 7
    assert f"pages {readable + 1}-7 could not be read" in problem
    assert doc.document.page_count == 7
    for i, s in enumerate(sentences[: readable - 1]):  # the last readable page may be cut
        (passage,) = [x for x in doc.passages if s in x.text]
        assert passage.page_start == i
    assert all(x.page_end is not None and x.page_end < readable for x in doc.passages)
    assert [pg.has_text_layer for pg in doc.pages][readable:] == [False] * (7 - readable)


def test_truncated_pdf_without_page_tree(tmp_path: Path, count: WordPieceCounter) -> None:
    src = tmp_path / "full.pdf"
    sentences = pdfgen.make_tail_tree_pdf(src, 7)
    data = src.read_bytes()
    p = tmp_path / "truncated.pdf"
    p.write_bytes(data[: len(data) // 2])
    doc = extract_file(p, settings=SETTINGS, count_tokens=count)
    (problem,) = doc.document.problems
    m = re.match(r"repaired: (\d) pages readable \(the file looks truncated\)", problem)
    assert m, problem  # the page tree is lost with the end of the file: no "of 7"
    assert "page count is unknown" in problem
    readable = int(m.group(1))
    assert 2 <= readable < 7 and doc.document.page_count == readable
    (first,) = [x for x in doc.passages if sentences[0] in x.text]
    assert first.page_start == 0
    # the viewer opens the file the same way: the cited page is the one that was read
    shown = render_pdf_page(p, first.page_start, 0.2)
    assert shown.page_count == readable


def test_truncated_pdf_nothing_readable(tmp_path: Path, count: WordPieceCounter) -> None:
    src = tmp_path / "full.pdf"
    pdfgen.make_tail_tree_pdf(src, 3)
    data = src.read_bytes()
    p = tmp_path / "truncated.pdf"
    p.write_bytes(data[: data.index(b"stream")])  # cut before the first page's content
    err = _raises(p, CorruptFileError, count)
    assert "is cut short" in err.message and "no page could be recovered" in err.message
    assert "download or copy the file again" in err.hint


def test_truncated_encrypted_pdf(tmp_path: Path, count: WordPieceCounter) -> None:
    src = tmp_path / "locked.pdf"
    pdfgen.make_encrypted_pdf(src)
    data = src.read_bytes()
    p = tmp_path / "truncated.pdf"
    # cut inside the trailer, after the encryption dictionary's start but before the file id
    p.write_bytes(data[: data.rindex(b"/Filter/Standard") + 20])
    err = _raises(p, CorruptFileError, count)
    assert "the file is encrypted, and what is needed to decrypt it" in err.message


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


def test_repaired_pdf_words_with_lost_character_maps() -> None:
    words = [(0.0, 0, 20, 10, "2022"), (22.0, 0, 26, 10, "\x96"), (28.0, 0, 48, 10, "2026")]
    words += [(50.0, 0, 70, 10, "\x1f\x1e\x1d"), (72.0, 0, 90, 10, "caf\ufffd")]
    kept, _ = clean_line(words, None, repaired=True)
    assert [w[4] for w in kept] == ["2022", "–", "2026"]  # a cp1252 code, then garbage
    assert kept[1][:4] == words[1][:4]
    assert [w[4] for w in clean_line(words, None)[0]] == [w[4] for w in words]
