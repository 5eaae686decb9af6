"""The ``LLM`` Protocol, the data that crosses it, and the behaviour every backend shares.

Every language-model backend (``LlamaCppLLM``, ``OpenAICompatibleLLM``, and the scripted fake
:class:`~models.scripted.ScriptedLLM`) offers:

- ``chat(messages) -> ChatResponse``: plain text;
- ``complete_json(messages, SchemaModel) -> SchemaModel``: output constrained to the model's JSON
  schema where the backend can (grammar, ``response_format``), always validated back into the
  pydantic model, with one retry that shows the model its validation error;
- ``stream(messages) -> Iterator[str]``: tokens as they are generated;
- ``choose(messages, options) -> Choice``: which of a few one-word answers the model gives, with
  its probability of each (read from the next-token distribution where the backend exposes it,
  else one constrained generation, certain of what it chose);
- cancellation through any object with ``is_set()`` (a ``threading.Event``), checked between
  tokens; a cancelled call raises :class:`~models.errors.GenerationCancelled`;
- ``count_tokens(text)`` and ``context_size``; a prompt that does not leave room for
  ``max_tokens`` raises :class:`~models.errors.ContextOverflow` before it is sent.

Shared behaviour lives in :class:`BaseLLM`; backends implement ``_generate`` and ``stream``.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from models.errors import ContextOverflow, GenerationCancelled, StructuredOutputError

logger = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

DEFAULT_MAX_TOKENS = 512
#: Tokens a chat template adds around each message (role markers), and around the whole prompt.
MESSAGE_OVERHEAD_TOKENS = 6
PROMPT_OVERHEAD_TOKENS = 4


class ChatMessage(BaseModel):
    """One chat turn."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str


class ChatResponse(BaseModel):
    """What a generation returned, with the figures the task log and the benchmarks need."""

    model_config = ConfigDict(extra="forbid")

    text: str
    model: str = Field(description="Name of the model that answered.")
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = Field(
        default=None, description="'stop', 'length', ... as reported."
    )
    elapsed_s: float = 0.0
    first_token_s: float | None = Field(
        default=None, description="Time to the first token, if seen."
    )


class Choice(BaseModel):
    """What ``choose`` returned: the option the model gives and its probability of each."""

    model_config = ConfigDict(extra="forbid")

    option: str
    probabilities: dict[str, float] = Field(
        description="Each option's probability, normalised over the options."
    )
    mass: float | None = Field(
        default=None,
        description="The probability of any option among all next tokens (None if unknown).",
    )
    model: str = ""
    prompt_tokens: int | None = None
    elapsed_s: float = 0.0

    @classmethod
    def certain(cls, option: str, options: Sequence[str], **figures: Any) -> Choice:
        """A choice known only by the option picked (no probabilities to read): taken as sure."""
        return cls(option=option, probabilities={o: float(o == option) for o in options}, **figures)


def check_options(options: Sequence[str]) -> list[str]:
    """``options`` as ``choose`` needs them: two or more one-word options whose first two letters
    differ, case aside, so that the first token of a reply tells them apart."""
    opts = [o.strip() for o in options]
    if len(opts) < 2 or any(not o or " " in o for o in opts):
        raise ValueError(f"choose needs two or more one-word options, got {list(options)!r}")
    low = [o.lower() for o in opts]
    for i, a in enumerate(low):
        for j, b in enumerate(low):
            if i != j and b.startswith(a[:2]):
                raise ValueError(f"options {opts[i]!r} and {opts[j]!r} start alike")
    return opts


def _choice_schema(options: Sequence[str]) -> type[BaseModel]:
    from pydantic import create_model

    answer: Any = Literal[tuple(options)]
    return create_model("OptionChoice", answer=(answer, ...))


@runtime_checkable
class CancelToken(Protocol):
    """Anything with ``is_set()``; ``threading.Event`` is the usual one."""

    def is_set(self) -> bool: ...


@runtime_checkable
class LLM(Protocol):
    """A chat model the research roles can use. See the module docstring for the contract."""

    @property
    def name(self) -> str: ...

    @property
    def context_size(self) -> int: ...

    def count_tokens(self, text: str) -> int: ...

    def count_message_tokens(self, messages: Sequence[ChatMessage]) -> int: ...

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.2,
        cancel: CancelToken | None = None,
    ) -> ChatResponse: ...

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.2,
        cancel: CancelToken | None = None,
    ) -> Iterator[str]: ...

    def complete_json(
        self,
        messages: Sequence[ChatMessage],
        schema_model: type[T],
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.0,
        cancel: CancelToken | None = None,
    ) -> T: ...

    def choose(
        self,
        messages: Sequence[ChatMessage],
        options: Sequence[str],
        *,
        cancel: CancelToken | None = None,
    ) -> Choice: ...

    def close(self) -> None: ...


# --------------------------------------------------------------------------- JSON schema helpers


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Return ``schema`` with every local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) inlined.

    Pydantic puts nested models under ``$defs``; grammar converters and some servers handle refs
    poorly, so backends get a self-contained schema. Recursive models cannot be inlined and raise
    ``ValueError``.
    """
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        defs.update({f"#/{key}/{name}": value for name, value in schema.get(key, {}).items()})

    def resolve(node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                if ref not in defs:
                    raise ValueError(f"Unsupported $ref {ref!r} in JSON schema.")
                if ref in stack:
                    raise ValueError(f"Recursive schema ({ref}) cannot be used for output.")
                target = resolve(copy.deepcopy(defs[ref]), (*stack, ref))
                siblings = {k: v for k, v in node.items() if k != "$ref"}
                return {**target, **resolve(siblings, stack)} if siblings else target
            return {
                k: resolve(v, stack) for k, v in node.items() if k not in ("$defs", "definitions")
            }
        if isinstance(node, list):
            return [resolve(item, stack) for item in node]
        return node

    result = resolve(schema, ())
    assert isinstance(result, dict)
    return result


def json_schema_for(schema_model: type[BaseModel]) -> dict[str, Any]:
    """The self-contained JSON schema a backend constrains output to."""
    return inline_refs(schema_model.model_json_schema())


def _strip_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_titles(v) for k, v in node.items() if k != "title"}
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def schema_instruction(schema: dict[str, Any]) -> str:
    """The sentence telling a model which JSON to write (titles dropped to save tokens)."""
    compact = json.dumps(_strip_titles(schema), separators=(",", ":"), ensure_ascii=False)
    return (
        "Reply with one JSON object and nothing else. It must conform to this JSON schema:\n"
        + compact
    )


def with_schema_instruction(
    messages: Sequence[ChatMessage], schema: dict[str, Any]
) -> list[ChatMessage]:
    """Append the schema instruction to the system message (adding one if there is none)."""
    text = schema_instruction(schema)
    out = list(messages)
    if out and out[0].role == "system":
        out[0] = ChatMessage(role="system", content=f"{out[0].content}\n\n{text}")
    else:
        out.insert(0, ChatMessage(role="system", content=text))
    return out


def json_prompt(
    messages: Sequence[ChatMessage], schema_model: type[BaseModel]
) -> list[ChatMessage]:
    """What ``complete_json`` sends on its first attempt: ``messages`` with the instruction for
    ``schema_model``'s schema (so a caller can count what the model reads)."""
    return with_schema_instruction(messages, json_schema_for(schema_model))


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def extract_json_text(raw: str) -> str:
    """Strip Markdown fences and text around the outermost JSON object, if any."""
    match = _FENCE.match(raw)
    text = match.group(1) if match else raw.strip()
    start, end = text.find("{"), text.rfind("}")
    if start > 0 or (start >= 0 and end < len(text) - 1):
        return text[start : end + 1] if end > start else text[start:]
    return text


#: A JSON answer that ends in one stretch of text written this many times over, this many
#: characters in all, is a small model caught in a loop: under a grammar it would run on to
#: ``max_tokens`` (a minute of 1.5B time on two cores) and still not close its JSON.
LOOP_REPEATS = 4
LOOP_MIN_CHARS = 64
LOOP_MAX_UNIT = 256
#: Tokens between two looks for a loop while generating (see :func:`caught_in_loop`).
LOOP_CHECK_EVERY = 8
#: ``ChatResponse.finish_reason`` of a JSON generation stopped by :func:`loop_cut`.
REPEAT_FINISH = "repeat"


def loop_cut(text: str) -> int | None:
    """Where ``text`` starts saying again what it has just said, if it ends in one stretch
    repeated back to back at least ``LOOP_REPEATS`` times and ``LOOP_MIN_CHARS`` characters
    (``'"a", "a", "a", ...'``, a sentence written again and again): the end of the stretch's
    first copy. None otherwise: a list of different items never matches, nor a short run."""
    for unit in range(1, min(LOOP_MAX_UNIT, len(text) // LOOP_REPEATS) + 1):
        times = max(LOOP_REPEATS, -(-LOOP_MIN_CHARS // unit))
        stretch = text[-unit:]
        if unit * times > len(text) or not text.endswith(stretch * times):
            continue
        start = len(text) - unit * times
        while start >= unit and text[start - unit : start] == stretch:
            start -= unit
        return start + unit
    return None


def caught_in_loop(parts: Sequence[str]) -> bool:
    """Whether a JSON generation's tokens so far end in a loop (:func:`loop_cut`), looked at
    every ``LOOP_CHECK_EVERY`` tokens; the backends stop it with ``REPEAT_FINISH``."""
    return len(parts) % LOOP_CHECK_EVERY == 0 and loop_cut("".join(parts)) is not None


def _short_error(exc: ValidationError | ValueError) -> str:
    if isinstance(exc, ValidationError):
        parts = [
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
            for err in exc.errors()[:8]
        ]
        return "; ".join(parts)
    return str(exc)[:400]


# --------------------------------------------------------------------------- shared base class


class BaseLLM(ABC):
    """Behaviour every backend shares: fitting prompts, the structured-output loop, chat.

    Subclasses implement ``_generate`` (one blocking generation, optionally constrained to a JSON
    schema, calling ``on_token`` per token and honouring ``cancel`` between tokens), ``stream``,
    ``count_tokens`` and ``context_size``. Threading: whatever the subclass guarantees; the base
    keeps no mutable state of its own.
    """

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    @property
    @abstractmethod
    def context_size(self) -> int: ...

    @abstractmethod
    def count_tokens(self, text: str) -> int: ...

    def count_message_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """Tokens the prompt for ``messages`` takes (exact or a safe estimate, per backend)."""
        return PROMPT_OVERHEAD_TOKENS + sum(
            self.count_tokens(m.content) + MESSAGE_OVERHEAD_TOKENS for m in messages
        )

    def check_fits(self, messages: Sequence[ChatMessage], max_tokens: int) -> int:
        """Return the prompt's token count, or raise ``ContextOverflow`` if the prompt plus
        ``max_tokens`` of answer does not fit the context window."""
        if not messages:
            raise ValueError("At least one message is needed.")
        used = self.count_message_tokens(messages)
        if used + max_tokens > self.context_size:
            raise ContextOverflow(
                f"The prompt for {self.name} takes {used} tokens; with room for {max_tokens} "
                f"tokens of answer it exceeds the {self.context_size}-token context window."
            )
        return used

    @abstractmethod
    def _generate(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        cancel: CancelToken | None,
        json_schema: dict[str, Any] | None,
    ) -> ChatResponse: ...

    @abstractmethod
    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.2,
        cancel: CancelToken | None = None,
    ) -> Iterator[str]: ...

    def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.2,
        cancel: CancelToken | None = None,
    ) -> ChatResponse:
        self.check_fits(messages, max_tokens)
        return self._generate(
            messages,
            max_tokens=max_tokens,
            temperature=temperature,
            cancel=cancel,
            json_schema=None,
        )

    def complete_json(
        self,
        messages: Sequence[ChatMessage],
        schema_model: type[T],
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.0,
        cancel: CancelToken | None = None,
    ) -> T:
        """Generate an object of ``schema_model``; retry once with the validation error shown."""
        schema = json_schema_for(schema_model)
        prompt = json_prompt(messages, schema_model)
        last_error = last_text = ""
        for attempt in (1, 2):
            self.check_fits(prompt, max_tokens)
            response = self._generate(
                prompt,
                max_tokens=max_tokens,
                temperature=temperature,
                cancel=cancel,
                json_schema=schema,
            )
            try:
                return schema_model.model_validate_json(extract_json_text(response.text))
            except (ValidationError, ValueError) as exc:
                last_error, last_text = _short_error(exc), response.text
                shown = response.text
                if response.finish_reason == "length":
                    last_error += f" (the answer was cut at max_tokens={max_tokens})"
                elif response.finish_reason == REPEAT_FINISH:
                    last_error += " (the answer repeated itself and was stopped)"
                    shown = response.text[: loop_cut(response.text)]  # a loop shown is copied
                logger.info(
                    "%s: invalid %s on attempt %s: %s",
                    self.name,
                    schema_model.__name__,
                    attempt,
                    last_error,
                )
                prompt = [
                    *prompt,
                    ChatMessage(role="assistant", content=shown[:2000]),
                    ChatMessage(
                        role="user",
                        content=(
                            f"That answer was not valid: {last_error}. Reply again with only "
                            "the corrected JSON object, keeping strings short."
                        ),
                    ),
                ]
        raise StructuredOutputError(
            f"{self.name} did not produce a valid {schema_model.__name__} after one retry: "
            f"{last_error}",
            text=last_text,
        )

    def choose(
        self,
        messages: Sequence[ChatMessage],
        options: Sequence[str],
        *,
        cancel: CancelToken | None = None,
    ) -> Choice:
        """The default for backends without next-token probabilities: one generation constrained
        to the options, taken as certain."""
        opts = check_options(options)
        started = time.monotonic()
        out = self.complete_json(messages, _choice_schema(opts), max_tokens=16, cancel=cancel)
        picked = str(out.answer)  # type: ignore[attr-defined]
        return Choice.certain(picked, opts, model=self.name, elapsed_s=time.monotonic() - started)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; the default has none."""


def raise_if_cancelled(cancel: CancelToken | None, name: str) -> None:
    if cancel is not None and cancel.is_set():
        raise GenerationCancelled(f"Generation by {name} was cancelled.")
