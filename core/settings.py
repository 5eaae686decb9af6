"""The one settings tree, and where Sourcebook keeps a user's files.

Precedence, highest first: environment (``SOURCEBOOK_<GROUP>__<FIELD>``, e.g.
``SOURCEBOOK_RETRIEVAL__DEFAULT_K=20``), then ``<home>/settings.json``, then the defaults here.

Everything written for a user lives under one *home* directory: the platform's user data dir, or
``SOURCEBOOK_HOME`` / ``--home PATH``. Large shared caches (assembled model files) live in the user
cache dir, or ``SOURCEBOOK_MODELS_DIR``, so a second home does not copy them again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from core.errors import ConfigError

SCHEMA_VERSION = 1
APP_NAME = "sourcebook"


class LibrarySettings(BaseModel):
    path: Path | None = Field(
        None, description="Library folder; default `<home>/library`. May be shared storage."
    )


class IngestSettings(BaseModel):
    max_file_mb: int = Field(512, ge=1, description="Files larger than this are refused.")
    max_pages: int = Field(5000, ge=1, description="PDFs with more pages are refused.")
    passage_max_tokens: int = Field(
        200, ge=32, le=256, description="Word pieces per passage (MiniLM's hard limit is 256)."
    )
    embed_batch_size: int = Field(64, ge=1, description="Passages embedded per batch.")
    ocr_enabled: bool = Field(
        True, description="OCR PDF pages without a text layer (needs Tesseract installed)."
    )
    ocr_languages: str = Field(
        "eng", description="Tesseract languages, e.g. `eng` or `eng+deu` (needs their data)."
    )
    ocr_dpi: int = Field(
        300, ge=72, le=1200, description="Render resolution for OCR (raised to a scan's own)."
    )
    ocr_psm: int = Field(
        1, ge=0, le=13, description="Tesseract page segmentation mode (1: auto + orientation)."
    )
    ocr_workers: int = Field(2, ge=1, le=16, description="Tesseract processes run at once.")
    ocr_page_timeout_s: float = Field(180.0, gt=0, description="Longest OCR of one page.")


class RetrievalSettings(BaseModel):
    default_k: int = Field(10, ge=1, le=200, description="Hits returned by a search.")
    graph_expansion: bool = Field(False, description="Expand hits through the knowledge graph.")


class RoleModels(BaseModel):
    router: str | None = Field(None, description="Model for source routing; default if unset.")
    planner: str | None = Field(None, description="Model for planning; default if unset.")
    researcher: str | None = Field(None, description="Model for researchers; default if unset.")
    writer: str | None = Field(None, description="Model for the writer; default if unset.")


class EndpointSettings(BaseModel):
    name: str = Field(..., description="Name used to select this endpoint's model.")
    base_url: str = Field(..., description="OpenAI-compatible base URL, e.g. http://host/v1.")
    model: str = Field(..., description="Model name the server knows.")
    api_key_env: str | None = Field(
        None, description="Environment variable holding the API key (never stored in files)."
    )
    api_key: str | None = Field(None, description="API key; prefer api_key_env.", repr=False)
    context_size: int = Field(8192, ge=512, description="Context window of the served model.")
    timeout_s: float = Field(120.0, gt=0, description="Per-request timeout.")


class ModelSettings(BaseModel):
    default: str = Field(
        "qwen2.5-coder-1.5b-instruct-q4_k_m", description="Model for roles without their own."
    )
    roles: RoleModels = Field(default_factory=RoleModels)
    search_paths: list[Path] = Field(
        default_factory=list, description="Extra folders scanned for GGUF files."
    )
    endpoints: list[EndpointSettings] = Field(
        default_factory=list, description="OpenAI-compatible servers."
    )
    threads: int = Field(2, ge=1, description="CPU threads for llama.cpp.")
    context_size: int = Field(8192, ge=512, description="llama.cpp context window (tokens).")
    prompt_cache_mb: int = Field(
        1024,
        ge=0,
        description="llama.cpp: memory (MB) for model states kept between calls, so a "
        "research worker's next step continues from its last one instead of re-reading its "
        "whole conversation after another worker's turn (0: off).",
    )
    prompt_lookup_tokens: int = Field(
        0,
        ge=0,
        le=16,
        description="llama.cpp: draft this many tokens by looking up the text just written in "
        "the prompt (prompt-lookup decoding), checked by the model in one batch; speeds up "
        "output that copies the passages in theory; measured slower here (1.5B, 2 cores: "
        "0.75-0.94x on logged research calls, bench/prompt_lookup.py) and it keeps logits for "
        "the whole context (~5 GB at 8,192 tokens), so 0: off.",
    )
    flash_attention: bool = Field(
        False,
        description="llama.cpp: compute attention with its fused (flash) kernel: prompts read "
        "2-6% faster on 2 CPU cores (bench/llama_settings.py) but whole research runs only a "
        "few per cent, and its other rounding changes the model's greedy outputs (a fresh "
        "MuSiQue dev run: F1 first .30 against .46), so off.",
    )
    embedder_threads: int = Field(2, ge=1, description="CPU threads for the embedder.")
    embedder_runtime: Literal["torch", "onnx", "onnx-int8"] = Field(
        "onnx-int8",
        description="MiniLM on ONNX Runtime with int8 weights (default: 962 pages ingested in "
        "~86 s at a 0.7 GB peak; hybrid recall@5 on MuSiQue as with fp32), its fp32 copy "
        "('onnx'), or on torch through sentence-transformers ('torch').",
    )


class ResearchLimits(BaseModel):
    """How research runs: the hard limits of one run (defaults: the evidence-agent design) and
    the stages it takes. The settings' ``research`` section holds one; a run gets a copy with
    any changes (:meth:`core.service.Sourcebook.research_limits`)."""

    max_workers: int = Field(3, ge=1, description="Concurrent researcher workers.")
    max_tool_calls: int = Field(20, ge=1, description="Tool calls per worker.")
    max_steps: int = Field(50, ge=1, description="Steps (model turns) per worker.")
    fetch_chars: int = Field(12000, ge=200, description="Characters per evidence fetch.")
    max_rounds: int = Field(
        1,
        ge=1,
        description="Research rounds (first + follow-ups). A follow-up round researches the "
        "gaps the first round's notes name. On MuSiQue dev it fetched no gold passage the first "
        "round had not in two series of 15 questions, one in a third, and asking for gaps cost "
        "~20 of the ~115 tokens a notes call writes: with one round (and the lean plan), the "
        "median 94 s a question against 100 s, the same answers asserted and confidently wrong "
        "(bench/results/research_speed.json, levers s37_default and s37_base).",
    )
    discover_k: int = Field(6, ge=1, le=50, description="Hits per discover_evidence call.")
    discover_graph: bool = Field(
        True,
        description="discover_evidence expands its hits through the knowledge graph (passages "
        "sharing the query's or the best hits' entities): it finds the next hop's passage "
        "(MuSiQue recall@5 .67 -> .77).",
    )
    enough_fetches: int = Field(6, ge=1, description="A worker stops after this many fetches.")
    read_top: int = Field(
        3,
        ge=0,
        le=10,
        description="Before its notes, a worker reads its best unread hits until it has read "
        "this many (within its tool calls).",
    )
    writer_max_tokens: int = Field(900, ge=64)
    prose_prompt_tokens: int = Field(
        2048,
        ge=0,
        description="Under a short answer, the writer's prose is written only when its prompt "
        "(the notes and every passage read) is at most this many tokens; past it, the body is "
        "the notes a passage holds, as with notes_body (no call). The 1.5B reads ~110 prompt "
        "tokens a second on a 2-core laptop, so 2,048 bounds the call near 20 s: a MuSiQue "
        "question's paragraphs fit, a filing's tables mostly do not (0: no bound).",
    )
    writer_sentences: int = Field(
        0,
        ge=0,
        le=40,
        description="Under a short answer, the writer reads only this many sentences of the "
        "passages, those most like the question or a plan query, each under its passage's "
        "label, as the short answer does (0: every passage whole, up to 1,500 characters "
        "each). 12 is ~6 s a MuSiQue question faster, but in fresh runs cited with recall "
        ".59-.61 against .69-.74 whole (figures in the README).",
    )
    short_answer: bool = Field(
        True,
        description="Before the report, the writer answers in one short cited line, hop by hop "
        "(one more model call).",
    )
    support_check: bool = Field(
        True,
        description="Each cited claim is read with its passages by the model, asked whether "
        "they state it (yes / partly / no, its probabilities read, no tokens written); an "
        "unsupported claim is flagged and an unsupported answer is not stated "
        "(core.research.support).",
    )
    trail: bool = Field(
        False,
        description="End the report with its research trail: each step's finding, cited (no "
        "model call; see core.research.trail). Off unless asked for: a reader wants the answer "
        "and its evidence, the trail is the record of how the run got there.",
    )
    chain_support: bool = Field(
        True,
        description="An answer line stands on its chain when every link (one fact, one cited "
        "passage) passed its own checks, the links join, and the last states the answer "
        "(core.research.chain); otherwise it is judged as a whole, except one joining passages "
        "of several documents, which is then flagged: judged as a whole, such answers score no "
        "better than chance. An answer worked out from figures stands only when a checked link "
        "states each figure (which line item and period it is), else it is flagged.",
    )
    notes_body: bool = Field(
        False,
        description="Under a short answer, the body is the notes' findings that a passage "
        "they cite holds, each cited to it (no model call), instead of the writer's prose "
        "(one call reading every passage fetched).",
    )
    stages_off: list[str] = Field(
        default_factory=list,
        description="Post-draft stages switched off by name: those of "
        "core.research.pipeline.STAGES (listed by `sourcebook eval --help` under --off).",
    )
    max_queries: int = Field(5, ge=1, le=5, description="Queries of the plan that run.")
    auto_search: bool = Field(
        True,
        description="A worker's first steps are searches for its query (saves a model call), "
        "for what the queries it builds on found, and for the line items of a financial "
        "metric it names (core.research.line_items).",
    )
    tool_loop: bool | None = Field(
        None,
        description="After its automatic searches, a worker's model chooses its next tool "
        "calls, one model call per step; off, it reads its best hits (read_top) and writes its "
        "notes: one model call per worker. Unset: on only when the run may use the web (its "
        "tools are the loop's choices to make). On, over the library alone, measured fresh on "
        "MuSiQue dev in one session: median 206 s a question against 123 s off, and no better: "
        "fetched recall .78 against .80, F1 first .30 against .32, 4 confidently wrong answers "
        "against 2 (bench/results/research_speed.json, levers tool_loop_on and default).",
    )

    @field_validator("stages_off")
    @classmethod
    def _known_stages(cls, names: list[str]) -> list[str]:
        from core.research.pipeline import known_stages  # not at load time: settings stay light

        return known_stages(names)


class WebSettings(BaseModel):
    """Web access: ``sourcebook add URL`` and, in runs that allow the web, the research tools
    ``fetch_url`` and (with a search provider) ``web_search``. Everything is off by default."""

    enabled: bool = Field(False, description="Allow fetching web pages. Off by default.")
    allow_local_hosts: bool = Field(
        False, description="Allow loopback/private hosts (for local servers only)."
    )
    max_bytes: int = Field(20_000_000, ge=1, description="Largest response accepted.")
    timeout_s: float = Field(20.0, gt=0, description="Per-request timeout.")
    max_redirects: int = Field(5, ge=0, description="Redirects followed.")
    local_allowlist: list[str] = Field(
        default_factory=list,
        description="`host:port` entries (e.g. `127.0.0.1:8888`) allowed although local, "
        "when allow_local_hosts is off; everything else local stays refused.",
    )
    search_provider: Literal["searxng", "brave"] | None = Field(
        None,
        description="Web search for research runs (the `web_search` tool): `searxng` (your "
        "SearXNG instance at `searxng_url`) or `brave` (the Brave Search API, key in the "
        "variable named by `search_api_key_env`). Unset: no web search tool.",
    )
    searxng_url: str | None = Field(
        None,
        description="Base URL of a SearXNG instance whose JSON format is enabled "
        "(`search: formats: [html, json]` in its settings.yml), e.g. `https://searx.example.org`. "
        "A SearXNG on this machine or network is refused like any local host unless listed "
        "in `local_allowlist` (e.g. `localhost:8888`) or `allow_local_hosts` is set.",
    )
    search_api_key_env: str = Field(
        "BRAVE_SEARCH_API_KEY",
        description="Environment variable holding the Brave Search API key (never stored).",
    )
    search_api_key: str | None = Field(
        None, description="Brave Search API key; prefer search_api_key_env.", repr=False
    )
    search_results: int = Field(5, ge=1, le=20, description="Results per web search.")

    @model_validator(mode="after")
    def _searxng_needs_url(self) -> WebSettings:
        if self.search_provider == "searxng":
            url = (self.searxng_url or "").strip()
            if not url.startswith(("http://", "https://")):
                raise ValueError(
                    "web.search_provider is `searxng` but web.searxng_url is not an "
                    "http(s) URL (e.g. http://localhost:8888)"
                )
        return self


class UISettings(BaseModel):
    first_run_done: bool = Field(False, description="The welcome screen was shown.")


class Settings(BaseSettings):
    """All of Sourcebook's settings, in nested groups."""

    model_config = SettingsConfigDict(
        env_prefix="SOURCEBOOK_", env_nested_delimiter="__", extra="forbid"
    )

    schema_version: int = Field(SCHEMA_VERSION, description="Settings file format version.")
    library: LibrarySettings = Field(default_factory=LibrarySettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    models: ModelSettings = Field(default_factory=ModelSettings)
    research: ResearchLimits = Field(default_factory=ResearchLimits)
    web: WebSettings = Field(default_factory=WebSettings)
    ui: UISettings = Field(default_factory=UISettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The environment overrides the settings file (passed in as init values).
        return (env_settings, init_settings)


def default_home() -> Path:
    env = os.environ.get("SOURCEBOOK_HOME")
    return Path(env).expanduser() if env else Path(platformdirs.user_data_dir(APP_NAME))


def models_cache_dir() -> Path:
    env = os.environ.get("SOURCEBOOK_MODELS_DIR")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir(APP_NAME)) / "models"


def load_settings(home: Path) -> Settings:
    """Read ``<home>/settings.json`` (if any) under the environment's overrides."""
    path = home / "settings.json"
    data: dict[str, Any] = {}
    if path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(
                f"Cannot read settings file {path}: {exc}.",
                hint="Fix the JSON or delete the file to return to the defaults.",
            ) from exc
    try:
        return Settings(**data)
    except ValidationError as exc:
        raise ConfigError(
            f"Invalid settings in {path} or SOURCEBOOK_* variables: {exc}",
            hint="Fix or remove the setting named above.",
        ) from exc


def save_settings(home: Path, settings: Settings) -> None:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "settings.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(settings.model_dump_json(indent=2, exclude_none=True), encoding="utf-8")
    tmp.replace(path)
