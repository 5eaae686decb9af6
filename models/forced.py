"""Text a JSON schema forces: the rest of an enum value once its first characters fix it.

A constrained generation that names one of a few known strings (evidence ids, ~17 tokens each,
listed in the schema as an enum) spends most of that string's decode steps on characters the
grammar leaves no choice about: once "ev1:3f" matches one id, its remaining digits are fixed.
:class:`ForcedText` follows the JSON written so far and tells when it is inside such a string
and what it can still become; :func:`forced_tokens` gives the tokens every such value is
written with next, so a backend can read them in one batch instead of one decode each. Tokens
are the values' own, each tokenized whole as the prompt shows it, so forcing never splits a
value where the model would not. Only enum strings are followed (keys and whitespace the
grammar leaves free), and the closing quote is left to the model: it is often written
together with what follows it (``",`` or ``"]``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Path = tuple[str, ...]  # object keys, and "[]" for an array's items
_PLAIN = re.compile(r'^[^"\\\x00-\x1f]*$')  # written in JSON exactly as it reads


def enum_paths(schema: dict[str, Any]) -> dict[Path, tuple[str, ...]]:
    """Each place in a (ref-free) schema whose string must be one of a list: path -> values.
    Values JSON would escape are left out (the written text would not match them)."""
    found: dict[Path, set[str]] = {}

    def walk(node: Any, path: Path) -> None:
        if not isinstance(node, dict):
            return
        values = list(node.get("enum", []))
        if "const" in node:
            values.append(node["const"])
        strings = [v for v in values if isinstance(v, str) and _PLAIN.match(v)]
        if strings:
            found.setdefault(path, set()).update(strings)
        for key, sub in (node.get("properties") or {}).items():
            walk(sub, (*path, key))
        items = node.get("items")
        if isinstance(items, dict):
            walk(items, (*path, "[]"))
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in node.get(key) or []:
                walk(sub, path)

    walk(schema, ())
    return {path: tuple(sorted(values)) for path, values in found.items()}


class ForcedText:
    """Follows a JSON document as it is written (:meth:`feed`) and tells, at any point, whether
    it is inside a string whose place in the schema is an enum (:meth:`open_enum`)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._enums = enum_paths(schema)
        self._frames: list[list[Any]] = []  # ["{", key, expecting_key] or ["[", None, False]
        self._in_string = False
        self._is_key = False
        self._escaped = False
        self._chars: list[str] = []

    @property
    def active(self) -> bool:
        """Whether the schema has any enum string to force."""
        return bool(self._enums)

    def feed(self, text: str) -> None:
        frames = self._frames
        for ch in text:
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                    self._chars.append(ch)
                elif ch == "\\":
                    self._escaped = True
                    self._chars.append(ch)
                elif ch == '"':
                    self._in_string = False
                    if self._is_key and frames:
                        frames[-1][1] = "".join(self._chars)
                else:
                    self._chars.append(ch)
            elif ch == '"':
                self._in_string = True
                self._is_key = bool(frames) and frames[-1][0] == "{" and frames[-1][2]
                self._chars = []
            elif ch in "{[":
                frames.append([ch, None, ch == "{"])
            elif ch in "}]":
                if frames:
                    frames.pop()
            elif ch == ":" and frames and frames[-1][0] == "{":
                frames[-1][2] = False
            elif ch == "," and frames and frames[-1][0] == "{":
                frames[-1][2] = True

    def open_enum(self) -> tuple[str, tuple[str, ...]] | None:
        """Inside a string whose place is an enum: what is written of it and the values it
        can still become (none left when it went off the list); else None."""
        if not self._in_string or self._is_key or self._escaped:
            return None
        path = tuple("[]" if kind == "[" else str(key) for kind, key, _ in self._frames)
        values = self._enums.get(path)
        if not values:
            return None
        written = "".join(self._chars)
        return written, tuple(v for v in values if v.startswith(written))


def forced_tokens(
    written: str,
    values: tuple[str, ...],
    tokenize: Callable[[str], list[int]],
    piece: Callable[[int], str],
) -> list[int]:
    """The tokens every value still possible is written with next, each value tokenized as a
    whole (as the model saw it in its prompt): their common run of tokens after the ones that
    make up ``written``. None when ``written`` ends inside one of those tokens (the model split
    it its own way, and forcing the rest could split it as the model would not)."""
    runs = []
    for value in values:
        tokens = tokenize(value)
        at, length = 0, 0
        while length < len(written) and at < len(tokens):
            length += len(piece(tokens[at]))
            at += 1
        if length != len(written):
            return []
        runs.append(tokens[at:])
    if not runs:
        return []
    common = runs[0]
    for run in runs[1:]:
        n = 0
        while n < min(len(common), len(run)) and common[n] == run[n]:
            n += 1
        common = common[:n]
    return common
