"""Prompt templates (``resources/prompts/<role>.jinja``) rendered and fitted to a context window.

A template's text before the line ``=== USER ===`` is the system message, the rest the user
message. :func:`fit_messages` shrinks the named variables (never the instructions) until the
prompt plus the answer budget fits the model's window: a prompt never overflows.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import jinja2

from core.errors import ModelError
from models.llm import LLM, ChatMessage

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "resources" / "prompts"
_SPLIT = "=== USER ==="
Keep = Literal["head", "tail"]


@functools.cache
def _env(folder: str) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        autoescape=False,  # plain-text prompts for a model, never HTML
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        trim_blocks=False,
    )


def render(
    role: str, variables: Mapping[str, Any], folder: Path | None = None
) -> list[ChatMessage]:
    text = _env(str(folder or PROMPTS_DIR)).get_template(f"{role}.jinja").render(**variables)
    system, _, user = text.partition(_SPLIT)
    msgs = [ChatMessage(role="system", content=system.strip())]
    if user.strip():
        msgs.append(ChatMessage(role="user", content=user.strip()))
    return msgs


def _cut(text: str, chars: int, keep: Keep) -> str:
    if len(text) <= chars:
        return text
    if keep == "head":
        return text[: max(0, chars - 1)] + "…"
    return "…" + text[len(text) - max(0, chars - 1) :]


def fit_messages(
    llm: LLM,
    role: str,
    variables: Mapping[str, Any],
    shrink: Mapping[str, Keep],
    max_tokens: int,
    *,
    reserve: int = 0,
    folder: Path | None = None,
) -> list[ChatMessage]:
    """Render ``role`` so that prompt + ``max_tokens`` + ``reserve`` fit ``llm.context_size``.

    ``shrink`` names string variables that may be cut (keeping their head or tail); the longest
    is cut first, by a quarter each round. ``reserve`` leaves room for text the backend adds
    (e.g. the JSON-schema instruction).
    """
    values = dict(variables)
    budget = llm.context_size - max_tokens - reserve
    for _round in range(60):
        msgs = render(role, values, folder)
        used = llm.count_message_tokens(msgs)
        if used <= budget:
            return msgs
        candidates = [k for k in shrink if len(str(values.get(k, ""))) > 40]
        if not candidates:
            break
        longest = max(candidates, key=lambda k: len(str(values[k])))
        text = str(values[longest])
        over_chars = (used - budget) * 4
        target = max(40, min(len(text) * 3 // 4, len(text) - over_chars))
        values[longest] = _cut(text, target, shrink[longest])
    raise ModelError(
        f"The {role} prompt does not fit the {llm.context_size}-token window of {llm.name}.",
        hint="Use a model with a larger context window or lower the answer length.",
    )


def answer_budget(llm: LLM, wanted: int) -> int:
    """Tokens of answer to ask for: ``wanted``, but never more than a third of the window."""
    return max(64, min(wanted, llm.context_size // 3))


def schema_reserve(llm: LLM, schema_model: type[Any]) -> int:
    """Tokens the backend's JSON-schema instruction will add to the system message."""
    from models.llm import json_schema_for, schema_instruction

    return llm.count_tokens(schema_instruction(json_schema_for(schema_model))) + 8
