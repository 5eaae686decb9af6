"""EmbedOnce: a text already embedded in the run is not embedded again (a recording fake)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from core.vectors import EmbedOnce


class RecordingEmbedder:
    """A fake embedder: each text's vector is derived from the text, and every call is kept."""

    name = "fake"
    dim = 8
    max_tokens = 256
    identity = "fake@0/test"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.stack([self.vector(t) for t in texts]).astype(np.float32)

    def vector(self, text: str) -> np.ndarray:
        rng = np.random.default_rng(sum(map(ord, text)) + len(text))
        v = rng.standard_normal(self.dim)
        return (v / np.linalg.norm(v)).astype(np.float32)


def test_repeated_texts_are_embedded_once_and_each_gets_its_vector() -> None:
    fake = RecordingEmbedder()
    embed = EmbedOnce(fake)  # type: ignore[arg-type]
    first = embed(["boilerplate", "revenue rose", "boilerplate"])
    second = embed(["net loss", "revenue rose", "boilerplate"])
    assert fake.calls == [["boilerplate", "revenue rose"], ["net loss"]]
    assert embed.reused == 3
    for texts, out in ((["boilerplate", "revenue rose", "boilerplate"], first),
                       (["net loss", "revenue rose", "boilerplate"], second)):  # fmt: skip
        assert out.shape == (3, fake.dim)
        assert np.array_equal(out, np.stack([fake.vector(t) for t in texts]))


def test_only_the_latest_texts_are_remembered() -> None:
    fake = RecordingEmbedder()
    embed = EmbedOnce(fake, capacity=2)  # type: ignore[arg-type]
    embed(["a"])
    embed(["b"])
    embed(["a"])  # seen: refreshed as the latest
    embed(["c"])  # evicts "b", the oldest
    embed(["a", "b"])
    assert fake.calls == [["a"], ["b"], ["c"], ["b"]]


def test_nothing_to_embed() -> None:
    fake = RecordingEmbedder()
    out = EmbedOnce(fake)([])  # type: ignore[arg-type]
    assert out.shape == (0, fake.dim) and fake.calls == []
