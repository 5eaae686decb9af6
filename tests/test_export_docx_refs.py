"""DOCX, BibTeX and CSL-JSON exports, read back with real readers (python-docx, a small BibTeX
parser, json), and the CLI's export formats chosen by name and by file suffix."""
# ruff: noqa: F811  (fixtures imported from helper modules are redefined as arguments)

from __future__ import annotations

import argparse
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from docx import Document
from export_fixtures import (
    QUESTION,
    export_app,  # noqa: F401 - fixture
    make_report,
)

from core.cli_research import add_parsers
from core.export import FORMATS, export_report, format_for
from core.export_refs import bibtex_escape, citation_key
from core.research.schemas import CitationRecord, Report
from core.service import Sourcebook

HARBOR_TITLE, RAIL_TITLE = "Northport Harbor Report", "Eastline Railway Facts"


def _docx_paragraphs(data: bytes) -> list[Any]:
    return list(Document(io.BytesIO(data)).paragraphs)


def test_docx_has_structure_citations_sources_and_checks(
    export_app: Sourcebook, tmp_path: Path
) -> None:
    report = make_report(export_app)
    out = tmp_path / "r.docx"
    export_app.export_report(report, "docx", out)
    doc = Document(str(out))
    paras = doc.paragraphs
    styles = [(p.style.name if p.style is not None else "", p.text) for p in paras]
    assert styles[0] == ("Title", QUESTION)
    assert any(t.startswith("Status: partial") for _, t in styles)
    assert ("Heading 1", "Findings") in styles and ("Heading 2", "Sources") in styles
    body = next(p for p in paras if p.text.startswith("Answer:"))
    bold = [r.text for r in body.runs if r.bold]
    italic = [r.text for r in body.runs if r.italic]
    assert bold == ["Answer:"] and italic == ["4,200 ships"]
    # [n] are links to the Sources entries, whose numbers are the report's
    assert "[1]" in body.text and "[2]" in body.text
    anchors = re.findall(r'w:anchor="([^"]+)"', body._p.xml)
    assert anchors == ["src_1", "src_2"]
    sources = [t for _, t in styles if re.match(r"\d\. ", t)]
    assert sources[0].startswith(f"1. {HARBOR_TITLE} — pp. 1, 2 — source: ")
    assert sources[1].startswith(f"2. {RAIL_TITLE} — p. 1")
    assert sources[2].startswith("3. ") and "ferry-notes.txt" in sources[2]
    marks = re.findall(r'w:name="(src_\d+)"', "".join(p._p.xml for p in paras))
    assert marks == ["src_1", "src_2", "src_3"]
    bullets = [t for s, t in styles if s == "List Bullet"]
    assert any("ferry terminal reopened" in t and "[3]" in t for t in bullets)
    # the table, the flagged claim, and the evidence appendix with its pictures
    assert [c.text for c in doc.tables[0].rows[1].cells] == ["Railway", "1887"]
    assert ("Heading 1", "Flagged claims") in styles
    assert any("The port is busy." in t and "do not state it" in t for _, t in styles)
    quotes = [t for s, t in styles if s == "Quote"]
    assert "handled 4,200 ships in 2019" in quotes and len(quotes) == 4
    assert len(doc.inline_shapes) == 3


def _parse_bibtex(text: str) -> list[tuple[str, str, dict[str, str]]]:
    """A minimal BibTeX reader: @type{key, name = {value} | number, ...} with nested braces."""
    entries = []
    for m in re.finditer(r"@(\w+)\{([^,\s]+),", text):
        pos, fields = m.end(), {}
        while True:
            fm = re.compile(r"\s*(\w+)\s*=\s*").match(text, pos)
            if fm is None:
                break
            pos = fm.end()
            if text[pos] == "{":
                depth, start = 0, pos
                while True:
                    ch = text[pos]
                    if ch == "\\":
                        pos += 2
                        continue
                    depth += ch == "{"
                    depth -= ch == "}"
                    pos += 1
                    if depth == 0:
                        break
                value = text[start + 1 : pos - 1]
            else:
                vm = re.compile(r"\d+").match(text, pos)
                assert vm is not None
                value, pos = vm.group(0), vm.end()
            fields[fm.group(1)] = value
            pos = re.compile(r"\s*,?").match(text, pos).end()  # type: ignore[union-attr]
        assert text[pos:].lstrip().startswith("}")
        entries.append((m.group(1), m.group(2), fields))
    return entries


def test_bibtex_one_entry_per_document(export_app: Sourcebook, tmp_path: Path) -> None:
    report = make_report(export_app)
    out = tmp_path / "sources.bib"
    export_app.export_report(report, "bib", out)
    entries = _parse_bibtex(out.read_text(encoding="utf-8"))
    assert len(entries) == 3  # harbor cited twice: one entry
    keys = [k for _, k, _ in entries]
    assert len(set(keys)) == 3 and all(re.fullmatch(r"[a-z][a-z0-9_]*", k) for k in keys)
    kind, key, harbor = entries[0]
    assert kind == "misc" and re.fullmatch(r"northport2019_[0-9a-f]{6}", key)
    assert harbor["year"] == "2019" and "year" not in entries[1][2]
    assert harbor["title"] == "{Northport Harbor Report}" and harbor["pages"] == "1--2"
    assert "harbor.pdf" in harbor["howpublished"]
    assert re.search(r"Accessed \d{4}-\d\d-\d\d", harbor["note"])
    assert "harbor \\& railway" in harbor["note"]  # escaped for BibTeX
    # stable: the same report exports the same keys
    again = _parse_bibtex(export_app.export_report(report, "bib").decode())
    assert [k for _, k, _ in again] == keys


def test_csl_json_fields(export_app: Sourcebook) -> None:
    report = make_report(export_app)
    items = json.loads(export_app.export_report(report, "csl"))
    assert isinstance(items, list) and len(items) == 3
    for item in items:
        assert {"id", "type", "title", "accessed", "note"} <= set(item)
        assert item["type"] in ("document", "webpage")
        assert len(item["accessed"]["date-parts"][0]) == 3
    harbor = items[0]
    assert harbor["title"] == HARBOR_TITLE and harbor["page"] == "1-2"
    assert harbor["source"].endswith("harbor.pdf") and "URL" not in harbor
    bib_keys = re.findall(r"@misc\{([^,]+),", export_app.export_report(report, "bib").decode())
    assert [i["id"] for i in items] == bib_keys
    # the year comes from the PDF's own metadata (its creation date); rail.pdf has none
    assert harbor["issued"] == {"date-parts": [[2019]]} and "issued" not in items[1]


def test_refs_of_web_sources_and_escaping() -> None:
    cites = [
        CitationRecord(
            number=n,
            evidence_id=f"ev1:{n:016x}",
            doc_id=f"doc_{n}",
            title=title,
            source_uri=uri,
            pages=pages,
            quote="q",
            content_sha256="0",
        )
        for n, title, uri, pages in [
            (1, "Costs {100%} & $5_000 #1 ~ ^ \\ ok", "https://example.org/a?b=1#frag", []),
            (2, "Ångström: the 2nd report", "/data/x.pdf", [3, 4, 5, 9]),
            (2, "Ångström: the 2nd report", "/data/x.pdf", [5, 6]),
        ]
    ]
    report = Report(task="t", question="q", status="answered", markdown="", citations=cites)
    bib = export_report(report, "bib").decode()
    entries = _parse_bibtex(bib)
    assert [e[2]["title"] for e in entries] == [
        "{Costs \\{100\\%\\} \\& \\$5\\_000 \\#1 \\~{} \\^{} \\textbackslash{} ok}",
        "{Ångström: the 2nd report}",
    ]
    web = entries[0][2]
    assert web["url"] == "https://example.org/a?b=1%23frag" and "urldate" in web
    assert entries[1][2]["pages"] == "3--6, 9"
    assert entries[1][1].startswith("angstrom") and entries[0][1].startswith("costs")
    items = json.loads(export_report(report, "csl"))
    assert items[0]["type"] == "webpage" and items[0]["URL"] == "https://example.org/a?b=1#frag"
    assert items[1]["page"] == "3-6, 9" and "issued" not in items[1]
    assert citation_key("2020 Annual Review", 2020, "doc_9").startswith("src2020")
    assert bibtex_escape("a\n b") == "a b"


def _cli(app: Sourcebook, argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    handlers = add_parsers(p.add_subparsers(dest="command"))
    args = p.parse_args(argv)
    return handlers[args.command](app, args)


def test_format_for_names_and_suffixes() -> None:
    assert format_for(Path("r.docx")) == "docx" and format_for(Path("r.bib")) == "bib"
    assert format_for(Path("r.csl.json")) == "csl" and format_for(Path("r.json")) == "json"
    assert format_for(Path("r.htm")) == "html" and format_for(Path("r.txt")) is None
    assert format_for(Path("r.json"), "csl") == "csl" and format_for(Path("x"), "bibtex") == "bib"
    assert set(FORMATS) == {"md", "html", "pdf", "docx", "json", "bib", "csl"}


def test_cli_export_by_format_and_suffix(
    export_app: Sourcebook, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from core.errors import ConfigError

    report = make_report(export_app)
    log = export_app.task_log()
    try:
        log.begin(report.task, report.question, {})
        log.finish(report.task, report.status, report.model_dump(mode="json"))
    finally:
        log.close()
    for name in ("r.docx", "r.bib", "r.csl.json", "r.html"):
        assert _cli(export_app, ["export", report.task, "--out", str(tmp_path / name)]) == 0
    assert _parse_bibtex((tmp_path / "r.bib").read_text())
    assert json.loads((tmp_path / "r.csl.json").read_text())[0]["title"] == HARBOR_TITLE
    assert _docx_paragraphs((tmp_path / "r.docx").read_bytes())[0].text == QUESTION
    assert "data:image/png;base64," in (tmp_path / "r.html").read_text()
    capsys.readouterr()
    assert _cli(export_app, ["export", report.task, "--format", "bib"]) == 0
    assert capsys.readouterr().out.count("@misc{") == 3
    with pytest.raises(ConfigError, match="needs a file"):
        _cli(export_app, ["export", report.task, "--format", "docx"])
    # a file in a folder that does not exist, or a folder: told plainly, nothing written
    with pytest.raises(ConfigError, match=r"folder .*missing does not exist"):
        _cli(export_app, ["export", report.task, "--out", str(tmp_path / "missing" / "r.md")])
    with pytest.raises(ConfigError, match="is a folder"):
        _cli(export_app, ["export", report.task, "--format", "md", "--out", str(tmp_path)])
    assert not (tmp_path / "missing").exists()
    # an OS error while writing says which file and why
    from core.errors import SourcebookError
    from core.export import write_out

    (tmp_path / "plain.txt").write_text("x")
    with pytest.raises(SourcebookError, match=r"Could not write .*plain\.txt/r\.md: "):
        write_out(tmp_path / "plain.txt" / "r.md", b"report")
