"""Generate small real PDFs with PyMuPDF for tests (two-column, tables, multi-page, scans...).

Each function writes ``path`` and returns what a reader should find in it, so tests can compare.
"""

from __future__ import annotations

from pathlib import Path

import pymupdf

LEFT_SENTENCES = [
    f"Left column sentence number {i} talks about alpha topics in some detail." for i in range(14)
]
RIGHT_SENTENCES = [
    f"Right column sentence number {i} describes beta matters at similar length." for i in range(14)
]


def make_two_column_pdf(path: Path) -> dict[str, list[str]]:
    """One page, a title across the top, then two prose columns whose lines share baselines."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((72, 60), "A Study of Two Columns", fontsize=18, fontname="hebo")
    left = pymupdf.Rect(50, 90, 296, 740)
    right = pymupdf.Rect(316, 90, 562, 740)
    rc1 = page.insert_textbox(left, " ".join(LEFT_SENTENCES), fontsize=10, fontname="helv")
    rc2 = page.insert_textbox(right, " ".join(RIGHT_SENTENCES), fontsize=10, fontname="helv")
    assert rc1 >= 0 and rc2 >= 0, "column text did not fit"
    doc.save(path)
    doc.close()
    return {"left": LEFT_SENTENCES, "right": RIGHT_SENTENCES}


def make_multipage_pdf(path: Path, pages: int) -> list[str]:
    """``pages`` pages, each with a heading and a sentence naming its 1-based page number."""
    doc = pymupdf.open()
    sentences = []
    for n in range(1, pages + 1):
        page = doc.new_page(width=612, height=792)
        page.insert_text((72, 72), f"Chapter {n}", fontsize=20, fontname="hebo")
        s = f"This is the body text of page number {n} in the generated report."
        page.insert_textbox(pymupdf.Rect(72, 100, 540, 300), s, fontsize=11, fontname="helv")
        sentences.append(s)
    doc.save(path)
    doc.close()
    return sentences


TABLE_ROWS = [
    ["Region", "Revenue", "Growth"],
    ["North", "$1,200", "12%"],
    ["South", "$950", "8%"],
    ["East", "$1,430", "15%"],
    ["West", "$780", "-3%"],
]


def make_table_pdf(path: Path) -> list[list[str]]:
    """A paragraph, then a 3-column table drawn cell by cell (like most report PDFs)."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((72, 72), "Quarterly Results", fontsize=18, fontname="hebo")
    page.insert_textbox(
        pymupdf.Rect(72, 90, 540, 140),
        "The table below shows revenue and growth by region for the quarter.",
        fontsize=11,
        fontname="helv",
    )
    xs = [72, 260, 420]
    y = 170
    for r, row in enumerate(TABLE_ROWS):
        for x, cell in zip(xs, row, strict=True):
            page.insert_text((x, y), cell, fontsize=11, fontname="hebo" if r == 0 else "helv")
        page.draw_line((72, y + 5), (540, y + 5), width=0.5)
        y += 20
    doc.save(path)
    doc.close()
    return TABLE_ROWS


def make_headings_pdf(path: Path) -> None:
    """Nested headings: a big title, section headings and a bold sub-heading, with prose."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    y = 72.0

    def line(text: str, size: float, font: str, gap: float = 8) -> None:
        nonlocal y
        page.insert_text((72, y), text, fontsize=size, fontname=font)
        y += size + gap

    line("Annual Report", 22, "hebo", 14)
    line("Introduction", 16, "hebo")
    for i in range(3):
        line(f"The introduction explains the purpose of report part {i}.", 11, "helv", 4)
    y += 10
    line("Methods", 16, "hebo")
    line("Data Collection", 11, "hebo", 6)
    for i in range(3):
        line(f"Data was collected from source number {i} during the year.", 11, "helv", 4)
    doc.save(path)
    doc.close()


def make_image_only_pdf(path: Path, *, text_pages: int = 0) -> None:
    """A 'scanned' page (a full-page image, no text layer), after ``text_pages`` text pages."""
    doc = pymupdf.open()
    for n in range(text_pages):
        page = doc.new_page(width=612, height=792)
        page.insert_text((72, 72), f"Text page {n + 1} has a real text layer.", fontsize=12)
    page = doc.new_page(width=612, height=792)
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 200, 260), False)
    pix.clear_with(200)
    page.insert_image(page.rect, pixmap=pix)
    doc.save(path)
    doc.close()


def make_encrypted_pdf(path: Path, password: str = "secret") -> None:
    """A PDF that needs a user password to open."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Confidential text.", fontsize=12)
    doc.save(
        path,
        encryption=pymupdf.PDF_ENCRYPT_AES_256,
        user_pw=password,
        owner_pw=password + "-owner",
    )
    doc.close()


def make_long_pdf(path: Path, pages: int, sentences_per_page: int = 30) -> None:
    """Many pages of prose (for token-limit and speed tests)."""
    doc = pymupdf.open()
    for n in range(pages):
        page = doc.new_page(width=612, height=792)
        text = " ".join(
            f"Sentence {k} on page {n + 1} discusses the Federal Reserve and inflation of 3.5% "
            f"in March 2021, with revenue of $4.2 billion."
            for k in range(sentences_per_page)
        )
        page.insert_textbox(pymupdf.Rect(60, 60, 552, 740), text, fontsize=9, fontname="helv")
    doc.save(path)
    doc.close()


# Two small reports for library tests (one page per string).
ALPHA = [
    "The Harbor Authority approved a budget of 42 million dollars for the new seawall. "
    "Construction begins in March 2025 under contractor Baxter Marine.",
    "Tidal flooding in the lower district rose by 18 percent since 2010. "
    "Residents petitioned the council for faster drainage works.",
]
BETA = [
    "The Mountain Rail study compares electric and diesel locomotives on steep grades. "
    "Electric units cut fuel costs by a third on the Alder Pass line.",
]


def write_pdf(path: Path, pages: list[str]) -> Path:
    """A PDF with one page per text."""
    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page()
        page.insert_textbox(pymupdf.Rect(60, 60, 540, 780), text, fontsize=11)
    doc.save(path)
    doc.close()
    return path


def make_sec_cover_pdf(path: Path, lines: list[str]) -> None:
    """A filing's cover page: ``lines`` one under another (the first, the agency, in large
    type, so it is also the first heading), then a body page."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    y = 60.0
    for i, line in enumerate(lines):
        size = 16 if i == 0 else 10
        page.insert_text((72, y), line, fontsize=size, fontname="hebo" if i == 0 else "helv")
        y += size + 8
    body = doc.new_page(width=612, height=792)
    body.insert_textbox(
        pymupdf.Rect(72, 72, 540, 700),
        "Item 7. Management's discussion. Net sales increased 12 percent in the year.",
        fontsize=10,
        fontname="helv",
    )
    doc.set_metadata({"title": "0000000000-24-000001"})  # a filing number, as EDGAR leaves it
    doc.save(path)
    doc.close()


def make_tail_tree_pdf(path: Path, pages: int) -> list[str]:
    """Like :func:`make_multipage_pdf`, but with the catalog and the page tree written last, as
    most PDF 1.5+ writers leave them: a copy cut short loses the page tree, not the pages."""
    sentences = make_multipage_pdf(path, pages)
    doc = pymupdf.open(path)
    catalog = doc.pdf_catalog()
    root = int(doc.xref_get_key(catalog, "Pages")[1].split()[0])
    new_root = doc.get_new_xref()
    doc.update_object(new_root, doc.xref_object(root))
    for i in range(doc.page_count):
        doc.xref_set_key(doc[i].xref, "Parent", f"{new_root} 0 R")
    new_catalog = doc.get_new_xref()
    doc.update_object(new_catalog, f"<< /Type /Catalog /Pages {new_root} 0 R >>")
    doc.xref_set_key(-1, "Root", f"{new_catalog} 0 R")
    doc.update_object(root, "null")
    doc.update_object(catalog, "null")
    data = doc.tobytes()  # object order kept: the new catalog and tree come last
    doc.close()
    path.write_bytes(data)
    return sentences


TOC_ENTRIES = [("1. Introduction", "2"), ("1.1. Scope of the Study", "2"), ("2. Staffing", "3")]
STRUCTURE_IDS = ["_9cdf804c-c003-4ebd-8997-69fb44b7fda2", "_Toc104567890"]
LEADER_ROWS = [("Contractors", "12"), ("Employees", "340"), ("Volunteers", "7")]


def make_toc_pdf(path: Path) -> None:
    """A table of contents with dot leaders (glued to the title and number as word processors
    write them, spaced, and standing alone), body pages whose margin holds bookmark ids in tiny
    type, and a staffing table whose labels are joined to their figures by leaders."""
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_text((250, 72), "Contents", fontsize=16, fontname="hebo")
    y = 100.0
    for k, (title, num) in enumerate(TOC_ENTRIES):
        if k == 0:
            line = title + "." * 70 + num  # one glued word: "Introduction....2"
        elif k == 1:
            line = title + " " + ". " * 30 + num
        else:
            line = title + " " + "." * 60 + " " + num
        page.insert_text((72, y), line, fontsize=11, fontname="helv")
        y += 14
    body = doc.new_page(width=612, height=792)
    body.insert_text((72, 72), "1. Introduction", fontsize=16, fontname="hebo")
    body.insert_text((558, 90), STRUCTURE_IDS[0], fontsize=1.4, fontname="helv")
    body.insert_textbox(
        pymupdf.Rect(72, 100, 540, 200),
        "The study reviews how the agency staffs its regional offices. It counts contractors, "
        "employees and volunteers at the end of the fiscal year.",
        fontsize=11,
        fontname="helv",
    )
    body.insert_text((558, 140), STRUCTURE_IDS[1], fontsize=1.4, fontname="helv")
    staff = doc.new_page(width=612, height=792)
    staff.insert_text((72, 72), "2. Staffing", fontsize=16, fontname="hebo")
    staff.insert_text(
        (72, 100), "The offices employ the following people.", fontsize=11, fontname="helv"
    )
    y = 130.0
    for label, num in LEADER_ROWS:
        staff.insert_text((72, y), label + "." * 40 + num, fontsize=11, fontname="helv")
        y += 14
    doc.save(path)
    doc.close()
