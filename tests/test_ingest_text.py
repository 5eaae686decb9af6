"""Plain text, Markdown, HTML and JSONL ingestion."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest

from core.errors import CorruptFileError, IngestError
from core.ingest import extract_file, iter_jsonl, text_lost
from core.settings import IngestSettings
from graph.schemas import IngestedDocument
from models.embedder import WordPieceCounter, minilm_dir

SETTINGS = IngestSettings()


@pytest.fixture(scope="module")
def count() -> WordPieceCounter:
    return WordPieceCounter(minilm_dir())


def _check_offsets(doc: IngestedDocument) -> None:
    for p in doc.passages:
        assert doc.text[p.char_start : p.char_end] == p.text
        assert p.page_start is None and p.words == []
        for s in p.spans:
            assert p.text[s.start : s.end].strip()


def test_plain_text(tmp_path: Path, count: WordPieceCounter) -> None:
    p = tmp_path / "notes.txt"
    p.write_text(
        "First paragraph line one\ncontinues here. Second sentence.\n\nAnother paragraph.\n",
        encoding="utf-8",
    )
    doc = extract_file(p, settings=SETTINGS, count_tokens=count)
    assert doc.document.kind == "text" and doc.document.title == "notes"
    assert "First paragraph line one continues here." in doc.text
    assert [doc.passages[0].text[s.start : s.end] for s in doc.passages[0].spans][:2] == [
        "First paragraph line one continues here.",
        "Second sentence.",
    ]
    _check_offsets(doc)


def test_markdown(tmp_path: Path, count: WordPieceCounter) -> None:
    p = tmp_path / "guide.md"
    p.write_text(
        "# Field Guide\n\nIntro text about **birds**.\n\n## Owls\n\nOwls hunt at night.\n\n"
        "| Bird | Weight |\n|---|---|\n| Owl | 1 kg |\n\n### Barn owls\n\nBarn owls are pale.\n",
        encoding="utf-8",
    )
    doc = extract_file(p, settings=SETTINGS, count_tokens=count)
    assert doc.document.kind == "markdown" and doc.document.title == "Field Guide"
    assert "Owl | 1 kg" in doc.text and "**" not in doc.text
    barn = next(x for x in doc.passages if "Barn owls are pale." in x.text)
    # a small sub-section may share a passage with its parent section (path of its start)
    assert barn.heading_path[:2] == ["Field Guide", "Owls"]
    owls = next(x for x in doc.passages if "Owls hunt at night." in x.text)
    assert "Intro text" not in owls.text  # no merging across a top-level heading
    _check_offsets(doc)


def test_html_drops_script_style_nav(tmp_path: Path, count: WordPieceCounter) -> None:
    p = tmp_path / "page.html"
    p.write_text(
        "<html><head><title>Web Page</title><style>.x{color:red}</style></head><body>"
        "<nav>Home | About</nav><h1>Main Title</h1><p>Visible <b>text</b> here."
        "<script>var secret = 1;</script></p><h2>Data</h2>"
        "<table><tr><th>A</th><th>B</th></tr><tr><td>1</td><td>2</td></tr></table>"
        "</body></html>",
        encoding="utf-8",
    )
    doc = extract_file(p, settings=SETTINGS, count_tokens=count)
    assert doc.document.kind == "html" and doc.document.title == "Web Page"
    assert "Visible text here." in doc.text
    assert "secret" not in doc.text and "color" not in doc.text and "About" not in doc.text
    assert "A | B\n1 | 2" in doc.text
    data = next(x for x in doc.passages if "1 | 2" in x.text)
    assert data.heading_path == ["Main Title", "Data"]
    _check_offsets(doc)


@pytest.mark.parametrize(
    ("codec", "bom"),
    [
        ("utf-8", codecs.BOM_UTF8),
        ("utf-16-le", codecs.BOM_UTF16_LE),
        ("utf-16-be", codecs.BOM_UTF16_BE),
        ("utf-32-le", codecs.BOM_UTF32_LE),
        ("utf-32-be", codecs.BOM_UTF32_BE),
    ],
)
def test_text_with_a_byte_order_mark_decodes_exactly(
    tmp_path: Path, count: WordPieceCounter, codec: str, bom: bytes
) -> None:
    text = "Größe of the café: 東京 ☃, naïve.\n\nA second paragraph.\n"
    p = tmp_path / "marked.txt"
    p.write_bytes(bom + text.encode(codec))
    doc = extract_file(p, settings=SETTINGS, count_tokens=count)
    assert doc.text.startswith("Größe of the café: 東京 ☃, naïve.")
    assert "A second paragraph." in doc.text and "\ufeff" not in doc.text
    assert doc.document.problems == []  # a byte-order mark is certain: nothing was assumed


LEGACY_FRENCH = (
    "Le petit village se trouvait au bord de la rivière, entouré de champs de blé et de "
    "forêts épaisses. Chaque matin, les habitants se levaient très tôt pour travailler.\n\n"
    "Madame Lefèvre, l'institutrice, était très aimée. « Apprenez bien, disait-elle, car le "
    "savoir est le plus précieux des trésors. »\n"
)
LEGACY_JAPANESE = (
    "日本語のテキストファイルです。これはシフトJISで保存されています。東京は日本の首都です。\n"
    "毎朝、人々は早く起きて仕事に行きます。駅はいつも混雑しています。\n"
)


def test_legacy_encodings_are_detected_and_noted(tmp_path: Path, count: WordPieceCounter) -> None:
    french = tmp_path / "lettre.txt"
    french.write_bytes(LEGACY_FRENCH.encode("cp1252"))
    doc = extract_file(french, settings=SETTINGS, count_tokens=count)
    assert "Madame Lefèvre, l'institutrice, était très aimée." in doc.text
    assert doc.document.problems == ["text encoding assumed: cp1252 (detected)"]
    assert not text_lost(doc.document.problems[0])  # how the text was read, none lost

    japanese = tmp_path / "nihongo.md"
    japanese.write_bytes(LEGACY_JAPANESE.encode("shift_jis"))
    doc = extract_file(japanese, settings=SETTINGS, count_tokens=count)
    assert "東京は日本の首都です。" in doc.text
    # cp932 is Windows' superset of Shift-JIS; either name is a right answer
    [note] = doc.document.problems
    assert note in (
        "text encoding assumed: cp932 (detected)",
        "text encoding assumed: shift_jis (detected)",
    )


def _write_jsonl(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_jsonl_custom_fields_and_bad_line(tmp_path: Path, count: WordPieceCounter) -> None:
    p = tmp_path / "corpus.jsonl"
    _write_jsonl(
        p,
        [
            json.dumps({"pid": "a1", "name": "Ada Lovelace", "body": "Ada wrote notes in 1843."}),
            "{not json",
            json.dumps({"pid": 7, "name": "Charles Babbage", "body": "He designed engines."}),
            "",
            json.dumps({"pid": "x", "name": "No text"}),
        ],
    )
    records = iter_jsonl(
        p,
        title_field="name",
        text_field="body",
        id_field="pid",
        settings=SETTINGS,
        count_tokens=count,
    )
    docs: list[IngestedDocument] = []
    errors: list[IngestError] = []
    while True:
        try:
            docs.append(next(records))
        except StopIteration:
            break
        except IngestError as exc:
            errors.append(exc)
    assert [d.document.external_id for d in docs] == ["a1", "7"]
    assert [d.document.title for d in docs] == ["Ada Lovelace", "Charles Babbage"]
    assert docs[0].document.source_key == f"jsonl:{p.resolve()}#a1"
    assert docs[0].document.kind == "jsonl"
    assert len(errors) == 2 and all(isinstance(e, CorruptFileError) for e in errors)
    assert "line 2" in errors[0].message and "line 5" in errors[1].message
    first = docs[0].passages[0]
    assert first.text.startswith("Ada Lovelace")
    titles = [m for m in docs[0].mentions if m.type == "title"]
    assert len(titles) == 1 and titles[0].name == "Ada Lovelace"
    assert titles[0].span_id == first.spans[0].span_id
    assert first.text[titles[0].start : titles[0].end] == "Ada Lovelace"


def test_jsonl_ids_stable_and_line_keys(tmp_path: Path, count: WordPieceCounter) -> None:
    p = tmp_path / "c.jsonl"
    _write_jsonl(p, [json.dumps({"title": "T", "text": "Some text about Paris."})])
    a = list(iter_jsonl(p, settings=SETTINGS, count_tokens=count))
    b = list(iter_jsonl(p, settings=SETTINGS, count_tokens=count))
    assert a[0].document.doc_id == b[0].document.doc_id
    assert [x.passage_id for x in a[0].passages] == [x.passage_id for x in b[0].passages]
    assert a[0].document.external_id is None
    assert a[0].document.source_key == f"jsonl:{p.resolve()}#1"
