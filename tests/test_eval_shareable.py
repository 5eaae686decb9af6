"""Shareable evaluation results: what :func:`core.eval.shareable` leaves out and how it writes
paths, and that every committed result in bench/results keeps the evaluation data outside the
project (no absolute paths; none of ../shared/eval's questions, answers or justifications)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, SHARED_EVAL

from core.eval_metrics import (
    BENCHMARK_FIELDS,
    AnswerScore,
    CitationCheck,
    EvalResult,
    EvalSummary,
    QuestionResult,
    portable_path,
    shareable,
)

RESULTS = REPO / "bench" / "results"
# The answer's figures, which a shareable result keeps (its sentences go).
SCORES = {"first_em", "first_f1", "best_em", "best_f1"}
# Gold strings shorter than this are numbers, years or single common words, which any text
# may hold by chance; questions, justifications and evidence are all longer.
MIN_GOLD_CHARS = 12
# An absolute path: "/" then a name and "/" after no word character, dot or slash (so not a
# URL, a fraction or a relative "../x"), or a drive letter.
ABSOLUTE = re.compile(r"(?<![\w.~/\\-])/[\w.@+\\-]+/|\b[A-Za-z]:\\")


def _strings(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    """Every string in a JSON value with its key path (list positions left out)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, (*path, str(k)))
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, path)


def _figures(value: Any) -> Any:
    """A JSON value with its strings blanked: the numbers, flags and shape that must not change."""
    if isinstance(value, str):
        return ""
    if isinstance(value, dict):
        return {k: _figures(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_figures(v) for v in value]
    return value


def _synthetic(root: Path) -> EvalResult:
    shared = root.parent / "shared" / "eval" / "fb"
    q = QuestionResult(
        qid="fb_001",
        question="What was the operating margin of Acme Widgets in its fiscal 2022 year?",
        gold_answer="Acme's operating margin fell from 12.5% to 11.0% in fiscal 2022.",
        task="eval-scripted-fb_001",
        status="partial",
        status_reasons=["1 claim(s) are not clearly supported by their citation (marked ⚠)."],
        seconds=12.5,
        baseline_recall={"@2": 0.0, "@5": 0.5},
        fetched=3,
        fetched_recall=0.5,
        fetched_gold=["ACME_2022_10K@41"],
        answer=AnswerScore(first="It fell to 11.0%.", first_f1=0.25, best="It fell.", best_f1=0.3),
        numeric_match=True,
        citations=2,
        citation_precision=0.5,
        citation_recall=1.0,
        page_accuracy=1.0,
        checks=[CitationCheck(number=1, evidence_id="ev1:0123456789abcdef", units=[], gold=True)],
        plan_queries=["What was the operating margin of Acme Widgets in its fiscal 2022 year?"],
        report_markdown="**Answer:** It fell to 11.0% [1].\n\n## Sources\n\n1. Filing\n",
        error=f"cannot read {root}/resources/samples/notes.md, {shared}/pdfs/x.pdf or "
        "/home/someone/private/x.pdf (N/A since 1/2/2023, see <https://x.org/a/b>): "
        "/tmp/run-7/lib/pages.db.",
    )
    summary = EvalSummary(
        dataset="financebench",
        questions_file=str(shared / "dev_questions.jsonl"),
        library="/tmp/sourcebook-eval-abc/my lib",
        model="scripted",
        ks=[2, 5],
        questions=1,
        baseline_recall={"@2": 0.0, "@5": 0.5},
        fetched_recall=0.5,
        em_first=0.0,
        f1_first=0.25,
        em_best=0.0,
        f1_best=0.3,
        numeric_match=1.0,
        citation_precision=0.5,
        citation_recall=1.0,
        page_accuracy=1.0,
        quote_accuracy=None,
        invalid_citations=0,
        statuses={"partial": 1},
        seconds_total=12.5,
        seconds_mean=12.5,
    )
    return EvalResult(summary=summary, questions=[q])


def test_shareable_drops_benchmark_text_and_writes_portable_paths(tmp_path: Path) -> None:
    root = tmp_path / "my_work" / "main"
    full = _synthetic(root).model_dump(mode="json")
    out = shareable(full, root)
    q = out["questions"][0]
    assert out["redacted"] == list(BENCHMARK_FIELDS)
    for gone in ("question", "gold_answer", "plan_queries", "report_markdown"):
        assert gone not in q
    assert full["questions"][0]["question"]  # the input is left as it was
    # no text of the benchmark's, nor the report and answer that restate it
    dumped = json.dumps(out)
    assert "operating margin" not in dumped and "11.0%" not in dumped
    # ids, figures, statuses and timings stay
    assert q["qid"] == "fb_001" and q["status"] == "partial" and q["seconds"] == 12.5
    assert q["answer"] == {k: v for k, v in full["questions"][0]["answer"].items() if k in SCORES}
    assert q["fetched_gold"] == ["ACME_2022_10K@41"]
    assert q["status_reasons"] == full["questions"][0]["status_reasons"]
    # a path left in text: relative to the project, to ../shared beside it, else its last part
    assert q["error"] == (
        "cannot read resources/samples/notes.md, ../shared/eval/fb/pdfs/x.pdf or x.pdf (N/A since "
        "1/2/2023, see <https://x.org/a/b>): pages.db."
    )
    assert out["summary"]["questions_file"] == "../shared/eval/fb/dev_questions.jsonl"
    assert out["summary"]["library"] == "my lib"
    assert not ABSOLUTE.search(json.dumps(out))
    # every figure is as it was, and the copy still reads as a result
    kept = [
        {
            **{k: v for k, v in x.items() if k not in BENCHMARK_FIELDS},
            "answer": {k: v for k, v in x["answer"].items() if k in SCORES},
        }
        for x in full["questions"]
    ]
    assert _figures(out) == _figures({**full, "questions": kept, "redacted": out["redacted"]})
    again = EvalResult.model_validate(out)
    assert again.summary.model_dump(exclude={"questions_file", "library"}) == _synthetic(
        root
    ).summary.model_dump(exclude={"questions_file", "library"})
    assert shareable(out, root) == out  # applying it twice changes nothing


def test_portable_path_edges(tmp_path: Path) -> None:
    root = tmp_path / "main"
    assert portable_path(str(root), root) == "."
    assert portable_path(str(root.parent / "shared"), root) == "../shared"
    assert portable_path(f"{root}x/y.json", root) == "y.json"  # a sibling named like the root
    assert portable_path("../shared/eval/a.jsonl", root) == "../shared/eval/a.jsonl"
    assert portable_path("bench/results/x.json", root) == "bench/results/x.json"


# ----------------------------------------------------------------------------- committed files


def _committed() -> list[tuple[str, Any]]:
    files = sorted(RESULTS.rglob("*.json"))
    assert files, RESULTS
    return [(str(f.relative_to(REPO)), json.loads(f.read_text(encoding="utf-8"))) for f in files]


def test_committed_results_hold_no_absolute_paths() -> None:
    found = [
        f"{name}: {'.'.join(path)}: {m.group(0)}"
        for name, data in _committed()
        for path, text in _strings(data)
        for m in [ABSOLUTE.search(text)]
        if m
    ]
    assert not found, "\n".join(found[:10])


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _gold_texts() -> dict[str, str]:
    """The benchmark's own text in ../shared/eval, each with the question id it belongs to."""
    out: dict[str, str] = {}
    for name in ("musique", "financebench"):
        path = SHARED_EVAL / name / "dev_questions.jsonl"
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            qid = str(r.get("qid") or r.get("financebench_id"))
            texts = [r["question"], r.get("answer", ""), *r.get("answer_aliases", [])]
            texts.append(r.get("justification") or "")
            for hop in r.get("decomposition", []):
                texts += [hop.get("sub_question", ""), hop.get("sub_answer", "")]
            texts += [e.get("evidence_text", "") for e in r.get("evidence", [])]
            # a question's sentences one by one too: a plan often restates them
            texts += re.split(r"(?<=[.?!])\s+", r["question"])
            for t in map(_norm, texts):
                if len(t) >= MIN_GOLD_CHARS:
                    out.setdefault(t, qid)
    return out


def test_committed_results_hold_no_benchmark_text() -> None:
    """No committed result holds a question, a gold answer, a sub-question, a justification or
    gold evidence text of ../shared/eval, nor a report (which restates them)."""
    gold = _gold_texts()
    if not gold:
        pytest.skip(f"evaluation data not present: {SHARED_EVAL}")
    found = []
    for name, data in _committed():
        rows = data.get("questions") if isinstance(data, dict) else None
        found += [
            f"{name}: {q.get('qid')} keeps its report or answer sentence"
            for q in (rows if isinstance(rows, list) else [])
            if isinstance(q, dict)
            and (q.get("report_markdown") or (q.get("answer") or {}).get("first"))
        ]
        for path, text in _strings(data):
            held = _norm(text)
            found += [
                f"{name}: {'.'.join(path)} holds gold text of {qid}"
                for t, qid in gold.items()
                if t in held
            ]
    assert not found, "\n".join(sorted(set(found))[:10])
