"""Structure-aware chunking: blocks in reading order -> document text -> passages and spans.

Every reader (PDF, text, Markdown, HTML, JSONL) turns its input into a list of :class:`Block`
(heading, paragraph, table or line group) in reading order, each with optional word boxes whose
offsets point into the block's text. :func:`chunk_blocks` then

1. joins the blocks into the document text (blocks separated by a blank line);
2. cuts each block into *units*: sentences for paragraphs, rows for tables and line groups, the
   whole text for headings; a unit longer than the token limit is cut on word boundaries (and a
   single enormous "word" on characters);
3. packs consecutive units greedily into passages of at most ``max_tokens`` word pieces, never
   across a top-level heading, preferring to start a passage at a heading or a paragraph
   boundary, and never leaving a heading orphaned at the end of a passage;
4. merges a very small trailing fragment into the passage before it when the two fit.

Units are separated by whitespace in the document text and the MiniLM pre-tokenizer splits on
whitespace, so a passage's word pieces are the sum of its units' (one batched count). The final
passages are counted once more and any that would exceed the limit is split again, so the limit
holds whatever the counter does.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from core.text import (
    sentence_ranges as sentence_ranges,
)  # re-exported: some callers import it from here
from graph.ids import passage_id, span_id
from graph.schemas import Passage, Span

TokenCounter = Callable[[Sequence[str]], list[int]]
BlockKind = Literal["heading", "paragraph", "table", "lines"]
# (page_index, x0, y0, x1, y1, start, end): a word's box and its offsets in the block text.
WordBox = tuple[int, float, float, float, float, int, int]

BLOCK_SEPARATOR = "\n\n"
HARD_HEADING_LEVEL = 2
"""Headings at this level or above (1 = top) always start a new passage."""

_WORD = re.compile(r"\S+")


@dataclass(slots=True)
class Block:
    """One structural piece of a document in reading order (see the module docstring)."""

    kind: BlockKind
    text: str
    level: int = 0
    words: list[WordBox] = field(default_factory=list)
    page: int | None = None


@dataclass(slots=True)
class _Unit:
    start: int
    end: int
    block: int
    brk: int  # 0 inside a block, 1 block start, 2 soft heading, 3 hard heading
    heading: bool
    glued: bool = False  # cut inside a word: token sums are not exact
    tokens: int = 0
    origin: int = -1  # index of the sentence/row this piece was cut from


@dataclass(slots=True)
class ChunkResult:
    text: str
    passages: list[Passage]


def _line_ranges(text: str, start: int, end: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    pos = start
    while pos < end:
        nl = text.find("\n", pos, end)
        stop = end if nl < 0 else nl
        s, e = pos, stop
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append((s, e))
        pos = stop + 1
    return out


def _make_units(text: str, blocks: Sequence[Block], offsets: Sequence[int]) -> list[_Unit]:
    units: list[_Unit] = []
    for bi, (block, off) in enumerate(zip(blocks, offsets, strict=True)):
        end = off + len(block.text)
        if block.kind == "heading":
            ranges = _line_ranges(text, off, end)
            if len(ranges) > 1:
                ranges = [(ranges[0][0], ranges[-1][1])]
        elif block.kind == "paragraph":
            ranges = sentence_ranges(text, off, end)
        else:
            ranges = _line_ranges(text, off, end)
        if block.kind == "heading":
            brk = 3 if block.level <= HARD_HEADING_LEVEL else 2
        else:
            brk = 1
        for i, (s, e) in enumerate(ranges):
            units.append(_Unit(s, e, bi, brk if i == 0 else 0, block.kind == "heading"))
    return units


def _split_long(text: str, unit: _Unit, max_tokens: int, count: TokenCounter) -> list[_Unit]:
    """Cut an over-long unit on word boundaries (a single huge word on characters)."""
    words = [(m.start(), m.end()) for m in _WORD.finditer(text, unit.start, unit.end)]
    counts = count([text[s:e] for s, e in words])
    pieces: list[tuple[int, int, int, bool]] = []  # start, end, tokens, glued
    for (s, e), n in zip(words, counts, strict=True):
        if n <= max_tokens:
            pieces.append((s, e, n, False))
            continue
        step = max_tokens  # one word piece covers at least one character
        for cs in range(s, e, step):
            ce = min(e, cs + step)
            pieces.append((cs, ce, count([text[cs:ce]])[0], True))
    out: list[_Unit] = []
    cur_s, cur_e, cur_n, glued = pieces[0][0], pieces[0][1], pieces[0][2], pieces[0][3]
    for s, e, n, g in pieces[1:]:
        if cur_n + n <= max_tokens and not (g and glued and s == cur_e):
            cur_e, cur_n, glued = e, cur_n + n, glued or g
        else:
            out.append(_Unit(cur_s, cur_e, unit.block, 0, unit.heading, glued, cur_n, unit.origin))
            cur_s, cur_e, cur_n, glued = s, e, n, g
    out.append(_Unit(cur_s, cur_e, unit.block, 0, unit.heading, glued, cur_n, unit.origin))
    out[0].brk = unit.brk
    return out


def _pack(units: list[_Unit], blocks: Sequence[Block], max_tokens: int) -> list[list[_Unit]]:
    soft_min = max_tokens // 4
    block_tokens: dict[int, int] = {}
    for u in units:
        block_tokens[u.block] = block_tokens.get(u.block, 0) + u.tokens
    groups: list[list[_Unit]] = []
    cur: list[_Unit] = []
    cur_tok = 0
    for u in units:
        if cur:
            only_headings = all(x.heading for x in cur)
            new = False
            overflow = cur_tok + u.tokens > max_tokens
            if overflow:
                new = True
            elif not only_headings:
                if u.brk == 3 or (u.brk == 2 and cur_tok >= soft_min):
                    new = True
                elif (
                    u.brk == 1
                    and cur_tok + block_tokens[u.block] > max_tokens
                    and cur_tok >= max_tokens // 2
                ):
                    new = True  # the next paragraph won't fit whole: start it fresh
            if new:
                carry: list[_Unit] = []
                while cur and cur[-1].heading and len(cur) > len(carry) + 1 and cur[-1].brk:
                    carry.insert(0, cur.pop())
                carry_tok = sum(x.tokens for x in carry)
                if carry and carry_tok + u.tokens > max_tokens:
                    cur.extend(carry)
                    carry = []
                    carry_tok = 0
                groups.append(cur)
                cur, cur_tok = carry, carry_tok
        cur.append(u)
        cur_tok += u.tokens
    if cur:
        groups.append(cur)
    # merge very small trailing fragments (not starting at a heading) into the one before
    small = max(16, max_tokens // 8)
    merged: list[list[_Unit]] = []
    for g in groups:
        tok = sum(x.tokens for x in g)
        if (
            merged
            and tok < small
            and g[0].brk <= 1
            and not any(x.glued for x in g)
            and sum(x.tokens for x in merged[-1]) + tok <= max_tokens
        ):
            merged[-1].extend(g)
        else:
            merged.append(g)
    return merged


def _heading_paths(blocks: Sequence[Block]) -> list[list[str]]:
    paths: list[list[str]] = []
    stack: list[tuple[int, str]] = []
    for b in blocks:
        if b.kind == "heading":
            while stack and stack[-1][0] >= b.level:
                stack.pop()
            stack.append((b.level, " ".join(b.text.split())))
        paths.append([t for _, t in stack])
    return paths


def chunk_blocks(
    blocks: Sequence[Block],
    *,
    content_sha256: str,
    doc_id: str,
    max_tokens: int,
    count_tokens: TokenCounter,
) -> ChunkResult:
    """Document text and passages (with spans and words) for ``blocks``; see the module doc."""
    blocks = [b for b in blocks if b.text.strip()]
    parts: list[str] = []
    offsets: list[int] = []
    pos = 0
    for i, b in enumerate(blocks):
        if i:
            parts.append(BLOCK_SEPARATOR)
            pos += len(BLOCK_SEPARATOR)
        offsets.append(pos)
        parts.append(b.text)
        pos += len(b.text)
    text = "".join(parts)
    units = _make_units(text, blocks, offsets)
    if not units:
        return ChunkResult(text, [])
    counts = count_tokens([text[u.start : u.end] for u in units])
    final_units: list[_Unit] = []
    for k, (u, n) in enumerate(zip(units, counts, strict=True)):
        u.tokens = n
        u.origin = k
        if n > max_tokens:
            final_units.extend(_split_long(text, u, max_tokens, count_tokens))
        else:
            final_units.append(u)
    counted = _enforce_limit(text, _pack(final_units, blocks, max_tokens), max_tokens, count_tokens)

    paths = _heading_paths(blocks)
    word_starts: list[int] = []
    word_boxes: list[tuple[int, int, int, tuple[float, float, float, float]]] = []
    for b, off in zip(blocks, offsets, strict=True):
        for page, x0, y0, x1, y1, s, e in b.words:
            word_starts.append(off + s)
            word_boxes.append((off + s, off + e, page, (x0, y0, x1, y1)))

    passages: list[Passage] = []
    for ordinal, (g, tokens) in enumerate(counted):
        s, e = g[0].start, g[-1].end
        ptext = text[s:e]
        pid = passage_id(content_sha256, ordinal, ptext)
        spans = [
            Span.model_construct(
                span_id=span_id(pid, u.start - s, u.end - s),
                passage_id=pid,
                start=u.start - s,
                end=u.end - s,
            )
            for u in _merge_glued(g)
        ]
        i = bisect.bisect_left(word_starts, s)
        j = bisect.bisect_left(word_starts, e)
        words = [
            {"page_index": pg, "start": ws - s, "end": we - s, "rect": rect}
            for ws, we, pg, rect in word_boxes[i:j]
            if we <= e
        ]
        pages = [p for p in (blocks[u.block].page for u in g) if p is not None]
        passages.append(
            Passage(
                passage_id=pid,
                doc_id=doc_id,
                ordinal=ordinal,
                text=ptext,
                heading_path=list(paths[next((u.block for u in g if not u.heading), g[0].block)]),
                page_start=min(pages) if pages else None,
                page_end=max(pages) if pages else None,
                char_start=s,
                char_end=e,
                token_count=tokens,
                words=words,
                spans=spans,
            )
        )
    return ChunkResult(text, passages)


def _merge_glued(group: list[_Unit]) -> list[_Unit]:
    """Spans are sentences: pieces of one over-long sentence in a passage form one span."""
    out: list[_Unit] = []
    for u in group:
        if out and out[-1].origin == u.origin:
            last = out[-1]
            out[-1] = _Unit(
                last.start, u.end, last.block, last.brk, last.heading, True, 0, u.origin
            )
        else:
            out.append(u)
    return out


def _enforce_limit(
    text: str, groups: list[list[_Unit]], max_tokens: int, count: TokenCounter
) -> list[tuple[list[_Unit], int]]:
    """Token counts of the passages; groups whose sum may be inexact are counted again.

    Units are separated by whitespace, which the word-piece pre-tokenizer splits on, so a
    group's count is the sum of its units'; only groups holding pieces cut inside a word
    (``glued``) are re-counted, and split again if they exceed the limit.
    """
    out: list[tuple[list[_Unit], int]] = []
    for g in groups:
        if any(u.glued for u in g) and len(g) > 1:
            n = count([text[g[0].start : g[-1].end]])[0]
            if n > max_tokens:
                half = len(g) // 2
                out.extend(_enforce_limit(text, [g[:half], g[half:]], max_tokens, count))
                continue
            out.append((g, n))
        else:
            out.append((g, sum(u.tokens for u in g)))
    return out
