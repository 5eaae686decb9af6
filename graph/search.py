"""Hybrid search: dense + keyword fusion, then optional graph expansion.

Fusion (why not plain RRF). On MuSiQue with MiniLM, dense recall@5 is 0.61, BM25 0.37 and an
equal-weight reciprocal rank fusion 0.47: RRF throws away the score gaps and gives a weak
keyword list the same say as a strong dense one. We use a convex combination of normalised
scores instead (Bruch et al., "An Analysis of Fusion Functions for Hybrid Retrieval", 2023, found
it better than RRF and robust to its one parameter):

    score(p) = alpha * d(p) + (1 - alpha) * b(p),    alpha = 0.8 (dense weighted higher)

where ``d = max(cos, 0) / max cos`` over the dense candidates and ``b = bm25 / max bm25`` over the
keyword candidates (theoretical minimum 0, observed maximum: the best hit of each list is 1).
A passage missing from one list gets that list's *floor* (its weakest candidate's normalised
score): it ranked below every listed candidate, so the floor is an upper bound, and the same
rule treats both signals alike (a keyword list shorter than asked holds every match: its floor
is 0). Not-yet-embedded passages (keyword search before embeddings) get the dense floor, i.e.
"no better than the weakest dense candidate". Consequences: the best dense hit scores at least
``alpha``; a passage found only by keywords enters the top ranks only when it is a strong
keyword hit *and* the dense list is flat; a passage found by both rises.

Graph expansion (``graph=True``): graph scores from :meth:`graph.view.GraphView.expand`
(personalized PageRank over the local passage-entity graph, HippoRAG-style, plus the
previous/next passages of the seeds), seeded by the first ``min(ceil(k / 2), 5)`` fused hits
weighted by their scores and by the entities the query names (the caller extracts them).
Expansion candidates get their exact dense score (from their stored
vectors) in the fused formula above, and every candidate gets ``+ gamma * g`` with ``g`` in
[0, 1]; the first ``ceil(k / 2)`` fused hits keep their places, so weak expansions cannot push
out the strongest direct evidence.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from graph.index import PassageIndex
from graph.schemas import Passage, SearchHit, SearchSignal
from graph.view import GraphView

logger = logging.getLogger(__name__)

SearchMode = Literal["hybrid", "vector", "keyword"]

ALPHA = 0.8
# Weight of the graph score against the fused one for expansion candidates. MuSiQue hybrid+graph
# recall@2/5/10 with query-entity seeding (bench/retrieval_quality.py): .25 gave .57/.71/.82,
# .5 .57/.77/.83, 1.0 .54/.77/.84. Before entity seeding .5 gained less (@5 .65 -> .73).
GAMMA = 0.5
SNIPPET_CHARS = 300
_WORD = re.compile(r"\w{3,}")


@dataclass
class Scored:
    """One candidate with its per-signal ranks and scores."""

    passage_id: str
    dense: float | None = None
    dense_rank: int | None = None
    keyword: float | None = None
    keyword_rank: int | None = None
    graph: float = 0.0
    score: float = 0.0
    signals: list[SearchSignal] = field(default_factory=list)


def fuse(
    dense: list[tuple[str, float]],
    keyword: list[tuple[str, float]],
    *,
    depth: int,
    alpha: float = ALPHA,
) -> tuple[dict[str, Scored], Callable[[float | None, float | None], float]]:
    """Fuse two ranked lists (see the module docstring).

    Returns the scored candidates and the scoring function ``f(cos, bm25)`` (``None`` = absent
    from that list), so expansions can be scored on the same scale. ``depth`` is how many
    candidates each list was asked for: a shorter keyword list holds every match, so a passage
    missing from it scores 0 there.
    """
    cos_max = max((max(c, 0.0) for _, c in dense), default=0.0)
    bm_max = max((s for _, s in keyword), default=0.0)
    d_norm = [max(c, 0.0) / cos_max if cos_max > 0 else 0.0 for _, c in dense]
    b_norm = [s / bm_max if bm_max > 0 else 0.0 for _, s in keyword]
    d_floor = min(d_norm, default=0.0)
    b_floor = min(b_norm, default=0.0) if len(keyword) >= depth else 0.0

    def score(cos: float | None, bm25: float | None) -> float:
        d = d_floor if cos is None else (max(cos, 0.0) / cos_max if cos_max > 0 else 0.0)
        b = b_floor if bm25 is None else (bm25 / bm_max if bm_max > 0 else 0.0)
        if not dense:
            return b
        if not keyword:
            return d
        return alpha * d + (1.0 - alpha) * b

    out: dict[str, Scored] = {}
    for rank, (pid, cos) in enumerate(dense):
        out[pid] = Scored(pid, dense=cos, dense_rank=rank)
    for rank, (pid, bm) in enumerate(keyword):
        s = out.setdefault(pid, Scored(pid))
        s.keyword, s.keyword_rank = bm, rank
    for s in out.values():
        s.score = score(s.dense, s.keyword)
    return out, score


def _signals(s: Scored, k: int) -> list[SearchSignal]:
    sig: list[SearchSignal] = []
    if s.dense_rank is not None and s.dense_rank < k:
        sig.append("vector")
    if s.keyword_rank is not None and s.keyword_rank < k:
        sig.append("keyword")
    if not sig:
        if s.dense_rank is not None:
            sig.append("vector")
        if s.keyword_rank is not None:
            sig.append("keyword")
    if s.graph > 0:
        sig.append("graph")
    return sig


def make_snippet(text: str, query: str, size: int = SNIPPET_CHARS) -> str:
    if len(text) <= size:
        return text
    lowered = text.lower()
    starts = [i for w in _WORD.findall(query.lower()) if (i := lowered.find(w)) >= 0]
    start = max(0, min(starts) - size // 4) if starts else 0
    start = min(start, len(text) - size)
    if start > 0:
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < start + 30 else start
    piece = text[start : start + size].strip()
    return ("…" if start > 0 else "") + piece + ("…" if start + size < len(text) else "")


class Searcher:
    """Runs one search: candidate lists, fusion, expansion, hit assembly.

    Why: keeps the ranking logic apart from the store's bookkeeping.
    Threading: stateless; safe to call from several threads at once (the dense and keyword
    queries of one search run concurrently on lancedb's event loop).
    """

    def __init__(self, index: PassageIndex, view: GraphView) -> None:
        self.index = index
        self.view = view

    def close(self) -> None:
        """Nothing to release today; kept so the store's shutdown order stays explicit."""

    def candidates(
        self,
        text: str,
        vector: np.ndarray | None,
        *,
        depth: int,
        where: str | None,
        mode: SearchMode,
    ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        want_dense = vector is not None and mode in ("hybrid", "vector")
        want_kw = bool(text.strip()) and mode in ("hybrid", "keyword")
        if want_dense and want_kw and vector is not None:
            return self.index.hybrid_candidates(vector, text, depth, where)
        dense = (
            self.index.vector_search(vector, depth, where)
            if want_dense and vector is not None
            else []
        )
        kw = self.index.keyword_search(text, depth, where) if want_kw else []
        return dense, kw

    def rank(
        self,
        text: str,
        vector: np.ndarray | None,
        *,
        k: int,
        where: str | None,
        mode: SearchMode,
        graph: bool,
        passage_meta: Callable[[list[str]], dict[str, Passage]],
        doc_allowed: Callable[[str], bool],
        entities: Sequence[str] = (),
    ) -> tuple[list[Scored], dict[str, Passage]]:
        """The top ``k`` candidates, best first, with the metadata of their passages."""
        depth = max(50, 4 * k)
        dense, kw = self.candidates(text, vector, depth=depth, where=where, mode=mode)
        fused, score_fn = fuse(dense, kw, depth=depth)
        order = sorted(fused.values(), key=lambda s: -s.score)
        if graph and order:
            order = self._expand(order, k, vector, score_fn, passage_meta, doc_allowed, entities)
        top = order[:k]
        meta = passage_meta([s.passage_id for s in top])
        top = [s for s in top if s.passage_id in meta]
        for s in top:
            s.signals = _signals(s, k)
        return top, meta

    def _expand(
        self,
        order: list[Scored],
        k: int,
        vector: np.ndarray | None,
        score_fn: Callable[[float | None, float | None], float],
        passage_meta: Callable[[list[str]], dict[str, Passage]],
        doc_allowed: Callable[[str], bool],
        entities: Sequence[str],
    ) -> list[Scored]:
        keep = math.ceil(k / 2)
        n_seeds = min(keep, 5)
        seeds = {s.passage_id: max(s.score, 1e-6) for s in order[:n_seeds]}
        g = self.view.expand(seeds, entities=entities)
        if not g:
            return order
        by_id = {s.passage_id: s for s in order}
        fresh = [p for p, _ in sorted(g.items(), key=lambda kv: -kv[1]) if p not in by_id]
        fresh = fresh[: 3 * k]
        meta = passage_meta(fresh)
        fresh = [p for p in fresh if p in meta and doc_allowed(meta[p].doc_id)]
        vecs = self.index.vectors_for(fresh) if vector is not None and fresh else {}
        q = None if vector is None else np.asarray(vector, dtype=np.float32)
        for p in fresh:
            cos = float(vecs[p] @ q) if q is not None and p in vecs else None
            s = Scored(p, dense=None, keyword=None)
            s.score = score_fn(cos, None)
            by_id[p] = s
        for p, gs in g.items():
            if p in by_id:
                by_id[p].graph = gs
        head = order[:keep]
        head_ids = {s.passage_id for s in head}
        rest = [s for s in by_id.values() if s.passage_id not in head_ids]
        rest.sort(key=lambda s: -(s.score + GAMMA * s.graph))
        for s in rest:
            s.score += GAMMA * s.graph
        for s in head:
            s.graph = 0.0  # seeds kept in place: found directly, not by the graph
        return head + rest

    @staticmethod
    def to_hit(s: Scored, p: Passage, title: str, superseded: bool, query: str) -> SearchHit:
        return SearchHit(
            evidence_id=p.passage_id,
            doc_id=p.doc_id,
            title=title,
            page_start=p.page_start,
            page_end=p.page_end,
            heading_path=p.heading_path,
            snippet=make_snippet(p.text, query),
            score=round(s.score, 6),
            signals=s.signals,
            superseded=superseded,
        )
