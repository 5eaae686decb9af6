"""What the packaged app (packaging/sourcebook.spec) relies on, checked in the source install:

- with the exported ONNX file present, the app's whole first session (the real window's
  self-test: add a PDF, search, open a hit) never imports torch, sentence-transformers or
  transformers, which the bundle leaves out;
- an embedder loads a prebuilt ONNX file (a bundle's) without exporting or writing anything,
  and never deletes one it cannot load;
- in a frozen app the llama.cpp probe's children and the document reader's child run through
  the app's own binary, and the entry point runs them.

The bundle itself is tested as a user would use it by packaging/test-bundle.sh
(`make package-test`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
from pdfgen import write_pdf

from core.frozen import EXTRACTOR_FLAG
from core.ingest import ExtractorProcess, extract_file
from core.settings import IngestSettings, models_cache_dir
from desktop.entry import wants_app
from models import embedder as embedder_mod
from models import probe as probe_mod
from models.embedder import OnnxEmbedder, WordPieceCounter, minilm_dir
from models.errors import ModelFileError

REPO = Path(__file__).resolve().parent.parent
NEVER = ("torch", "sentence_transformers", "transformers")


@pytest.fixture(scope="module")
def int8_onnx() -> Path:
    """The app's default embedder file (exported once into the shared models cache)."""
    return OnnxEmbedder(models_cache_dir(), quantized=True).prepare()


@pytest.mark.real_model
@pytest.mark.slow
def test_the_apps_first_session_never_imports_torch(int8_onnx: Path, tmp_path: Path) -> None:
    pdf = write_pdf(
        tmp_path / "levee report.pdf",
        ["The levee inspection found seepage under the north embankment in March."],
    )
    shot = tmp_path / "shot.png"
    code = (
        "import sys\n"
        "from desktop.entry import main\n"
        f"code = main(['--self-test', {str(pdf)!r}, '--query', 'seepage embankment', "
        f"'--screenshot', {str(shot)!r}, '--self-test-timeout', '240'])\n"
        f"print('IMPORTED', [m for m in {NEVER!r} if m in sys.modules])\n"
        "sys.exit(code)\n"
    )
    env = {
        **_clean_env(),
        "SOURCEBOOK_HOME": str(tmp_path / "home"),
        "SOURCEBOOK_MODELS_DIR": str(int8_onnx.parent),
        "QT_QPA_PLATFORM": "offscreen",
        "PYTHONPATH": str(REPO),  # the tree under test, whatever the venv's editable install
    }
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "self-test passed" in proc.stderr
    assert "IMPORTED []" in proc.stdout, proc.stdout
    assert shot.stat().st_size > 1000


@pytest.mark.slow
def test_a_failed_self_test_exits_non_zero(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "a.pdf", ["The levee inspection found seepage."])
    env = {
        **_clean_env(),
        "SOURCEBOOK_HOME": str(tmp_path / "home"),
        "QT_QPA_PLATFORM": "offscreen",
        "PYTHONPATH": str(REPO),
    }
    for args, why in (
        ([str(tmp_path / "missing.pdf"), "--query", "levee"], "no such file"),
        ([str(pdf), "--query", "zeppelin"], "the first hit holds no word of 'zeppelin'"),
    ):
        proc = subprocess.run(
            [str(Path(sys.executable).with_name("sourcebook")), "--self-test", *args],
            capture_output=True,
            text=True,
            timeout=240,
            env=env,
            cwd=tmp_path,
            check=False,
        )
        assert proc.returncode == 1, proc.stderr[-2000:]
        assert "self-test FAILED" in proc.stderr and why in proc.stderr


def test_a_prebuilt_onnx_file_is_loaded_and_nothing_is_written(
    int8_onnx: Path, tmp_path: Path
) -> None:
    prebuilt = tmp_path / "bundled-models"
    prebuilt.mkdir()
    shutil.copy2(int8_onnx, prebuilt / int8_onnx.name)
    cache = tmp_path / "cache"
    emb = OnnxEmbedder(cache, quantized=True, prebuilt_dirs=[prebuilt], threads=1)
    assert emb.onnx_path == prebuilt / int8_onnx.name
    vec = emb.embed(["a levee", "a dam"])
    assert vec.shape == (2, emb.dim)
    assert not cache.exists()  # nothing exported, quantized or cached


def test_a_damaged_prebuilt_file_is_reported_and_kept(int8_onnx: Path, tmp_path: Path) -> None:
    prebuilt = tmp_path / "bundled-models"
    prebuilt.mkdir()
    (prebuilt / int8_onnx.name).write_bytes(b"not an onnx file")
    emb = OnnxEmbedder(tmp_path / "cache", quantized=True, prebuilt_dirs=[prebuilt])
    with pytest.raises(ModelFileError, match="prebuilt ONNX embedder") as err:
        emb.embed(["x"])
    assert "install it again" in (err.value.hint or "")
    assert (prebuilt / int8_onnx.name).read_bytes() == b"not an onnx file"


def test_a_frozen_app_looks_for_its_bundled_models(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert embedder_mod.bundled_models_dir() is None  # a source install has none
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    folder = tmp_path / embedder_mod.BUNDLED_MODELS_FOLDER
    assert embedder_mod.bundled_models_dir() == folder
    assert OnnxEmbedder(tmp_path / "cache").prebuilt_dirs == [folder]


def test_a_frozen_apps_probe_runs_through_its_own_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    assert probe_mod.probe_command(Path("m.gguf"))[1:3] == ["-m", "models.probe"]
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", "/opt/sourcebook/sourcebook")
    assert probe_mod.probe_command(Path("m.gguf"), Path("lib/v.so")) == [
        "/opt/sourcebook/sourcebook",
        probe_mod.CHILD_FLAG,
        "m.gguf",
        "--variant",
        "lib/v.so",
    ]
    assert probe_mod.scores_command() == [
        "/opt/sourcebook/sourcebook",
        probe_mod.CHILD_FLAG,
        "--scores",
    ]
    assert "PYTHONPATH" not in probe_mod._child_env()


def test_the_entry_point_runs_the_probes_child() -> None:
    """What the frozen app's binary does with the probe's command line, through the real
    console script: the scores child prints ggml's CPU-variant scores as JSON."""
    exe = Path(sys.executable).with_name("sourcebook")
    proc = subprocess.run(
        [str(exe), probe_mod.CHILD_FLAG, "--scores"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_clean_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    scores = json.loads(proc.stdout)
    assert isinstance(scores, dict)
    assert all(isinstance(v, int) for v in scores.values())


def test_a_frozen_apps_document_reader_runs_through_its_own_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The extraction child started as a packaged app starts it (its binary and
    EXTRACTOR_FLAG), here through the console script: the same document comes back."""
    pdf = write_pdf(tmp_path / "a.pdf", ["Seepage was found under the north embankment."])
    expected = extract_file(
        pdf, settings=IngestSettings(), count_tokens=WordPieceCounter(minilm_dir())
    )
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", str(Path(sys.executable).with_name("sourcebook")))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    reader = ExtractorProcess(partial(WordPieceCounter, minilm_dir()))
    try:
        doc = reader.extract(pdf, settings=IngestSettings())
        child = reader._proc
        assert child is not None and child.args[1] == EXTRACTOR_FLAG
    finally:
        reader.close()
    assert doc.document.doc_id == expected.document.doc_id
    assert [p.text for p in doc.passages] == [p.text for p in expected.passages]


def test_the_self_test_options_open_the_app() -> None:
    assert wants_app(["--self-test", "a.pdf", "--query", "two words", "--screenshot", "s.png"])
    assert wants_app(["--ready-file=/tmp/r", "--home", "h"])
    assert not wants_app(["search", "--query", "x"])
    assert not wants_app(["--self-test"])  # a value is missing: the CLI explains


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SOURCEBOOK_")} | {
        "HF_HUB_OFFLINE": "1"
    }
