"""OpenAICompatibleLLM's protocol handling and error paths, over ``httpx.MockTransport``."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from llm_fixtures import free_port
from pydantic import BaseModel, ConfigDict, Field

from models.errors import (
    AuthenticationFailed,
    ContextOverflow,
    EndpointError,
    EndpointUnreachable,
    GenerationCancelled,
    MalformedResponse,
    ModelNotFound,
    StructuredOutputError,
)
from models.llm import ChatMessage
from models.openai_compat import EndpointConfig, OpenAICompatibleLLM

SECRET = "sk-test-0123456789abcdef"
USER = [ChatMessage(role="user", content="Say hello.")]


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: str = Field(max_length=40)
    confidence: int = Field(ge=0, le=10)


Handler = Callable[[httpx.Request], httpx.Response]


def completion(content: str, finish: str = "stop") -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "c1",
            "object": "chat.completion",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content},
                 "finish_reason": finish}
            ],
            "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
        },
    )  # fmt: skip


def sse(tokens: list[str], *, done: bool = True, finish: bool = True) -> Iterator[bytes]:
    yield b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
    for tok in tokens:
        event = {"choices": [{"index": 0, "delta": {"content": tok}}]}
        yield f"data: {json.dumps(event)}\n\n".encode()
    if finish:
        yield b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    if done:
        yield b"data: [DONE]\n\n"


def streaming(chunks: Iterator[bytes]) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=chunks)


class Recorder:
    """A transport handler that answers from a list and remembers the requests."""

    def __init__(self, *answers: httpx.Response | Handler) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        return answer(request) if callable(answer) else answer

    def body(self, i: int) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.requests[i].content)
        return data


def make(handler: Handler, **kwargs: Any) -> tuple[OpenAICompatibleLLM, list[float]]:
    sleeps: list[float] = []
    llm = OpenAICompatibleLLM(
        "http://server.test/v1",
        "m1",
        api_key=SECRET,
        transport=httpx.MockTransport(handler),
        sleep=sleeps.append,
        backoff_s=0.01,
        **kwargs,
    )
    return llm, sleeps


def test_chat_sends_the_protocol_and_reads_the_answer() -> None:
    rec = Recorder(completion("Hello!"))
    llm, _ = make(rec)
    response = llm.chat(USER, max_tokens=16, temperature=0.0)
    assert response.text == "Hello!"
    assert (response.prompt_tokens, response.completion_tokens) == (7, 2)
    request = rec.requests[0]
    assert request.url == "http://server.test/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert rec.body(0)["messages"] == [{"role": "user", "content": "Say hello."}]
    assert rec.body(0)["max_tokens"] == 16 and rec.body(0)["stream"] is False


def test_401_is_an_authentication_error_without_the_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    body = {"error": {"message": f"Incorrect API key provided: {SECRET}"}}
    llm, _ = make(Recorder(httpx.Response(401, json=body)))
    with pytest.raises(AuthenticationFailed) as info:
        llm.chat(USER)
    assert "HTTP 401" in str(info.value)
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    assert "***" in str(info.value)
    assert SECRET not in caplog.text
    assert SECRET not in repr(llm)


def test_404_naming_the_model_is_model_not_found() -> None:
    body = {"error": {"message": "The model `m1` does not exist", "code": "model_not_found"}}
    llm, _ = make(Recorder(httpx.Response(404, json=body)))
    with pytest.raises(ModelNotFound, match="no model 'm1'"):
        llm.chat(USER)


def test_404_without_model_points_at_the_base_url() -> None:
    llm, _ = make(Recorder(httpx.Response(404, text="Not Found")))
    with pytest.raises(EndpointError, match="usually ends in /v1") as info:
        llm.chat(USER)
    assert not isinstance(info.value, ModelNotFound)


def test_429_then_success_retries_after_backoff() -> None:
    rec = Recorder(httpx.Response(429, json={"error": "slow down"}), completion("ok"))
    llm, sleeps = make(rec)
    assert llm.chat(USER).text == "ok"
    assert len(rec.requests) == 2
    assert sleeps == [0.01]


def test_429_honours_retry_after() -> None:
    rec = Recorder(httpx.Response(429, headers={"retry-after": "2"}), completion("ok"))
    llm, sleeps = make(rec)
    llm.chat(USER)
    assert sleeps == [2.0]


def test_500_twice_then_success_with_exponential_backoff() -> None:
    rec = Recorder(httpx.Response(500), httpx.Response(503), completion("ok"))
    llm, sleeps = make(rec, max_retries=2)
    assert llm.chat(USER).text == "ok"
    assert sleeps == [0.01, 0.02]


def test_500_twice_with_one_retry_fails_clearly() -> None:
    rec = Recorder(httpx.Response(500, text="internal"), httpx.Response(500, text="internal"))
    llm, sleeps = make(rec, max_retries=1)
    with pytest.raises(EndpointError, match="HTTP 500 after 1 retries"):
        llm.chat(USER)
    assert len(rec.requests) == 2 and len(sleeps) == 1


def test_stream_yields_tokens() -> None:
    rec = Recorder(streaming(sse(["Hel", "lo", "!"])))
    llm, _ = make(rec)
    assert list(llm.stream(USER)) == ["Hel", "lo", "!"]
    assert rec.body(0)["stream"] is True


def test_cut_stream_is_malformed_after_the_tokens_it_got() -> None:
    llm, _ = make(Recorder(streaming(sse(["partial", " answer"], done=False, finish=False))))
    seen: list[str] = []
    with pytest.raises(MalformedResponse, match="ended before"):
        for tok in llm.stream(USER):
            seen.append(tok)
    assert seen == ["partial", " answer"]


def test_connection_dropped_mid_stream_is_an_endpoint_error() -> None:
    def chunks() -> Iterator[bytes]:
        yield from list(sse(["a"], done=False, finish=False))
        raise httpx.ReadError("connection reset by peer")

    llm, _ = make(Recorder(streaming(chunks())))
    with pytest.raises(EndpointError, match="broke mid-answer"):
        list(llm.stream(USER))


def test_invalid_json_body_is_malformed() -> None:
    llm, _ = make(Recorder(httpx.Response(200, text="<html>proxy error</html>")))
    with pytest.raises(MalformedResponse, match="not JSON"):
        llm.chat(USER)


def test_json_without_choices_is_malformed() -> None:
    llm, _ = make(Recorder(httpx.Response(200, json={"result": "hi"})))
    with pytest.raises(MalformedResponse, match=r"choices\[0\]"):
        llm.chat(USER)


def test_invalid_event_in_stream_is_malformed() -> None:
    llm, _ = make(Recorder(streaming(iter([b"data: {not json\n\n"]))))
    with pytest.raises(MalformedResponse, match="not JSON"):
        list(llm.stream(USER))


def test_structured_output_uses_json_schema_and_validates() -> None:
    rec = Recorder(completion('{"answer": "yes", "confidence": 7}'))
    llm, _ = make(rec)
    assert llm.complete_json(USER, Answer) == Answer(answer="yes", confidence=7)
    fmt = rec.body(0)["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Answer"
    assert fmt["json_schema"]["schema"]["properties"]["answer"]["maxLength"] == 40
    assert rec.body(0)["temperature"] == 0.0


def test_invalid_model_json_is_retried_once() -> None:
    rec = Recorder(completion('{"answer": "yes"'), completion('{"answer": "yes", "confidence": 3}'))
    llm, _ = make(rec)
    assert llm.complete_json(USER, Answer).confidence == 3
    assert rec.body(1)["messages"][-1]["role"] == "user"
    assert "not valid" in rec.body(1)["messages"][-1]["content"]


def test_invalid_model_json_twice_is_a_structured_output_error() -> None:
    rec = Recorder(completion("I think yes."), completion('{"answer": "yes", "confidence": 99}'))
    llm, _ = make(rec)
    with pytest.raises(StructuredOutputError, match="confidence"):
        llm.complete_json(USER, Answer)


def test_rejected_json_schema_falls_back_to_json_mode_and_remembers() -> None:
    reject = httpx.Response(422, json={"detail": "response_format.type: Input should be 'text'"})
    ok = '{"answer": "yes", "confidence": 1}'
    rec = Recorder(reject, completion(ok), completion(ok))
    llm, sleeps = make(rec)
    llm.complete_json(USER, Answer)
    assert rec.body(0)["response_format"]["type"] == "json_schema"
    assert rec.body(1)["response_format"] == {
        "type": "json_object",
        "schema": rec.body(0)["response_format"]["json_schema"]["schema"],
    }
    assert llm.json_mode == "json_object_schema"
    llm.complete_json(USER, Answer)
    assert rec.body(2)["response_format"]["type"] == "json_object"
    assert sleeps == []


def test_llama_cpp_servers_500_on_json_schema_also_falls_back() -> None:
    detail = "response_format.type: Input should be 'text' or 'json_object'"
    rec = Recorder(
        httpx.Response(500, json={"error": {"message": detail}}),
        completion('{"answer": "yes", "confidence": 1}'),
    )
    llm, sleeps = make(rec)
    assert llm.complete_json(USER, Answer).answer == "yes"
    assert llm.json_mode == "json_object_schema" and sleeps == []


def test_server_context_error_is_context_overflow() -> None:
    body = {"error": {"message": "This model's maximum context length is 4096 tokens"}}
    llm, _ = make(Recorder(httpx.Response(400, json=body)))
    with pytest.raises(ContextOverflow):
        llm.chat(USER)


def test_prompt_too_long_is_refused_locally() -> None:
    rec = Recorder()
    llm, _ = make(rec, context_size=1000)
    with pytest.raises(ContextOverflow):
        llm.chat([ChatMessage(role="user", content="word " * 1000)])
    assert rec.requests == []


def test_connection_refused_is_unreachable() -> None:
    port = free_port()  # nothing listens there
    llm = OpenAICompatibleLLM(f"http://127.0.0.1:{port}/v1", "m1", api_key=SECRET, max_retries=0)
    with pytest.raises(EndpointUnreachable, match="Cannot connect") as info:
        llm.chat(USER)
    assert SECRET not in str(info.value)


def test_timeout_is_unreachable() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    llm, _ = make(slow, timeout_s=3)
    with pytest.raises(EndpointUnreachable, match="within 3 s"):
        llm.chat(USER)


def test_cancel_closes_the_stream_between_tokens() -> None:
    produced = []

    def chunks() -> Iterator[bytes]:
        for chunk in sse([f"t{i} " for i in range(100)]):
            produced.append(chunk)
            yield chunk

    cancel = threading.Event()
    llm, _ = make(Recorder(streaming(chunks())))
    seen = []
    with pytest.raises(GenerationCancelled):
        for tok in llm.stream(USER, cancel=cancel):
            seen.append(tok)
            if len(seen) == 3:
                cancel.set()
    assert len(seen) == 3
    assert len(produced) <= 5  # the server's stream was not read any further


def test_chat_with_cancel_streams_so_cancel_can_act() -> None:
    cancel = threading.Event()
    cancel.set()
    rec = Recorder()
    llm, _ = make(rec)
    with pytest.raises(GenerationCancelled):
        llm.chat(USER, cancel=cancel)
    assert rec.requests == []
    rec.answers.append(streaming(sse(["a", "b"])))
    response = llm.chat(USER, cancel=threading.Event())
    assert response.text == "ab" and response.first_token_s is not None
    assert rec.body(0)["stream"] is True


def test_endpoint_config_reads_key_from_environment_and_hides_it() -> None:
    cfg = EndpointConfig(
        name="team-server", base_url="http://server.test/v1", model="m1", api_key_env="TEAM_KEY"
    )
    rec = Recorder(completion("hi"))
    llm = OpenAICompatibleLLM.from_config(
        cfg, env={"TEAM_KEY": SECRET}, transport=httpx.MockTransport(rec)
    )
    assert llm.name == "team-server"
    llm.chat(USER)
    assert rec.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    explicit = EndpointConfig(name="x", base_url="http://h/v1", model="m", api_key=SECRET)
    assert SECRET not in repr(explicit) and SECRET not in explicit.model_dump_json()


def test_no_key_no_authorization_header() -> None:
    rec = Recorder(completion("hi"))
    llm = OpenAICompatibleLLM("http://server.test/v1", "m1", transport=httpx.MockTransport(rec))
    llm.chat(USER)
    assert "authorization" not in rec.requests[0].headers


def test_list_models() -> None:
    rec = Recorder(httpx.Response(200, json={"data": [{"id": "m1"}, {"id": "m2"}]}))
    llm, _ = make(rec)
    assert llm.list_models() == ["m1", "m2"]
