"""A scripted model for Ask's tests that cites passages by what they say."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from models.llm import DEFAULT_MAX_TOKENS, CancelToken, ChatMessage, Choice
from models.scripted import ScriptedCall, ScriptedLLM

_BLOCK = re.compile(r"^\[(E\d+)\] .*\n(.*)$", re.MULTILINE)


class PassageLLM(ScriptedLLM):
    """Scripted answers that cite passages by what they say: ``{founded in 1921}`` becomes the
    label (``E2``) under which the prompt (this turn's or an earlier one's) showed the sentences
    holding those words, so a test does not depend on the order of the search hits; words no
    passage shown holds become E99. The support check says "no" to a prompt holding
    ``refuse`` (the question, for the answer line's check), "yes" to the rest."""

    def __init__(self, answers: Sequence[str], refuse: str = "") -> None:
        super().__init__(answers)
        self.refuse = refuse

    def choose(
        self,
        messages: Sequence[ChatMessage],
        options: Sequence[str],
        *,
        cancel: CancelToken | None = None,
    ) -> Choice:
        if self.refuse and any(self.refuse in m.content for m in messages):
            self.enqueue_choices(["no"])
        return super().choose(messages, options, cancel=cancel)

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
        prompts = "\n".join(m.content for m in messages if m.role == "user")
        shown = {m.group(2): m.group(1) for m in _BLOCK.finditer(prompts)}

        def label(m: re.Match[str]) -> str:
            return next((lab for text, lab in shown.items() if m.group(1) in text), "E99")

        text = re.sub(r"\{([^}]+)\}", label, self._next_answer())
        return self._stream_tokens(text, max_tokens, cancel)
