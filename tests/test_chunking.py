"""Chunking: token limit with the real MiniLM counter, offsets, spans, structure."""

from __future__ import annotations

from pathlib import Path

import pdfgen
import pytest

from core.ingest import extract_file
from core.ingest.chunking import Block, chunk_blocks, sentence_ranges
from core.settings import IngestSettings
from models.embedder import WordPieceCounter, minilm_dir


@pytest.fixture(scope="module")
def count() -> WordPieceCounter:
    return WordPieceCounter(minilm_dir())


def _chunk(blocks: list[Block], count: WordPieceCounter, max_tokens: int = 64):  # type: ignore[no-untyped-def]
    return chunk_blocks(
        blocks,
        content_sha256="ab" * 32,
        doc_id="doc_x",
        max_tokens=max_tokens,
        count_tokens=count,
    )


def test_sentence_ranges() -> None:
    t = "Mr. Smith met Dr. Jones in the U.S. yesterday. Revenue was $3.5 billion! Next one? Yes."
    got = [t[s:e] for s, e in sentence_ranges(t)]
    assert got == [
        "Mr. Smith met Dr. Jones in the U.S. yesterday.",
        "Revenue was $3.5 billion!",
        "Next one?",
        "Yes.",
    ]


def test_limit_offsets_spans_and_no_overlap(count: WordPieceCounter) -> None:
    long_sentence = " ".join(f"word{i}" for i in range(400)) + "."
    blocks = [
        Block("heading", "Top", 1),
        Block("paragraph", " ".join(f"Sentence {i} is short." for i in range(60))),
        Block("paragraph", long_sentence),
        Block("heading", "Second", 1),
        Block("paragraph", "Tiny tail."),
    ]
    res = _chunk(blocks, count)
    assert res.passages
    prev_end = 0
    for p in res.passages:
        assert res.text[p.char_start : p.char_end] == p.text
        assert p.char_start >= prev_end
        prev_end = p.char_end
        assert p.token_count == count([p.text])[0] <= 64
        for s in p.spans:
            assert 0 <= s.start < s.end <= len(p.text)
            assert s.span_id == f"{p.passage_id}#{s.start}-{s.end}"
    # never merged across a top-level heading
    second = next(p for p in res.passages if "Tiny tail." in p.text)
    assert second.text.startswith("Second") and second.heading_path == ["Second"]
    # the over-long sentence is one span per passage piece, cut on word boundaries
    pieces = [p for p in res.passages if "word10" in p.text or "word399" in p.text]
    assert all(not p.text.startswith("ord") for p in pieces)


def test_huge_word_is_split(count: WordPieceCounter) -> None:
    res = _chunk([Block("paragraph", "x" * 3000 + " end.")], count, max_tokens=32)
    assert all(count([p.text])[0] <= 32 for p in res.passages)
    assert "".join(p.text for p in res.passages).replace(" ", "") == "x" * 3000 + "end."


def test_small_trailing_fragment_merged(count: WordPieceCounter) -> None:
    para = " ".join(f"Sentence number {i} has a few words." for i in range(9)) + " End."
    res = _chunk([Block("paragraph", para)], count, max_tokens=64)
    assert res.passages[-1].token_count > 8  # "End." did not become its own passage


def test_pdf_passages_never_exceed_limit(tmp_path: Path, count: WordPieceCounter) -> None:
    p = tmp_path / "long.pdf"
    pdfgen.make_long_pdf(p, 5)
    settings = IngestSettings(passage_max_tokens=128)
    doc = extract_file(p, settings=settings, count_tokens=count)
    assert len(doc.passages) > 5
    real = count([x.text for x in doc.passages])
    assert max(real) <= 128
    assert [x.token_count for x in doc.passages] == real
    for x in doc.passages:
        for w in x.words:
            assert x.text[w.start : w.end].strip() == x.text[w.start : w.end]
