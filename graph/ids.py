"""Content-derived ids. The same bytes always give the same ids."""

from __future__ import annotations

import hashlib
import re

EVIDENCE_PREFIX = "ev1:"
_SPAN_RE = re.compile(r"^(ev1:[0-9a-f]{16})#(\d+)-(\d+)$")
_PASSAGE_RE = re.compile(r"^ev1:[0-9a-f]{16}$")
CITED_ID_RE = re.compile(r"\[(ev1:[0-9a-f]{16}(?:#\d+-\d+)?)\]")  # "[ev1:…]" in a report


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def document_id(content_sha256: str) -> str:
    return "doc_" + content_sha256[:16]


def passage_id(content_sha256: str, ordinal: int, text: str) -> str:
    h = hashlib.sha256(f"{content_sha256}\x00{ordinal}\x00{text}".encode()).hexdigest()
    return EVIDENCE_PREFIX + h[:16]


def span_id(passage_id: str, start: int, end: int) -> str:
    return f"{passage_id}#{start}-{end}"


def entity_id(name: str) -> str:
    """One id per name, whatever type a mention was guessed to be: a passage titled "Northport
    Historical Society" and a sentence naming that organisation meet at one node."""
    key = " ".join(name.lower().split())
    return "ent_" + hashlib.sha256(key.encode()).hexdigest()[:12]


def parse_evidence_id(evidence_id: str) -> tuple[str, tuple[int, int] | None]:
    """Split an evidence id into (passage id, span range or None). Raises ValueError."""
    m = _SPAN_RE.match(evidence_id)
    if m:
        return m.group(1), (int(m.group(2)), int(m.group(3)))
    if _PASSAGE_RE.match(evidence_id):
        return evidence_id, None
    raise ValueError(f"not an evidence id: {evidence_id!r}")
