"""Trust figures of `sourcebook eval` on hand-made reports: whether the answer was asserted or
abstained, right or confidently wrong, the claims that stood, their summary, and
`eval-rescore`, which scores a saved (shareable) result again against its question file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from core.cli_research import add_parsers, format_eval
from core.errors import ConfigError
from core.eval import EvalResult, rescore
from core.eval_metrics import (
    QuestionTrust,
    answer_flagged,
    claim_count,
    score_answer,
    score_trust,
    summarize_trust,
)
from core.research.citations import report_sentences
from core.research.schemas import UNVERIFIED_NOTE, WITHHELD_ANSWER
from core.service import Sourcebook

SOURCES = "\n\n## Sources\n\n1. Bar Society — p. 1\n2. Baz River — p. 2\n"
GOLD = ["Alice Grant", "A. Grant"]


def _trust(
    markdown: str,
    golds: list[str] = GOLD,
    *,
    status: str = "answered",
    flagged: int = 0,
    removed: int = 0,
    dataset: Any = "musique",
) -> QuestionTrust:
    answer = score_answer(markdown, golds)
    return score_trust(dataset, markdown, status, answer, golds, flagged, removed)


def test_right_asserted_answer() -> None:
    md = "**Answer:** Alice Grant [1].\n\nShe was the society's first president [1][2]." + SOURCES
    t = _trust(md)
    assert t.asserted and t.right and not t.answer_flagged
    assert (t.claims, t.supported_claims) == (2, 2)


def test_wrong_asserted_answer_is_confidently_wrong() -> None:
    # "Bob Stone" shares no token with the gold answer or its alias: F1 0 < 0.5
    md = "**Answer:** Bob Stone [1].\n\nHe founded the society [2]." + SOURCES
    t = _trust(md)
    assert t.asserted and not t.right
    assert summarize_trust([t]).confidently_wrong == 1
    # the bar is F1 0.5: "Alice Grant was first president" vs "Alice Grant" (the alias
    # "A. Grant" matches less): P 2/5, R 1 -> F1 0.57, right; "Alice Grant was the first
    # president of it": P 2/7 ("the" dropped) -> F1 0.44, wrong
    assert _trust("**Answer:** Alice Grant was first president [1].").right
    assert not _trust("**Answer:** Alice Grant was the first president of it [1].").right


def test_wrong_flagged_answer_abstains_and_is_not_confidently_wrong() -> None:
    md = (
        "**Answer:** Bob Stone [1]. ⚠\n\nHe founded the society [2].\n\n"
        "## Flagged claims\n\n- ⚠ “Bob Stone.”: not in the cited text: Bob, Stone" + SOURCES
    )
    t = _trust(md, flagged=1)
    assert t.answer_flagged and not t.asserted and not t.right
    assert (t.claims, t.supported_claims) == (2, 1)  # the Flagged claims list is no claim
    s = summarize_trust([t])
    assert (s.asserted, s.abstained, s.confidently_wrong) == (0, 1, 0)
    assert s.selective_accuracy is None  # nothing asserted


def test_a_claim_removed_from_the_report_is_still_a_claim_checked_and_flagged() -> None:
    md = (
        "**Answer:** Alice Grant [1].\n\nShe was the society's first president [1].\n\n"
        "## Flagged claims\n\n- ⚠ “She founded it in 1901.”: removed from the report: not in "
        "the cited text: 1901" + SOURCES
    )
    t = _trust(md, flagged=1, removed=1)
    assert t.asserted and t.right
    assert (t.claims, t.supported_claims) == (3, 2)
    assert _trust(md, flagged=1).claims == 2  # counted from the report alone, it would be lost


def test_flag_on_a_later_sentence_of_the_answer_line_leaves_the_answer_asserted() -> None:
    # the ⚠ follows the sentence it flags; the line's next sentence starts after it
    md = "**Answer:** Alice Grant [1]. She founded it in 1901 [2]. ⚠ She left in 1910 [2]."
    assert report_sentences(md) == [
        "**Answer:** Alice Grant [1].",
        "She founded it in 1901 [2]. ⚠",
        "She left in 1910 [2].",
    ]
    assert not answer_flagged(md)
    t = _trust(md, flagged=1)
    assert t.asserted and t.right and (t.claims, t.supported_claims) == (3, 2)
    assert answer_flagged("**Answer:** Bob Stone [1]. ⚠ She left in 1910 [2].")


def test_insufficient_evidence_run_abstains() -> None:
    md = "**Answer:** Alice Grant [1].\n\nThe sources do not say more." + SOURCES
    t = _trust(md, status="insufficient_evidence")
    assert not t.asserted and not t.answer_flagged and t.right
    assert _trust("", status="partial").asserted is False  # no answer line at all
    s = summarize_trust([t])
    assert (s.asserted, s.abstained, s.confidently_wrong) == (0, 1, 0)


def test_a_withheld_answer_abstains_whatever_the_status() -> None:
    md = f"{WITHHELD_ANSWER}\n\nThe society was founded in 1901 [1]." + SOURCES
    for status in ("insufficient_evidence", "budget_exhausted", "partial_retrieval"):
        t = _trust(md, status=status, flagged=1)
        assert not t.asserted and not t.right, status


def test_an_unverified_answer_abstains_and_is_scored_as_the_lead_it_gives() -> None:
    md = f"**Answer:** Alice Grant [1]. \u26a0 {UNVERIFIED_NOTE}\n\nThe society met in 1901 [1]."
    t = _trust(md + SOURCES, status="insufficient_evidence", flagged=1)
    assert t.answer_flagged and not t.asserted and t.right  # right, but not claimed as known
    assert score_answer(md, GOLD).first_f1 == 1.0  # the note is a sentence of its own
    wrong = _trust(md.replace("Alice Grant", "Bob Stone") + SOURCES, flagged=1)
    assert not wrong.asserted and summarize_trust([wrong]).confidently_wrong == 0


def test_numeric_gold_answer_matched_or_missed_in_the_answer_sentence() -> None:
    gold = ["$7312.00"]
    hit = _trust("**Answer:** $7,312 million [1].", gold, dataset="financebench")
    assert hit.right and hit.answer_numeric_match is True
    # the gold figure elsewhere in the body does not make the answer right
    md = "**Answer:** $6,900 million [1].\n\nRevenue was $7,312 million a year before [1]."
    miss = _trust(md, gold, dataset="financebench")
    assert miss.asserted and not miss.right and miss.answer_numeric_match is False
    # within the 1 % tolerance
    assert _trust("**Answer:** $7,330 million [1].", gold, dataset="financebench").right
    # a gold answer stating no quantity is scored by F1
    words = _trust("**Answer:** Alice Grant [1].", GOLD, dataset="financebench")
    assert words.right and words.answer_numeric_match is None


def test_claim_count_counts_cited_and_flagged_sentences() -> None:
    md = (
        "**Answer:** Alice Grant [1].\n\n# Heading [2]\n\nTo find her, read on.\n"
        "- She founded it in 1901. [2]\n- She was born in 1850. ⚠\n\n"
        "## Flagged claims\n\n- ⚠ “She was born in 1850.”: no citation" + SOURCES
    )
    # the answer, the list item whose citation stands after it, and the flagged uncited one
    assert claim_count(md) == 3
    # more flags recorded than sentences found: every claim counts as flagged, none below zero
    t = _trust(md, flagged=4)
    assert (t.claims, t.supported_claims) == (4, 0)


def test_summary_counts_and_selective_accuracy() -> None:
    right = _trust("**Answer:** Alice Grant [1].\n\nShe led it [1].")
    wrong = _trust("**Answer:** Bob Stone [1].")
    flagged = _trust("**Answer:** Bob Stone [1]. ⚠", flagged=1)
    empty = _trust("", status="insufficient_evidence")
    s = summarize_trust([right, wrong, right, flagged, empty])
    assert (s.asserted, s.abstained, s.confidently_wrong) == (3, 2, 1)
    assert s.selective_accuracy == pytest.approx(2 / 3)
    assert (s.claims, s.supported_claims) == (6, 5)
    assert s.claim_support_rate == pytest.approx(5 / 6)
    none = summarize_trust([])
    assert none.selective_accuracy is None and none.claim_support_rate is None


# ----------------------------------------------------------------------------- rescoring


def _result(questions: list[dict[str, Any]]) -> dict[str, Any]:
    summary = {
        "dataset": "musique",
        "questions_file": "../shared/eval/x/questions.jsonl",
        "library": "lib",
        "model": "scripted",
        "ks": [2],
        "questions": len(questions),
        "baseline_recall": {"@2": 0.5},
        "fetched_recall": 0.5,
        "em_first": 0.5,
        "f1_first": 0.5,
        "em_best": 0.5,
        "f1_best": 0.5,
        "citation_precision": 1.0,
        "citation_recall": 0.5,
        "page_accuracy": None,
        "quote_accuracy": 1.0,
        "invalid_citations": 0,
        "statuses": {"answered": 1, "partial": 1, "error": 1},
        "seconds_total": 3.0,
        "seconds_mean": 1.0,
    }
    return {
        "how": "by hand",
        "summary": summary,
        "questions": questions,
        "redacted": ["question", "gold_answer", "plan_queries"],
    }


def _row(qid: str, markdown: str, status: str = "answered", **extra: Any) -> dict[str, Any]:
    row = {"qid": qid, "task": f"t-{qid}", "status": status, "seconds": 1.0}
    row["answer"] = score_answer(markdown, ["unused"]).model_dump()
    return {**row, "report_markdown": markdown, **extra}


ROWS = [
    _row("q1", "**Answer:** Alice Grant [1].\n\nShe led it [1]."),
    _row("q2", "**Answer:** Bob Stone [1]. ⚠", "partial", flagged_claims=1),
    _row("q3", "", "error", error="the model failed"),
]
ANSWERS = {"q1": ["Alice Grant"], "q2": ["Glimmer Falls"], "q3": ["Baz"], "q9": ["Other"]}


def test_rescore_adds_trust_figures_and_keeps_the_rest() -> None:
    saved = _result(ROWS)
    out = rescore(saved, ANSWERS)
    assert "trust" not in saved["summary"]  # the input is left as it was
    q1, q2, q3 = out["questions"]
    assert q1["trust"]["asserted"] and q1["trust"]["right"]
    assert q2["trust"]["answer_flagged"] and not q2["trust"]["asserted"]
    assert q3["trust"] is None  # a failed run has no trust figures
    assert out["summary"]["trust"] == {
        "asserted": 1,
        "abstained": 1,
        "confidently_wrong": 0,
        "selective_accuracy": 1.0,
        "claims": 3,
        "supported_claims": 2,
        "claim_support_rate": pytest.approx(2 / 3),
    }
    # every other field, known or not, is as it was
    strip = {**out, "summary": {k: v for k, v in out["summary"].items() if k != "trust"}}
    strip["questions"] = [{k: v for k, v in q.items() if k != "trust"} for q in out["questions"]]
    assert strip == saved and out["how"] == "by hand"
    # the recomputed result reads as a result, and prints its trust figures
    text = format_eval(EvalResult.model_validate(out))
    assert "trust: 1 answer(s) asserted, 1 abstained, 0 confidently wrong" in text
    assert "selective accuracy (right among asserted) 1.00" in text
    assert "claims supported 2/3 (0.67)" in text
    with pytest.raises(ConfigError, match="not in the question file"):
        rescore(saved, {"q1": ["Alice Grant"]})


def test_rescore_scores_a_financebench_reports_numeric_match_again() -> None:
    """A numeric match scored by an older rule (the day of a date read as a quantity) is
    scored again, and the summary's with it."""
    rows = [
        _row("q1", "**Answer:** Tarsk Mills [1].", numeric_match=False),
        _row("q2", "**Answer:** $1,840 million [1].", numeric_match=True),
    ]
    saved = _result(rows)
    saved["summary"] = {**saved["summary"], "dataset": "financebench", "numeric_match": 0.5}
    golds = {"q1": ["Tarsk Mills, from March 30, 2023 onward."], "q2": ["$1,840 million"]}
    out = rescore(saved, golds)
    assert [q["numeric_match"] for q in out["questions"]] == [None, True]
    assert out["summary"]["numeric_match"] == 1.0
    assert out["questions"][0]["trust"]["answer_numeric_match"] is None  # judged by F1


def test_eval_rescore_command_scores_a_full_result_and_writes_it_shareable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = tmp_path / "res.json"
    full = _result(
        [{**ROWS[0], "question": "Which one (q1)?", "gold_answer": "Alice Grant"}, ROWS[1]]
    )
    full["redacted"] = []
    result.write_text(json.dumps(full), encoding="utf-8")
    questions = tmp_path / "questions.jsonl"
    rows = [
        {"qid": qid, "question": f"Which one ({qid})?", "answer": a[0], "gold_passage_ids": ["p"]}
        for qid, a in ANSWERS.items()
    ]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    p = argparse.ArgumentParser()
    handlers = add_parsers(p.add_subparsers(dest="command"))
    app = Sourcebook(tmp_path / "home")
    try:
        # --shareable: scored from the reports, written without them or the benchmark's text
        out = tmp_path / "shared" / "res.json"
        argv = ["eval-rescore", str(result), "--questions", str(questions), "--out", str(out)]
        args = p.parse_args([*argv, "--shareable"])
        assert handlers[args.command](app, args) == 0
        printed = capsys.readouterr().out
        assert "trust: 1 answer(s) asserted, 1 abstained" in printed
        assert f"wrote {out}" in printed
        data = json.loads(out.read_text(encoding="utf-8"))
        assert data["summary"]["trust"]["selective_accuracy"] == 1.0
        assert [q["trust"]["right"] for q in data["questions"]] == [True, False]
        text = out.read_text(encoding="utf-8")
        assert "Which one" not in text and "Alice Grant" not in text
        assert json.loads(result.read_text(encoding="utf-8")) == full  # --out: input kept
        # a shareable result has no reports to score again: it is refused, saying what to do
        args = p.parse_args(["eval-rescore", str(out), "--questions", str(questions)])
        with pytest.raises(ConfigError, match="shareable result") as refused:
            handlers[args.command](app, args)
        assert "results folder" in (refused.value.hint or "")
        assert json.loads(out.read_text(encoding="utf-8")) == data  # left as it was
        # a FinanceBench question file for a MuSiQue result is refused
        fb = tmp_path / "fb.jsonl"
        fb.write_text(json.dumps({"question": "?", "answer": "1", "evidence": []}) + "\n")
        args = p.parse_args(["eval-rescore", str(result), "--questions", str(fb)])
        with pytest.raises(ConfigError, match="musique result"):
            handlers[args.command](app, args)
        # a result written shareable before reports were left out stays shareable: a path it
        # gained is written relative again
        older = _result(ROWS[:2])
        older["summary"]["library"] = str(tmp_path / "labs" / "lib-7")
        result.write_text(json.dumps(older), encoding="utf-8")
        args = p.parse_args(["eval-rescore", str(result), "--questions", str(questions)])
        assert handlers[args.command](app, args) == 0
        assert json.loads(result.read_text(encoding="utf-8"))["summary"]["library"] == "lib-7"
    finally:
        app.close()
