"""Pure metrics of ``sourcebook eval`` and their results: answer match, recall, citation
precision/recall, page checks, the per-question and summary records, their aggregation and
their shareable form. No I/O and no library access, so each can be tested on hand-made
examples.

Answers are scored SQuAD-style: lower case, punctuation and the articles a/an/the removed,
whitespace collapsed; exact match and token F1 take the best over the gold answer and its
aliases. A report is not a bare answer, so two extractions are scored:

- ``first``: the first sentence of the first content line of the report (headings, list
  markers, citation markers and emphasis removed) -- what a reader takes as the answer;
- ``best``: the sentence of the report body (before the Sources list) that matches the gold
  answer best -- an upper bound that forgives the writer for not leading with the answer.

Trust (:class:`QuestionTrust`, :class:`TrustSummary`): whether the report asserted its answer
(the answer sentence carries no ⚠ and the run did not end insufficient_evidence) or abstained,
whether that answer is right (first-sentence F1 >= :data:`RIGHT_F1`, or for a FinanceBench gold
answer stating a quantity, that quantity in the answer sentence), and the share of the report's
claims the claim check let stand. An asserted wrong answer is *confidently wrong*.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from core.research.schemas import WITHHELD_ANSWER
from core.text import MONTH, NUMBER, YEAR, split_sentences

Dataset = Literal["musique", "financebench"]
EvalMode = Literal["research", "ask"]
TARGETS = {"fetched_recall": 0.85, "citation_recall": 0.7, "f1_first": 0.35}
RIGHT_F1 = 0.5  # first-sentence F1 at which an answer counts as right

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation) | {"\u2019", "\u2018", "\u201c", "\u201d", "\u2013", "\u2014"}
_CITE = re.compile(r"\[(?:\d{1,3}|E\d{1,3}|ev1:[0-9a-fA-F]{16}(?:#\d+-\d+)?)\]")
_END_SECTIONS = re.compile(r"^#{1,6}\s*(Sources|Flagged claims)\b", re.IGNORECASE | re.MULTILINE)
_NUMBER = re.compile(rf"-?{NUMBER}")
_MONTH_BEFORE = re.compile(rf"\b{MONTH}\.?\s+$", re.IGNORECASE)  # "August 30", "Aug. 30"
_MONTH_AFTER = re.compile(rf"^\s+(?:of\s+)?{MONTH}\b", re.IGNORECASE)  # "30 August"
_WORD = re.compile(r"[a-z0-9]+")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    pred = normalize_answer(prediction)
    return max((1.0 if pred == normalize_answer(g) else 0.0 for g in golds), default=0.0)


def _f1(pred: list[str], gold: list[str]) -> float:
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if not pred or not gold:
        return float(pred == gold)
    if same == 0:
        return 0.0
    p, r = same / len(pred), same / len(gold)
    return 2 * p * r / (p + r)


def token_f1(prediction: str, golds: Sequence[str]) -> float:
    pred = normalize_answer(prediction).split()
    return max((_f1(pred, normalize_answer(g).split()) for g in golds), default=0.0)


def report_body(markdown: str) -> str:
    """The report without its Sources list and flagged-claims section."""
    m = _END_SECTIONS.search(markdown)
    return markdown[: m.start()] if m else markdown


def _clean(line: str) -> str:
    line = _CITE.sub("", line).replace("\u26a0", "")
    line = re.sub(r"^\s*(?:[-*+>]|\d+[.)])\s+", "", line)  # list markers, quotes
    line = re.sub(r"[*_`]+", "", line)  # emphasis, code
    line = re.sub(r"^answer\s*:\s*", "", line, flags=re.IGNORECASE)  # the report's answer label
    return re.sub(r"\s+([.,;:!?])", r"\1", " ".join(line.split())).strip()


def sentences(markdown: str) -> list[str]:
    """The body's sentences in order (headings skipped, markup and citations removed)."""
    out: list[str] = []
    for raw in report_body(markdown).splitlines():
        if raw.lstrip().startswith("#") or not raw.strip():
            continue
        out.extend(split_sentences(_clean(raw)))  # "J. Edgar Northcote", "U.S. Army" are kept
    return out


class AnswerScore(BaseModel):
    first: str = ""
    first_em: float = 0.0
    first_f1: float = 0.0
    best: str = ""
    best_em: float = 0.0
    best_f1: float = 0.0


def score_answer(markdown: str, golds: Sequence[str]) -> AnswerScore:
    """EM and F1 of the report's first sentence and of its best-matching sentence."""
    sents = sentences(markdown)
    if not sents:
        return AnswerScore()
    first = sents[0]
    best = max(sents, key=lambda s: (token_f1(s, golds), exact_match(s, golds)))
    return AnswerScore(
        first=first,
        first_em=exact_match(first, golds),
        first_f1=token_f1(first, golds),
        best=best,
        best_em=exact_match(best, golds),
        best_f1=token_f1(best, golds),
    )


def _day_of_month(text: str, m: re.Match[str]) -> bool:
    """Whether number ``m`` is the day of a date ("August 30, 2023", "30 August")."""
    raw = m.group(0).rstrip(",")  # "30," of "March 30, 2023"
    if not raw.isdigit() or not 1 <= int(raw) <= 31:
        return False
    return bool(_MONTH_BEFORE.search(text[: m.start()]) or _MONTH_AFTER.match(text[m.end() :]))


def numbers(text: str, *, quantities_only: bool = False) -> list[float]:
    """The numbers in ``text``; ``quantities_only`` skips years (a bare 19xx or 20xx, as in
    "FY 2023"), the day of a date ("from August 30, 2023") and list enumerators like "(1)",
    which say nothing about an answer."""
    out = []
    for m in _NUMBER.finditer(text):
        raw = m.group(0)
        if quantities_only and (
            re.fullmatch(YEAR, raw)
            or _day_of_month(text, m)
            or (text[m.start() - 1 : m.start()] == "(" and text[m.end() : m.end() + 1] == ")")
        ):
            continue
        try:
            out.append(float(raw.replace(",", "")))
        except ValueError:
            continue
    return out


def numeric_match(markdown: str, gold_answer: str, rel_tol: float = 0.01) -> bool | None:
    """Whether the first quantity of the gold answer appears among the report body's
    quantities within ``rel_tol`` (years and enumerators skipped on both sides, so "1,994"
    matches "$1,994mn" but "in 1994" does not); None when the gold answer states no quantity."""
    gold = numbers(gold_answer, quantities_only=True)
    if not gold:
        return None
    target = gold[0]
    for n in numbers(_CITE.sub(" ", report_body(markdown)), quantities_only=True):
        if abs(n - target) <= rel_tol * max(abs(target), 1e-9):
            return True
    return False


def recall(found: Iterable[object], gold: Iterable[object]) -> float | None:
    """Share of ``gold`` in ``found`` (None when there is no gold)."""
    g = set(gold)
    return len(g & set(found)) / len(g) if g else None


def precision(found: Iterable[object], gold: Iterable[object]) -> float | None:
    """Share of ``found`` in ``gold`` (None when nothing was found)."""
    f = set(found)
    return len(f & set(gold)) / len(f) if f else None


def recall_at(ranked: Sequence[object], gold: Iterable[object], k: int) -> float | None:
    """Recall of the first ``k`` distinct items of ``ranked``."""
    top = list(dict.fromkeys(ranked))[:k]
    return recall(top, gold)


def words(text: str) -> list[str]:
    """Lower-case alphanumeric tokens (layout, hyphens and punctuation ignored)."""
    return _WORD.findall(text.lower().replace("\u00ad", ""))


def text_held(quote: str, page_text: str, min_coverage: float = 0.9) -> tuple[bool, float]:
    """Whether ``page_text`` holds ``quote``: its words in order, or (for text the extractor
    re-ordered, such as table cells and columns) at least ``min_coverage`` of its words.

    Returns (held, coverage): coverage is the share of the quote's words found on the page,
    counted with multiplicity.
    """
    q, p = words(quote), words(page_text)
    if not q:
        return False, 0.0
    if f" {' '.join(q)} " in f" {' '.join(p)} ":
        return True, 1.0
    have = Counter(p)
    found = sum(min(n, have[w]) for w, n in Counter(q).items())
    coverage = found / len(q)
    return coverage >= min_coverage, coverage


def mean(values: Iterable[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


# ----------------------------------------------------------------------------- trust


class QuestionTrust(BaseModel):
    """Whether one report asserted its answer, whether the answer is right, and how many of its
    claims stood: the per-question figures a :class:`TrustSummary` adds up, kept in the result
    so that the summary can be recomputed."""

    answer_flagged: bool = Field(description="The report's answer sentence is marked ⚠.")
    asserted: bool = Field(
        description="An answer sentence without ⚠, in a run not ended insufficient_evidence."
    )
    right: bool = Field(description="First-sentence F1 >= 0.5, or the numeric match below.")
    answer_numeric_match: bool | None = Field(
        None,
        description="FinanceBench: the gold answer's first quantity is in the answer sentence "
        "(1% tolerance); None when the gold answer states no quantity.",
    )
    claims: int = Field(0, description="Claims the claim check judged (see :func:`claim_count`).")
    supported_claims: int = Field(0, description="Those it did not flag.")


class TrustSummary(BaseModel):
    """How far a reader can trust what the reports assert, over the runs that did not fail."""

    asserted: int
    abstained: int = Field(description="Flagged answer, insufficient_evidence, or no answer.")
    confidently_wrong: int = Field(description="Asserted, and not right.")
    selective_accuracy: float | None = Field(
        description="Right among asserted; None when nothing was asserted."
    )
    claims: int
    supported_claims: int
    claim_support_rate: float | None = Field(
        description="Claims not flagged among all claims checked (micro); None without claims."
    )


def _answer_line(markdown: str) -> str:
    """The line ``answer.first`` is taken from (see :func:`sentences`), or ""."""
    for raw in report_body(markdown).splitlines():
        if raw.strip() and not raw.lstrip().startswith("#") and _clean(raw):
            return raw
    return ""


def _report_sentences(markdown: str) -> list[str]:
    # The claim check's module loads the library stack; scoring alone should not.
    from core.research.citations import report_sentences

    return report_sentences(markdown)


def answer_flagged(markdown: str) -> bool:
    """Whether the report's answer sentence (the first of its answer line) is marked ⚠."""
    first = next(iter(_report_sentences(_answer_line(markdown))), "")
    return "\u26a0" in first


def claim_count(markdown: str) -> int:
    """The claims the run's claim check judged in a report. The run records only the flagged
    ones, so the checked claims are counted here from the report: its body's sentences, split
    as the check splits them, that cite a source or carry its ⚠ (uncited sentences that are
    not flagged asserted nothing the check needed a source for)."""
    return sum(
        1
        for s in _report_sentences(report_body(markdown))
        if not s.lstrip().startswith("#") and (_CITE.search(s) or "\u26a0" in s)
    )


def score_trust(
    dataset: Dataset,
    markdown: str,
    status: str,
    answer: AnswerScore,
    golds: Sequence[str],
    flagged_claims: int,
    removed_claims: int = 0,
) -> QuestionTrust:
    """The trust figures of one report: ``answer`` is its scored answer (:func:`score_answer`),
    ``golds`` the gold answer then its aliases, ``flagged_claims`` what the checks flagged,
    ``removed_claims`` how many of those were taken out of the report (still claims checked)."""
    flagged = answer_flagged(markdown)
    numeric = None
    if dataset == "financebench" and golds and answer.first:
        numeric = numeric_match(answer.first, golds[0])
    if numeric is not None:
        right = numeric
    else:
        right = bool(answer.first) and token_f1(answer.first, golds) >= RIGHT_F1
    claims = max(claim_count(markdown) + removed_claims, flagged_claims)
    return QuestionTrust(
        answer_flagged=flagged,
        asserted=bool(answer.first)
        and not flagged
        and status != "insufficient_evidence"
        and not markdown.lstrip().startswith(WITHHELD_ANSWER),
        right=right,
        answer_numeric_match=numeric,
        claims=claims,
        supported_claims=claims - flagged_claims,
    )


def summarize_trust(trusts: Iterable[QuestionTrust]) -> TrustSummary:
    ts = list(trusts)
    asserted = [t for t in ts if t.asserted]
    wrong = sum(not t.right for t in asserted)
    claims = sum(t.claims for t in ts)
    supported = sum(t.supported_claims for t in ts)
    return TrustSummary(
        asserted=len(asserted),
        abstained=len(ts) - len(asserted),
        confidently_wrong=wrong,
        selective_accuracy=(len(asserted) - wrong) / len(asserted) if asserted else None,
        claims=claims,
        supported_claims=supported,
        claim_support_rate=supported / claims if claims else None,
    )


# ----------------------------------------------------------------------------- results


class CitationCheck(BaseModel):
    number: int
    evidence_id: str
    units: list[str]
    gold: bool
    source_ok: bool | None = Field(None, description="Cited text found in its source.")
    coverage: float | None = Field(None, description="Share of the quote's words there.")
    where: Literal["page", "record", "none"] = "none"
    problem: str = ""


class QuestionResult(BaseModel):
    qid: str
    question: str = Field("", description="Left out of a shareable result.")
    gold_answer: str = Field("", description="Left out of a shareable result.")
    task: str
    status: str
    status_reasons: list[str] = Field(default_factory=list)
    seconds: float
    reused: bool = Field(False, description="The task had finished before; its report reused.")
    replayed_from: str | None = Field(
        None, description="The task whose plan and research this run reused (eval --replay)."
    )
    baseline_recall: dict[str, float | None] = Field(default_factory=dict)
    fetched: int = 0
    fetched_recall: float | None = None
    fetched_gold: list[str] = Field(default_factory=list)
    seen_recall: float | None = Field(
        None, description="Gold share of every id the run's searches showed (fetched or not)."
    )
    hops_baseline: list[bool] = Field(default_factory=list)
    hops_fetched: list[bool] = Field(default_factory=list)
    answer: AnswerScore = Field(default_factory=AnswerScore)
    numeric_match: bool | None = None
    citations: int = 0
    citation_precision: float | None = None
    citation_recall: float | None = None
    page_accuracy: float | None = None
    quote_accuracy: float | None = None
    invalid_citations: int = 0
    invalid_reasons: list[str] = Field(default_factory=list)
    removed_citations: int = 0
    flagged_claims: int = 0
    removed_claims: int = 0
    trust: QuestionTrust | None = Field(
        None, description="None for a failed run, or a result scored before these figures."
    )
    checks: list[CitationCheck] = Field(default_factory=list)
    plan_queries: list[str] = Field(default_factory=list)
    report_markdown: str = ""
    error: str | None = None


class EvalSummary(BaseModel):
    dataset: Dataset
    questions_file: str
    library: str
    model: str
    ks: list[int]
    questions: int
    baseline_recall: dict[str, float | None]
    fetched_recall: float | None
    seen_recall: float | None = None
    hop_recall_baseline: dict[str, float | None] = Field(default_factory=dict)
    hop_recall_fetched: dict[str, float | None] = Field(default_factory=dict)
    em_first: float | None
    f1_first: float | None
    em_best: float | None
    f1_best: float | None
    numeric_match: float | None = None
    citation_precision: float | None
    citation_recall: float | None
    page_accuracy: float | None
    quote_accuracy: float | None
    invalid_citations: int
    statuses: dict[str, int]
    trust: TrustSummary | None = Field(
        None, description="None in a result scored before these figures (see core.eval.rescore)."
    )
    seconds_total: float
    seconds_mean: float | None
    targets: dict[str, dict[str, Any]] = Field(default_factory=dict)
    unmapped_gold: list[str] = Field(default_factory=list)


class EvalResult(BaseModel):
    summary: EvalSummary
    ingest: dict[str, Any] = Field(default_factory=dict)
    scope: Literal["library", "own-docs"] = Field(
        "library",
        description="What each run could read: the whole library, or (own-docs) only the "
        "filings its question names.",
    )
    mode: EvalMode = Field(
        "research",
        description="What answered each question: a full research run, or Ask (one search, "
        "one model call, the same checks).",
    )
    answer_extraction: str = (
        "first: first sentence of the first non-heading line of the report; best: the report "
        "sentence with the highest token F1 (SQuAD normalisation, best over answer + aliases)"
    )
    questions: list[QuestionResult]
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    redacted: list[str] = Field(
        default_factory=list,
        description="Per-question fields a shareable copy left out (see :func:`shareable`).",
    )


# ----------------------------------------------------------------------------- shareable

PROJECT = Path(__file__).resolve().parents[1]
# The per-question fields that hold a benchmark's own text or restate it: its question, its
# gold answer, the plan's queries (a planner often copies the question's sentences), the report
# (it restates the question and, when right, states its answer) and the answer sentences taken
# from it ("answer.first": the field "first" of "answer").
BENCHMARK_FIELDS = (
    "question",
    "gold_answer",
    "plan_queries",
    "report_markdown",
    "answer.first",
    "answer.best",
)
# An absolute POSIX path inside text, such as an error message: "/" after no word
# character, dot or slash (so not a URL, "N/A" or a date) and at least two parts.
_ABS_PATH = re.compile(r"(?<![\w.~/\\-])/[^\s\"'<>(){}/,;]+(?:/[^\s\"'<>(){}/,;]+)+")


def _under(path: str, base: Path) -> str | None:
    """The rest of ``path`` after the folder ``base`` ("" for ``base`` itself), or None."""
    m = re.match(re.escape(str(base).rstrip("/")) + r"(?:/|$)", path)
    return None if m is None else path[m.end() :]


def portable_path(path: str, root: Path = PROJECT) -> str:
    """``path`` as a shareable result writes it: relative to the project ``root``, or to the
    ``../shared`` folder beside it (``../shared/eval/...``), as the evaluation data is meant
    to be named; any other absolute path keeps only its last part (the rest describes one
    machine, and often its user). Relative paths stay as they are."""
    if not path.startswith("/"):
        return path
    for base, prefix in ((root, "."), (root.parent / "shared", "../shared")):
        rest = _under(path, base)
        if rest is not None:
            return (f"{prefix}/{rest}" if rest else prefix).removeprefix("./")
    return path.rstrip("/").rsplit("/", 1)[-1]


def _portable_text(text: str, root: Path) -> str:
    def one(m: re.Match[str]) -> str:
        found = m.group(0)
        bare = found.rstrip(".")  # a path that ends a sentence
        return portable_path(bare, root) + found[len(bare) :]

    return _ABS_PATH.sub(one, text)


def _drop(question: Mapping[str, Any]) -> dict[str, Any]:
    """``question`` without :data:`BENCHMARK_FIELDS` (a dotted name is a field of a field)."""
    out = dict(question)
    for name in BENCHMARK_FIELDS:
        head, _, rest = name.partition(".")
        if not rest:
            out.pop(head, None)
        elif isinstance(out.get(head), Mapping):
            out[head] = {k: v for k, v in out[head].items() if k != rest}
    return out


def shareable(result: Mapping[str, Any], root: Path = PROJECT) -> dict[str, Any]:
    """A copy of an evaluation result (its JSON form) fit to commit or share. Each question
    keeps its ids, figures, statuses and timings, but no text that holds or restates the
    benchmark's (:data:`BENCHMARK_FIELDS`: its question and answer, and the run's report);
    every absolute path left in a field or inside text is written by :func:`portable_path`.
    Figures are copied unchanged.

    A user's own result file may keep everything; evaluation data licensed for evaluation
    only must not travel with a project, so a result that does takes this form."""

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            return _portable_text(value, root)
        if isinstance(value, Mapping):
            return {k: scrub(v) for k, v in value.items()}
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value

    out: dict[str, Any] = scrub(
        {**result, "questions": list(map(_drop, result.get("questions", [])))}
    )
    summary = out.get("summary")
    if isinstance(summary, dict):
        for key in ("questions_file", "library"):  # whole paths, spaces and all
            if isinstance(result["summary"].get(key), str):
                summary[key] = portable_path(result["summary"][key], root)
    out["redacted"] = list(BENCHMARK_FIELDS)
    return out


# ----------------------------------------------------------------------------- summary


def summarize(
    dataset: Dataset,
    results: list[QuestionResult],
    *,
    questions_file: Path,
    library: Path,
    model: str,
    ks: list[int],
    unmapped: list[str],
) -> EvalSummary:
    """Means over questions (macro); page and quote accuracy over all citations (micro)."""
    ok = [r for r in results if r.error is None]
    checks = [c for r in ok for c in r.checks]

    def share(where: str) -> float | None:
        xs = [c.source_ok for c in checks if c.where == where]
        return sum(map(bool, xs)) / len(xs) if xs else None

    hop_n = max((len(r.hops_fetched) for r in ok), default=0)
    s = EvalSummary(
        dataset=dataset,
        questions_file=str(questions_file),
        library=str(library),
        model=model,
        ks=ks,
        questions=len(results),
        baseline_recall={
            f"@{k}": mean(r.baseline_recall.get(f"@{k}") for r in results) for k in ks
        },
        fetched_recall=mean(r.fetched_recall for r in ok),
        seen_recall=mean(r.seen_recall for r in ok),
        hop_recall_baseline={
            f"hop{i + 1}": mean(float(r.hops_baseline[i]) for r in ok if len(r.hops_baseline) > i)
            for i in range(hop_n)
        },
        hop_recall_fetched={
            f"hop{i + 1}": mean(float(r.hops_fetched[i]) for r in ok if len(r.hops_fetched) > i)
            for i in range(hop_n)
        },
        em_first=mean(r.answer.first_em for r in ok),
        f1_first=mean(r.answer.first_f1 for r in ok),
        em_best=mean(r.answer.best_em for r in ok),
        f1_best=mean(r.answer.best_f1 for r in ok),
        numeric_match=mean(None if r.numeric_match is None else float(r.numeric_match) for r in ok),
        citation_precision=mean(r.citation_precision for r in ok),
        citation_recall=mean(r.citation_recall for r in ok),
        page_accuracy=share("page"),
        quote_accuracy=share("record"),
        invalid_citations=sum(r.invalid_citations for r in results),
        statuses=dict(Counter(r.status for r in results)),
        trust=summarize_trust(r.trust for r in ok if r.trust is not None),
        seconds_total=sum(r.seconds for r in results),
        seconds_mean=mean(r.seconds for r in results),
        unmapped_gold=unmapped,
    )
    if hop_n:
        flat = [float(h) for r in ok for h in r.hops_fetched]
        s.hop_recall_fetched["all"] = mean(flat)
        s.hop_recall_baseline["all"] = mean(float(h) for r in ok for h in r.hops_baseline)
    if dataset == "musique":
        for name, target in TARGETS.items():
            value = getattr(s, name)
            s.targets[name] = {
                "value": value,
                "target": target,
                "met": value is not None and value >= target,
            }
    s.targets["invalid_citations"] = {
        "value": s.invalid_citations,
        "target": 0,
        "met": s.invalid_citations == 0,
    }
    acc = s.page_accuracy if s.page_accuracy is not None else s.quote_accuracy
    s.targets["cited_text_in_source"] = {"value": acc, "target": 1.0, "met": acc in (None, 1.0)}
    return s
