"""The scripted fake: a deterministic :class:`~models.llm.BaseLLM` that replays enqueued
answers, for testing the control flow around a model without one."""

from __future__ import annotations

import json
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from models.llm import (
    DEFAULT_MAX_TOKENS,
    REPEAT_FINISH,
    BaseLLM,
    CancelToken,
    ChatMessage,
    ChatResponse,
    Choice,
    caught_in_loop,
    check_options,
    raise_if_cancelled,
)

ScriptedAnswer = str | BaseModel | dict[str, Any] | Exception


class ScriptedCall(BaseModel):
    """One call recorded by :class:`ScriptedLLM`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kind: Literal["chat", "stream", "json", "choose"]
    messages: list[ChatMessage]
    json_schema: dict[str, Any] | None = None
    max_tokens: int


class ScriptedLLM(BaseLLM):
    """A deterministic fake that replays enqueued answers and records every call in ``history``.

    Exists so control flow (planning, retries, citation repair, cancellation) can be tested
    without a model; it goes through the same ``BaseLLM`` logic (fitting, JSON validation and the
    one retry) as the real backends and is built through the same backend registry. Answers are
    strings, dicts / pydantic objects (dumped as JSON) or exceptions (raised). Tokens are the
    answer split after whitespace. Counting is one token per 4 characters, rounded up.

    Threading: ``enqueue`` and calls may come from any thread; the queue is a ``deque`` and each
    call pops one answer atomically, but the order across threads is the order of the calls.
    """

    def __init__(
        self,
        answers: Iterable[ScriptedAnswer] = (),
        *,
        name: str = "scripted",
        context_size: int = 4096,
        token_delay_s: float = 0.0,
    ) -> None:
        super().__init__(name)
        self._answers: deque[ScriptedAnswer] = deque(answers)
        self._context_size = context_size
        self._token_delay_s = token_delay_s
        self._choices: deque[str] = deque()
        self.history: list[ScriptedCall] = []

    def enqueue(self, answers: Iterable[ScriptedAnswer]) -> None:
        self._answers.extend(answers)

    def enqueue_choices(self, options: Iterable[str]) -> None:
        """Answers for ``choose`` calls, in order; with none queued it picks the first option
        (so a scripted run's support checks pass unless a test says otherwise)."""
        self._choices.extend(options)

    def choose(
        self,
        messages: Sequence[ChatMessage],
        options: Sequence[str],
        *,
        cancel: CancelToken | None = None,
    ) -> Choice:
        opts = check_options(options)
        self.history.append(ScriptedCall(kind="choose", messages=list(messages), max_tokens=1))
        raise_if_cancelled(cancel, self.name)
        picked = self._choices.popleft() if self._choices else opts[0]
        if picked not in opts:
            raise AssertionError(f"{self.name}: scripted choice {picked!r} is not in {opts!r}")
        return Choice.certain(
            picked, opts, model=self.name, prompt_tokens=self.count_message_tokens(messages)
        )

    @property
    def pending(self) -> int:
        return len(self._answers)

    @property
    def pending_choices(self) -> int:
        """Queued ``choose`` answers not yet asked for."""
        return len(self._choices)

    @property
    def context_size(self) -> int:
        return self._context_size

    def count_tokens(self, text: str) -> int:
        return (len(text) + 3) // 4

    def _next_answer(self) -> str:
        if not self._answers:
            raise AssertionError(f"{self.name}: no scripted answer left for this call.")
        answer = self._answers.popleft()
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, BaseModel):
            return answer.model_dump_json()
        if isinstance(answer, dict):
            return json.dumps(answer)
        return answer

    def _tokens(self, text: str) -> list[str]:
        return re.findall(r"\S+\s*|\s+", text)

    def _run(
        self,
        text: str,
        max_tokens: int,
        cancel: CancelToken | None,
        on_token: Callable[[str], None] | None,
        stop_loops: bool = False,
    ) -> ChatResponse:
        start = time.monotonic()
        tokens = self._tokens(text)
        finish = "stop"
        if len(tokens) > max_tokens:
            tokens, finish = tokens[:max_tokens], "length"
        out: list[str] = []
        for tok in tokens:
            raise_if_cancelled(cancel, self.name)
            if self._token_delay_s:
                time.sleep(self._token_delay_s)
            out.append(tok)
            if on_token is not None:
                on_token(tok)
            if stop_loops and caught_in_loop(out):
                finish = REPEAT_FINISH
                break
        return ChatResponse(
            text="".join(out),
            model=self.name,
            completion_tokens=len(out),
            finish_reason=finish,
            elapsed_s=time.monotonic() - start,
        )

    def _generate(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        cancel: CancelToken | None,
        json_schema: dict[str, Any] | None,
    ) -> ChatResponse:
        self.history.append(
            ScriptedCall(
                kind="json" if json_schema is not None else "chat",
                messages=list(messages),
                json_schema=json_schema,
                max_tokens=max_tokens,
            )
        )
        raise_if_cancelled(cancel, self.name)
        response = self._run(
            self._next_answer(), max_tokens, cancel, None, stop_loops=json_schema is not None
        )
        response.prompt_tokens = self.count_message_tokens(messages)
        return response

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.2,
        cancel: CancelToken | None = None,
    ) -> Iterator[str]:
        self.check_fits(messages, max_tokens)
        self.history.append(
            ScriptedCall(kind="stream", messages=list(messages), max_tokens=max_tokens)
        )
        raise_if_cancelled(cancel, self.name)
        text = self._next_answer()
        return self._stream_tokens(text, max_tokens, cancel)

    def _stream_tokens(
        self, text: str, max_tokens: int, cancel: CancelToken | None
    ) -> Iterator[str]:
        for tok in self._tokens(text)[:max_tokens]:
            raise_if_cancelled(cancel, self.name)
            if self._token_delay_s:
                time.sleep(self._token_delay_s)
            yield tok
