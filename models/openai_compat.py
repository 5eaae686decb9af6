"""``OpenAICompatibleLLM``: any server speaking the OpenAI chat-completions protocol.

Works against Ollama, llama-server, llama-cpp-python's server, vLLM, LM Studio and hosted APIs.
Structured output asks for ``response_format: json_schema`` first; a server that rejects it gets
``json_object`` with the schema (llama.cpp's extension), then plain ``json_object``, then no
format at all; whichever works is remembered. The answer is always validated by the caller
(:meth:`BaseLLM.complete_json`), with one retry.

Errors map to :mod:`models.errors`: connection refused or timeout -> ``EndpointUnreachable``;
401/403 -> ``AuthenticationFailed``; 404 naming the model -> ``ModelNotFound``; an answer outside
the protocol -> ``MalformedResponse``; 429 and 5xx are retried with exponential backoff first.
The API key is sent only in the ``Authorization`` header; it is never logged, never part of an
exception message (server text quoted in messages has it masked) and hidden from ``repr``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NoReturn

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from models.errors import (
    AuthenticationFailed,
    ContextOverflow,
    EndpointError,
    EndpointUnreachable,
    MalformedResponse,
    ModelNotFound,
)
from models.llm import (
    DEFAULT_MAX_TOKENS,
    BaseLLM,
    CancelToken,
    ChatMessage,
    ChatResponse,
    raise_if_cancelled,
)

logger = logging.getLogger(__name__)

#: Structured-output request styles, most precise first.
JSON_MODES = ("json_schema", "json_object_schema", "json_object", "prompt_only")
_CONTEXT_WORDS = re.compile(r"context|too long|maximum.{0,20}tokens|exceed", re.IGNORECASE)


class EndpointConfig(BaseModel):
    """An OpenAI-compatible server as the settings describe it (``core`` maps its settings)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Name used to select this endpoint's model.")
    base_url: str = Field(description="Base URL including the version, e.g. http://host/v1.")
    model: str = Field(description="Model name the server knows.")
    api_key: SecretStr | None = Field(default=None, description="Explicit key; prefer api_key_env.")
    api_key_env: str | None = Field(
        default=None, description="Environment variable holding the key."
    )
    context_size: int = Field(default=8192, ge=256)
    timeout_s: float = Field(default=120.0, gt=0)

    def resolve_api_key(self, env: Mapping[str, str] | None = None) -> str | None:
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        if self.api_key_env:
            value = (os.environ if env is None else env).get(self.api_key_env)
            if not value:
                logger.warning(
                    "Endpoint %s: environment variable %s is not set; sending no API key",
                    self.name,
                    self.api_key_env,
                )
            return value or None
        return None


class _Rejected(EndpointError):
    """HTTP 400/422: the server refused the request as asked (e.g. an unknown response_format)."""


class OpenAICompatibleLLM(BaseLLM):
    """Chat, JSON and streaming over HTTP, with retries and clear errors.

    Exists so a role can run on any inference server instead of the local llama.cpp model.

    Threading: one instance may be used from several threads at once; the ``httpx.Client`` is
    thread-safe and the only mutable state (which JSON mode the server accepts) is guarded by a
    lock. Generation runs on the calling thread; cancellation closes the response between tokens.
    Token counts are an estimate (one token per 3 characters, rounded up) unless a ``tokenizer``
    is given, which errs on the safe side for the context check.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        name: str | None = None,
        api_key: str | SecretStr | None = None,
        context_size: int = 8192,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        max_retries: int = 2,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        tokenizer: Callable[[str], int] | None = None,
    ) -> None:
        super().__init__(name or model)
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._context_size = context_size
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._sleep = sleep
        self._tokenizer = tokenizer
        key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        self._secret = key or None
        headers = {"Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(
            base_url=self.base_url + "/",
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(connect_timeout_s, timeout_s)),
            transport=transport,
        )
        self._lock = threading.Lock()
        self._json_mode = 0  # index into JSON_MODES that the server last accepted

    @classmethod
    def from_config(
        cls, config: EndpointConfig, *, env: Mapping[str, str] | None = None, **kwargs: Any
    ) -> OpenAICompatibleLLM:
        return cls(
            config.base_url,
            config.model,
            name=config.name,
            api_key=config.resolve_api_key(env),
            context_size=config.context_size,
            timeout_s=config.timeout_s,
            **kwargs,
        )

    def __repr__(self) -> str:
        return f"OpenAICompatibleLLM(name={self.name!r}, base_url={self.base_url!r})"

    @property
    def context_size(self) -> int:
        return self._context_size

    @property
    def json_mode(self) -> str:
        """The structured-output style the server last accepted."""
        return JSON_MODES[self._json_mode]

    def count_tokens(self, text: str) -> int:
        if self._tokenizer is not None:
            return self._tokenizer(text)
        return math.ceil(len(text) / 3)

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------------ HTTP

    def _redact(self, text: str, limit: int = 300) -> str:
        if self._secret:
            text = text.replace(self._secret, "***")
        text = " ".join(text.split())
        return text if len(text) <= limit else text[:limit] + "..."

    def _fail(self, status: int, body: str) -> NoReturn:
        where = f"{self.name} ({self.base_url})"
        detail = self._redact(body)
        if status in (401, 403):
            raise AuthenticationFailed(
                f"{where} refused the request (HTTP {status}): {detail or 'no detail'}."
            )
        if status == 404:
            if "model" in body.lower():
                raise ModelNotFound(
                    f"{where} has no model {self.model!r} (HTTP 404): {detail}.",
                    hint="Check the endpoint's model name against the server's model list.",
                )
            raise EndpointError(
                f"{where}: {self.base_url}/chat/completions was not found (HTTP 404).",
                hint="Check the base URL; it usually ends in /v1.",
            )
        if status in (400, 413, 422) and _CONTEXT_WORDS.search(body):
            raise ContextOverflow(f"{where} says the prompt is too long: {detail}.")
        if status in (400, 422):
            raise _Rejected(f"{where} rejected the request (HTTP {status}): {detail}.")
        if status == 429:
            raise EndpointError(
                f"{where} is rate limiting (HTTP 429) after {self._max_retries} retries.",
                hint="Wait a moment and try again, or lower the number of workers.",
            )
        raise EndpointError(
            f"{where} failed with HTTP {status} after {self._max_retries} retries: {detail}."
        )

    def _transport_error(self, exc: httpx.TransportError) -> EndpointError:
        where = f"{self.name} ({self.base_url})"
        if isinstance(exc, httpx.ConnectError):
            return EndpointUnreachable(f"Cannot connect to {where}: {self._redact(str(exc))}.")
        if isinstance(exc, httpx.TimeoutException):
            return EndpointUnreachable(f"{where} did not answer within {self._timeout_s:g} s.")
        return EndpointError(f"{where}: {type(exc).__name__}: {self._redact(str(exc))}.")

    def _delay(self, attempt: int, response: httpx.Response) -> float:
        retry_after = response.headers.get("retry-after", "")
        try:
            wanted = float(retry_after)
        except ValueError:
            wanted = self._backoff_s * (2**attempt)
        return max(0.0, min(wanted, self._max_backoff_s))

    def _send(self, payload: dict[str, Any], *, stream: bool) -> httpx.Response:
        """POST chat/completions with retries; returns a 2xx response (open if ``stream``)."""
        for attempt in range(self._max_retries + 1):
            try:
                request = self._client.build_request("POST", "chat/completions", json=payload)
                response = self._client.send(request, stream=stream)
            except httpx.TransportError as exc:
                raise self._transport_error(exc) from None
            status = response.status_code
            if status < 400:
                return response
            if status >= 500 and "response_format" in payload:
                # Some servers (llama-cpp-python) answer an unknown response_format with a 500.
                body = response.read().decode("utf-8", errors="replace")
                response.close()
                if "response_format" in body:
                    raise _Rejected(f"HTTP {status}: {self._redact(body)}")
                if attempt >= self._max_retries:
                    self._fail(status, body)
            retryable = status == 429 or status >= 500
            if retryable and attempt < self._max_retries:
                delay = self._delay(attempt, response)
                response.close()
                logger.info(
                    "%s: HTTP %s, retry %s/%s in %.1f s",
                    self.name,
                    status,
                    attempt + 1,
                    self._max_retries,
                    delay,
                )
                self._sleep(delay)
                continue
            try:
                body = response.read().decode("utf-8", errors="replace")
            except httpx.HTTPError:
                body = ""
            finally:
                response.close()
            self._fail(status, body)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ payloads

    def _payload(
        self,
        messages: Sequence[ChatMessage],
        max_tokens: int,
        temperature: float,
        stream: bool,
    ) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": [m.model_dump() for m in messages],
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": stream,
        }

    @staticmethod
    def _with_format(payload: dict[str, Any], mode: str, schema: dict[str, Any]) -> dict[str, Any]:
        name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title", "output")))[:64]
        formats: dict[str, Any] = {
            "json_schema": {"type": "json_schema", "json_schema": {"name": name, "schema": schema}},
            "json_object_schema": {"type": "json_object", "schema": schema},
            "json_object": {"type": "json_object"},
        }
        return {**payload, "response_format": formats[mode]} if mode in formats else payload

    def _send_structured(
        self, payload: dict[str, Any], schema: dict[str, Any], *, stream: bool
    ) -> httpx.Response:
        """Send with the most precise response_format the server accepts."""
        with self._lock:
            start = self._json_mode
        for index in range(start, len(JSON_MODES)):
            mode = JSON_MODES[index]
            try:
                response = self._send(self._with_format(payload, mode, schema), stream=stream)
            except _Rejected as exc:
                if index == len(JSON_MODES) - 1:
                    raise EndpointError(exc.message) from None
                logger.info("%s: response_format %s refused; trying the next", self.name, mode)
                continue
            with self._lock:
                self._json_mode = index
            return response
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ parsing

    def _parse_completion(self, response: httpx.Response, started: float) -> ChatResponse:
        try:
            data = response.json()
        except ValueError:
            snippet = self._redact(response.text, 120)
            raise MalformedResponse(
                f"{self.name}: the server's answer is not JSON: {snippet!r}."
            ) from None
        try:
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
            if not isinstance(text, str):
                raise TypeError("content is not a string")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise MalformedResponse(
                f"{self.name}: the answer has no choices[0].message.content ({exc})."
            ) from None
        usage = data.get("usage") or {}
        return ChatResponse(
            text=text,
            model=self.name,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            finish_reason=choice.get("finish_reason"),
            elapsed_s=time.monotonic() - started,
        )

    def _events(self, response: httpx.Response) -> Iterator[dict[str, Any]]:
        """Server-sent events' JSON payloads; ends at ``[DONE]`` or a finish reason."""
        where = f"{self.name} ({self.base_url})"
        finished = False
        try:
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue  # blank keep-alives, comments, event: lines
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                try:
                    event = json.loads(data)
                except ValueError:
                    raise MalformedResponse(
                        f"{where} sent an event that is not JSON: {self._redact(data, 120)!r}."
                    ) from None
                if not isinstance(event, dict):
                    raise MalformedResponse(f"{where} sent an event that is not an object.")
                if "error" in event:
                    raise EndpointError(
                        f"{where} failed mid-answer: {self._redact(json.dumps(event['error']))}."
                    )
                choices = event.get("choices") or [{}]
                finished = finished or bool(choices[0].get("finish_reason"))
                yield event
        except httpx.TimeoutException:
            raise EndpointUnreachable(
                f"{where} stopped sending within {self._timeout_s:g} s."
            ) from None
        except httpx.TransportError as exc:
            raise EndpointError(
                f"{where}: the connection broke mid-answer ({type(exc).__name__})."
            ) from None
        if not finished:
            raise MalformedResponse(f"{where}: the stream ended before the answer was complete.")

    def _stream_response(
        self, response: httpx.Response, cancel: CancelToken | None
    ) -> Iterator[tuple[str, str | None]]:
        """(token, finish_reason) pairs; closes the response however the iteration ends."""
        try:
            for event in self._events(response):
                raise_if_cancelled(cancel, self.name)
                choices = event.get("choices") or []
                if not choices:
                    continue
                delta = choices[0].get("delta") or {}
                token = delta.get("content") or ""
                if not isinstance(token, str):
                    raise MalformedResponse(f"{self.name}: a streamed token is not a string.")
                yield token, choices[0].get("finish_reason")
            raise_if_cancelled(cancel, self.name)
        finally:
            response.close()

    # ------------------------------------------------------------------ LLM API

    def _generate(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        cancel: CancelToken | None,
        json_schema: dict[str, Any] | None,
    ) -> ChatResponse:
        raise_if_cancelled(cancel, self.name)
        started = time.monotonic()
        stream = cancel is not None  # streaming lets a cancel take effect between tokens
        payload = self._payload(messages, max_tokens, temperature, stream)
        if json_schema is not None:
            response = self._send_structured(payload, json_schema, stream=stream)
        else:
            response = self._send(payload, stream=stream)
        if not stream:
            return self._parse_completion(response, started)
        parts: list[str] = []
        finish: str | None = None
        first: float | None = None
        for token, reason in self._stream_response(response, cancel):
            if token and first is None:
                first = time.monotonic() - started
            parts.append(token)
            finish = reason or finish
        return ChatResponse(
            text="".join(parts),
            model=self.name,
            finish_reason=finish,
            completion_tokens=sum(1 for p in parts if p),
            elapsed_s=time.monotonic() - started,
            first_token_s=first,
        )

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.2,
        cancel: CancelToken | None = None,
    ) -> Iterator[str]:
        """Yield tokens as the server sends them. Connection and HTTP errors raise here, at the
        call; errors later in the stream raise from the iterator."""
        self.check_fits(messages, max_tokens)
        raise_if_cancelled(cancel, self.name)
        response = self._send(self._payload(messages, max_tokens, temperature, True), stream=True)
        return (tok for tok, _ in self._stream_response(response, cancel) if tok)

    def list_models(self) -> list[str]:
        """Model ids the server offers (``GET /models``); a reachability check for settings."""
        where = f"{self.name} ({self.base_url})"
        try:
            response = self._client.get("models")
        except httpx.TransportError as exc:
            raise self._transport_error(exc) from None
        if response.status_code >= 400:
            self._fail(response.status_code, response.text)
        try:
            return [str(item["id"]) for item in response.json()["data"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise MalformedResponse(f"{where}: /models is not a model list ({exc}).") from None
