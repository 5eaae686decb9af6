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

Title prior. A question often names the document it is about ("Does Acme have an improving
operating margin as of FY2022?"), and a library of filings holds twenty companies'
passages that all say "we" and "the Company": a third of FinanceBench's top-5 hits came from
another company's filing. The document title is a field of its own (BM25F's reason for fields):
each document gets ``t`` in [0, 1], the idf of the words that both the query names (capitalised
words and numbers, :func:`name_words`) and its title hold, over the geometric mean of the idf of
the query's named words and of the title's words (a cosine; idf over the library's titles, so
words every title has, "Form 10-K", weigh nothing), and each candidate's fused score gets
``+ beta * t``, ``beta = 0.2``. A query naming no title is ranked exactly as before. Gold
recall@2/5/10 without -> with the prior (bench/retrieval_financebench.py,
bench/retrieval_quality.py): FinanceBench hybrid .45/.55/.68 -> .46/.64/.69 (top-5 hits from the
filing asked about .69 -> .78); MuSiQue hybrid .56/.67/.72 -> .53/.64/.76 and hybrid+graph
.57/.77/.86 -> .59/.78/.86 (15 questions: within noise). Dividing by the title's words alone (a
one-word title "City" fully named by any question saying "City") lost MuSiQue hybrid .56 -> .46
at @2 before queries were cut to their names; by the query's alone (every title holding the
company's name fully named), FinanceBench .45 -> .41.

Graph expansion (``graph=True``): graph scores from :meth:`graph.view.GraphView.expand`
(personalized PageRank over the local passage-entity graph, HippoRAG-style, plus the
previous/next passages of the seeds), seeded by the first ``min(ceil(k / 2), 5)`` fused hits
weighted by their scores and by the entities the query names (the caller extracts them).
Expansion candidates get their exact dense score (from their stored
vectors) in the fused formula above, and every candidate gets ``+ gamma * g`` with ``g`` in
[0, 1]; the first ``ceil(k / 2)`` fused hits keep their places, so weak expansions cannot push
out the strongest direct evidence. Past those the title prior is taken back: it chose the seeds,
and a next hop usually lies in a document the query does not name (kept, it lost MuSiQue
hybrid+graph recall@10 .86 -> .83).
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
# Weight of the title prior against the fused score (whose best hit scores 0.8 to 1).
BETA = 0.2
_TITLE_TOKEN = re.compile(r"[a-z0-9]+")
_YEAR = re.compile(r"(?:19|20)\d\d")


# Words a question starts with or joins names by: capitalised at a sentence's start, never a name.
_NOT_NAMES = frozenset(
    "a an and are as at by can could did do does find for from had has have how in is it of on "  # noqa: SIM905
    "or the to was were what when where which who whom whose why with".split()
)


def title_tokens(text: str) -> set[str]:
    """Words of a title or query as the title prior compares them: lower-case letter and digit
    runs of two or more characters, and the years inside a run ("FY2022" names 2022), without
    the function words a question begins with ("What", "Does")."""
    out: set[str] = set()
    for t in _TITLE_TOKEN.findall(text.lower()):
        if len(t) >= 2 and t not in _NOT_NAMES:
            out.add(t)
        out.update(_YEAR.findall(t))
    return out


def name_words(query: str) -> str:
    """The words of a query that can name a title: those with a capital or a digit ("Acme",
    "3M", "FY2022"), not the common words around them ("city", "company"), which would match
    every title made of them; a query typed all in lower case keeps every word."""
    if query == query.lower():
        return query
    return " ".join(w for w in query.split() if any(c.isupper() or c.isdigit() for c in w))


class TitlePrior:
    """How much a query names each document's title (see the module docstring).

    Threading: immutable once built; the store builds a new one when its titles change.
    """

    def __init__(self, titles: dict[str, str]) -> None:
        words = {doc_id: title_tokens(t) for doc_id, t in titles.items()}
        df: dict[str, int] = {}
        for title_words in words.values():
            for w in title_words:
                df[w] = df.get(w, 0) + 1
        n = len(words)
        self._idf = {w: math.log(n / c) for w, c in df.items() if c < n}
        self._words = {
            d: {w: self._idf[w] for w in ws if w in self._idf} for d, ws in words.items()
        }
        self._docs_with: dict[str, list[str]] = {}
        for d, ws in self._words.items():
            for w in ws:
                self._docs_with.setdefault(w, []).append(d)

    def weights(self, query: str) -> dict[str, float]:
        """doc_id -> t in (0, 1] for the documents whose titles the query names (others: 0)."""
        named = title_tokens(name_words(query)) & self._idf.keys()
        out: dict[str, float] = {}
        named_mass = sum(self._idf[w] for w in named)
        for d in {d for w in named for d in self._docs_with[w]}:
            ws = self._words[d]
            shared = sum(v for w, v in ws.items() if w in named)
            out[d] = shared / math.sqrt(named_mass * sum(ws.values()))
        return out


@dataclass
class Scored:
    """One candidate with its per-signal ranks and scores."""

    passage_id: str
    dense: float | None = None
    dense_rank: int | None = None
    keyword: float | None = None
    keyword_rank: int | None = None
    graph: float = 0.0
    prior: float = 0.0
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
        """Waits for the index's background work (see :meth:`PassageIndex.close`)."""
        self.index.close()

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
        title_prior: dict[str, float] | None = None,
        doc_of: Callable[[list[str]], dict[str, str]] | None = None,
    ) -> tuple[list[Scored], dict[str, Passage]]:
        """The top ``k`` candidates, best first, with the metadata of their passages.

        ``title_prior`` (doc_id -> t, from :class:`TitlePrior`) raises the passages of the
        documents the query names; ``doc_of`` maps passage ids to their documents for it."""
        depth = max(50, 4 * k)
        dense, kw = self.candidates(text, vector, depth=depth, where=where, mode=mode)
        fused, score_fn = fuse(dense, kw, depth=depth)
        if title_prior and doc_of is not None:
            for pid, doc_id in doc_of(list(fused)).items():
                s = fused[pid]
                s.prior = BETA * title_prior.get(doc_id, 0.0)
                s.score += s.prior
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
        # past the kept head, the evidence decides: the title prior chose the seeds, and a
        # next hop usually lies in a document the query does not name
        for s in rest:
            s.score += GAMMA * s.graph - s.prior
        rest.sort(key=lambda s: -s.score)
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
