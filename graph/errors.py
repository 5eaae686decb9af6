"""Errors raised by the knowledge graph. ``core`` converts them into its own tree."""

from __future__ import annotations


class GraphError(Exception):
    """The catalog or the index failed (SQLite, lancedb)."""


class NotFoundInGraph(GraphError):
    """No document, passage, span or collection by that id or name."""
