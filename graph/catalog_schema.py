"""The catalog's SQLite schema (:mod:`graph.catalog`) and the column lists its queries read.

``SCHEMA`` is idempotent (``CREATE ... IF NOT EXISTS``); ``SCHEMA_VERSION`` is what the
catalog records, and a catalog recorded by a newer program is refused rather than misread.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY,
    source_key TEXT NOT NULL,
    source_uri TEXT NOT NULL,
    title TEXT NOT NULL,
    kind TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    external_id TEXT,
    version INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('indexing', 'ready')),
    superseded_by TEXT REFERENCES documents(doc_id) ON DELETE SET NULL,
    page_count INTEGER NOT NULL,
    passage_count INTEGER NOT NULL,
    problems TEXT NOT NULL,
    added_at TEXT NOT NULL,
    byte_size INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_sha ON documents(content_sha256);
CREATE INDEX IF NOT EXISTS documents_source ON documents(source_key);
CREATE TABLE IF NOT EXISTS document_texts (
    doc_id TEXT PRIMARY KEY REFERENCES documents(doc_id) ON DELETE CASCADE,
    text_z BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS pages (
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    page_index INTEGER NOT NULL,
    width REAL NOT NULL,
    height REAL NOT NULL,
    char_count INTEGER NOT NULL,
    has_text_layer INTEGER NOT NULL,
    PRIMARY KEY (doc_id, page_index)
);
CREATE TABLE IF NOT EXISTS passages (
    passage_id TEXT PRIMARY KEY,
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    heading_path TEXT NOT NULL,
    page_start INTEGER,
    page_end INTEGER,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL,
    token_count INTEGER NOT NULL,
    words BLOB NOT NULL,
    UNIQUE (doc_id, ordinal)
);
CREATE TABLE IF NOT EXISTS spans (
    span_id TEXT PRIMARY KEY,
    passage_id TEXT NOT NULL REFERENCES passages(passage_id) ON DELETE CASCADE,
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS spans_passage ON spans(passage_id);
CREATE TABLE IF NOT EXISTS entities (
    entity_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    type TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entities_name ON entities(name COLLATE NOCASE);
CREATE TABLE IF NOT EXISTS mentions (
    entity_id TEXT NOT NULL REFERENCES entities(entity_id),
    passage_id TEXT NOT NULL REFERENCES passages(passage_id) ON DELETE CASCADE,
    span_id TEXT NOT NULL,
    start INTEGER NOT NULL,
    "end" INTEGER NOT NULL,
    PRIMARY KEY (passage_id, start, "end", entity_id)
);
CREATE INDEX IF NOT EXISTS mentions_entity ON mentions(entity_id);
CREATE TABLE IF NOT EXISTS entity_edges (
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    a TEXT NOT NULL,
    b TEXT NOT NULL,
    weight INTEGER NOT NULL,
    PRIMARY KEY (doc_id, a, b)
);
CREATE TABLE IF NOT EXISTS collections (
    name TEXT PRIMARY KEY,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS collection_members (
    name TEXT NOT NULL REFERENCES collections(name) ON DELETE CASCADE,
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    PRIMARY KEY (name, doc_id)
);
CREATE INDEX IF NOT EXISTS collection_members_doc ON collection_members(doc_id);
CREATE TABLE IF NOT EXISTS library_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

DOC_COLS = (
    "doc_id, source_key, source_uri, title, kind, content_sha256, external_id, version, status, "
    "superseded_by, page_count, passage_count, problems, added_at, byte_size"
)
PASSAGE_COLS = (
    "passage_id, doc_id, ordinal, text, heading_path, page_start, page_end, char_start, "
    "char_end, token_count, words"
)
