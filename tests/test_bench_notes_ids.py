"""bench/notes_ids.py: the prompt variants it replays (no model)."""

from __future__ import annotations

import json

from conftest import bench_module

from models.llm import ChatMessage

A, B = "ev1:00000000000000aa", "ev1:00000000000000bb"


MESSAGES = [
    ChatMessage(role="system", content="Write notes."),
    ChatMessage(role="user", content=f"[{B}] Mill\nA mill.\n\n[{A}] Town\nA town near [{B}]."),
]


def test_labels_replace_every_id_in_order_of_first_mention_and_the_enum_follows() -> None:
    bench = bench_module("notes_ids")
    prompt, schema = bench.prompt_and_grammar("labels", MESSAGES, [B, A])
    text = prompt[-1].content
    assert A not in text and B not in text
    assert text.startswith("[E1] Mill") and "[E2] Town" in text and text.endswith("near [E1].")
    assert '"E1","E2"' in prompt[0].content and "E1" in json.dumps(schema)


def test_no_enum_hides_the_ids_from_the_instruction_but_the_grammar_keeps_them() -> None:
    bench = bench_module("notes_ids")
    prompt, schema = bench.prompt_and_grammar("no_enum", MESSAGES, [B, A])
    instruction = prompt[0].content
    assert A not in instruction and bench.ENUM_HINT in instruction
    assert A in json.dumps(schema) and B in json.dumps(schema)
    logged, _ = bench.prompt_and_grammar("ids", MESSAGES, [B, A])
    assert A in logged[0].content and logged[1] == MESSAGES[1]


def test_one_id_bounds_a_finding_to_one_passage_in_grammar_and_prompt_line() -> None:
    bench = bench_module("notes_ids")
    system = ChatMessage(
        role="system", content="Write notes.\nEach finding is a sentence, with its ids.\nThen."
    )
    messages = [system, MESSAGES[1]]

    def bound(schema: dict) -> int:
        return schema["properties"]["findings"]["items"]["properties"]["evidence_ids"]["maxItems"]

    logged, schema = bench.prompt_and_grammar("ids", messages, [B, A])
    assert bound(schema) == bench.LOGGED_IDS_PER_FINDING and logged[0].content.startswith(
        system.content
    )
    prompt, schema = bench.prompt_and_grammar("one_id", messages, [B, A])
    assert bound(schema) == 1
    assert bench.ONE_ID_LINE in prompt[0].content and "with its ids" not in prompt[0].content
    assert prompt[0].content.startswith("Write notes.\n") and prompt[1] == MESSAGES[1]
