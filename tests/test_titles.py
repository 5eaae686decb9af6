"""Document titles from an SEC filing's cover page (core.ingest.titles)."""

from __future__ import annotations

from pathlib import Path

import pdfgen
import pymupdf
from conftest import shared_eval

from core.ingest import extract_file
from core.ingest.titles import sec_cover_title
from core.settings import IngestSettings
from models.embedder import WordPieceCounter, minilm_dir

TEN_K = [
    "UNITED STATES",
    "SECURITIES AND EXCHANGE COMMISSION",
    "Washington, D.C. 20549",
    "FORM 10-K",
    "ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934",
    "For the fiscal year ended December 31, 2024",
    "Commission File No. 000-12345",
    "ACME WIDGETS, INC.",
    "(Exact name of registrant as specified in its charter)",
    "Delaware",
]


def test_a_10k_cover_gives_registrant_form_and_fiscal_year(tmp_path: Path) -> None:
    path = tmp_path / "acme-10k.pdf"
    pdfgen.make_sec_cover_pdf(path, TEN_K)
    doc = extract_file(path, settings=IngestSettings(), count_tokens=WordPieceCounter(minilm_dir()))
    # not the letterhead (the first heading) nor the filing number (the metadata title)
    assert (
        doc.document.title == "ACME WIDGETS, INC. — Form 10-K, fiscal year ended December 31, 2024"
    )


def test_an_8k_cover_with_wrapped_lines_gives_its_report_date() -> None:
    lines = [
        "UNITED STATES",
        "SECURITIES AND EXCHANGE COMMISSION",
        "FORM 8-K",
        "CURRENT",
        "REPORT",
        "Date of Report (Date of earliest event",
        "reported): March 14, 2021 (March 12,",
        "2021)",
        "KELDAR",
        "PLC",
        "(Exact",
        "name of registrant as specified in its charter)",
    ]
    assert sec_cover_title(lines) == "KELDAR PLC — Form 8-K, report dated March 14, 2021"


def test_a_cover_without_the_registrant_note_names_the_line_after_the_file_number() -> None:
    lines = [
        "UNITED STATES SECURITIES AND EXCHANGE COMMISSION",
        "FORM 10-Q",
        "For the Quarterly Period Ended June 30, 2023",
        "Commission File Number 001-37845",
        "EXAMPLE CORPORATION",
        "WASHINGTON 91-1144442 (STATE OF INCORPORATION)",
    ]
    assert sec_cover_title(lines) == (
        "EXAMPLE CORPORATION — Form 10-Q, quarterly period ended June 30, 2023"
    )


def test_documents_that_are_not_filings_keep_their_other_titles() -> None:
    # names the agency in its text but has no form line: a report about filings, not a filing
    assert (
        sec_cover_title(
            [
                "Disclosure Trends in 2024",
                "Companies file annual reports with the Securities and Exchange Commission.",
                "(Exact name of registrant as specified in its charter)",
            ]
        )
        is None
    )
    # a filing whose registrant cannot be found: no half title
    assert sec_cover_title(["SECURITIES AND EXCHANGE COMMISSION", "FORM 10-K"]) is None
    assert sec_cover_title([]) is None


def test_the_financebench_filings_get_distinct_titles_naming_their_registrants() -> None:
    folder = shared_eval("financebench", "pdfs")
    titles = {}
    for path in sorted(folder.glob("*.pdf")):
        with pymupdf.open(path) as doc:
            title = sec_cover_title(doc[0].get_text().splitlines())
        if "EARNINGS" not in path.name:  # press releases, not filings
            titles[path.name] = title
    assert len(titles) >= 10
    assert all(titles.values()), [n for n, t in titles.items() if not t]
    assert len(set(titles.values())) == len(titles)
    for name, title in titles.items():
        company = name.split("_")[0][:4].lower()
        assert company in title.lower().replace(" ", ""), (name, title)
        form = "10-K" if "10K" in name else "10-Q" if "10Q" in name else "8-K"
        assert f"Form {form}" in title, (name, title)
