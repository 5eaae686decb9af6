"""The shared state of one research run and the logged wrappers around model and tool calls.

Every model call and tool call of a run goes through :class:`RunContext`, which (1) returns the
saved result when the task log already holds this step (resume), (2) records the start and the
result or error before the run moves on, (3) times it as a span with token counts, and (4)
checks cancellation first.

Threading contract: one context per run, shared by the worker threads. Its mutable parts are
thread-safe: the task log serialises writes, ``Fetched`` has a lock, flags use a lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel

from core.errors import CancelledError, ModelError, translate_errors
from core.library import Library
from core.research.schemas import EventKind, ResearchLimits, RunEvent, ToolResult
from core.research.tools import Fetched, Scope, Tools
from core.tasks import RecordingFailed, TaskLog
from models.errors import GenerationCancelled, StructuredOutputError
from models.llm import LLM, ChatMessage, Choice, json_prompt

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
EventFn = Callable[[RunEvent], None]


def invalid_output(exc: BaseException) -> bool:
    """Whether a model error means "the answer did not fit the schema" (not a dead backend)."""
    return isinstance(exc.__cause__, StructuredOutputError)


class StopSignal:
    """The user's cancel event plus the run's own stop flag, set when a worker hits an error
    that ends the run (so the other workers stop at their next step). Thread-safe."""

    def __init__(self, user: threading.Event | None = None) -> None:
        self._user = user
        self._own = threading.Event()

    def is_set(self) -> bool:
        return self._own.is_set() or (self._user is not None and self._user.is_set())

    def set(self) -> None:
        self._own.set()


@dataclass
class RunFlags:
    """Things that happened during the run and decide its status."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    tool_errors: list[str] = field(default_factory=list)
    budget_hits: list[str] = field(default_factory=list)
    failed_workers: list[str] = field(default_factory=list)

    def add(self, kind: str, text: str) -> None:
        with self.lock:
            getattr(self, kind).append(text)


@dataclass
class RunContext:
    library: Library
    log: TaskLog
    task: str
    run: int
    models: Mapping[str, LLM]
    limits: ResearchLimits
    scope: Scope
    tools: Tools
    fetched: Fetched
    cancel: StopSignal
    on_event: EventFn | None = None
    flags: RunFlags = field(default_factory=RunFlags)

    # ------------------------------------------------------------------ plumbing

    @property
    def tool_loop(self) -> bool:
        """Whether a worker's model chooses its next tool calls (``limits.tool_loop``; unset,
        only when the run may use the web)."""
        return self.tools.web_allowed if self.limits.tool_loop is None else self.limits.tool_loop

    def model(self, role: str) -> LLM:
        llm = self.models.get(role) or self.models.get("default")
        if llm is None:
            raise ModelError(f"No model configured for the {role} role.")
        return llm

    def emit(self, kind: EventKind, *, stage: str = "", worker: str = "", text: str = "") -> None:
        if self.on_event is not None:
            try:
                self.on_event(RunEvent(kind=kind, stage=stage, worker=worker, text=text))
            except Exception:  # a broken progress view must not break the run
                logger.exception("progress callback failed")

    def check_cancel(self) -> None:
        if self.cancel.is_set():
            raise CancelledError("The research run was cancelled.")

    def _messages_event(self, key: str, messages: Sequence[ChatMessage]) -> None:
        self.log.append(
            self.task,
            self.run,
            "messages",
            f"{key}#messages@{self.run}",
            [m.model_dump() for m in messages],
        )

    # ------------------------------------------------------------------ model calls

    @contextmanager
    def _model_errors(self, key: str) -> Iterator[None]:
        """Model errors as a run reports them: a cancelled generation cancels the run; any other
        is recorded against step ``key``, then raised."""
        try:
            with translate_errors():
                yield
        except ModelError as exc:
            if isinstance(exc.__cause__, GenerationCancelled):
                raise CancelledError("The research run was cancelled.") from exc
            self.log.record_error(self.task, self.run, key, str(exc))
            raise

    def model_json(
        self,
        role: str,
        key: str,
        messages: Sequence[ChatMessage],
        schema: type[M],
        *,
        max_tokens: int = 512,
    ) -> tuple[M, bool]:
        """A schema-constrained model call, logged and resumable. Returns (value, reused)."""
        self.check_cancel()
        llm = self.model(role)

        def call() -> M:
            self._messages_event(key, messages)
            with self.log.span(self.task, self.run, "model", f"{role}/{key}") as counts:
                # what the model reads: the messages and the schema instruction the call adds
                counts["prompt_tokens"] = llm.count_message_tokens(json_prompt(messages, schema))
                with self._model_errors(key):
                    out = llm.complete_json(
                        messages, schema, max_tokens=max_tokens, cancel=self.cancel
                    )
                # what the model wrote: not the defaults of fields it left out (a lean plan's)
                written = out.model_dump_json(exclude_unset=True)
                counts["completion_tokens"] = llm.count_tokens(written)
            return out

        return self.log.step(
            self.task,
            self.run,
            key,
            call,
            dump=lambda m: m.model_dump(mode="json"),
            load=schema.model_validate,
        )

    def model_choose(
        self, role: str, key: str, messages: Sequence[ChatMessage], options: Sequence[str]
    ) -> tuple[Choice, bool]:
        """Which of ``options`` the model answers, with its probabilities; logged and
        resumable like the other calls. Returns (choice, reused)."""
        self.check_cancel()
        llm = self.model(role)

        def call() -> Choice:
            self._messages_event(key, messages)
            with self.log.span(self.task, self.run, "model", f"{role}/{key}") as counts:
                with self._model_errors(key):
                    out = llm.choose(messages, options, cancel=self.cancel)
                counts["prompt_tokens"] = out.prompt_tokens or llm.count_message_tokens(messages)
                counts["completion_tokens"] = 0
            return out

        return self.log.step(
            self.task,
            self.run,
            key,
            call,
            dump=lambda c: c.model_dump(mode="json"),
            load=Choice.model_validate,
        )

    def model_text(
        self,
        role: str,
        key: str,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        stream_to: Callable[[str], None] | None = None,
        stop_at: Callable[[str], int | None] | None = None,
    ) -> tuple[str, bool]:
        """A free-text model call (streamed to ``stream_to`` if given), logged and resumable.

        ``stop_at(text)`` is asked at each word boundary for where the text should end; once it
        answers, generation stops and the text is cut there (a small model caught in a loop, or
        copying its prompt).
        """
        self.check_cancel()
        llm = self.model(role)

        def call() -> str:
            self._messages_event(key, messages)
            with self.log.span(self.task, self.run, "model", f"{role}/{key}") as counts:
                counts["prompt_tokens"] = llm.count_message_tokens(messages)
                parts: list[str] = []
                with self._model_errors(key):
                    tokens: Iterator[str] = llm.stream(
                        messages, max_tokens=max_tokens, cancel=self.cancel
                    )
                    cut = None
                    for tok in tokens:
                        after = parts[-1][-1:] if parts else ""
                        at_word = tok[:1].isspace() or after.isspace()
                        if stop_at is not None and at_word:
                            cut = stop_at("".join(parts))
                            if cut is not None:
                                break
                        parts.append(tok)
                        if stream_to is not None:
                            stream_to(tok)
                    close = getattr(tokens, "close", None)
                    if close is not None:
                        close()  # stops the generation if it was cut
                text = "".join(parts)
                counts["completion_tokens"] = llm.count_tokens(text)
                if stop_at is not None and cut is None:
                    cut = stop_at(text)
                if cut is not None:
                    logger.info("%s: the text is cut where it went astray (stop_at)", key)
                    text = text[:cut].rstrip()
            return text

        text, reused = self.log.step(self.task, self.run, key, call)
        if reused and stream_to is not None:
            stream_to(text)
        return text, reused

    # ------------------------------------------------------------------ tool calls

    def tool(
        self,
        key: str,
        name: str,
        fn: Callable[[], ToolResult],
        *,
        args: dict[str, str] | None = None,
        cache: bool = True,
    ) -> ToolResult:
        """Run a tool, logged (the call with its arguments, then the result). ``cache=False``
        (fetch_evidence) runs it again on resume, so a citation is always backed by a fetch of
        the current run."""
        self.check_cancel()

        def call() -> ToolResult:
            self.log.append(
                self.task,
                self.run,
                "tool_call",
                f"{key}#call@{self.run}",
                {"tool": name, "args": args or {}},
            )
            with self.log.span(self.task, self.run, "tool", f"{name}/{key}"):
                try:
                    res = fn()
                except (CancelledError, RecordingFailed):
                    raise
                except Exception as exc:  # a failing tool reports back to the worker
                    logger.warning("tool %s failed: %s", name, exc)
                    res = ToolResult(tool=name, text="", error=f"{name} failed: {exc}")
            if res.error:
                self.flags.add("tool_errors", f"{name}: {res.error}")
            return res

        if not cache:
            res = call()
            self.log.append(
                self.task,
                self.run,
                "tool_result",
                f"{key}#result@{self.run}",
                res.model_dump(mode="json"),
            )
            return res
        value, reused = self.log.step(
            self.task,
            self.run,
            key,
            call,
            dump=lambda r: r.model_dump(mode="json"),
            load=ToolResult.model_validate,
        )
        if reused and value.error:
            self.flags.add("tool_errors", f"{name}: {value.error}")
        return value
