"""The eval's inputs: question files of both formats (read as ``../shared/eval`` writes them),
the library their runs read, and gold units (a corpus record, or a filing's page) mapped onto the
library's documents. See :mod:`core.eval` for what is measured."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from core.errors import ConfigError
from core.eval_metrics import Dataset
from core.service import Sourcebook
from graph.schemas import Document

# ----------------------------------------------------------------------------- questions


class EvalQuestion(BaseModel):
    """One question with its gold data, in either format. Gold units are strings: a corpus
    record id (MuSiQue) or ``DOC_NAME@PAGE`` with a 0-based page (FinanceBench)."""

    qid: str
    question: str
    answers: list[str] = Field(description="The gold answer, then its aliases.")
    gold: list[str]
    hops: list[str] = Field(default_factory=list, description="MuSiQue: each hop's gold unit.")
    docs: list[str] = Field(
        default_factory=list,
        description="FinanceBench: the filing(s) the question is about (``doc_name``).",
    )


def page_unit(doc_name: str, page_index: int) -> str:
    return f"{doc_name}@{page_index}"


def detect_format(record: Mapping[str, Any]) -> Dataset:
    if "gold_passage_ids" in record:
        return "musique"
    if "evidence" in record:
        return "financebench"
    raise ConfigError(
        "Unknown question format.",
        hint="Expected MuSiQue records (gold_passage_ids) or FinanceBench records (evidence).",
    )


def load_questions(path: Path) -> tuple[Dataset, list[EvalQuestion]]:
    """Read a question file of either format (the format is taken from its first record)."""
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        records = [json.loads(ln) for ln in lines]
    except (OSError, ValueError) as exc:
        raise ConfigError(f"Cannot read the questions {path}: {exc}") from exc
    if not records:
        raise ConfigError(f"{path} holds no questions.")
    dataset = detect_format(records[0])
    out: list[EvalQuestion] = []
    for i, r in enumerate(records, 1):
        try:
            if dataset == "musique":
                out.append(
                    EvalQuestion(
                        qid=str(r.get("qid") or r.get("id") or f"q{i}"),
                        question=r["question"],
                        answers=[r["answer"], *r.get("answer_aliases", [])],
                        gold=list(r["gold_passage_ids"]),
                        hops=[str(h["gold_passage_id"]) for h in r.get("decomposition", [])],
                    )
                )
            else:
                units = [
                    page_unit(e.get("doc_name") or r["doc_name"], int(e["evidence_page_num"]))
                    for e in r["evidence"]
                ]
                named = [r.get("doc_name"), *(e.get("doc_name") for e in r["evidence"])]
                out.append(
                    EvalQuestion(
                        qid=str(r.get("financebench_id") or f"q{i}"),
                        question=r["question"],
                        answers=[r["answer"]],
                        gold=list(dict.fromkeys(units)),
                        docs=list(dict.fromkeys(str(n) for n in named if n)),
                    )
                )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{path}, record {i}: missing or bad field {exc}.") from exc
    return dataset, out


# ----------------------------------------------------------------------------- library


def prepare_library(
    app: Sourcebook, dataset: Dataset, corpus: Path | None, docs: Path | None
) -> dict[str, Any]:
    """Ingest the corpus or documents unless the library already holds documents."""
    existing = app.documents(include_superseded=False)
    if existing:
        return {"skipped": True, "documents": len(existing)}
    if dataset == "musique" and corpus is None:
        raise ConfigError("MuSiQue questions need their corpus.", hint="Pass --corpus FILE.jsonl.")
    if dataset == "financebench" and docs is None:
        raise ConfigError("FinanceBench questions need their PDFs.", hint="Pass --docs DIR.")
    t0 = time.perf_counter()
    if corpus is not None:
        changes = app.add_jsonl(corpus, id_field="passage_id")
    else:
        assert docs is not None
        changes = app.add([docs])
    counts = Counter(r.outcome for r in changes.results)
    return {
        "skipped": False,
        "seconds": time.perf_counter() - t0,
        **{str(k): n for k, n in counts.items()},
    }


class UnitMap:
    """Documents -> gold units: external id (MuSiQue) or file stem + page (FinanceBench)."""

    def __init__(self, dataset: Dataset, documents: list[Document], aliases: dict[str, str]):
        self.dataset = dataset
        self.key = {
            d.doc_id: (d.external_id or "") if dataset == "musique" else Path(d.source_uri).stem
            for d in documents
        }
        self.keys = set(self.key.values()) - {""}
        self.aliases = aliases

    def gold(self, units: list[str]) -> list[str]:
        """Gold units spelled as the library spells them (duplicate corpus records fold)."""
        return list(dict.fromkeys(self.aliases.get(u, u) for u in units))

    def units(self, doc_id: str, pages0: list[int]) -> list[str]:
        key = self.key.get(doc_id, "")
        if not key:
            return []
        if self.dataset == "musique":
            return [key]
        return [page_unit(key, p) for p in pages0]

    def unmapped(self, units: list[str]) -> list[str]:
        doc = (lambda u: u) if self.dataset == "musique" else (lambda u: u.rsplit("@", 1)[0])
        return [u for u in units if doc(self.aliases.get(u, u)) not in self.keys]


def corpus_records(corpus: Path | None) -> tuple[dict[str, str], dict[str, str]]:
    """(record id -> title and text, record id -> id of the first record with that content)."""
    texts: dict[str, str] = {}
    aliases: dict[str, str] = {}
    if corpus is None:
        return texts, aliases
    first: dict[tuple[str, str], str] = {}
    with corpus.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            r = json.loads(line)
            rid, title, text = str(r.get("passage_id", "")), r.get("title", ""), r.get("text", "")
            texts[rid] = f"{title}\n{text}"
            aliases[rid] = first.setdefault((title, text), rid)
    return texts, {k: v for k, v in aliases.items() if k != v}


def pages0(start: int | None, end: int | None) -> list[int]:
    """The 0-based pages a passage spans."""
    if start is None:
        return []
    return list(range(start, (end if end is not None else start) + 1))
