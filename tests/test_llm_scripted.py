"""The shared LLM behaviour (fitting, structured output, retry, streaming, cancel) on the fake."""

from __future__ import annotations

import threading
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from models.discovery import ModelEntry
from models.errors import ContextOverflow, GenerationCancelled, StructuredOutputError
from models.llm import (
    LLM,
    BaseLLM,
    ChatMessage,
    check_options,
    extract_json_text,
    inline_refs,
    json_schema_for,
    loop_cut,
)
from models.registry import builtin_backends
from models.scripted import ScriptedLLM


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(max_length=60)
    tool: Literal["discover_evidence", "fetch_evidence"]


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    goal: str = Field(max_length=80)
    steps: list[Step] = Field(min_length=1, max_length=3)


class Node(BaseModel):
    name: str
    children: list[Node] = []


USER = [ChatMessage(role="user", content="Plan research on solar panels.")]
GOOD = {
    "goal": "Compare panels",
    "steps": [{"query": "panel efficiency", "tool": "fetch_evidence"}],
}


def test_scripted_is_an_llm_and_records_history() -> None:
    llm = ScriptedLLM(["Hello there."])
    assert isinstance(llm, LLM)
    response = llm.chat(USER, max_tokens=20)
    assert response.text == "Hello there."
    assert response.model == "scripted"
    assert response.finish_reason == "stop"
    assert [call.kind for call in llm.history] == ["chat"]
    assert llm.history[0].messages == USER
    assert llm.pending == 0


def test_complete_json_validates_into_the_model_and_states_the_schema() -> None:
    llm = ScriptedLLM([GOOD])
    plan = llm.complete_json(USER, Plan)
    assert plan == Plan.model_validate(GOOD)
    call = llm.history[0]
    assert call.kind == "json"
    assert call.json_schema is not None
    assert "$ref" not in str(call.json_schema) and "$defs" not in call.json_schema
    assert call.messages[0].role == "system"
    assert "JSON schema" in call.messages[0].content
    assert call.messages[1:] == USER


def test_invalid_json_is_retried_once_with_the_error_shown() -> None:
    bad = {"goal": "x", "steps": [{"query": "q", "tool": "invented_tool"}]}
    llm = ScriptedLLM([bad, GOOD])
    assert llm.complete_json(USER, Plan).goal == "Compare panels"
    assert len(llm.history) == 2
    retry = llm.history[1].messages
    assert retry[-2].role == "assistant"
    assert retry[-1].role == "user"
    assert "steps.0.tool" in retry[-1].content


def test_invalid_twice_raises_structured_output_error() -> None:
    llm = ScriptedLLM(["not json at all", '{"goal": "x", "steps": [], "extra": 1}'])
    with pytest.raises(StructuredOutputError, match="Plan") as err:
        llm.complete_json(USER, Plan)
    assert len(llm.history) == 2
    assert err.value.text == '{"goal": "x", "steps": [], "extra": 1}'  # the last answer, kept


def test_fenced_and_chatty_json_is_accepted() -> None:
    llm = ScriptedLLM(
        ['```json\n{"goal": "g", "steps": [{"query": "q", "tool": "fetch_evidence"}]}\n```']
    )
    assert llm.complete_json(USER, Plan).goal == "g"
    assert extract_json_text('Sure! {"a": 1} Hope that helps.') == '{"a": 1}'
    assert extract_json_text('{"a": 1}') == '{"a": 1}'


def test_answer_cut_by_max_tokens_is_reported_in_the_retry() -> None:
    long = {"goal": "word " * 15, "steps": [{"query": "q", "tool": "fetch_evidence"}]}
    llm = ScriptedLLM([long, GOOD])
    llm.complete_json(USER, Plan, max_tokens=10)
    assert "max_tokens=10" in llm.history[1].messages[-1].content


@pytest.mark.parametrize(
    ("text", "cut"),
    [
        ('{"goal": "' + "tiles, " * 12, len('{"goal": "tiles, ')),  # a short stretch
        (
            "A. " + "The roof faces south and gets sun. " * 4,
            len("A. The roof faces south and gets sun. "),
        ),
        ('{"n": "' + "ab" * 40 + "a", len('{"n": "aba')),  # ends inside a copy: "ba" repeats
        ("x" * 70, 1),
    ],
)
def test_a_text_ending_in_a_loop_is_cut_after_its_first_copy(text: str, cut: int) -> None:
    assert loop_cut(text) == cut


@pytest.mark.parametrize(
    "text",
    [
        ", ".join(f'"panel {i}"' for i in range(40)),  # different items
        '{"years": [0, 0, 0], "goal": "x"}',  # a short run
        "The roof faces south. " * 3,  # three copies are not yet a loop
        "",
    ],
)
def test_text_without_a_loop_is_not_cut(text: str) -> None:
    assert loop_cut(text) is None


def test_a_looping_json_answer_is_stopped_and_retried_without_the_loop() -> None:
    unit = "panels face south and "
    looping = '{"goal": "' + unit * 60
    llm = ScriptedLLM([looping, GOOD])
    assert llm.complete_json(USER, Plan, max_tokens=400).goal == "Compare panels"
    shown, feedback = llm.history[1].messages[-2:]
    assert "repeated itself" in feedback.content
    # the retry shows what came before the loop and one copy, not the loop to copy again
    assert looping.startswith(shown.content)
    assert len('{"goal": "') + len(unit) <= len(shown.content) < len('{"goal": "') + 2 * len(unit)


def test_stream_yields_tokens_in_order() -> None:
    llm = ScriptedLLM(["one two three"])
    tokens = list(llm.stream(USER))
    assert tokens == ["one ", "two ", "three"]
    assert llm.history[0].kind == "stream"


def test_cancel_between_tokens_stops_the_stream() -> None:
    cancel = threading.Event()
    llm = ScriptedLLM(["a b c d e f"])
    seen = []
    with pytest.raises(GenerationCancelled):
        for token in llm.stream(USER, cancel=cancel):
            seen.append(token)
            if len(seen) == 2:
                cancel.set()
    assert seen == ["a ", "b "]


def test_cancel_already_set_raises_before_generating() -> None:
    cancel = threading.Event()
    cancel.set()
    llm = ScriptedLLM(["never"])
    with pytest.raises(GenerationCancelled):
        llm.chat(USER, cancel=cancel)


def test_cancel_from_another_thread_stops_chat() -> None:
    cancel = threading.Event()
    llm = ScriptedLLM(["x " * 200], token_delay_s=0.01)
    timer = threading.Timer(0.1, cancel.set)
    timer.start()
    with pytest.raises(GenerationCancelled):
        llm.chat(USER, max_tokens=500, cancel=cancel)
    timer.join()


def test_context_overflow_is_raised_before_sending() -> None:
    llm = ScriptedLLM(["unused"], context_size=100)
    long = [ChatMessage(role="user", content="x" * 400)]
    with pytest.raises(ContextOverflow, match="100-token context window"):
        llm.chat(long)
    # the prompt alone fits, but not with room for the answer
    short = [ChatMessage(role="user", content="x" * 200)]
    with pytest.raises(ContextOverflow):
        llm.chat(short, max_tokens=50)
    assert llm.chat(short, max_tokens=10).text == "unused"
    assert [c.kind for c in llm.history] == ["chat"]


def test_scripted_exception_is_raised() -> None:
    llm = ScriptedLLM([ContextOverflow("boom")])
    with pytest.raises(ContextOverflow, match="boom"):
        llm.chat(USER)


def test_scripted_is_built_through_the_registry_like_real_backends() -> None:
    registry = builtin_backends()
    assert {"llamacpp", "openai", "scripted"} <= set(registry.backends)
    entry = ModelEntry(
        name="fake-model", backend="scripted", source="folder", location="-", context_length=2048
    )
    llm = registry.create(entry)
    assert isinstance(llm, ScriptedLLM)
    assert llm.name == "fake-model" and llm.context_size == 2048
    with pytest.raises(ValueError, match="already registered"):
        registry.register("scripted", lambda e, o: ScriptedLLM())


def test_inline_refs_resolves_pydantic_defs_and_rejects_recursion() -> None:
    schema = json_schema_for(Plan)
    assert schema["properties"]["steps"]["items"]["properties"]["tool"]["enum"] == [
        "discover_evidence",
        "fetch_evidence",
    ]
    assert schema["properties"]["steps"]["maxItems"] == 3
    with pytest.raises(ValueError, match="Recursive"):
        inline_refs(Node.model_json_schema())


def test_choose_without_probabilities_is_one_constrained_generation() -> None:
    llm = ScriptedLLM([{"answer": "partly"}])
    msgs = [ChatMessage(role="user", content="Does it say so?")]
    # the base behaviour (what a backend without next-token probabilities gets)
    got = BaseLLM.choose(llm, msgs, ["yes", "partly", "no"])
    assert got.option == "partly" and got.probabilities == {"yes": 0.0, "partly": 1.0, "no": 0.0}
    (call,) = llm.history
    assert call.kind == "json" and call.json_schema is not None
    assert "yes" in str(call.json_schema) and "partly" in str(call.json_schema)


def test_scripted_choose_takes_queued_choices_then_the_first_option() -> None:
    llm = ScriptedLLM()
    llm.enqueue_choices(["no"])
    msgs = [ChatMessage(role="user", content="q")]
    assert llm.choose(msgs, ["yes", "no"]).option == "no"
    assert llm.choose(msgs, ["yes", "no"]).option == "yes"
    assert [c.kind for c in llm.history] == ["choose", "choose"]
    llm.enqueue_choices(["maybe"])
    with pytest.raises(AssertionError, match="not in"):
        llm.choose(msgs, ["yes", "no"])


@pytest.mark.parametrize("options", [["yes"], ["yes", "yes"], ["no", "none"], ["yes", "not sure"]])
def test_choose_refuses_options_a_first_token_cannot_tell_apart(options: list[str]) -> None:
    with pytest.raises(ValueError):
        check_options(options)
