"""bench/prompt_reuse.py: which logged calls it replays, in what order, with what schema (no
model)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import bench_module

from core.research.schemas import LeanPlan
from core.tasks import TaskLog
from models.llm import ChatMessage

ID = "ev1:00000000000000aa"


def test_call_kinds_come_from_their_step_keys() -> None:
    bench = bench_module("prompt_reuse")
    assert bench.kind_of("plan#messages@1") == "plan"
    assert bench.kind_of("r1/q2/notes#messages@1") == "notes"
    assert bench.kind_of("answer#messages@2") == "answer"
    assert bench.kind_of("write#messages@1") == "write"
    assert bench.kind_of("support/0123abcd#messages@1") == "support"
    assert bench.kind_of("kind/0123abcd#messages@1") == "kind"
    assert bench.kind_of("plan/discover#call@1") is None
    assert bench.kind_of("r1/q1/t1#call@1") is None


def _messages(user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Work."}, {"role": "user", "content": user}]


def test_a_series_calls_are_replayed_question_by_question_in_run_order(tmp_path: Path) -> None:
    bench = bench_module("prompt_reuse")
    log = TaskLog(tmp_path / "tasks.sqlite")
    try:
        for qid in ("q_first", "q_second"):
            task = f"eval-m-tag-{qid}"
            run = log.begin(task, "Where is the Tarsk Mills weir?", {})
            log.append(task, run, "messages", "plan#messages@1", _messages("Plan it."))
            log.append(task, run, "tool_call", "r1/q1/t1#call@1", {"tool": "search"})
            log.append(
                task, run, "messages", "r1/q1/notes#messages@1", _messages(f"[{ID}] Weir\nOld.")
            )
            log.append(task, run, "messages", "support/ab#messages@1", _messages("Is it?"))
        log.begin("eval-m-other-q_first", "Another series.", {})
        calls = bench.logged_calls(log, "eval-m-tag", None)
        assert [(c["task"].rsplit("-", 1)[1], c["kind"]) for c in calls] == [
            ("q_first", "plan"),
            ("q_first", "notes"),
            ("q_first", "support"),
            ("q_second", "plan"),
            ("q_second", "notes"),
            ("q_second", "support"),
        ]
        assert calls[0]["schema"] is LeanPlan
        # the notes schema is rebuilt with the ids the prompt shows, as the run built it
        assert ID in str(calls[1]["schema"].model_json_schema())
        firsts = bench.logged_calls(log, "eval-m-tag", 1)
        assert [c["task"] for c in firsts] == ["eval-m-tag-q_first"] * 3
    finally:
        log.close()


def test_reading_is_summed_with_the_share_continued_from_kept_states() -> None:
    bench = bench_module("prompt_reuse")
    rows = [
        {"prompt_tokens": 800, "read_tokens": 400, "passage_tokens_again": 0, "seconds": 6.0},
        {"prompt_tokens": 200, "read_tokens": 200, "passage_tokens_again": 90, "seconds": 2.0},
    ]
    assert bench.summary(rows) == {
        "calls": 2,
        "prompt_tokens": 1000,
        "read_tokens": 600,
        "passage_tokens_again": 90,
        "continued_share": pytest.approx(0.4),
        "seconds": 8.0,
    }


def test_passages_are_told_apart_by_their_text_in_notes_and_writer_prompts() -> None:
    bench = bench_module("prompt_reuse")
    mill = "The Tarsk Mills weir was built in 1904.\n  It was raised in 1931."
    notes = {
        "kind": "notes",
        "messages": [
            ChatMessage(role="system", content="Write notes."),
            ChatMessage(
                role="user",
                content=f"Question: When?\n<data>\n[{ID}] Weir\n{mill}\n\n"
                "[ev1:00000000000000bb] Town\nNorthport lies east.\n</data>",
            ),
        ],
    }
    write = {
        "kind": "write",
        "messages": [
            ChatMessage(role="system", content="Write."),
            ChatMessage(
                role="user",
                content=f"Passages:\n<data>\n[E1] Weir, p. 2\n{' '.join(mill.split())}\n</data>",
            ),
        ],
    }
    folded = "The Tarsk Mills weir was built in 1904. It was raised in 1931."
    assert bench.passages_shown(notes) == [folded, "Northport lies east."]
    assert bench.passages_shown(write) == [folded]  # the same passage, shown again
    assert bench.passages_shown({**write, "kind": "support"}) == []
