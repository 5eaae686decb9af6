"""The service facade: the one object the CLI and the desktop app talk to.

`Sourcebook` owns the settings, the home directory, the library and the models. Models load
lazily and belong to this object (never module globals). Every method returns pydantic schemas.

Threading contract: library writes (adds, removes, collection changes) must come from one thread
at a time; the desktop's operations helper runs them on a single-worker executor. Reads
(search, evidence, documents) are safe from any thread.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from core.errors import NotFoundError, translate_errors
from core.evidence import Evidence
from core.export import ExportFormat, check_out, export_report, write_out
from core.export_refs import SourceInfo
from core.ingest import text_lost
from core.library import AddProgress, Library, LibraryChanges, ProgressFn
from core.render import RenderedPage
from core.research import ResearchRequest, clarify_questions, draft_plan, run_research
from core.research.ask import AskRequest, ask_question
from core.research.conversation import AskTurn, Conversation, is_turn, seed_notes
from core.research.estimate import ClockReading, RunClock, RunEstimate, estimate, recorded_runs
from core.research.schemas import (
    Boundary,
    CitationRecord,
    FlaggedClaim,
    RemovedCitation,
    Report,
    ResearchLimits,
    ResearchPlan,
    RunEvent,
)
from core.settings import Settings, default_home, load_settings, models_cache_dir, save_settings
from core.tasks import TaskInfo, TaskLog, TaskSpan
from core.text import STOP_WORDS
from core.vectors import ReembedResult
from graph.schemas import Collection, Document, SearchHit, Word
from models.discovery import ModelEntry
from models.embedder import Embedder, OnnxEmbedder, SentenceTransformerEmbedder
from models.llm import LLM

logger = logging.getLogger(__name__)

# The schemas the facade hands out, importable from here by the desktop (which may not import
# graph/ or models/ itself), the function words a view skips when it marks a query's words, and
# whether a document's problem lost text (a page read by OCR did not).
__all__ = [
    "STOP_WORDS",
    "AddProgress",
    "AskTurn",
    "Boundary",
    "CitationRecord",
    "ClockReading",
    "Collection",
    "Conversation",
    "Document",
    "Evidence",
    "ExportFormat",
    "FlaggedClaim",
    "LibraryChanges",
    "ModelEntry",
    "ReembedResult",
    "RemovedCitation",
    "RenderedPage",
    "Report",
    "ResearchLimits",
    "ResearchPlan",
    "RunClock",
    "RunEstimate",
    "RunEvent",
    "SearchHit",
    "Settings",
    "Sourcebook",
    "TaskInfo",
    "TaskSpan",
    "Word",
    "text_lost",
]


def _close_models(models: Iterable[LLM]) -> None:
    seen: set[int] = set()
    for m in models:
        if id(m) not in seen:
            seen.add(id(m))
            try:
                m.close()
            except Exception:  # closing is best effort
                logger.warning("closing a model failed", exc_info=True)


class Sourcebook:
    """The application object. See the module docstring for the threading contract."""

    def __init__(
        self,
        home: Path | None = None,
        *,
        settings: Settings | None = None,
        embedder: Embedder | None = None,
        llms: Mapping[str, LLM] | None = None,
    ) -> None:
        self.home = (home or default_home()).expanduser().resolve()
        self.home.mkdir(parents=True, exist_ok=True)
        self.settings = settings or load_settings(self.home)
        self._embedder = embedder
        self._library: Library | None = None
        self._llms: dict[str, LLM] | None = dict(llms) if llms is not None else None
        self._owns_llms = llms is None
        self._lock = threading.Lock()

    @property
    def library_path(self) -> Path:
        return self.settings.library.path or self.home / "library"

    @property
    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                m = self.settings.models
                with translate_errors():
                    if m.embedder_runtime == "torch":
                        self._embedder = SentenceTransformerEmbedder(
                            threads=m.embedder_threads,
                            batch_size=self.settings.ingest.embed_batch_size,
                        )
                    else:
                        self._embedder = OnnxEmbedder(
                            models_cache_dir(),
                            threads=m.embedder_threads,
                            quantized=m.embedder_runtime == "onnx-int8",
                        )
            return self._embedder

    @property
    def library(self) -> Library:
        embedder = self.embedder
        with self._lock:
            if self._library is None:
                self._library = Library(self.library_path, self.settings, embedder)
            return self._library

    def role_models(
        self, *, default: str | None = None, overrides: Mapping[str, str] | None = None
    ) -> dict[str, LLM]:
        """One LLM per research role (plus ``clarifier`` and ``default``), owned by this object.

        Built from settings on first use (models load lazily on their first call) and kept;
        ``default``/``overrides`` (the CLI's ``--model``/``--model-ROLE``) rebuild them.
        Injected models (the ``llms`` argument) are returned as they are.
        """
        with self._lock:
            if self._llms is not None and (not self._owns_llms or not (default or overrides)):
                return dict(self._llms)
        from core.llms import build_roles

        built = build_roles(self.settings.models, default=default, overrides=overrides)
        out: dict[str, LLM] = dict(built)
        first = out.get("planner") or next(iter(built.values()))
        out.setdefault("clarifier", first)
        out["default"] = first
        old: dict[str, LLM] | None
        with self._lock:
            if self._llms is not None and not (default or overrides):
                # Another thread built them meanwhile (a run and an Ask starting together):
                # theirs may be in use already, so keep theirs and drop these unused ones.
                out, old = dict(self._llms), out
            else:
                old, self._llms, self._owns_llms = self._llms, out, True
        if old:
            _close_models(old.values())
        return dict(out)

    def reset_models(self) -> None:
        """Forget the built models (after the model settings changed); they rebuild lazily."""
        with self._lock:
            old, self._llms = (self._llms, None) if self._owns_llms else (None, self._llms)
        if old:
            _close_models(old.values())

    def save_settings(self, settings: Settings) -> None:
        """Validate and persist new settings under the home; models rebuild on next use."""
        save_settings(self.home, settings)
        self.settings = settings
        self.reset_models()

    def list_models(self) -> list[ModelEntry]:
        """Every model the settings can name: starters, GGUF found on disk, endpoints."""
        from core.llms import list_models

        return list_models(self.settings.models)

    def close(self) -> None:
        self.reset_models()
        with self._lock:
            if self._library is not None:
                self._library.close()
                self._library = None

    # library operations -------------------------------------------------------------

    def add(
        self,
        paths: Sequence[Path | str],
        *,
        collection: str | None = None,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> LibraryChanges:
        return self.library.add_paths(
            paths, collection=collection, progress=progress, cancel=cancel
        )

    def add_jsonl(
        self,
        path: Path,
        *,
        title_field: str = "title",
        text_field: str = "text",
        id_field: str | None = None,
        collection: str | None = None,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> LibraryChanges:
        return self.library.add_jsonl(
            path,
            title_field=title_field,
            text_field=text_field,
            id_field=id_field,
            collection=collection,
            progress=progress,
            cancel=cancel,
        )

    def documents(self, *, include_superseded: bool = True) -> list[Document]:
        return self.library.documents(include_superseded=include_superseded)

    def remove(self, doc_ref: str) -> LibraryChanges:
        return self.library.remove(doc_ref)

    def collections(self) -> list[Collection]:
        with translate_errors():
            return self.library.store.list_collections()

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        doc_refs: Sequence[str] = (),
        collections: Sequence[str] = (),
        graph: bool | None = None,
        mode: Literal["hybrid", "vector", "keyword"] = "hybrid",
    ) -> list[SearchHit]:
        return self.library.search(
            query, k=k, doc_refs=doc_refs, collections=collections, graph=graph, mode=mode
        )

    def evidence(self, evidence_id: str) -> Evidence:
        return self.library.evidence(evidence_id)

    def embedder_identity(self) -> str:
        """The current embedder's identity (what new vectors are made by)."""
        return self.embedder.identity

    def embedder_mismatch(self) -> str | None:
        """When the library's vectors were made by another embedder than the current one
        (adding is refused then): a sentence saying which, and what to do; else ``None``."""
        return self.library.embedder_mismatch

    def reembed(
        self, *, progress: ProgressFn | None = None, cancel: threading.Event | None = None
    ) -> ReembedResult:
        """Recompute every passage's vector with the current embedder (a library write: run
        it like an add). See :meth:`core.library.Library.reembed`."""
        return self.library.reembed(progress=progress, cancel=cancel)

    # research (core/research, core/tasks, core/export) -----------------------------------

    def task_log(self) -> TaskLog:
        """The task log under the home (``tasks.sqlite``); the caller closes it."""
        return TaskLog(self.home / "tasks.sqlite")

    def research_limits(self, **changes: object) -> ResearchLimits:
        """The settings' research limits, with ``changes`` (e.g. a stage off), validated."""
        return ResearchLimits.model_validate({**self.settings.research.model_dump(), **changes})

    def research_estimate(
        self,
        *,
        models: Mapping[str, LLM] | None = None,
        limits: ResearchLimits | None = None,
        route: bool = False,
    ) -> RunEstimate:
        """How long a run with these models (default: :meth:`role_models`) and limits (default:
        the settings') is likely to take here, from earlier runs' recorded stage times (see
        :mod:`core.research.estimate`). A few quick task-log reads."""
        names = {r: m.name for r, m in (models or self.role_models()).items()}
        chosen = (limits or self.research_limits()).model_dump()
        log = self.task_log()
        try:
            return estimate(recorded_runs(log, names), names, chosen, route=route)
        finally:
            log.close()

    def research(
        self,
        question: str,
        *,
        models: Mapping[str, LLM] | None = None,
        task: str | None = None,
        boundary: Boundary | None = None,
        limits: ResearchLimits | None = None,
        answers: Sequence[str] = (),
        plan: ResearchPlan | None = None,
        route: bool = False,
        fresh: bool = False,
        cancel: threading.Event | None = None,
        on_event: Callable[[RunEvent], None] | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> Report:
        """Run (or resume, by task name) a research run; ``models`` maps role -> LLM
        (``default`` covers roles not named); without it, :meth:`role_models`."""
        models = models if models is not None else self.role_models()
        request = ResearchRequest(
            question=question,
            task=task,
            boundary=boundary or Boundary(),
            limits=limits or self.research_limits(),
            answers=list(answers),
            plan=plan,
            route=route,
            fresh=fresh,
        )
        log = self.task_log()
        try:
            return run_research(
                self.library,
                log,
                models,
                request,
                cancel=cancel,
                on_event=on_event,
                on_token=on_token,
            )
        finally:
            log.close()

    def ask(
        self,
        question: str,
        *,
        conversation: str | None = None,
        models: Mapping[str, LLM] | None = None,
        boundary: Boundary | None = None,
        limits: ResearchLimits | None = None,
        fresh: bool = False,
        cancel: threading.Event | None = None,
        on_event: Callable[[RunEvent], None] | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> Report:
        """One question of an Ask conversation (``conversation`` names it; default: a new one
        named from the question): one search, one model call streamed to ``on_token``, the
        checks of a research run. ``boundary`` None keeps the conversation's sources. Asking
        a conversation's last question again returns its answer (``fresh`` asks anew); one
        that was interrupted resumes. See :mod:`core.research.ask`."""
        models = models if models is not None else self.role_models()
        req = AskRequest(
            question=question,
            conversation=conversation,
            boundary=boundary,
            limits=limits or self.research_limits(),
            fresh=fresh,
        )
        log = self.task_log()
        try:
            return ask_question(
                self.library, log, models, req, cancel=cancel, on_event=on_event, on_token=on_token
            )
        finally:
            log.close()

    def conversation(self, name: str) -> Conversation:
        """Conversation ``name``: its finished turns, an interrupted one, its sources
        (``NotFoundError`` if there is none)."""
        log = self.task_log()
        try:
            conv = Conversation.load(log, name)
        finally:
            log.close()
        if not conv.exists:
            raise NotFoundError(
                f"No conversation called {name!r}.", hint="Run `sourcebook tasks` to list them."
            )
        return conv

    def research_from_conversation(
        self,
        name: str,
        *,
        models: Mapping[str, LLM] | None = None,
        limits: ResearchLimits | None = None,
        fresh: bool = False,
        cancel: threading.Event | None = None,
        on_event: Callable[[RunEvent], None] | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> Report:
        """Research this: a full research run on the conversation's current question, inside
        its sources, starting from the passages it read (citable from the start) and its
        asserted answers. Its task is ``NAME/research-N`` (N: the turns so far), so running it
        again resumes it."""
        conv = self.conversation(name)
        if conv.last is None:
            raise NotFoundError(
                f"Conversation {name!r} has no answered question yet.",
                hint="Ask a question first.",
            )
        request = ResearchRequest(
            question=conv.last.question,
            task=f"{name}/research-{len(conv.turns)}",
            boundary=conv.boundary or Boundary(),
            limits=limits or self.research_limits(),
            fresh=fresh,
            seed=seed_notes(conv),
        )
        log = self.task_log()
        try:
            return run_research(
                self.library,
                log,
                models if models is not None else self.role_models(),
                request,
                cancel=cancel,
                on_event=on_event,
                on_token=on_token,
            )
        finally:
            log.close()

    def clarify(
        self,
        question: str,
        *,
        models: Mapping[str, LLM] | None = None,
        boundary: Boundary | None = None,
        task: str | None = None,
    ) -> list[str]:
        """Questions about scope or output shape to ask before a run (empty if none)."""
        models = models if models is not None else self.role_models()
        log = self.task_log()
        try:
            req = ResearchRequest(question=question, task=task, boundary=boundary or Boundary())
            return clarify_questions(self.library, log, models, req)
        finally:
            log.close()

    def plan(
        self,
        question: str,
        *,
        models: Mapping[str, LLM] | None = None,
        boundary: Boundary | None = None,
        answers: Sequence[str] = (),
    ) -> ResearchPlan:
        """The planner's plan for ``question``, to show and edit before a run (pass the edited
        plan to :meth:`research` as ``plan=``). Leaves no task in the history."""
        models = models if models is not None else self.role_models()
        req = ResearchRequest(
            question=question, boundary=boundary or Boundary(), answers=list(answers)
        )
        with tempfile.TemporaryDirectory(prefix="sourcebook-plan-") as scratch:
            return draft_plan(self.library, models, req, Path(scratch))

    def tasks(self) -> list[TaskInfo]:
        """Research tasks and conversations, latest first (a conversation's turns are its own
        tasks, listed by :meth:`conversation`, not here)."""
        log = self.task_log()
        try:
            return [t for t in log.list_tasks() if not is_turn(t.params)]
        finally:
            log.close()

    def task(self, name: str) -> tuple[TaskInfo, list[TaskSpan]]:
        """A task's record and its timing spans; ``NotFoundError`` if there is none."""
        log = self.task_log()
        try:
            info = log.get(name)
            if info is None:
                raise NotFoundError(f"No task called {name!r}.", hint="Run `sourcebook tasks`.")
            return info, log.spans(name)
        finally:
            log.close()

    def report(self, name: str) -> Report:
        info, _ = self.task(name)
        if info.report is None:
            raise NotFoundError(
                f"Task {name!r} has no report yet (status {info.status}).",
                hint="Rerun the task to resume it.",
            )
        return Report.model_validate(info.report)

    def export(self, name: str, fmt: ExportFormat, out: Path | None = None) -> bytes:
        """The task's report as ``fmt`` bytes (see ``core.export.FORMATS``); also written to
        ``out`` if given."""
        return self.export_report(self.report(name), fmt, out)

    def export_report(self, report: Report, fmt: ExportFormat, out: Path | None = None) -> bytes:
        """``report`` exported with what the library knows: page pictures of the cited words
        (html, pdf, docx) and the documents' years and dates (bib, csl). Slow: a worker."""
        if out is not None:
            check_out(out)  # before the pages are drawn
        data = export_report(
            report, fmt, render_page=self.render_page, source_info=self.source_info
        )
        if out is not None:
            write_out(out, data)
        return data

    def source_info(self, doc_id: str) -> SourceInfo | None:
        """What a reference entry needs beyond the citation: the document's kind, the year its
        own metadata gives (if its bytes are at hand) and when it was added; ``None`` when the
        library no longer has it."""
        from core.export_refs import source_info_of

        try:
            doc = self.document(doc_id)
        except NotFoundError:
            return None
        return source_info_of(doc.kind, doc.added_at, self.source_path(doc.doc_id))

    # desktop support (added for the desktop app: page rendering, original files) ---------
    # Read-only helpers; like the other reads they are safe from any thread, and slow ones
    # (render_page, sample_documents' first call) belong on a worker thread.

    def document(self, doc_ref: str) -> Document:
        """One document by id, id prefix, exact title or source path (``NotFoundError``)."""
        return self.library.resolve_document(doc_ref)

    def source_path(self, doc_id: str) -> Path | None:
        """A local file holding the document's exact bytes, if there is one.

        The file it was added from while it is unchanged (same sha256), else the copy the
        library keeps of fetched web documents; ``None`` when neither exists (the file moved,
        changed or was deleted; web pages whose copy is gone).
        """
        from core.ingest.web import stored_copy
        from core.render import file_sha256

        doc = self.document(doc_id)
        kept = stored_copy(self.library_path / "web", doc.content_sha256)
        if kept is not None:
            return kept
        if "://" in doc.source_uri:
            return None
        path = Path(doc.source_uri).expanduser()
        try:
            if path.is_file() and file_sha256(path) == doc.content_sha256:
                return path
        except OSError:
            logger.info("cannot read %s to check it", path, exc_info=True)
        return None

    def render_page(self, doc_id: str, page_index: int, zoom: float) -> RenderedPage:
        """Page ``page_index`` (0-based) of a PDF document as RGB pixels at ``zoom`` px/pt.

        Renders the very bytes that were added (see :meth:`source_path`), so word boxes line
        up; ``NotFoundError`` says what to do when they are no longer on disk.
        """
        from core.render import render_pdf_page

        doc = self.document(doc_id)
        if doc.kind != "pdf":
            raise NotFoundError(
                f"{doc.title!r} is a {doc.kind} document; it has no pages to draw.",
                hint="Its passage text is shown instead.",
            )
        path = self.source_path(doc.doc_id)
        if path is None:
            raise NotFoundError(
                f"The original of {doc.title!r} ({doc.source_uri}) is missing or has changed "
                "since it was added.",
                hint="Put the file back, or add it again to index the new version.",
            )
        return render_pdf_page(path, page_index, zoom, doc_id=doc.doc_id)

    def sample_documents(self) -> list[Path]:
        """The sample PDFs bundled with Sourcebook (public-domain US federal reports)."""
        from importlib.resources import files

        root = Path(str(files("resources") / "samples"))
        return sorted(p for p in root.glob("*.pdf") if p.is_file())

    @staticmethod
    def supported_suffixes() -> tuple[str, ...]:
        """File extensions an add accepts (for file dialogs and drag and drop)."""
        from core.ingest import SUPPORTED_SUFFIXES

        return tuple(sorted(SUPPORTED_SUFFIXES))

    def configure_logging(self, *, verbose: bool = False) -> None:
        """Log to ``<home>/logs`` (once per process), as the CLI does."""
        from core.logging_setup import configure_logging

        configure_logging(self.home / "logs", verbose=verbose)
