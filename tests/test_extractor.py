"""PDF extraction in a child process (core.ingest.ExtractorProcess): same documents as in
process, typed errors, and no harm from a child or a parent killed mid-file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from pdfgen import make_encrypted_pdf, make_long_pdf, make_two_column_pdf

from core.errors import CancelledError, CorruptFileError, EmptyFileError, EncryptedFileError
from core.ingest import ExtractorProcess, extract_file
from core.settings import IngestSettings
from graph.wordpack import unpack_words
from models.embedder import WordPieceCounter, minilm_dir

pytestmark = pytest.mark.skipif(
    not (ExtractorProcess.supported and Path("/proc/self/stat").exists()),
    reason="the child process runs on POSIX; these tests read /proc",
)

SETTINGS = IngestSettings()


@pytest.fixture(scope="module")
def big_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("extractor") / "long.pdf"
    make_long_pdf(path, 400)
    return path


@pytest.fixture
def extractor() -> object:
    ex = ExtractorProcess(partial(WordPieceCounter, minilm_dir()))
    yield ex
    ex.close()


@pytest.fixture
def small_pdf(tmp_path: Path, extractor: ExtractorProcess) -> Path:
    """A two-page PDF, already read once: the extractor's child is up."""
    small = tmp_path / "two.pdf"
    make_two_column_pdf(small)
    extractor.extract(small, settings=SETTINGS)
    return small


def _child_pid(ex: ExtractorProcess, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc = ex._proc
        if proc is not None:
            return proc.pid
        time.sleep(0.01)
    raise AssertionError("the extraction process did not start")


def _gone(pid: int, timeout: float = 15) -> bool:
    """Whether process ``pid`` has exited (a zombie whose reaper has not run yet counts)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def test_child_gives_the_same_document_as_in_process(
    tmp_path: Path, extractor: ExtractorProcess
) -> None:
    pdf = tmp_path / "two.pdf"
    make_two_column_pdf(pdf)
    here = extract_file(pdf, settings=SETTINGS, count_tokens=WordPieceCounter(minilm_dir()))
    there = extractor.extract(pdf, settings=SETTINGS)
    assert there.document.doc_id == here.document.doc_id
    # the word boxes come packed, as the catalog stores them
    assert all(not p.words and p.packed_words for p in there.passages)
    assert [unpack_words(p.packed_words or b"") for p in there.passages] == [
        p.words for p in here.passages
    ]
    assert sum(len(p.words) for p in here.passages) > 50
    rest: Any = {"document": True, "passages": {"__all__": {"words"}}}
    assert there.model_dump(exclude=rest) == here.model_dump(exclude=rest)
    # the child is kept for the next file
    pid = _child_pid(extractor)
    extractor.extract(pdf, settings=SETTINGS)
    assert _child_pid(extractor) == pid


def test_child_errors_come_back_typed(tmp_path: Path, extractor: ExtractorProcess) -> None:
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    corrupt = tmp_path / "corrupt.pdf"
    corrupt.write_bytes(b"%PDF-1.7\n" + os.urandom(2000))
    locked = tmp_path / "locked.pdf"
    make_encrypted_pdf(locked)
    for path, kind in (
        (empty, EmptyFileError),
        (corrupt, CorruptFileError),
        (locked, EncryptedFileError),
    ):
        with pytest.raises(kind) as err:
            extractor.extract(path, settings=SETTINGS)
        assert err.value.path == str(path) and path.name in err.value.message
        assert err.value.hint


def test_child_killed_mid_file_fails_that_file_only(
    small_pdf: Path, big_pdf: Path, extractor: ExtractorProcess
) -> None:
    pid = _child_pid(extractor)
    killer = threading.Timer(0.3, os.kill, (pid, signal.SIGKILL))
    killer.start()
    with pytest.raises(CorruptFileError) as err:
        extractor.extract(big_pdf, settings=SETTINGS)
    killer.join()
    assert "stopped while reading it" in err.value.message and err.value.hint
    assert _gone(pid)
    doc = extractor.extract(small_pdf, settings=SETTINGS)  # a new child reads the next file
    assert doc.passages and _child_pid(extractor) != pid


@pytest.mark.usefixtures("small_pdf")  # the child is up
def test_cancel_stops_the_child_mid_file(big_pdf: Path, extractor: ExtractorProcess) -> None:
    pid = _child_pid(extractor)
    cancel = threading.Event()
    timer = threading.Timer(0.3, cancel.set)
    timer.start()
    with pytest.raises(CancelledError):  # raised only if the file was still being read
        extractor.extract(big_pdf, settings=SETTINGS, cancel=cancel)
    timer.join()
    assert extractor._proc is None and _gone(pid)


def test_parent_killed_mid_file_leaves_no_child(big_pdf: Path, tmp_path: Path) -> None:
    """kill -9 of the app while its child reads a file: the child ends too (no orphan)."""
    script = textwrap.dedent(
        f"""
        import sys, threading
        from functools import partial
        from pathlib import Path
        from core.ingest import ExtractorProcess
        from core.settings import IngestSettings
        from models.embedder import WordPieceCounter, minilm_dir
        ex = ExtractorProcess(partial(WordPieceCounter, minilm_dir()))
        def report():
            import time
            while ex._proc is None:
                time.sleep(0.01)
            print(ex._proc.pid, flush=True)
        threading.Thread(target=report, daemon=True).start()
        while True:
            ex.extract(Path({str(big_pdf)!r}), settings=IngestSettings())
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=Path.cwd()
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    time.sleep(1.0)  # well inside a 400-page file
    assert not _gone(child, timeout=0)  # the child is running
    parent.kill()
    parent.wait(30)
    assert _gone(child), "the extraction process outlived the killed app"
