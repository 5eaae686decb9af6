"""What a schema forces a model to write next (models.forced), on synthetic schemas."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from models.forced import ForcedText, enum_paths, forced_tokens
from models.llm import inline_refs

IDS = ("ev1:3fa9c2d1e0b4a711", "ev1:3f07aa21c9d0e5b3", "ev1:b2c4d6e8f0a1b3c5")
Id = Literal[IDS]  # type: ignore[valid-type]


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    claim: str = Field(max_length=80)
    evidence_ids: list[Id] = Field(min_length=1, max_length=3)


class Notes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[Item] = Field(max_length=4)
    answer_id: Id | None = None
    kind: Literal["person"] = "person"


SCHEMA = inline_refs(Notes.model_json_schema())


VOCAB: dict[str, int] = {}


def tokenize(text: str) -> list[int]:
    """Like a byte-pair tokenizer that splits digits: one token per digit, a run of letters
    with at most one punctuation mark before it, or a run of punctuation."""
    pieces = re.findall(r"\d|[^\w\s]?[a-z]+|[^\w\s]+", text)
    return [VOCAB.setdefault(p, len(VOCAB)) for p in pieces]


def piece(token: int) -> str:
    return next(p for p, t in VOCAB.items() if t == token)


def forced_after(text: str) -> str:
    """The text forced after ``text`` has been written, fed in pieces as tokens arrive."""
    forced = ForcedText(SCHEMA)
    for i in range(0, len(text), 3):
        forced.feed(text[i : i + 3])
    place = forced.open_enum()
    return "".join(map(piece, forced_tokens(*place, tokenize, piece))) if place else ""


def test_the_schema_s_enum_places_are_found_through_lists_and_optional_values() -> None:
    paths = enum_paths(SCHEMA)
    assert paths[("items", "[]", "evidence_ids", "[]")] == tuple(sorted(IDS))
    assert paths[("answer_id",)] == tuple(sorted(IDS))
    assert paths[("kind",)] == ("person",)
    assert ("items", "[]", "claim") not in paths
    assert ForcedText(SCHEMA).active
    assert not ForcedText({"type": "object", "properties": {"a": {"type": "string"}}}).active


def test_an_enum_string_is_forced_as_far_as_the_values_agree() -> None:
    start = '{"items": [{"claim": "Kelmor lies on the coast", "evidence_ids": ["'
    # all three start "ev1:", but one is written ":b" as one token: the model writes the colon
    assert forced_after(start) == "ev1"
    assert forced_after(start + "ev1:") == ""  # three values left, no token in common
    assert forced_after(start + "ev1:3f") == ""  # "3fa9..." is written "fa": "f" ends no token
    assert forced_after(start + "ev1:3f0") == "7aa21c9d0e5b3"  # one left: the rest, no quote
    assert forced_after(start + "ev1:b") == "2c4d6e8f0a1b3c5"
    assert forced_after(start + "ev1:3fa9c2d1e0b4a711") == ""  # whole: the model closes it
    second = start + 'ev1:3fa9c2d1e0b4a711", "'
    assert forced_after(second + "ev1:b2") == "c4d6e8f0a1b3c5"
    assert forced_after(start + "ev1:x") == ""  # off the list: the grammar will say so


def test_nothing_is_forced_in_free_text_keys_or_outside_strings() -> None:
    assert forced_after('{"items": [{"claim": "ev1:3fa') == ""  # a claim is free text
    assert forced_after('{"items": [{"claim": "Port Ellery", "evid') == ""  # a key
    assert forced_after('{"items": [], "answer_id": ') == ""  # before the value's quote
    assert forced_after('{"items": [{"claim": "a \\"quoted\\" name", "evidence_ids": ["ev1:b') == (
        "2c4d6e8f0a1b3c5"  # escaped quotes in an earlier string do not lose the place
    )


def test_an_optional_enum_value_and_a_single_allowed_value_are_forced() -> None:
    assert forced_after('{"items": [], "answer_id": "ev1:3fa') == "9c2d1e0b4a711"
    assert forced_after('{"items": [], "answer_id": null, "kind": "') == "person"
    # after an object in a list closes, the place is the list's again, then the parent's
    text = '{"items": [{"claim": "x", "evidence_ids": ["ev1:b2c4d6e8f0a1b3c5"]}], "answer_id": "'
    assert forced_after(text) == "ev1"
