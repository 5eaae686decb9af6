"""PassageIndex maintenance: the ANN index stays in few segments, and searches stay right."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from graph.index import MAX_ANN_SEGMENTS, PassageIndex, RowMap
from graph.schemas import Passage

DIM = 8


def passages(doc: str, n: int) -> list[Passage]:
    return [
        Passage(
            passage_id=f"{doc}-p{i}",
            doc_id=doc,
            ordinal=i,
            text=f"{doc} passage {i}",
            page_start=0,
            page_end=0,
            char_start=0,
            char_end=10,
        )
        for i in range(n)
    ]


def test_ann_index_is_rebuilt_instead_of_growing_past_max_segments(tmp_path: Path) -> None:
    idx = PassageIndex(tmp_path / "index", DIM, ann_threshold=200, optimize_every=100)
    rng = np.random.default_rng(3)
    segments, rebuilt = [], []
    stored: dict[str, np.ndarray] = {}
    for d in range(7):
        ps = passages(f"d{d}", 100)
        idx.add_passages({f"d{d}": ps})
        v = rng.standard_normal((100, DIM)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        idx.set_vectors([p.passage_id for p in ps], v)
        stored.update(zip([p.passage_id for p in ps], v, strict=True))
        done = idx.maintain()
        segments.append(idx.ann_segments())
        rebuilt.append("ann_build_s" in done)
    # built at 200 rows, folded forward into a second segment, rebuilt rather than a third
    assert segments == [0, 1, 2, 1, 2, 1, 2]
    assert rebuilt == [False, True, False, True, False, True, False]
    assert max(segments) == MAX_ANN_SEGMENTS
    for pid in ("d0-p5", "d3-p40", "d6-p99"):  # rows of every age are found
        assert idx.vector_search(stored[pid], 5, None)[0][0] == pid


def test_ann_search_reports_cosine_similarities_like_an_exact_scan(tmp_path: Path) -> None:
    # hybrid fusion normalises the dense scores, so the ANN index must report the same cosine
    # an exact scan does (a lancedb cosine index reports 2 x the cosine distance)
    idx = PassageIndex(tmp_path / "index", DIM, ann_threshold=300, optimize_every=100)
    rng = np.random.default_rng(5)
    ps = passages("d", 300)
    idx.add_passages({"d": ps})
    v = rng.standard_normal((300, DIM)).astype(np.float32)
    idx.set_vectors([p.passage_id for p in ps], 3.0 * v)  # stored normalised all the same
    idx.maintain(force=True)
    assert idx.has_ann_index()
    for i in (3, 150, 299):
        q = v[i] + 0.8 * v[(i + 1) % 300]
        ann = dict(idx.vector_search(q, 5, None))
        exact = dict(idx.vector_search(q, 5, None, exact=True))
        assert set(ann) & set(exact)
        for pid in set(ann) & set(exact):
            assert abs(ann[pid] - exact[pid]) < 0.02, (pid, ann[pid], exact[pid])
        cos = float(q @ v[i] / np.linalg.norm(q) / np.linalg.norm(v[i]))
        assert abs(exact[ps[i].passage_id] - cos) < 1e-4


def _keyword_index(tmp_path: Path, n: int = 300) -> tuple[PassageIndex, list[Passage]]:
    idx = PassageIndex(tmp_path / "index", DIM, ann_threshold=10_000, optimize_every=100)
    ps = [
        p.model_copy(update={"text": f"token{p.ordinal:04d} shared words"})
        for p in passages("d", n)
    ]
    idx.add_passages({"d": ps})
    return idx, ps


def test_searches_use_the_row_map_only_while_no_write_has_landed(tmp_path: Path) -> None:
    idx, ps = _keyword_index(tmp_path)
    assert idx.keyword_search("token0007", 3, None)[0][0] == "d-p7"  # no map yet: passage ids
    assert idx.wait_rowmap()
    assert idx.keyword_search("token0007", 3, None)[0][0] == "d-p7"
    # a poisoned map of the current write count is used (the fast path really runs) ...
    good = idx._rowmap
    assert good is not None
    poisoned = RowMap(good.gen, good.rowids, np.array([f"x{p}" for p in good.passage_ids]))
    idx._rowmap = poisoned
    assert idx.keyword_search("token0007", 3, None)[0][0] == "xd-p7"
    # ... and never after a write: rewriting rows moves them (new row ids)
    rng = np.random.default_rng(1)
    idx.set_vectors([p.passage_id for p in ps], rng.standard_normal((len(ps), DIM)))
    assert idx._rowmap is poisoned
    assert idx.keyword_search("token0007", 3, None)[0][0] == "d-p7"
    assert idx.wait_rowmap()
    assert idx._rowmap is not poisoned
    idx._rowmap = RowMap(idx._rowmap.gen, idx._rowmap.rowids[:0], idx._rowmap.passage_ids[:0])
    assert idx.keyword_search("token0007", 3, None)[0][0] == "d-p7"  # unknown row ids: slow way


def test_close_waits_for_the_background_row_map_read_and_starts_no_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lancedb query left running in a daemon thread at interpreter exit can abort the
    process, so closing the index waits for it."""
    idx, _ = _keyword_index(tmp_path)
    finished = threading.Event()
    read = idx._read_rowmap

    def slow_read() -> None:
        time.sleep(0.5)
        read()
        finished.set()

    monkeypatch.setattr(idx, "_read_rowmap", slow_read)
    idx.keyword_search("token0007", 3, None)  # no map yet: starts the read
    assert idx._rowmap_thread is not None and idx._rowmap_thread.is_alive()
    idx.close()
    assert finished.is_set()
    idx._rowmap = None
    assert idx.keyword_search("token0007", 3, None)[0][0] == "d-p7"  # still searchable
    assert not idx._rowmap_thread.is_alive() and idx._rowmap is None  # and nothing started


def test_searches_stay_right_while_a_writer_moves_rows(tmp_path: Path) -> None:
    # searches racing a writer whose set_vectors / optimize give rows new row ids
    idx, ps = _keyword_index(tmp_path)
    rng = np.random.default_rng(2)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            while not stop.is_set():
                some = [ps[i] for i in rng.choice(len(ps), 40, replace=False)]
                idx.set_vectors([p.passage_id for p in some], rng.standard_normal((40, DIM)))
                idx.maintain(force=True)
                stop.wait(0.05)  # a pause, long enough for the map to be read again
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    t = threading.Thread(target=writer)
    t.start()
    checked = fast = 0
    deadline = time.monotonic() + 2
    try:
        while time.monotonic() < deadline:
            i = int(rng.integers(0, len(ps)))
            fast += idx._rowmap_now() is not None
            hits = idx.keyword_search(f"token{i:04d}", 3, None)
            assert hits[0][0] == f"d-p{i}", (i, hits)
            checked += 1
    finally:
        stop.set()
        t.join()
    assert not errors
    assert checked > 20
    assert fast > 0  # the map was in use for part of the time, between writes
