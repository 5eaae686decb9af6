"""The same behavioural tests on the real 0.5B starter: in-process through llama.cpp, and over
HTTP through ``OpenAICompatibleLLM`` against llama-cpp-python's own server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from models.errors import ContextOverflow, GenerationCancelled, StructuredOutputError
from models.llamacpp import LlamaCppLLM
from models.llm import LLM, ChatMessage
from models.openai_compat import OpenAICompatibleLLM

pytestmark = pytest.mark.real_model


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(max_length=60, description="A self-contained search query.")
    tool: Literal["discover_evidence", "fetch_evidence"]


class MiniPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    goal: str = Field(max_length=80)
    steps: list[Step] = Field(min_length=1, max_length=2)


PLAN_PROMPT = [
    ChatMessage(role="system", content="You plan research in a document library. Be brief."),
    ChatMessage(role="user", content="Question: do heat pumps cost less to run than gas boilers?"),
]
STORY = [ChatMessage(role="user", content="Write a very long story about a lighthouse keeper.")]


@pytest.fixture(scope="module")
def local_llm(fast_model_path: Path) -> Iterator[LlamaCppLLM]:
    llm = LlamaCppLLM(fast_model_path, n_ctx=2048, n_threads=2, seed=7)
    yield llm
    llm.close()


@pytest.fixture(scope="module")
def http_llm(llama_server: str) -> Iterator[OpenAICompatibleLLM]:
    # A generous timeout: on a loaded 2-core CI machine one answer can take minutes.
    llm = OpenAICompatibleLLM(
        llama_server, "fast", name="fast-http", context_size=2048, timeout_s=600
    )
    yield llm
    llm.close()


@pytest.fixture(params=["llamacpp", "http"])
def llm(request: pytest.FixtureRequest) -> LLM:
    fixture = "local_llm" if request.param == "llamacpp" else "http_llm"
    model: LLM = request.getfixturevalue(fixture)
    return model


def test_structured_output_is_schema_valid(llm: LLM) -> None:
    plan = llm.complete_json(PLAN_PROMPT, MiniPlan, max_tokens=160)
    assert isinstance(plan, MiniPlan)
    assert 1 <= len(plan.steps) <= 2
    assert all(step.tool in ("discover_evidence", "fetch_evidence") for step in plan.steps)


def test_streaming_yields_tokens(llm: LLM) -> None:
    tokens = list(llm.stream(PLAN_PROMPT, max_tokens=12, temperature=0.0))
    assert 2 <= len(tokens) <= 12
    assert "".join(tokens).strip()


def test_cancel_stops_a_long_generation_promptly(llm: LLM) -> None:
    cancel = threading.Event()
    stamps: list[float] = []
    with pytest.raises(GenerationCancelled):
        for _token in llm.stream(STORY, max_tokens=1500, cancel=cancel):
            stamps.append(time.monotonic())
            if len(stamps) == 5:
                cancel.set()
    stopped = time.monotonic()
    # It stops at the next token boundary: at most one more token, and about one token's time
    # (measured on this machine, since a loaded CI box can be slow per token).
    assert len(stamps) <= 6
    per_token = (stamps[4] - stamps[0]) / 4
    assert stopped - stamps[4] < max(2.0, 3 * per_token)


def test_cancel_from_another_thread_interrupts_chat(llm: LLM) -> None:
    cancel = threading.Event()
    timer = threading.Timer(1.0, cancel.set)
    timer.start()
    started = time.monotonic()
    with pytest.raises(GenerationCancelled):
        llm.chat(STORY, max_tokens=1500, cancel=cancel)
    timer.join()
    assert time.monotonic() - started < 10


def test_prompt_that_does_not_fit_is_refused(llm: LLM) -> None:
    huge = [ChatMessage(role="user", content="lighthouse " * 3000)]
    with pytest.raises(ContextOverflow):
        llm.chat(huge, max_tokens=16)


class Echo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str


def test_a_json_answer_caught_in_a_loop_stops_long_before_its_budget(
    local_llm: LlamaCppLLM,
) -> None:
    ask = [ChatMessage(role="user", content='Write the word "echo" 2000 times, nothing else.')]
    budget = 400
    try:
        text = local_llm.complete_json(ask, Echo, max_tokens=budget).text
    except StructuredOutputError as exc:
        assert f"max_tokens={budget}" not in str(exc)  # stopped as a loop, not at the cut
        assert "repeated itself" in str(exc)
        text = exc.text
    # however the model answers, it never writes the loop out to its budget (~2 tokens a copy)
    assert text.count("echo") < budget // 4


def test_local_token_counts_are_exact(local_llm: LlamaCppLLM) -> None:
    assert local_llm.count_tokens("hello world") == 2
    n = local_llm.count_message_tokens(PLAN_PROMPT)
    response = local_llm.chat(PLAN_PROMPT, max_tokens=4, temperature=0.0)
    assert response.prompt_tokens == n
    assert local_llm.context_size == 2048


def test_local_model_is_used_from_several_threads_safely(local_llm: LlamaCppLLM) -> None:
    results: list[str] = []

    def ask() -> None:
        results.append(local_llm.chat(PLAN_PROMPT, max_tokens=4, temperature=0.0).text)

    threads = [threading.Thread(target=ask) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and len(set(results)) == 1


def test_broken_file_fails_before_llama_cpp_loads_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model at all")
    llm = LlamaCppLLM(bad)
    try:
        with pytest.raises(Exception, match="not a GGUF model file"):
            llm.chat(PLAN_PROMPT, max_tokens=4)
    finally:
        llm.close()


def test_kept_states_let_turn_taking_conversations_continue(fast_model_path: Path) -> None:
    """Research workers take turns on one model: with kept states each turn continues its own
    conversation from its last call instead of reading it all again after the other's turn."""
    llm = LlamaCppLLM(
        fast_model_path, n_ctx=2048, n_threads=2, seed=7, prompt_cache_bytes=256 << 20
    )
    try:
        llm.load()
        llama = llm._llama
        restored: list[int] = []
        load_state = llama.load_state

        def counting(state: object) -> None:
            restored.append(state.n_tokens)  # type: ignore[attr-defined]
            load_state(state)

        llama.load_state = counting
        system = ChatMessage(role="system", content="You answer in three words.")
        convs = {
            k: [system, ChatMessage(role="user", content=f"Describe {k} in detail. " * 20)]
            for k in ("harbors", "railways")
        }
        first: list[int] = []  # prompt tokens of each conversation's first turn
        for turn in range(2):
            for msgs in convs.values():
                response = llm.chat(msgs, max_tokens=8, temperature=0.0)
                answer = response.text
                assert answer
                if turn == 0:
                    first.append(response.prompt_tokens)
                msgs += [
                    ChatMessage(role="assistant", content=answer),
                    ChatMessage(role="user", content="And then?"),
                ]
        # the second turn of each conversation continued from its first, not from the other's
        assert len(restored) == 2
        assert all(n > f for n, f in zip(restored, first, strict=True))
        cache = llama.cache
        assert len(cache.cache_state) == 4  # a state per call, within the budget
        assert cache.cache_size <= 256 << 20
        # a kept state holds the model's state, not its 512-row logits buffer
        assert {s.scores.shape[0] for s in cache.cache_state.values()} == {1}
    finally:
        llm.close()


def test_no_kept_states_unless_asked(local_llm: LlamaCppLLM) -> None:
    local_llm.load()
    assert local_llm._llama.cache is None


JUDGE = (
    "You check claims against a passage. Reply yes if the passage states the claim, "
    "no if it does not."
)
PASSAGE = "Marta Kovac was born in 1961 in Split, a port town. She later studied in Vienna."


def _judge(claim: str) -> list[ChatMessage]:
    return [
        ChatMessage(role="system", content=JUDGE),
        ChatMessage(role="user", content=f"Passage: {PASSAGE}\nClaim: {claim}\nYes or no?"),
    ]


def test_local_choose_reads_probabilities_and_reuses_the_prompt_prefix(
    local_llm: LlamaCppLLM,
) -> None:
    first = local_llm.choose(_judge("Marta Kovac was born in Split."), ["yes", "no"])
    assert abs(sum(first.probabilities.values()) - 1) < 1e-6
    assert first.option == max(first.probabilities, key=lambda o: first.probabilities[o])
    assert first.mass is not None and first.mass > 0.5  # asked yes or no, it answers one
    assert first.prompt_tokens == local_llm.count_message_tokens(
        _judge("Marta Kovac was born in Split.")
    )
    # another prompt with the same opening, then the first again: continuing from the kept
    # prefix gives what reading it whole gave
    local_llm.choose(_judge("Marta Kovac studied in Oslo."), ["yes", "no"])
    again = local_llm.choose(_judge("Marta Kovac was born in Split."), ["yes", "no"])
    for option in ("yes", "no"):
        assert abs(again.probabilities[option] - first.probabilities[option]) < 0.02
    # and generation afterwards still works from a consistent state
    out = local_llm.chat([ChatMessage(role="user", content="Say hello.")], max_tokens=8)
    assert out.text.strip()


def test_http_choose_answers_one_of_the_options(http_llm: OpenAICompatibleLLM) -> None:
    got = http_llm.choose(_judge("Marta Kovac was born in Split."), ["yes", "no"])
    assert got.option in ("yes", "no") and got.probabilities[got.option] == 1.0


class Copy(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sentence: str = Field(max_length=200)


@pytest.mark.parametrize("flash", [True, False])
def test_flash_attention_reaches_the_context_and_kept_states_still_continue(
    fast_model_path: Path, flash: bool
) -> None:
    """The setting reaches llama.cpp's context, and a second call that begins like the first
    continues from its kept state under either attention kernel (not always word for word: the
    prompt's last token is then read alone, not in a batch, which may move a late token)."""
    import llama_cpp

    llm = LlamaCppLLM(
        fast_model_path,
        n_ctx=2048,
        n_threads=2,
        seed=7,
        prompt_cache_bytes=64 << 20,
        flash_attention=flash,
    )
    try:
        llm.load()
        want = (
            llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
            if flash
            else (llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        )
        assert llm._llama.context_params.flash_attn_type == want
        msgs = [
            ChatMessage(role="system", content="You copy sentences exactly."),
            ChatMessage(role="user", content="Copy: Tarsk Mills stands on the Dravin River."),
        ]
        first = llm.complete_json(msgs, Copy, max_tokens=60)
        assert first.sentence
        kept = llm._llama.cache
        assert len(kept.cache_state) == 1  # the state after the call was kept
        assert llm.complete_json(msgs, Copy, max_tokens=60).sentence  # continued from it
    finally:
        llm.close()


def test_prompt_lookup_drafts_from_the_prompt_and_keeps_output_valid(
    fast_model_path: Path,
) -> None:
    """With prompt lookup on, the model is offered drafts found in its prompt while it copies,
    under the schema's grammar and beside kept states, and the output still fits the schema."""
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    llm = LlamaCppLLM(
        fast_model_path,
        n_ctx=2048,
        n_threads=2,
        seed=7,
        prompt_cache_bytes=64 << 20,
        prompt_lookup_tokens=4,
    )
    try:
        llm.load()
        draft = llm._llama.draft_model
        assert isinstance(draft, LlamaPromptLookupDecoding)
        drafted: list[int] = []
        offer = draft.__call__

        def counting(input_ids: object, /, **kw: object) -> object:
            out = offer(input_ids, **kw)  # type: ignore[arg-type]
            drafted.append(len(out))
            return out

        llm._llama.draft_model = counting
        text = "Marta Kovac was born in 1961 in Split, a port town, and later studied in Vienna."
        msgs = [
            ChatMessage(role="system", content="You copy sentences exactly."),
            ChatMessage(role="user", content=f"Copy this sentence: {text}"),
        ]
        out = llm.complete_json(msgs, Copy, max_tokens=80)
        assert isinstance(out, Copy) and out.sentence
        assert sum(drafted) > 0  # tokens were drafted from the prompt
        assert llm.chat(msgs, max_tokens=40, temperature=0.0).text
    finally:
        llm.close()
