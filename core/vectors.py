"""Which embedder made a library's vectors: recorded, checked at open, and re-embedding.

Vectors of different embedders do not compare: the same MiniLM weights on another runtime give
vectors ~0.98 cosine apart, another model unrelated ones. So a library records the
``Embedder.identity`` that made its vectors (the catalog's ``library_meta``, key ``embedder``),
and :func:`check` compares it with the current embedder's when the library opens:

- no passages: a recorded identity describes nothing any more; the current one is recorded;
- the recorded identity is the current one: fine;
- another identity, or none but passages exist (a library made before identities were
  recorded): a mismatch. Search still works (vector ranking is degraded; the library logs a
  warning); adding is refused, so the two kinds of vectors are never mixed.

:func:`reembed_vectors` recomputes every passage's vector (superseded versions' too: they are
still in the index) with the text ingestion embeds (:func:`embedding_text`), batch by batch,
and records the current identity only after the last batch is written. A crash or a cancel
midway leaves the mismatch flagged, and running it again redoes the job. Only vectors are
written: passages and documents are never touched.

Both ingestion and re-embedding embed through :class:`EmbedOnce`, which embeds a text it has
already embedded in the same run only once.

Threading: :func:`reembed_vectors` is a library write (the writer thread, like adds).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, Field

from core.errors import CancelledError, EmbedderMismatchError, translate_errors
from graph.schemas import Document, Passage
from graph.store import GraphStore
from models.embedder import Embedder, Vectors, runtime_of

logger = logging.getLogger(__name__)

EMBEDDER_KEY = "embedder"
HEADER_MAX_TOKENS = 40  # word pieces of title/heading context prefixed to an embedded passage
UNRECORDED = (
    "an unrecorded embedder (libraries made before this version did not record theirs; the "
    "default runtime was torch, lately onnx-int8)"
)


class ReembedResult(BaseModel):
    """What a re-embedding did."""

    passages: int = Field(description="Passages whose vectors were recomputed.")
    documents: int = Field(description="Document versions they belong to, superseded included.")
    seconds: float
    embedder: str = Field(description="The identity now recorded as having made the vectors.")


@dataclass(frozen=True)
class Mismatch:
    """The library's vectors were made by ``recorded`` (``None``: not recorded), not by the
    ``current`` embedder."""

    recorded: str | None
    current: str

    @property
    def message(self) -> str:
        made_by = self.recorded or UNRECORDED
        return (
            f"This library's vectors were made by {made_by}, but the current embedder is "
            f"{self.current}."
        )

    @property
    def hint(self) -> str:
        fix = "Run `sourcebook reembed` to re-embed every passage with the current embedder"
        if self.recorded is None:  # no runtime setting brings an unrecorded library back
            return f"{fix}."
        runtime = runtime_of(self.recorded)
        back = (
            f"set `models.embedder_runtime` back to `{runtime}`"
            if runtime
            else "switch back to the embedder that made them"
        )
        return f"{fix}, or {back}."

    def __str__(self) -> str:
        return f"{self.message} {self.hint}"

    def error(self) -> EmbedderMismatchError:
        """The refusal of an add."""
        return EmbedderMismatchError(
            f"{self.message} Adding documents would mix the two kinds of vectors; nothing was "
            "added.",
            hint=self.hint,
        )


def check(store: GraphStore, current: str) -> Mismatch | None:
    """Compare the recorded identity with ``current`` (recording it in an empty library)."""
    with translate_errors():
        recorded = store.get_meta(EMBEDDER_KEY)
        if recorded == current:
            return None
        if not store.has_passages():
            store.set_meta(EMBEDDER_KEY, current)
            logger.info("recorded the embedder of the empty library: %s", current)
            return None
    return Mismatch(recorded, current)


class EmbedOnce:
    """Embeds each distinct text once per run, reusing the vector it got the first time.

    Identical embedded texts (passage and its title/heading header) are common: the 20
    FinanceBench PDFs hold 67 among 4,407 passages (two years of one company's 10-K share
    boilerplate), a new version of a document repeats most of its predecessor's passages, and
    re-embedding covers superseded versions too. Texts are remembered by a 16-byte BLAKE2 digest
    with their vector, the latest ``capacity`` of them (20,000 x 384 float32: ~31 MB).

    Threading: not thread-safe; one per add or re-embed run, used by the thread that writes.
    """

    def __init__(self, embedder: Embedder, capacity: int = 20_000) -> None:
        self.embedder = embedder
        self.capacity = capacity
        self.reused = 0
        self._seen: OrderedDict[bytes, Vectors] = OrderedDict()

    def __call__(self, texts: Sequence[str]) -> Vectors:
        keys = [hashlib.blake2b(t.encode(), digest_size=16).digest() for t in texts]
        todo: dict[bytes, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in self._seen:
                todo.setdefault(key, text)
        fresh = self.embedder.embed(list(todo.values())) if todo else None
        found = {k: self._seen[k] for k in keys if k in self._seen}
        if fresh is not None:
            found.update(zip(todo, fresh, strict=True))
        self.reused += len(texts) - len(todo)
        out = np.zeros((len(texts), self.embedder.dim), dtype=np.float32)
        for i, key in enumerate(keys):
            out[i] = found[key]
        for key in keys:  # remember the batch's texts as the latest
            self._seen[key] = found[key]
            self._seen.move_to_end(key)
        while len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return out


def embedding_text(embedder: Embedder, doc: Document, p: Passage) -> str:
    """The passage as embedded: prefixed by its document title and heading path.

    A passage deep in a report rarely names its subject ("Revenue rose 4%"); the header puts
    the document and section back. A passage that opens with its own heading already says
    that one, so the header leaves it out (1,127 of the 4,407 FinanceBench passages; 1% of
    the word pieces embedded). The header is cut to fit what the passage leaves of the
    model's window, so the passage itself is never truncated.
    """
    parts = [doc.title, *p.heading_path]
    parts = [x for i, x in enumerate(parts) if x and x not in parts[:i]]
    if len(parts) > 1 and opens_with(p.text, parts[-1]):
        parts.pop()
    header = " > ".join(parts)
    if not header or p.text.startswith(header):
        return p.text
    room = min(HEADER_MAX_TOKENS, embedder.max_tokens - 2 - p.token_count)
    words = header.split()
    while words and embedder.count_tokens([" ".join(words)])[0] > room:
        words = words[: len(words) * 3 // 4] if len(words) > 4 else words[:-1]
    return f"{' '.join(words)}\n{p.text}" if words else p.text


def opens_with(text: str, heading: str) -> bool:
    """Whether ``text`` starts with ``heading`` as whole words (headings in a heading path have
    their whitespace collapsed; "PART III" does not open with "PART I")."""
    head = " ".join(text[: 2 * len(heading) + 1].split())
    rest = head[len(heading) : len(heading) + 1]
    return head.startswith(heading) and not rest.isalnum()


def reembed_vectors(
    store: GraphStore,
    embedder: Embedder,
    text_of: Callable[[Document, Passage], str],
    *,
    batch: int,
    on_batch: Callable[[Document, int, int], None] | None = None,
    cancel: threading.Event | None = None,
) -> ReembedResult:
    """Recompute every passage's vector with ``embedder`` from ``text_of(doc, passage)``, in
    batches of ``batch``; ``on_batch(document, done, of)`` after each. A set ``cancel`` stops
    between batches with :class:`CancelledError` and nothing recorded."""
    t0 = time.perf_counter()
    identity = embedder.identity
    with translate_errors():
        docs = store.list_documents(include_superseded=True)
    total = sum(d.passage_count for d in docs)
    done = 0
    pending: list[tuple[Document, Passage]] = []
    embed = EmbedOnce(embedder)

    def flush() -> None:
        nonlocal done
        if cancel is not None and cancel.is_set():
            raise CancelledError(
                f"Re-embedding was cancelled after {done} of {total} passages.",
                hint="The library is intact and still flagged; run `sourcebook reembed` again "
                "to finish.",
            )
        vectors = embed([text_of(d, p) for d, p in pending])
        with translate_errors():
            store.set_vectors([p.passage_id for _, p in pending], vectors)
        done += len(pending)
        last = pending[-1][0]
        pending.clear()
        if on_batch is not None:
            on_batch(last, done, total)

    for doc in docs:
        with translate_errors():
            passages = store.get_document_passages(doc.doc_id, full=False)
        for p in passages:
            pending.append((doc, p))
            if len(pending) >= batch:
                flush()
    if pending:
        flush()
    with translate_errors():
        store.set_meta(EMBEDDER_KEY, identity)
    try:  # every vector changed: fold the rewritten rows in, retrain a vector index
        store.maintain(force=True, retrain=True)
    except Exception:  # the vectors are written; an optimisation failing must not undo that
        logger.exception("index maintenance after re-embedding failed")
    seconds = time.perf_counter() - t0
    logger.info(
        "re-embedded %s passages of %s documents in %.1f s (%s repeated texts embedded once)",
        done,
        len(docs),
        seconds,
        embed.reused,
    )
    return ReembedResult(passages=done, documents=len(docs), seconds=seconds, embedder=identity)
