"""The writer: reads the plan, the notes and the fetched evidence; does no new research.

Evidence is shown to the model under short labels (``[E1]``, ``[E2]`` ...), most credible first,
because a small model copies a short label far more reliably than a 16-hex id; the citation check
maps labels back to evidence ids (full ids are accepted too).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from core.errors import ModelError
from core.evidence import Evidence
from core.research import lookup, steps
from core.research.chain import chain_block, without_heading
from core.research.citations import cited_text, credibility
from core.research.context import RunContext, invalid_output
from core.research.drafts import (
    line_key,
    repeat_cut,
    strip_restatement,
    without_passage_talk,
    writer_stop,
)
from core.research.pipeline import record, stage_on
from core.research.prompts import answer_budget, fit_messages, schema_reserve
from core.research.schemas import (
    WORKED_AS,
    ResearchNotes,
    ResearchPlan,
    short_answer_model,
)
from core.research.tables import labelled_rows, runs_on
from core.research.terms import key_terms, terms_missing
from core.research.worked import as_written, worked_answer
from core.text import MONTH, sentence_ranges
from graph.errors import GraphError

logger = logging.getLogger(__name__)

EVIDENCE_CHARS = 1500
ANSWER_MAX_TOKENS = 600  # up to four steps, each a question, an answer and a one-line fact
ANSWER_MARK = "**Answer:**"  # opens the short answer line; it cites the passages hop by hop
ANSWER_SENTENCES = 8  # sentences the short-answer step reads, across all passages
ANSWER_HOLDERS = 2  # passages an unsupported answer is cited to, when they hold what it names


def cited_ids(notes: list[ResearchNotes], on_topic: bool = False) -> list[str]:
    """The ids the notes' findings cite (only :meth:`~ResearchNotes.on_topic` ones if asked),
    in order of first use."""
    used: list[str] = []
    for n in notes:
        for f in n.on_topic() if on_topic else n.findings:
            used.extend(e for e in f.evidence_ids if e not in used)
    return used


def order_evidence(ctx: RunContext, notes: list[ResearchNotes]) -> list[Evidence]:
    """Fetched evidence in three tiers, the most credible document first within each: cited by
    an on-topic finding, cited by another finding, read but not cited.

    Credibility alone put passages a worker merely read (a physics journal's, specific and
    authoritative) ahead of the ones that answer the question."""
    tiers = [cited_ids(notes, on_topic=True), cited_ids(notes)]
    used = list(dict.fromkeys([*tiers[0], *tiers[1], *(i for n in notes for i in n.fetched_ids)]))
    evs = [ev for ev in (ctx.fetched.get(i) for i in used) if ev is not None]
    docs = {ev.doc_id for ev in evs}
    scores: dict[str, float] = {}
    for d in docs:
        doc = ctx.library.store.get_document(d)
        scores[d] = credibility(doc, [e.text for e in evs if e.doc_id == d], len(docs) - 1)
    rank = {i: n for n, i in enumerate(used)}
    sets = [set(t) for t in tiers]

    def tier(ev_id: str) -> int:
        return next((k for k, t in enumerate(sets) if ev_id in t), len(sets))

    return sorted(evs, key=lambda e: (tier(e.evidence_id), -scores[e.doc_id], rank[e.evidence_id]))


#: How many passages back a table split between passages is followed for its header.
TABLE_RUN_PASSAGES = 5


def _passages_before(ctx: RunContext, passage_id: str) -> Iterator[str]:
    """The texts of the passages before ``passage_id`` in its document, nearest first, up to
    :data:`TABLE_RUN_PASSAGES`; read only as far as they are asked for."""
    store = ctx.library.store
    for _ in range(TABLE_RUN_PASSAGES):
        before = store.neighbours(passage_id).get("previous")
        if not before:
            return
        passage_id = before
        yield store.get_passage(passage_id).text


def with_tables(ctx: RunContext, evidence: list[Evidence]) -> list[Evidence]:
    """The evidence as the model reads it: statement rows beside their periods
    (:func:`~core.research.tables.labelled_rows`); a table running on from the passages before
    keeps their header."""
    out = []
    for ev in evidence:
        carried = None
        if "|" in ev.text:
            try:
                carried = runs_on(_passages_before(ctx, ev.passage_id), ev.text)
            except GraphError:
                carried = None
        text = labelled_rows(ev.text, carried)
        out.append(ev if text == ev.text else ev.model_copy(update={"text": text}))
    return out


def row_answer(
    ctx: RunContext, question: str, evidence: list[Evidence], labels: dict[str, str]
) -> str:
    """Stage ``row_lookup``: the short answer to a question asking for one line item in one
    year, its change between two as a percentage, a ratio of line items in one year, or
    whether a ratio or a line item rose or fell, read and worked out by the program off the
    statement rows naming them (:mod:`core.research.lookup`), or what the question defines in
    terms of them ("DIO is defined as ..."), its chain those rows; "" when the question asks
    for anything else or the rows read do not give one reading (the model answers then).

    The rows are read in ``evidence`` and in the rest of the filings it comes from, as an
    analyst opens the statements of the filing in front of them: a row found outside
    ``evidence`` is fetched (inside the run's sources) and its passage added to ``evidence``
    and ``labels``, so that it is cited like any other."""
    question = lookup.asked_part(question)
    defined = lookup.asked_definition(question)  # the question's own definition first
    years = None if defined else lookup.asked_years(question)
    metric = None if defined or years else lookup.asked_metric(question)
    trend = None if defined or years or metric else lookup.asked_trend(question)
    if not (defined or years or metric or trend):
        return ""
    tables = _statement_tables(ctx, question, evidence)

    def read(asked: str, periods: tuple[str, ...]) -> lookup.Read | None:
        return lookup.one_reading(
            [
                r
                for ev_id, text, before, heading in tables
                for r in lookup.readings(asked, periods, ev_id, text, before, heading)
            ]
        )

    def read_all(asked: Iterable[tuple[str, tuple[str, ...]]]) -> list[lookup.Read] | None:
        """A row for each (line item, its years), or None when one has none."""
        reads = [read(item, periods) for item, periods in asked]
        return [r for r in reads if r is not None] if None not in reads else None

    worked: tuple[str, str] | None = None
    joiner = WORKED_AS
    if defined is not None:
        found = read_all((t.item, t.years) for t in defined.terms)
        worked = lookup.worked_definition(defined, found, question) if found else None
    elif metric is not None:
        found = read_all((item, (metric[1],)) for item in metric[0].of)
        worked = lookup.worked_metric(metric[0], found, question) if found else None
    elif trend is not None:
        items = trend.metric.of if trend.metric else (question,)
        found = read_all((item, trend.years) for item in items)
        worked = lookup.trend_answer(trend, found, question) if found else None
        joiner = WORKED_AS if trend.metric else ": "
    else:
        assert years is not None
        found = read_all([(question, years)])
        if found and len(years) == 1:
            worked = lookup.stated(found[0], question)
        elif found:
            worked = lookup.changed(found[0], question)
    rows = [r.row for r in found or []]
    record(ctx, "row_lookup", {"rows": rows, "answer": worked[0] if worked else ""})
    if not worked or not found or not _cited(ctx, [r.evidence_id for r in found], evidence, labels):
        return ""
    by_id = {v: k for k, v in labels.items()}
    answer, calculation = worked
    cites = "".join(dict.fromkeys(f"[{by_id[r.evidence_id]}]" for r in found))
    shown = f"{joiner}{calculation}" if calculation else ""
    chain = chain_block([(r.row, by_id[r.evidence_id]) for r in found])
    return f"{ANSWER_MARK} {answer}{shown} {cites}.\n\n{chain}"


def _statement_tables(
    ctx: RunContext, question: str, evidence: list[Evidence]
) -> list[tuple[str, str, list[str], str]]:
    """The table passages of the filings ``evidence`` comes from (those whose titles
    :func:`~core.research.lookup.filing_asked` allows), the passages of ``evidence`` first (a
    row found in them too is cited without another fetch), each as (passage id, its rows
    labelled with their periods, the passages before it nearest first, its heading). Each
    filing's passages are listed once: a table running on finds its header among them."""
    held = {ev.passage_id for ev in evidence}
    tables = []
    for doc_id, title in {ev.doc_id: ev.title for ev in evidence}.items():
        if not lookup.filing_asked(question, title):
            continue
        try:
            passages = ctx.library.store.get_document_passages(doc_id, full=False)
        except GraphError:
            continue
        passages.sort(key=lambda p: p.ordinal)
        for i, p in enumerate(passages):
            if "|" not in p.text:
                continue
            before = [q.text for q in reversed(passages[max(0, i - TABLE_RUN_PASSAGES) : i])]
            text = labelled_rows(p.text, runs_on(before, p.text))
            tables.append((p.passage_id, text, before, " / ".join(p.heading_path)))
    return sorted(tables, key=lambda t: t[0] not in held)


def _cited(
    ctx: RunContext, ids: list[str], evidence: list[Evidence], labels: dict[str, str]
) -> bool:
    """Whether every passage of ``ids`` can be cited: those not in ``evidence`` are fetched
    (inside the run's sources, whole; logged as any fetch, and again on resume) and added to
    it and to ``labels``."""
    held = set(labels.values())
    for ev_id in dict.fromkeys(ids):
        if ev_id in held:
            continue
        fetch = functools.partial(ctx.tools.fetch_evidence, ev_id)
        if ctx.tool(f"row_lookup/fetch/{ev_id}", "fetch_evidence", fetch, cache=False).error:
            return False
        got = ctx.fetched.get(ev_id)
        if got is None:  # longer than a fetch may read whole: not citable
            return False
        evidence.append(got)
        labels[f"E{len(labels) + 1}"] = ev_id
        held.add(ev_id)
    return True


def labels_for(evidence: list[Evidence]) -> dict[str, str]:
    return {f"E{i}": ev.evidence_id for i, ev in enumerate(evidence, 1)}


def evidence_block(evidence: list[Evidence], labels: dict[str, str]) -> str:
    by_id = {v: k for k, v in labels.items()}
    parts = []
    for ev in evidence:
        pages = f", p. {ev.pages[0]}" if ev.pages else ""
        flag = " (superseded version)" if ev.superseded else ""
        text = " ".join(ev.text.split())[:EVIDENCE_CHARS]
        parts.append(f"[{by_id[ev.evidence_id]}] {ev.title}{pages}{flag}\n{text}")
    return "\n\n".join(parts)


def short_answer(
    ctx: RunContext,
    question: str,
    plan: ResearchPlan,
    evidence: list[Evidence],
    labels: dict[str, str],
) -> str:
    """The report's opening line, ``**Answer:** ... [E2][E5]``, then the chain that leads there
    (each step's fact citing its passage, :func:`core.research.chain.chain_block`), or "" when
    the model finds no answer in the passages (or its output is invalid twice): the report then
    opens as before. A worked-out figure shows its calculation, and its chain the steps
    stating the figures it uses (the support check asks them to).

    It reads not whole passages but their :data:`ANSWER_SENTENCES` sentences most similar to
    the question or a plan query (:func:`key_sentences`), each under its passage's label and
    title: given whole passages, the 1.5B answers with a name from the first passage, though
    the sentence stating the answer is in a passage beside it.

    A separate, schema-bound step because a 1.5B writer asked to answer first in free text
    restated the question or copied the instruction; in a bounded structure (steps first,
    labels from an enum) it gives a short, cited answer. Whether the answer is right is still
    the model's reading. An answer naming what its cited passages lack, or of another kind
    than asked (no year for "when?", :func:`unlike_asked`), is asked for once more, told what
    is wrong; the retry replaces it only when it is of the kind asked where the first was not,
    or its passages lack less. An answer its labels still do not support is cited first to
    the passages shown that hold all it names, when any do; else the claim check flags it.
    A figure worked out from the passages' figures is computed, not read
    (:mod:`core.research.worked`)."""
    llm = ctx.model("writer")
    evidence = with_tables(ctx, evidence)
    queries = [question, *(q.query for q in plan.queries)]
    picked = key_sentences(queries, evidence, ctx.library.embedder.embed, ANSWER_SENTENCES)
    if not picked:
        return ""
    labels = {k: v for k, v in labels.items() if v in picked}
    by_id = {v: k for k, v in labels.items()}
    block = sentence_block(evidence, picked, by_id)
    schema = short_answer_model(list(labels))
    budget = answer_budget(llm, ANSWER_MAX_TOKENS)
    shown = [ev for ev in evidence if ev.evidence_id in picked]

    def ask(key: str, feedback: str) -> dict[str, Any] | None:
        values = {
            "question": question,
            "steps": [q.query for q in plan.queries],
            "evidence": block,
            "feedback": feedback,
        }
        msgs = fit_messages(
            llm,
            "answer",
            values,
            {"evidence": "head"},
            budget,
            reserve=schema_reserve(llm, schema),
        )
        try:
            out, _ = ctx.model_json("writer", key, msgs, schema, max_tokens=budget)
        except ModelError as exc:
            if not invalid_output(exc):
                raise
            logger.info("short answer (%s) failed (%s)", key, exc)
            return None
        return out.model_dump()

    data = ask("answer", "")
    if data is None:
        return ""
    answer = _answer_words(data, question)
    worked = worked_answer(answer, data["calculation"], question, shown)
    if worked is not None:  # cited by the passages holding its figures, its steps below
        held = "".join(f"[{by_id[i]}]" for i in worked.sources)
        line = f"{ANSWER_MARK} {worked.answer}{WORKED_AS}{worked.calculation} {held}."
        chain = _chain(ctx, _links(data), labels)
        return f"{line}\n\n{chain}" if chain else line
    answer = as_written(answer, _answer_texts(data, shown, labels))
    line, cites, missing = _answer_line(data, answer, question, shown, labels)
    kind = unlike_asked(question, answer) if line else ""
    chosen = data  # the output whose steps are the chain: the retry's when it is taken
    if missing or kind:
        # One more try, told what is wrong: an answer its cited passages do not state is
        # usually wrong (five of six were, for the 1.5B), and a small model may answer with a
        # thing where the question asks for a date.
        told = f'Your earlier answer was "{answer}"'
        if missing:
            cited = ", ".join(f"[{c}]" for c in cites)
            told += f", citing {cited}, but those passages do not state: {', '.join(missing)}"
        if kind:
            told += f"{', and' if missing else ', but'} the question asks for {kind}"
        again = ask(
            "answer/retry",
            f"{told}. Answer again with words a passage states, and give the labels of the "
            "passages that state them.",
        )
        if again is not None and again["answered"]:
            answer2 = as_written(
                _answer_words(again, question), _answer_texts(again, shown, labels)
            )
            line2, cites2, missing2 = _answer_line(again, answer2, question, shown, labels)
            kind2 = unlike_asked(question, answer2)
            if line2 and (bool(kind2), len(missing2)) < (bool(kind), len(missing)):
                answer, line, cites, missing = answer2, line2, cites2, missing2
                chosen = again
    if missing:
        # Still unsupported by its own labels: cite first the passages shown to the model that
        # hold all it names, when there are any. The 1.5B gave the right country of an author's
        # citizenship citing passages about somebody else, while the passage naming the author
        # and his nationality was shown beside them. Its own first label stays after them: it
        # is often a hop that led there (replacing the labels cut one question's citation
        # recall from .75 to .25).
        holders = _holders(answer, question, shown, labels)
        if holders:
            line = _line(answer, list(dict.fromkeys([*holders[:ANSWER_HOLDERS], *cites])))
    if not line:
        return ""
    chain = _chain(ctx, _links(chosen), labels)
    return f"{line}\n\n{chain}" if chain else line


def _links(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A short answer's steps as chain links, (fact, label); a fact that is no whole sentence
    (:func:`~core.research.steps.whole_fact`) states nothing, so it is no link."""
    return [
        (st["fact"], st["label"])
        for st in data["steps"]
        if st["label"] and steps.whole_fact(st["fact"])
    ]


def stepped_answer(
    ctx: RunContext,
    question: str,
    plan: ResearchPlan,
    notes: Mapping[str, ResearchNotes],
    labels: dict[str, str],
) -> str:
    """The report's opening line and chain from the plan's steps (:mod:`core.research.steps`):
    ``**Answer:** <the last step's answer> [E1][E3].`` citing each step's passage, then each
    step's fact citing its one passage; or "" when the steps do not reach an answer, or reach
    one of another kind than asked (:func:`unlike_asked`): :func:`short_answer` then answers in
    one call. The stage's log event says which."""
    found = steps.step_answer(plan, notes, ctx.fetched.get)
    answer = strip_restatement(" ".join(found.answer.split()), question) if found else ""
    by_id = {v: k for k, v in labels.items()}
    why = ""
    if found is None:
        why = "no chain of answered steps"
    elif not answer or unlike_asked(question, answer):
        why = f"the last step's answer is not of the kind asked: {found.answer!r}"
    elif any(ev not in by_id for _, ev in found.links):
        why = "a step's passage is not among the writer's evidence"
    record(ctx, "step_answers", {"answer": "" if why else answer, "why_not": why})
    if why or found is None:
        return ""
    cites = list(dict.fromkeys(by_id[ev] for _, ev in found.links))
    chain = _chain(ctx, [(fact, by_id[ev]) for fact, ev in found.links], labels)
    return f"{_line(answer, cites)}\n\n{chain}" if chain else _line(answer, cites)


def _chain(ctx: RunContext, links: list[tuple[str, str]], labels: Mapping[str, str]) -> str:
    """:func:`chain_block` of (fact, label) links, each fact in its own words (:func:`_own_words`,
    ``labels`` giving each label's evidence id)."""
    return chain_block([(_own_words(ctx, f, labels.get(lb, "")), lb) for f, lb in links])


def _own_words(ctx: RunContext, fact: str, evidence_id: str) -> str:
    """Stage ``passage_talk`` on a step's fact: without its passage's heading, when the step
    copied the passage's opening heading and all, and saying what the passage states, not
    that it states it."""
    if not stage_on(ctx, "passage_talk"):
        return fact
    got = ctx.fetched.get(evidence_id)
    return without_passage_talk(without_heading(fact, got.text) if got is not None else fact)


_ASKS_WHEN = re.compile(r"^\s*when\b|\bwhen\s*\?\s*$|\b(?:what|which) year\b|\bwhat date\b", re.I)
_ASKS_COUNT = re.compile(r"\bhow (?:many|much)\b", re.I)
_GIVES_WHEN = re.compile(rf"\d|\b{MONTH}\b|\bcentury\b", re.I)
_GIVES_COUNT = re.compile(
    r"\d|\b(?:no|none|zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
    r"|dozen|hundred|thousand|million|billion)\b",
    re.I,
)


def unlike_asked(question: str, answer: str) -> str:
    """What ``question`` asks for that ``answer`` does not give: "a date or year" (asked when,
    or what year, answered without a digit, month or century), "a number" (asked how many or
    how much, answered without one), or ""."""
    if _ASKS_WHEN.search(question) and not _GIVES_WHEN.search(answer):
        return "a date or year"
    if _ASKS_COUNT.search(question) and not _GIVES_COUNT.search(answer):
        return "a number"
    return ""


def _answer_line(
    data: dict[str, Any], answer: str, question: str, shown: list[Evidence], labels: dict[str, str]
) -> tuple[str, list[str], list[str]]:
    """(the answer line or "", its labels, the names and figures it asserts that its cited
    passages lack, leaving out those the question itself holds)."""
    cites = list(dict.fromkeys(data["labels"]))
    if len(cites) > 1:  # a label after the first stays only if its passage states the answer
        holding = set(_holders(answer, question, shown, labels))
        cites = cites[:1] + [c for c in cites[1:] if c in holding]
    if not cites:  # the steps' labels stand in when the answer itself cites none
        cites = list(dict.fromkeys(s["label"] for s in data["steps"] if s["label"]))[-2:]
    if not cites:  # else the passages shown that hold it: the checks then judge it as any
        cites = _holders(answer, question, shown, labels)[:ANSWER_HOLDERS]
    if not data["answered"] or not answer or not cites:
        return "", [], []
    texts = {ev.evidence_id: cited_text(ev) for ev in shown}
    held = " ".join(texts.get(labels.get(c, ""), "") for c in cites)
    return _line(answer, cites), cites, terms_missing(_asserted(answer, question), held)


def _holders(
    answer: str, question: str, shown: list[Evidence], labels: dict[str, str]
) -> list[str]:
    """The labels of the passages shown that hold every name and figure ``answer`` asserts
    (none when it asserts none: "yes" is held by no passage in particular)."""
    asserted = _asserted(answer, question)
    if not asserted:
        return []
    by_id = {v: k for k, v in labels.items()}
    return [
        by_id[ev.evidence_id]
        for ev in shown
        if ev.evidence_id in by_id and not terms_missing(asserted, cited_text(ev))
    ]


def _answer_texts(data: dict[str, Any], shown: list[Evidence], labels: dict[str, str]) -> list[str]:
    """The passages shown as the model read them, those its answer cites first."""
    first = {labels.get(c, "") for c in data["labels"]}
    ordered = sorted(shown, key=lambda ev: ev.evidence_id not in first)
    return [cited_text(ev) for ev in ordered]


def _answer_words(data: dict[str, Any], question: str) -> str:
    """The model's answer on one line, without a final stop or a restated question."""
    return strip_restatement(" ".join(str(data["answer"]).split()).rstrip(" ."), question)


def _line(answer: str, cites: list[str]) -> str:
    return f"{ANSWER_MARK} {answer} " + "".join(f"[{c}]" for c in cites) + "."


def _asserted(answer: str, question: str) -> list[str]:
    """The names and figures an answer asserts, less those the question itself holds."""
    return terms_missing(key_terms(f"{ANSWER_MARK} {answer}"), question)


def sentence_block(
    evidence: list[Evidence], picked: Mapping[str, list[str]], by_id: Mapping[str, str]
) -> str:
    """The passages that have sentences in ``picked``, each as its label, title and those
    sentences (cuts marked with an ellipsis), in evidence order."""
    return "\n\n".join(
        f"[{by_id[ev.evidence_id]}] {ev.title}\n" + " … ".join(picked[ev.evidence_id])
        for ev in evidence
        if ev.evidence_id in picked
    )


def key_sentences(
    queries: list[str],
    evidence: list[Evidence],
    embed: Callable[[list[str]], np.ndarray],
    limit: int = ANSWER_SENTENCES,
) -> dict[str, list[str]]:
    """Evidence id -> its sentences among the ``limit`` most similar (cosine of the embedder's
    normalised vectors) to any of ``queries``, in passage order; passages with none are left
    out. Ties keep the evidence order (the more credible passage first)."""
    sents: list[tuple[str, int, str]] = []
    for ev in evidence:
        text = " ".join(ev.text.split())
        for n, (a, b) in enumerate(sentence_ranges(text)):
            sents.append((ev.evidence_id, n, text[a:b]))
    if not sents:
        return {}
    vecs = np.asarray(embed([*queries, *(t for _, _, t in sents)]), dtype=np.float32)
    best = (vecs[len(queries) :] @ vecs[: len(queries)].T).max(axis=1)
    top = sorted(np.argsort(-best, kind="stable")[:limit].tolist())
    out: dict[str, list[str]] = {}
    for i in top:
        ev_id, _, text = sents[i]
        out.setdefault(ev_id, []).append(text)
    return out


def write(
    ctx: RunContext,
    question: str,
    plan: ResearchPlan,
    notes: list[ResearchNotes],
    evidence: list[Evidence],
    labels: dict[str, str],
    on_token: Callable[[str], None] | None = None,
    answer: str = "",
) -> str | None:
    """Stream the draft; returns its Markdown (labels still in place). ``answer`` is the short
    answer line that opens the report (written before, by :func:`short_answer`); the writer
    then gives the support, reading the passages whole, or with ``writer_sentences`` set only
    that many sentences most like the question or a plan query (:func:`key_sentences`): a
    prompt a quarter as long, but fresh runs cited fewer of the answer's passages.

    None, with no call, when there is an answer and the prompt is longer than
    ``prose_prompt_tokens``: the caller then writes the body from the notes (:func:`notes_body`).
    """
    llm = ctx.model("writer")
    by_id = {v: k for k, v in labels.items()}

    def relabel(text: str) -> str:
        for ev_id, label in by_id.items():
            text = text.replace(ev_id, label)
        return text

    shown = with_tables(ctx, evidence)
    picked: dict[str, list[str]] = {}
    if answer and ctx.limits.writer_sentences:
        queries = [question, *(q.query for q in plan.queries)]
        embed = ctx.library.embedder.embed
        picked = key_sentences(queries, shown, embed, ctx.limits.writer_sentences)
    block = sentence_block(shown, picked, by_id) if picked else evidence_block(shown, labels)
    variables = {
        "question": question,
        "shape": plan.answer_shape,
        "components": plan.components,
        "notes": relabel("\n".join(n.compressed() for n in notes)),
        "evidence": block,
        "answer": answer,
    }
    msgs = fit_messages(
        llm,
        "writer",
        variables,
        {"notes": "head", "evidence": "head"},
        answer_budget(llm, ctx.limits.writer_max_tokens),
    )
    bound = ctx.limits.prose_prompt_tokens
    if answer and bound and (used := llm.count_message_tokens(msgs)) > bound:
        record(ctx, "body", {"prose": False, "prompt_tokens": used, "bound": bound})
        return None
    text, _ = ctx.model_text(
        "writer",
        "write",
        msgs,
        max_tokens=answer_budget(llm, ctx.limits.writer_max_tokens),
        stream_to=on_token,
        stop_at=writer_stop(ctx),
    )
    return text


NOTES_BODY_FINDINGS = 6  # findings a body made of the notes states, at most


def notes_body(ctx: RunContext, notes: list[ResearchNotes], answer: str) -> str:
    """The body under a short answer made of the notes (stage ``notes_body``): of each step's
    findings that a passage they cite holds (all its names and figures), those about the step's
    own subject (:meth:`~ResearchNotes.on_topic`), in step order, each citing only the passages
    that hold it; none the answer and its chain already state ("" when none is left). Its log
    event counts what was left out.

    No model call: the writer's prose over the same passages costs a call reading all of them
    (~18 s a question with the 1.5B here) and often restated the question with an answer of its
    own. A finding is the small model's own reading, so it is checked first: unchecked, one that
    joins a name from one passage to a fact from another ("B is from C" citing a passage about B
    and one about C) would be stated as found."""
    said = {line_key(ln) for ln in answer.splitlines() if line_key(ln)}
    lines: list[str] = []
    unheld = repeated = 0
    for n in notes:
        held = []
        for f in n.findings:
            terms = key_terms(f.claim)
            holders = [
                i
                for i in f.evidence_ids
                if (ev := ctx.fetched.get(i)) is not None
                and not terms_missing(terms, cited_text(ev))
            ]
            if holders:
                held.append(f.model_copy(update={"evidence_ids": holders}))
            else:
                unheld += 1
        for f in n.model_copy(update={"findings": held}).on_topic():
            claim = f.claim.strip().rstrip(".")
            if line_key(claim) in said:
                repeated += 1
            else:
                said.add(line_key(claim))
                lines.append(f"{claim} {''.join(f'[{i}]' for i in f.evidence_ids)}.")
    record(
        ctx,
        "notes_body",
        {"stated": len(lines[:NOTES_BODY_FINDINGS]), "unheld": unheld, "repeated": repeated},
    )
    return " ".join(lines[:NOTES_BODY_FINDINGS])


def findings_report(notes: list[ResearchNotes]) -> str:
    """The fallback report: each finding as a bullet citing its evidence ids."""
    lines = []
    for n in notes:
        for f in n.findings:
            cites = "".join(f"[{e}]" for e in f.evidence_ids)
            lines.append(f"- {f.claim.strip().rstrip('.')} {cites}.")
    return "\n".join(dict.fromkeys(lines))


def repair(ctx: RunContext, draft: str, invalid: list[str], labels: dict[str, str]) -> str:
    """The one repair pass: the writer drops or replaces the invalid citations."""
    llm = ctx.model("writer")
    msgs = fit_messages(
        llm,
        "repair",
        {"draft": draft, "invalid": invalid, "labels": list(labels)},
        {"draft": "head"},
        answer_budget(llm, ctx.limits.writer_max_tokens),
    )
    text, _ = ctx.model_text(
        "writer",
        "repair",
        msgs,
        max_tokens=answer_budget(llm, ctx.limits.writer_max_tokens),
        stop_at=repeat_cut,
    )
    return text
