"""A library records which embedder made its vectors, flags another one, and re-embeds.

Real PDFs, the real catalog and index, the real MiniLM; "another embedder" is the real one
under another identity, with the same vectors or with its dimensions permuted.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
from pdfgen import ALPHA, BETA, make_long_pdf, write_pdf

from core.cli import main
from core.errors import CancelledError, EmbedderMismatchError
from core.library import AddProgress
from core.service import Sourcebook
from core.settings import IngestSettings, Settings
from core.vectors import embedding_text
from models.embedder import (
    MINILM_WEIGHTS_SHA256,
    ONNX_GRAPH_VERSION,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
    runtime_of,
)

pytestmark = pytest.mark.real_model

SHA = MINILM_WEIGHTS_SHA256[:12]
OTHER = f"all-MiniLM-L6-v2@{SHA}/onnx-int8-{ONNX_GRAPH_VERSION}"


class Another:
    """The real embedder presented as another one: another identity, and vectors passed
    through ``transform`` (identity: same vectors)."""

    def __init__(
        self,
        inner: object,
        identity: str = OTHER,
        transform: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim  # type: ignore[attr-defined]
        self.max_tokens = inner.max_tokens  # type: ignore[attr-defined]
        self.identity = identity
        self._transform = transform

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)  # type: ignore[attr-defined,no-any-return]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vecs = self.inner.embed(texts)  # type: ignore[attr-defined]
        return vecs if self._transform is None else self._transform(vecs)


def permuted(vecs: np.ndarray) -> np.ndarray:
    """Reversed dimensions: still unit vectors, unrelated to the originals."""
    return np.ascontiguousarray(vecs[:, ::-1])


def open_app(home: Path, embedder: object, batch: int = 64) -> Sourcebook:
    settings = Settings(ingest=IngestSettings(embed_batch_size=batch))
    return Sourcebook(home, settings=settings, embedder=embedder)  # type: ignore[arg-type]


@pytest.fixture
def built(tmp_path: Path, embedder: object) -> Iterator[Path]:
    """A home whose library was made by the session embedder: two PDFs, one of them in two
    versions (the first superseded, its passages still in the index)."""
    home = tmp_path / "home"
    harbor = write_pdf(tmp_path / "harbor.pdf", ALPHA)
    rail = write_pdf(tmp_path / "rail.pdf", BETA)
    app = open_app(home, embedder)
    assert [r.outcome for r in app.add([harbor, rail]).results] == ["added", "added"]
    write_pdf(rail, [*BETA, "A later appendix adds the Cedar Ridge branch line timetable."])
    assert app.add([rail]).results[0].outcome == "new_version"
    app.close()
    yield home


def recorded(home: Path) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(home / "library" / "catalog.sqlite")) as conn:
        return conn.execute("SELECT key, value FROM library_meta").fetchall()


def stored_and_expected(app: Sourcebook) -> list[tuple[np.ndarray, np.ndarray]]:
    """(stored vector, the current embedder's vector of its embedding text) per passage,
    superseded versions included."""
    lib = app.library
    out = []
    for doc in app.documents(include_superseded=True):
        passages = lib.store.get_document_passages(doc.doc_id)
        stored = lib.store.vectors([p.passage_id for p in passages])
        expected = app.embedder.embed([embedding_text(app.embedder, doc, p) for p in passages])
        out.extend((stored[p.passage_id], v) for p, v in zip(passages, expected, strict=True))
    return out


def test_identities_name_model_weights_and_runtime(tmp_path: Path) -> None:
    torch = SentenceTransformerEmbedder().identity
    fp32 = OnnxEmbedder(tmp_path).identity
    int8 = OnnxEmbedder(tmp_path, quantized=True).identity
    assert torch == f"all-MiniLM-L6-v2@{SHA}/torch"
    assert fp32 == f"all-MiniLM-L6-v2@{SHA}/onnx-fp32-{ONNX_GRAPH_VERSION}"
    assert int8 == OTHER
    assert [runtime_of(i) for i in (torch, fp32, int8, "x@y/z")] == [
        "torch",
        "onnx",
        "onnx-int8",
        None,
    ]


def test_a_new_library_records_its_embedder(tmp_path: Path, embedder: object) -> None:
    home = tmp_path / "home"
    # An empty library takes whichever embedder opens it: nothing was embedded yet.
    first = open_app(home, Another(embedder))
    assert first.embedder_mismatch() is None  # opens the library
    first.close()
    assert recorded(home) == [("embedder", OTHER)]
    app = open_app(home, embedder)
    assert app.embedder_mismatch() is None
    assert recorded(home) == [("embedder", embedder.identity)]  # type: ignore[attr-defined]
    app.add([write_pdf(tmp_path / "harbor.pdf", ALPHA)])
    app.close()
    app = open_app(home, embedder)
    assert app.embedder_mismatch() is None
    assert app.search("seawall budget", k=1)[0].title.startswith("harbor")
    app.close()


@pytest.mark.parametrize("transform", [None, permuted], ids=["same-vectors", "other-vectors"])
def test_another_embedder_is_flagged_refused_and_search_works(
    built: Path,
    tmp_path: Path,
    embedder: object,
    transform: Callable[[np.ndarray], np.ndarray] | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = open_app(built, Another(embedder, transform=transform))
    mismatch = app.embedder_mismatch()
    assert mismatch is not None
    assert embedder.identity in mismatch and OTHER in mismatch  # type: ignore[attr-defined]
    assert "sourcebook reembed" in mismatch and "`onnx`" in mismatch  # the runtime to go back to
    before = [(d.doc_id, d.passage_count) for d in app.documents()]

    with pytest.raises(EmbedderMismatchError) as err:
        app.add([write_pdf(tmp_path / "new.pdf", ["Quarry permits rose in Elmwood county."])])
    assert "nothing was added" in err.value.message and embedder.identity in err.value.message  # type: ignore[attr-defined]
    assert "sourcebook reembed" in err.value.hint
    assert [(d.doc_id, d.passage_count) for d in app.documents()] == before

    with caplog.at_level(logging.WARNING, logger="core.library"):
        hits = app.search("seawall budget", k=3)
        app.search("electric locomotives", k=3)
    assert hits and hits[0].title.startswith("harbor")  # the keyword half still ranks it
    warnings = [r for r in caplog.records if "unlike vectors" in r.getMessage()]
    assert len(warnings) == 1  # once per library, not per search
    app.close()


def test_reembed_rewrites_every_vector_and_clears_the_mismatch(
    built: Path, tmp_path: Path, embedder: object
) -> None:
    app = open_app(built, Another(embedder, transform=permuted))
    assert app.embedder_mismatch() is not None
    pairs = stored_and_expected(app)
    assert not any(np.allclose(s, e, atol=1e-3) for s, e in pairs)  # the old vectors differ
    stats = app.library.store.stats()
    docs = app.documents(include_superseded=True)
    assert any(d.superseded_by for d in docs)

    events: list[AddProgress] = []
    result = app.reembed(progress=events.append)

    assert result.passages == stats["passages"] == len(pairs)
    assert result.documents == len(docs) and result.embedder == OTHER
    assert events and events[-1].done == events[-1].of == stats["passages"]
    assert app.embedder_mismatch() is None
    for stored, expected in stored_and_expected(app):  # superseded versions' too
        assert np.allclose(stored, expected, atol=1e-4)
    after = app.library.store.stats()
    for key in ("documents", "passages", "index_rows", "index_embedded"):
        assert after[key] == stats[key]
    # Vector search now compares like with like; adding works again.
    assert app.search("seawall budget", k=1, mode="vector")[0].title.startswith("harbor")
    assert app.add(
        [write_pdf(tmp_path / "new.pdf", ["Quarry permits rose in Elmwood county."])]
    ).added
    app.close()
    assert recorded(built) == [("embedder", OTHER)]
    app = open_app(built, Another(embedder, transform=permuted))
    assert app.embedder_mismatch() is None
    app.close()


def test_a_cancelled_reembed_stays_flagged_and_a_second_finishes(
    tmp_path: Path, embedder: object
) -> None:
    home = tmp_path / "home"
    make_long_pdf(tmp_path / "long.pdf", pages=3)
    app = open_app(home, embedder, batch=1)  # batches of 4 passages
    app.add([tmp_path / "long.pdf"])
    app.close()

    app = open_app(home, Another(embedder, transform=permuted), batch=1)
    n = app.library.store.stats()["passages"]
    assert n > 8
    cancel = threading.Event()
    seen: list[AddProgress] = []

    def on(ev: AddProgress) -> None:
        seen.append(ev)
        cancel.set()

    with pytest.raises(CancelledError):
        app.reembed(progress=on, cancel=cancel)
    assert [e.done for e in seen] == [4]
    assert app.embedder_mismatch() is not None
    new = [np.allclose(s, e, atol=1e-4) for s, e in stored_and_expected(app)]
    assert sum(new) == 4 and len(new) == n  # one batch written, no passage lost
    app.close()

    app = open_app(home, Another(embedder, transform=permuted), batch=1)
    assert app.embedder_mismatch() is not None  # the cancelled run recorded nothing
    assert app.reembed().passages == n
    assert app.embedder_mismatch() is None
    assert all(np.allclose(s, e, atol=1e-4) for s, e in stored_and_expected(app))
    app.close()


def test_a_library_made_before_identities_is_flagged(built: Path, embedder: object) -> None:
    with closing(sqlite3.connect(built / "library" / "catalog.sqlite")) as conn:
        conn.execute("DELETE FROM library_meta")
        conn.commit()
    app = open_app(built, embedder)
    mismatch = app.embedder_mismatch()
    assert mismatch is not None and "unrecorded embedder" in mismatch
    assert "embedder_runtime` back" not in mismatch  # no setting brings it back
    with pytest.raises(EmbedderMismatchError):
        app.add_jsonl(built / "none.jsonl")
    assert app.reembed().passages > 0
    assert app.embedder_mismatch() is None
    app.close()
    assert recorded(built) == [("embedder", embedder.identity)]  # type: ignore[attr-defined]


def test_cli_warns_refuses_and_reembeds(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    home = str(tmp_path / "home")
    pdf = write_pdf(tmp_path / "harbor.pdf", ALPHA)
    assert main(["--home", home, "add", str(pdf), "--quiet"]) == 0  # the default, onnx-int8
    capsys.readouterr()

    monkeypatch.setenv("SOURCEBOOK_MODELS__EMBEDDER_RUNTIME", "onnx")
    code = main(["--home", home, "docs"])
    err = capsys.readouterr().err
    assert code == 0 and err.count("warning:") == 1
    assert "sourcebook reembed" in err and "`onnx-int8`" in err  # the runtime to go back to
    with caplog.at_level(logging.WARNING, logger="core.library"):
        assert main(["--home", home, "search", "seawall budget", "-k", "2"]) == 0
    assert "harbor" in capsys.readouterr().out
    assert sum("unlike vectors" in r.getMessage() for r in caplog.records) == 1  # on stderr

    assert main(["--home", home, "add", str(write_pdf(tmp_path / "rail.pdf", BETA))]) == 4
    assert "nothing was added" in capsys.readouterr().err

    assert main(["--home", home, "reembed", "--quiet"]) == 0
    out = capsys.readouterr()
    assert re.search(r"re-embedded [1-9]\d* passage\(s\) of 1 document", out.out)
    assert "onnx-fp32" in out.out

    assert main(["--home", home, "docs"]) == 0
    out = capsys.readouterr()
    assert "warning" not in out.err and "vectors made by" in out.out and "onnx-fp32" in out.out
    assert main(["--home", home, "reembed"]) == 0
    assert "Nothing to do" in capsys.readouterr().out
