"""The `sourcebook` command line, in process and as a real subprocess (kill -9 recovery)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pymupdf
import pytest

from core.cli import main

pytestmark = pytest.mark.real_model

SAMPLES = Path(__file__).resolve().parent.parent / "resources" / "samples"


def make_pdf(path: Path, n_pages: int, marker: str = "zebra") -> Path:
    doc = pymupdf.open()
    for i in range(n_pages):
        page = doc.new_page()
        text = (
            f"Chapter {i}. The committee reviewed the {marker}{i} programme and its budget. "
            "Spending rose while staffing fell, according to the annual audit. " * 5
        )
        page.insert_textbox(pymupdf.Rect(50, 50, 550, 800), text, fontsize=10)
    doc.save(path)
    doc.close()
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_add_docs_search_show_remove(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = str(tmp_path / "home")
    pdf = make_pdf(tmp_path / "audit.pdf", 3)
    code, out, _ = run_cli(capsys, "--home", home, "add", str(pdf), "--collection", "audits")
    assert code == 0 and "added" in out and "1 added" in out

    code, out, _ = run_cli(capsys, "--home", home, "docs")
    assert code == 0 and "audit" in out and "ready" in out

    code, out, _ = run_cli(
        capsys, "--home", home, "search", "zebra2 programme", "-k", "3", "--json"
    )
    hits = json.loads(out)
    assert code == 0 and hits[0]["page_start"] == 2
    assert hits[0]["evidence_id"].startswith("ev1:")

    code, out, _ = run_cli(capsys, "--home", home, "show", hits[0]["evidence_id"])
    assert code == 0 and "page(s): 3" in out and "word boxes" in out

    code, out, _ = run_cli(capsys, "--home", home, "search", "zebra1", "--collection", "audits")
    assert code == 0 and "audit" in out

    code, _, err = run_cli(capsys, "--home", home, "show", "ev1:0000000000000000")
    assert code == 3 and "error:" in err

    code, _, err = run_cli(capsys, "--home", home, "remove", "no-such-document")
    assert code == 3 and "sourcebook docs" in err

    code, out, _ = run_cli(capsys, "--home", home, "remove", "audit.pdf")
    assert code == 0 and "removed" in out
    code, out, _ = run_cli(capsys, "--home", home, "docs")
    assert "empty" in out


def test_cli_reports_bad_files_and_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = str(tmp_path / "home")
    good = make_pdf(tmp_path / "good.pdf", 1)
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(good.read_bytes()[:300])  # truncated
    code, out, err = run_cli(capsys, "--home", home, "add", str(bad), str(good))
    assert code == 1
    assert "broken.pdf" in err and "->" in err
    assert "1 added" in out and "1 failed" in out


def test_cli_add_folder_names_skipped_files_and_reads_extensionless_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = str(tmp_path / "home")
    folder = tmp_path / "papers"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("Field notes about the heron colony.\n", encoding="utf-8")
    (folder / "README").write_text("Read me first: the heron survey, 2021.\n", encoding="utf-8")
    letter = "Le héron pêche près de la rivière, entouré de blé et de forêts épaisses.\n"
    (folder / "sub" / "lettre.txt").write_bytes(letter.encode("cp1252"))
    (folder / "blob").write_bytes(b"\x00\x01\x02 not text" * 50)  # no extension, not text
    (folder / "a.xyz").write_text("an unknown format\n")
    (folder / "b.bin").write_bytes(b"\x00" * 64)
    for i in range(1, 10):
        (folder / f"c{i:02}.dat").write_bytes(b"data")
    # hidden files and folders are tools' state, left out without a word
    (folder / ".git" / "objects").mkdir(parents=True)
    (folder / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (folder / ".git" / "objects" / "ab").write_bytes(b"x\x01\x00\x00")
    (folder / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")

    code, out, _ = run_cli(capsys, "--home", home, "add", str(folder))
    assert code == 0 and "3 added" in out, out
    skipped = [f"{folder / n}" for n in ("a.xyz", "b.bin", "blob", "c01.dat", "c07.dat")]
    assert f"Skipped 12 files of unsupported type: {', '.join(skipped[:4])}" in out
    assert skipped[4] in out and "c08.dat" not in out and "and 2 more" in out
    assert ".git" not in out and ".DS_Store" not in out

    code, out, _ = run_cli(capsys, "--home", home, "docs")
    assert code == 0 and "README" in out
    assert "note: text encoding assumed: cp1252 (detected)" in out  # read whole: a note


def test_cli_adds_jsonl_with_external_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = str(tmp_path / "home")
    corpus = tmp_path / "corpus.jsonl"
    rows = [
        {
            "pid": "p1",
            "name": "Alder Pass",
            "body": "Alder Pass is a mountain pass with a railway.",
        },
        {"pid": "p2", "name": "Harbor", "body": "The harbor seawall cost 42 million dollars."},
    ]
    corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    args = ["--home", home, "add", str(corpus), "--title-field", "name", "--text-field", "body"]
    code, out, _ = run_cli(capsys, *args, "--id-field", "pid")
    assert code == 0 and "2 added" in out
    code, out, _ = run_cli(capsys, "--home", home, "docs", "--json")
    docs = json.loads(out)
    assert sorted(d["external_id"] for d in docs) == ["p1", "p2"]


@pytest.mark.slow
def test_kill_9_during_add_leaves_a_library_that_recovers(tmp_path: Path) -> None:
    """A subprocess killed mid-add: the library opens, shows no half document, re-adds."""
    home = tmp_path / "home"
    # Enough pages for several embedding batches, so the kill lands while vectors are written.
    pdf = make_pdf(tmp_path / "big.pdf", 700)
    env = {**os.environ, "SOURCEBOOK_HOME": str(home), "SOURCEBOOK_PROGRESS": "1"}
    cmd = [sys.executable, "-m", "core.cli", "add", str(pdf)]
    for kill_at in ("indexing", "embedding"):
        proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=Path.cwd()
        )
        assert proc.stderr is not None
        seen = b""
        deadline = time.monotonic() + 300
        while kill_at.encode() not in seen and time.monotonic() < deadline:
            chunk = os.read(proc.stderr.fileno(), 256)
            if not chunk:
                break
            seen += chunk
        assert kill_at.encode() in seen, seen[-500:]
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL, "the add finished before it could be killed"
        if kill_at == "embedding":
            # The kill really left a half-added version behind for the next open to sweep.
            with sqlite3.connect(home / "library" / "catalog.sqlite") as db:
                statuses = [r[0] for r in db.execute("SELECT status FROM documents")]
            assert statuses == ["indexing"]

        # The library opens and shows no half-added document.
        check = subprocess.run(
            [sys.executable, "-m", "core.cli", "docs", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert check.returncode == 0, check.stderr
        assert json.loads(check.stdout) == []

    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "1 added" in done.stdout
    found = subprocess.run(
        [sys.executable, "-m", "core.cli", "search", "zebra677", "--mode", "keyword", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    hit = json.loads(found.stdout)[0]
    assert hit["page_start"] <= 677 <= hit["page_end"]


@pytest.mark.slow
def test_bundled_samples_are_searchable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What `make run` does: add the bundled sample library and answer a search."""
    home = str(tmp_path / "home")
    code, out, _ = run_cli(capsys, "--home", home, "add", str(SAMPLES), "--quiet")
    assert code == 0 and "4 added" in out
    code, out, _ = run_cli(
        capsys, "--home", home, "search", "strategic goals of the Department of Labor", "--json"
    )
    hits = json.loads(out)
    assert any("DOL" in h["title"] or "Labor" in h["title"] for h in hits[:3])


def test_cli_models_lists_starters_and_refuses_bad_gguf(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "ggufs"
    folder.mkdir()
    (folder / "broken-model.gguf").write_bytes(b"NOTAGGUF" + bytes(64))
    code, out, _ = run_cli(
        capsys, "--home", str(tmp_path / "home"), "models", "--path", str(folder), "--json"
    )
    assert code == 0
    entries = {e["name"]: e for e in json.loads(out)}
    assert "qwen2.5-coder-0.5b-instruct-q4_k_m" in entries
    broken = next(e for e in entries.values() if "broken-model" in e["location"])
    assert not broken["available"] and broken["error"]
