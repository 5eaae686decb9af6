"""``LlamaCppLLM``: a local GGUF model through llama-cpp-python."""

from __future__ import annotations

import ctypes
import functools
import json
import logging
import math
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from models import cpu_backend
from models.errors import ContextOverflow, GenerationCancelled, ModelBackendError, ModelFileError
from models.gguf import read_gguf_info
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
from models.probe import check_runtime

logger = logging.getLogger(__name__)

R = TypeVar("R")

# Used only when a GGUF carries no chat template (base models); most chat models do.
CHATML_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# The schema converter allows one optional space between JSON tokens; models pretty-print JSON,
# and every token the grammar rejects costs a full-vocabulary grammar pass. Allow JSON's usual
# whitespace instead (as llama.cpp's own JSON grammar does).
_SPACE_RULE = re.compile(r'^space ::= " "\?$', re.MULTILINE)
_RELAXED_SPACE = 'space ::= | " " | "\\n" [ \\t]{0,20}'


def schema_grammar_text(schema: dict[str, Any]) -> str:
    """GBNF for a (ref-free) JSON schema, via llama-cpp-python's converter."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    text: str = json_schema_to_gbnf(json.dumps(schema))
    return _SPACE_RULE.sub(lambda _: _RELAXED_SPACE, text)


class _GrammarFirstSampler:
    """Grammar-constrained sampling as llama.cpp's own server does it.

    llama-cpp-python applies the grammar to the whole vocabulary (150k tokens for Qwen) at every
    step, which makes schema-constrained output 10-30x slower than free text. Here the token is
    sampled without the grammar first and only checked against it; the full grammar pass runs
    only when that token is rejected. The output distribution is the same: a token the grammar
    accepts would have survived the full pass too. Worker thread only, like the Llama it serves.
    """

    def __init__(self, chain: Any, grammar: Any, llama: Any) -> None:
        import llama_cpp
        import numpy as np

        self._lib = llama_cpp
        self._chain = chain
        self._n_vocab: int = llama.n_vocab()
        self._grammar = llama_cpp.llama_sampler_init_grammar(
            llama._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not self._grammar:
            raise ValueError("llama.cpp rejected the grammar")
        self._buf = (llama_cpp.llama_token_data * self._n_vocab)()
        self._view = np.ctypeslib.as_array(self._buf)
        self._ids = np.arange(self._n_vocab, dtype=np.int32)
        self._one = (llama_cpp.llama_token_data * 1)()
        self._np = np
        self.full_passes = 0

    def _candidates(self, ctx: Any, idx: int) -> Any:
        lib = self._lib
        logits = self._np.ctypeslib.as_array(
            lib.llama_get_logits_ith(ctx.ctx, idx), shape=(self._n_vocab,)
        )
        self._view["id"] = self._ids
        self._view["logit"] = logits
        self._view["p"] = 0.0
        return lib.llama_token_data_array(
            data=ctypes.cast(self._buf, lib.llama_token_data_p),
            size=self._n_vocab,
            selected=-1,
            sorted=False,
        )

    def sample(self, ctx: Any, idx: int = -1) -> int:
        lib = self._lib
        cands = self._candidates(ctx, idx)
        lib.llama_sampler_apply(self._chain.sampler, ctypes.byref(cands))
        token = int(cands.data[cands.selected].id)
        one: Any = self._one[0]
        one.id, one.logit, one.p = token, 1.0, 0.0
        single = lib.llama_token_data_array(
            data=ctypes.cast(self._one, lib.llama_token_data_p), size=1, selected=-1, sorted=False
        )
        lib.llama_sampler_apply(self._grammar, ctypes.byref(single))
        if math.isinf(single.data[0].logit):  # rejected: constrain the whole vocabulary
            self.full_passes += 1
            cands = self._candidates(ctx, idx)
            lib.llama_sampler_apply(self._grammar, ctypes.byref(cands))
            lib.llama_sampler_apply(self._chain.sampler, ctypes.byref(cands))
            token = int(cands.data[cands.selected].id)
        lib.llama_sampler_accept(self._grammar, token)
        self._chain.accept(token)
        return token

    def __del__(self) -> None:
        if getattr(self, "_grammar", None):
            self._lib.llama_sampler_free(self._grammar)
            self._grammar = None


@functools.cache
def _llama_class() -> type[Any]:
    """``llama_cpp.Llama`` with grammar-first sampling (imported lazily: it loads a C library)."""
    from llama_cpp import Llama

    class _Llama(Llama):
        def _init_sampler(self, **kwargs: Any) -> Any:  # type: ignore[override]
            grammar = kwargs.pop("grammar", None)
            chain = super()._init_sampler(grammar=None, **kwargs)
            return chain if grammar is None else _GrammarFirstSampler(chain, grammar, self)

        def save_state(self) -> Any:
            """The saved state without its copy of the logits buffer (n_batch rows of the
            vocabulary: 311 MB per state for Qwen's 152k tokens), which continuing from the
            state does not read: generation evaluates at least the prompt's last token again.
            One row is kept, which ``load_state`` spreads over the rows it fills."""
            scores = self.scores
            self.scores = scores[-1:]
            try:
                return super().save_state()
            finally:
                self.scores = scores

    return _Llama


class _Abandoned(Exception):
    """The consumer of a stream stopped reading; the worker stops generating."""


class LlamaCppLLM(BaseLLM):
    """A GGUF chat model run in-process by llama.cpp.

    Exists so Sourcebook works offline on a laptop. The model loads lazily, once, on first use:
    the file's header is checked first (a broken file raises ``ModelFileError`` before llama.cpp
    sees it), then the chat template is taken from the GGUF. JSON output is constrained by a
    grammar built from the pydantic model's schema (refs inlined), then validated.

    Threading contract: a llama.cpp context is not thread-safe, so every call that touches it
    (load, tokenize, generate, close) runs on this instance's own single-worker
    ``ThreadPoolExecutor``. Public methods may be called from any thread; they queue on the worker
    and block until done, so concurrent callers are served one at a time in submission order.
    ``stream`` returns at once and its iterator receives tokens from the worker through a queue.
    Cancellation (``cancel.is_set()``), abandoning a stream and ``close()`` all take effect
    between two tokens.
    """

    def __init__(
        self,
        model_path: Path,
        *,
        name: str | None = None,
        n_threads: int = 2,
        n_ctx: int = 8192,
        n_batch: int = 512,
        seed: int | None = None,
        prepare: Callable[[], Path] | None = None,
        verbose: bool = False,
        prompt_cache_bytes: int = 0,
        prompt_lookup_tokens: int = 0,
        flash_attention: bool = False,
        probe: Callable[[Path], object] | None = check_runtime,
    ) -> None:
        """``prepare``, if given, runs once on the worker before loading and returns the file to
        load (the starters use it to assemble their GGUF on first use, not at start-up).

        ``probe`` runs before the first in-process load and raises if the runtime cannot run
        the file here (:func:`models.probe.check_runtime`: a one-token child process, because a
        build using instructions this CPU refuses kills the process, not just the call).

        ``prompt_cache_bytes`` > 0 keeps the model's state after each call, up to that many
        bytes, least recently used dropped first; a later prompt that begins like a kept one
        continues from it instead of reading its whole text again. Research workers take turns
        on the one model, so without it each worker's next step re-read its whole conversation
        (bench/llm_turns.py, 1.5B, 2 cores, three turn-taking 1,000-1,350-token conversations:
        a later turn 14.0 s re-reading, 3.5 s continued from its kept state).

        ``prompt_lookup_tokens`` > 0 drafts that many tokens ahead by finding the text just
        written in the prompt (llama.cpp's prompt-lookup decoding), and the model checks the
        draft in one batch: output that copies the passages is written several tokens a step.
        The model still chooses every token (bench/prompt_lookup.py compares outputs).

        ``flash_attention`` computes attention in llama.cpp's fused kernel (llama-cpp-python
        turns it off unless asked): prompts read 2-6% faster here (1.5B, 2 cores,
        bench/llama_settings.py), writing no faster; in whole runs the gain was a few per cent,
        and the kernel's other rounding changes greedy outputs, so it is off by default."""
        super().__init__(name or model_path.stem)
        self.model_path = model_path
        self._n_threads = n_threads
        self._n_ctx = n_ctx
        self._n_batch = n_batch
        self._seed = seed
        self._prepare = prepare
        self._verbose = verbose
        self._prompt_cache_bytes = prompt_cache_bytes
        self._prompt_lookup_tokens = prompt_lookup_tokens
        self._flash_attention = flash_attention
        self._probe = probe
        self._local = threading.local()
        self._executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="llamacpp", initializer=self._mark_worker
        )
        self._closing = threading.Event()
        self._llama: Any = None
        self._formatter: Any = None
        self._grammars: dict[str, Any] = {}

    # ------------------------------------------------------------------ worker plumbing

    def _mark_worker(self) -> None:
        self._local.is_worker = True

    def _run(self, fn: Callable[..., R], *args: Any) -> R:
        """Run ``fn`` on the worker and wait for it (directly if already on the worker)."""
        if getattr(self._local, "is_worker", False):
            return fn(*args)
        if self._closing.is_set():
            raise ModelBackendError(f"Model {self.name} is closed.")
        return self._executor.submit(fn, *args).result()

    def _load(self) -> Any:
        """Load the model (worker only)."""
        if self._llama is not None:
            return self._llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        if self._prepare is not None:
            self.model_path = self._prepare()
        info = read_gguf_info(self.model_path)
        if self._probe is not None:
            self._probe(self.model_path)
        if cpu_backend.loaded_variant() is None and cpu_backend.variant_libs():
            # else llama.cpp only says it failed to load the model
            raise ModelBackendError(
                f"This llama.cpp build ships CPU variants and none is loaded, so {self.name} "
                "cannot load.",
                hint="Load one first: models.probe.check_runtime (the default probe) does.",
            )
        started = time.monotonic()
        draft = None
        if self._prompt_lookup_tokens > 0:
            from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

            draft = LlamaPromptLookupDecoding(num_pred_tokens=self._prompt_lookup_tokens)
        try:
            llama = _llama_class()(
                model_path=str(self.model_path),
                n_ctx=self._n_ctx,
                n_threads=self._n_threads,
                n_threads_batch=self._n_threads,
                n_batch=min(self._n_batch, self._n_ctx),
                seed=self._seed if self._seed is not None else 0xFFFFFFFF,
                verbose=self._verbose,
                draft_model=draft,
                flash_attn=self._flash_attention,
                # a draft is checked on every position's logits; llama-cpp-python sizes its
                # logits buffer by this flag alone, so it must be set with a draft model
                logits_all=draft is not None,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelFileError(f"llama.cpp could not load {self.model_path}: {exc}.") from exc
        if self._prompt_cache_bytes > 0:
            from llama_cpp.llama_cache import LlamaRAMCache

            llama.set_cache(LlamaRAMCache(capacity_bytes=self._prompt_cache_bytes))
        template = llama.metadata.get("tokenizer.chat_template")
        if not template:
            logger.warning("%s has no chat template; using ChatML", self.model_path.name)
            template = CHATML_TEMPLATE
        eos_id, bos_id = llama.token_eos(), llama.token_bos()
        self._formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=llama._model.token_get_text(eos_id) if eos_id != -1 else "",
            bos_token=llama._model.token_get_text(bos_id) if bos_id != -1 else "",
            stop_token_ids=[eos_id],
        )
        self._llama = llama
        logger.info(
            "Loaded %s (%s, %s, ctx %s, %s threads) in %.1f s",
            self.name,
            info.architecture,
            info.quantization,
            self._n_ctx,
            self._n_threads,
            time.monotonic() - started,
        )
        return llama

    def load(self) -> None:
        """Load now instead of on first use (e.g. to show progress at start-up)."""
        self._run(self._load)

    @property
    def loaded(self) -> bool:
        return self._llama is not None

    # ------------------------------------------------------------------ tokens

    @property
    def context_size(self) -> int:
        return self._n_ctx

    def _tokenize(self, text: str, special: bool = False) -> list[int]:
        tokens: list[int] = self._load().tokenize(
            text.encode("utf-8"), add_bos=False, special=special
        )
        return tokens

    def count_tokens(self, text: str) -> int:
        return len(self._run(self._tokenize, text))

    def _format(self, messages: Sequence[ChatMessage]) -> tuple[list[int], Any]:
        """Prompt tokens and the formatter's result (stop strings, stopping criteria)."""
        llama = self._load()
        result = self._formatter(messages=[m.model_dump() for m in messages])
        tokens: list[int] = llama.tokenize(
            result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True
        )
        return tokens, result

    def count_message_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """Exact: the chat template applied and tokenized as it will be sent."""
        return len(self._run(self._format, messages)[0])

    # ------------------------------------------------------------------ generation

    def _grammar(self, schema: dict[str, Any]) -> Any:
        from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar

        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            try:
                grammar = LlamaGrammar.from_string(schema_grammar_text(schema), verbose=False)
            except Exception as exc:  # the converter raises bare Exceptions/AssertionErrors
                logger.warning(
                    "%s: cannot turn the schema into a grammar (%s); constraining to JSON only",
                    self.name,
                    exc,
                )
                grammar = LlamaGrammar.from_string(JSON_GBNF, verbose=False)
            self._grammars[key] = grammar
        return self._grammars[key]

    def _generate_here(
        self,
        messages: Sequence[ChatMessage],
        max_tokens: int,
        temperature: float,
        cancel: CancelToken | None,
        json_schema: dict[str, Any] | None,
        on_token: Callable[[str], None] | None,
    ) -> ChatResponse:
        """One generation (worker only)."""
        raise_if_cancelled(cancel, self.name)
        started = time.monotonic()
        llama = self._load()
        prompt, fmt = self._format(messages)
        if len(prompt) + max_tokens > self._n_ctx:
            raise ContextOverflow(
                f"The prompt for {self.name} takes {len(prompt)} tokens; with room for "
                f"{max_tokens} tokens of answer it exceeds the {self._n_ctx}-token context window."
            )
        chunks = llama.create_completion(
            prompt=prompt,
            max_tokens=max_tokens,
            temperature=temperature,
            repeat_penalty=1.0 if json_schema is not None else 1.1,
            stop=fmt.stop,
            stopping_criteria=fmt.stopping_criteria,
            grammar=self._grammar(json_schema) if json_schema is not None else None,
            seed=self._seed,
            stream=True,
        )
        parts: list[str] = []
        first: float | None = None
        finish: str | None = None
        try:
            for chunk in chunks:
                if self._closing.is_set():
                    raise GenerationCancelled(f"Model {self.name} is closing.")
                raise_if_cancelled(cancel, self.name)
                choice = chunk["choices"][0]
                token = choice["text"]
                finish = choice.get("finish_reason") or finish
                if not token:
                    continue
                if first is None:
                    first = time.monotonic() - started
                parts.append(token)
                if on_token is not None:
                    on_token(token)
                if json_schema is not None and caught_in_loop(parts):
                    finish = REPEAT_FINISH  # the grammar would let it run on to max_tokens
                    break
            raise_if_cancelled(cancel, self.name)
        finally:
            chunks.close()
        return ChatResponse(
            text="".join(parts),
            model=self.name,
            prompt_tokens=len(prompt),
            completion_tokens=len(parts),
            finish_reason=finish,
            elapsed_s=time.monotonic() - started,
            first_token_s=first,
        )

    def _option_tokens(self, options: Sequence[str]) -> dict[str, set[int]]:
        """The first token of each option as a reply could start with it (any case, with or
        without a leading space); a token two options share counts for neither."""
        llama = self._load()
        firsts: dict[str, set[int]] = {}
        for option in options:
            forms = {option, option.lower(), option.capitalize(), option.upper()}
            firsts[option] = {
                llama.tokenize(f.encode("utf-8"), add_bos=False, special=False)[0]
                for form in forms
                for f in (form, " " + form)
            }
        shared = {t for a in firsts for b in firsts if a != b for t in firsts[a] & firsts[b]}
        return {o: ids - shared for o, ids in firsts.items()}

    def _choose_here(
        self, messages: Sequence[ChatMessage], options: list[str], cancel: CancelToken | None
    ) -> Choice:
        """Read the prompt and the next token's distribution; no token is generated. The part of
        the prompt the context already holds (the last call's prompt) is not read again."""
        import numpy as np

        raise_if_cancelled(cancel, self.name)
        started = time.monotonic()
        llama = self._load()
        prompt, _ = self._format(messages)
        if len(prompt) + 1 > self._n_ctx:
            raise ContextOverflow(
                f"The prompt for {self.name} takes {len(prompt)} tokens, more than its "
                f"{self._n_ctx}-token context window."
            )
        firsts = self._option_tokens(options)
        held = llama.input_ids[: llama.n_tokens].tolist()
        keep, limit = 0, min(len(held), len(prompt) - 1)
        while keep < limit and held[keep] == prompt[keep]:
            keep += 1
        llama.n_tokens = keep
        llama.eval(prompt[keep:])  # logits for the last token only (logits_all is off)
        logits = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),))
        z = logits.astype(np.float64)
        z = np.exp(z - z.max())
        z /= z.sum()
        raw = {o: float(sum(z[i] for i in ids)) for o, ids in firsts.items()}
        mass = sum(raw.values())
        probs = {o: (v / mass if mass > 0 else 1 / len(raw)) for o, v in raw.items()}
        return Choice(
            option=max(probs, key=lambda o: probs[o]),
            probabilities=probs,
            mass=mass,
            model=self.name,
            prompt_tokens=len(prompt),
            elapsed_s=time.monotonic() - started,
        )

    def choose(
        self,
        messages: Sequence[ChatMessage],
        options: Sequence[str],
        *,
        cancel: CancelToken | None = None,
    ) -> Choice:
        """Which option the model's reply starts with, and how likely each is, from one read
        of the prompt (``option`` is the likeliest; ``mass`` says how much of the model's next
        token went to any option at all)."""
        return self._run(self._choose_here, messages, check_options(options), cancel)

    def _generate(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        cancel: CancelToken | None,
        json_schema: dict[str, Any] | None,
    ) -> ChatResponse:
        return self._run(
            self._generate_here, messages, max_tokens, temperature, cancel, json_schema, None
        )

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.2,
        cancel: CancelToken | None = None,
    ) -> Iterator[str]:
        """Yield tokens as the worker produces them. ``ContextOverflow`` raises at the call;
        generation errors (and ``GenerationCancelled``) raise from the iterator."""
        self.check_fits(messages, max_tokens)
        raise_if_cancelled(cancel, self.name)
        events: queue.Queue[tuple[str, Any]] = queue.Queue()
        abandoned = threading.Event()

        def on_token(token: str) -> None:
            if abandoned.is_set():
                raise _Abandoned
            events.put(("token", token))

        def job() -> None:
            try:
                self._generate_here(messages, max_tokens, temperature, cancel, None, on_token)
                events.put(("end", None))
            except BaseException as exc:  # handed to the consumer's thread
                events.put(("error", exc))

        if self._closing.is_set():
            raise ModelBackendError(f"Model {self.name} is closed.")
        self._executor.submit(job)
        return self._drain(events, abandoned)

    @staticmethod
    def _drain(events: queue.Queue[tuple[str, Any]], abandoned: threading.Event) -> Iterator[str]:
        try:
            while True:
                kind, value = events.get()
                if kind == "token":
                    yield value
                elif kind == "end" or isinstance(value, _Abandoned):
                    return
                else:
                    raise value
        finally:
            abandoned.set()

    def close(self) -> None:
        """Stop any generation between tokens, free the model and the worker. Idempotent."""
        if self._closing.is_set():
            return
        self._closing.set()

        def free() -> None:
            if self._llama is not None:
                self._llama.close()
                self._llama = None

        self._executor.submit(free)
        self._executor.shutdown(wait=True)
