"""The in-memory networkx view of the library, for neighbourhood expansion and graph ranking.

Nodes are plain strings whose prefix says their kind, so no per-node attribute dict is needed:
``doc_...`` (document), ``pg:<doc_id>:<page index>`` (page), ``ev1:...`` (passage), ``ent_...``
(entity). Edges: document - page, page - passage, passage - next passage (``w`` = 0.5),
passage - entity (``w`` = mention count), entity - entity (``w`` = co-mention count). The graph
is undirected; previous/next order lives in the catalog.

Ranking uses personalized PageRank (HippoRAG-style) on a *local* subgraph around the seeds
(seeds, their neighbours, their entities and the passages of those entities), so its cost does
not grow with the library.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterable

import networkx as nx

logger = logging.getLogger(__name__)

NEXT_WEIGHT = 0.5
NEIGHBOUR_SCORE = 0.5
# Entities named in more passages than this are hubs (like stop words); their passages are not
# pulled in, though the entity still links the seeds it touches.
HUB_PASSAGES = 200
PER_ENTITY_PASSAGES = 50
# With entities the query names, they start this share of PageRank's walks (each weighted by
# its specificity, 1 / passages naming it) and the top hits the rest. HippoRAG seeds on query
# entities alone; the hits keep the walk on topic when a name is common or missing.
# An even split, not the best of the sweep: MuSiQue hybrid+graph recall@5 (with graph weight
# GAMMA .25, bench/retrieval_quality.py) was .67 with no entity seeds, .73 / .71 / .71 / .69 with
# share .3 / .5 / .7 / 1.0.
ENTITY_SEED_SHARE = 0.5


def page_node(doc_id: str, page_index: int) -> str:
    return f"pg:{doc_id}:{page_index}"


def is_passage(node: str) -> bool:
    return node.startswith("ev1:")


def is_entity(node: str) -> bool:
    return node.startswith("ent_")


class GraphView:
    """The library graph in memory.

    Why: expansion and graph ranking need adjacency faster than SQL joins give it.
    Threading: mutations (add/remove a document) come from the writer thread, reads (explore,
    expand) from any thread; an RLock serialises them, as networkx graphs are not thread-safe.
    """

    def __init__(self) -> None:
        self.g: nx.Graph = nx.Graph()
        self._lock = threading.RLock()

    # -- building ---------------------------------------------------------------------------

    def add_document(
        self,
        doc_id: str,
        page_indexes: Iterable[int],
        passages: Iterable[tuple[str, int, int | None, int | None]],
        mentions: Iterable[tuple[str, str, int]],
        entity_edges: Iterable[tuple[str, str, int]],
    ) -> None:
        """Add one document: passages are (passage_id, ordinal, page_start, page_end)."""
        with self._lock:
            g = self.g
            g.add_node(doc_id)
            for i in page_indexes:
                g.add_edge(doc_id, page_node(doc_id, i))
            prev: str | None = None
            for pid, _ordinal, p0, p1 in sorted(passages, key=lambda r: r[1]):
                g.add_node(pid)
                if p0 is not None:
                    for i in range(p0, (p1 if p1 is not None else p0) + 1):
                        pg = page_node(doc_id, i)
                        if pg not in g:
                            g.add_edge(doc_id, pg)
                        g.add_edge(pg, pid)
                else:
                    g.add_edge(doc_id, pid)
                if prev is not None:
                    g.add_edge(prev, pid, w=NEXT_WEIGHT)
                prev = pid
        self.add_links(mentions, entity_edges)

    def add_links(
        self, mentions: Iterable[tuple[str, str, int]], entity_edges: Iterable[tuple[str, str, int]]
    ) -> None:
        """Passage - entity edges (passage_id, entity_id, count) and co-mention edges."""
        with self._lock:
            for pid, eid, n in mentions:
                self.g.add_edge(pid, eid, w=float(n))
            self._add_entity_edges(entity_edges, +1)

    def _add_entity_edges(self, edges: Iterable[tuple[str, str, int]], sign: int) -> None:
        g = self.g
        for a, b, w in edges:
            if sign > 0:
                if a in g and b in g:
                    old = g.edges[a, b]["w"] if g.has_edge(a, b) else 0.0
                    g.add_edge(a, b, w=old + w)
            elif g.has_edge(a, b):
                left = g.edges[a, b]["w"] - w
                if left <= 0:
                    g.remove_edge(a, b)
                else:
                    g.edges[a, b]["w"] = left

    def remove_document(
        self, doc_id: str, passage_ids: Iterable[str], entity_edges: Iterable[tuple[str, str, int]]
    ) -> None:
        with self._lock:
            g = self.g
            self._add_entity_edges(entity_edges, -1)
            touched: set[str] = set()
            for pid in passage_ids:
                if pid in g:
                    touched.update(n for n in g.adj[pid] if is_entity(n))
                    g.remove_node(pid)
            pages = [n for n in g.adj[doc_id] if n.startswith("pg:")] if doc_id in g else []
            g.remove_nodes_from(pages)
            if doc_id in g:
                g.remove_node(doc_id)
            for eid in touched:
                if eid in g and not any(is_passage(n) for n in g.adj[eid]):
                    g.remove_node(eid)

    # -- reading ----------------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"view_nodes": self.g.number_of_nodes(), "view_edges": self.g.number_of_edges()}

    def entity_degree(self, eid: str) -> int:
        return sum(1 for n in self.g.adj[eid] if is_passage(n))

    def _local_subgraph(
        self, seeds: Iterable[str], extra_entities: Iterable[str] = ()
    ) -> tuple[nx.Graph, dict[str, str]]:
        """The seeds' entities (plus ``extra_entities``), the passages of non-hub entities,
        co-mention edges among those entities (a bipartite passage-entity graph, HippoRAG's
        shape); and the seeds' previous/next passages (neighbour -> seed)."""
        g = self.g
        sub: nx.Graph = nx.Graph()
        neighbours: dict[str, str] = {}
        # in the order met, not a set's: which passages an entity reaches depends on those
        # added before it, and a set's order changes with each process's string hashing, so the
        # same search could rank differently from one run to the next
        entities = dict.fromkeys(e for e in extra_entities if e in g)
        for s in seeds:
            if s not in g:
                continue
            sub.add_node(s)
            for n in g.adj[s]:
                if is_passage(n):
                    neighbours.setdefault(n, s)
                elif is_entity(n):
                    entities.setdefault(n)
        for e in entities:
            passages = [n for n in g.adj[e] if is_passage(n)]
            df = len(passages)
            # Node specificity as in HippoRAG (1 / passages naming the entity): an entity shared
            # by few passages is a strong link. A softer 1 / log2(2 + df) let common entities
            # carry PageRank to unrelated passages (MuSiQue hybrid+graph recall@2/@10 .51/.75
            # with it, .54/.79 with this; @5 .65 either way: bench/retrieval_quality.py).
            idf = 1.0 / df
            inside = [p for p in passages if p in sub]
            chosen = inside
            if df <= HUB_PASSAGES:
                chosen = inside + [p for p in passages if p not in sub][:PER_ENTITY_PASSAGES]
            for p in chosen:
                sub.add_edge(p, e, w=g.edges[p, e].get("w", 1.0) * idf)
        ents = list(entities)
        for i, a in enumerate(ents):
            for b in ents[i + 1 :]:
                if g.has_edge(a, b):
                    sub.add_edge(a, b, w=math.log1p(g.edges[a, b].get("w", 1.0)))
        return sub, neighbours

    def expand(
        self,
        seeds: dict[str, float],
        *,
        entities: Iterable[str] = (),
        allowed: Callable[[str], bool] | None = None,
        damping: float = 0.5,
    ) -> dict[str, float]:
        """Graph scores in [0, 1] for passages near ``seeds`` (passage -> weight), seeds excluded.

        A passage's score is the larger of (a) its personalized PageRank over the local
        passage-entity graph, seeded by ``seeds`` and the ``entities`` a query names (see
        ``ENTITY_SEED_SHARE``), scaled so the best non-seed passage is 1, and (b)
        ``NEIGHBOUR_SCORE`` times the relative weight of the seed it follows or precedes.
        ``allowed`` filters passages. ``damping`` is the probability of following an edge;
        HippoRAG's 0.5 keeps the mass close to the seeds.
        """
        with self._lock:
            sub, neighbours = self._local_subgraph(seeds, entities)
            present = {s: w for s, w in seeds.items() if s in sub and w > 0}
            named = {e: 1.0 / max(self.entity_degree(e), 1) for e in entities if e in sub}
        if named:
            total = sum(present.values())
            share = ENTITY_SEED_SHARE if total > 0 else 1.0
            present = {s: (1 - share) * w / total for s, w in present.items()}
            etotal = sum(named.values())
            present.update({e: share * w / etotal for e, w in named.items()})
        out: dict[str, float] = {}
        if present and sub.number_of_edges() > 0:
            try:
                pr = nx.pagerank(
                    sub, alpha=damping, personalization=present, weight="w", max_iter=200, tol=1e-8
                )
            except nx.PowerIterationFailedConvergence:
                logger.warning("personalized PageRank did not converge; neighbours only")
                pr = {}
            scored = {n: v for n, v in pr.items() if is_passage(n) and n not in seeds and v > 0}
            if scored:
                top = max(scored.values())
                out = {n: v / top for n, v in scored.items()}
        top_seed = max(seeds.values(), default=0.0)
        for n, s in neighbours.items():
            if n not in seeds and top_seed > 0:
                out[n] = max(out.get(n, 0.0), NEIGHBOUR_SCORE * seeds[s] / top_seed)
        if allowed is not None:
            out = {n: v for n, v in out.items() if allowed(n)}
        return out

    def explore(
        self, passage_id: str, limit: int, allowed: Callable[[str], bool] | None = None
    ) -> list[str]:
        ranked = self.expand({passage_id: 1.0}, allowed=allowed)
        return [p for p, _ in sorted(ranked.items(), key=lambda kv: -kv[1])[:limit]]
