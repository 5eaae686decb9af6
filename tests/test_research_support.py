"""The support check: claims judged by meaning (scripted choices, real library), the answer that
fails it withheld, and the statuses that follow."""
# ruff: noqa: F811  (pytest fixtures imported from research_fixtures are redefined as arguments)

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError
from research_fixtures import (
    evidence,
    models,
    pid_with,
    plan,
    research_app,  # noqa: F401 - fixture
    unverified,
    worker_script,
)

from core.research import support
from core.research.pipeline import STAGES
from core.research.schemas import ResearchLimits
from core.service import Sourcebook
from core.settings import Settings
from models.llm import ChatMessage, Choice
from models.scripted import ScriptedLLM

Q = "Who founded the Northport Harbor Authority?"
LIM = ResearchLimits(tool_loop=True, max_workers=1, max_rounds=1, read_top=0, trail=False)
ANSWER = {
    "steps": [],
    "calculation": "",
    "answer": "Mayor Ellen Park",
    "labels": ["E1"],
    "answered": True,
}
BODY = "The authority was founded in 1921 [E1]. Mayor Ellen Park founded it [E1]."


def choice(option: str, p: float = 0.9) -> Choice:
    rest = (1 - p) / 2
    probs = {o: (p if o == option else rest) for o in support.OPTIONS}
    return Choice(option=option, probabilities=probs)


def _run(
    app: Sourcebook, task: str, choices: list[str], body: str = BODY, **limits: Any
) -> tuple[Any, ScriptedLLM]:
    found = pid_with(app, "founded in 1921")
    planner = ScriptedLLM([plan(("q1", Q, []))])
    researcher = ScriptedLLM(worker_script(Q, found, "Founded in 1921 by Ellen Park."))
    writer = ScriptedLLM([ANSWER, body])
    writer.enqueue_choices(choices)
    report = app.research(
        Q,
        models=models(planner, researcher, writer),
        task=task,
        limits=LIM.model_copy(update=limits),
    )
    assert writer.pending == 0
    return report, writer


def test_every_claim_supported_is_answered_and_the_judgements_are_logged(
    research_app: Sourcebook,
) -> None:
    report, writer = _run(research_app, "support-all-yes", ["yes", "yes", "yes"])
    assert report.status == "answered", (report.status_reasons, report.flagged_claims)
    assert report.markdown.startswith("**Answer:** Mayor Ellen Park [1].")
    asked = [c for c in writer.history if c.kind == "choose"]
    judged = [c for c in asked if "kind of thing" not in c.messages[-1].content]
    assert len(judged) == 3 and len(asked) == 4  # and the answer's kind, last
    assert "Answer: Mayor Ellen Park\n" in asked[-1].messages[-1].content
    first = judged[0].messages[-1].content  # the answer line first, as the answer to the question
    assert f"Question: {Q}\nAnswer: Mayor Ellen Park\n" in first and "Claim:" not in first
    assert "founded in 1921 by Mayor Ellen Park" in first and "[ev1:" not in first
    info, _ = research_app.task("support-all-yes")
    assert info.status == "answered"
    events = research_app.task_log().events("support-all-yes")
    (result,) = [e for e in events if e.key.startswith("support_check@")]
    assert result.payload["judged"] == 3 and result.payload["flagged"] == []


def test_a_body_claim_judged_unsupported_is_flagged_and_the_run_is_partial(
    research_app: Sourcebook,
) -> None:
    report, _ = _run(research_app, "support-body-partly", ["yes", "yes", "partly"])
    assert report.status == "partial"
    assert report.markdown.startswith("**Answer:** Mayor Ellen Park [1].")
    (flag,) = report.flagged_claims
    assert flag.sentence.startswith("Mayor Ellen Park founded it")
    assert "state only part of this (support check: partly, p(yes) 0.00)" in flag.reason
    assert "Mayor Ellen Park founded it [1]. ⚠" in report.markdown
    assert any("1 claim(s)" in r for r in report.status_reasons)


def test_an_answer_judged_unsupported_is_withheld_and_the_run_has_no_answer(
    research_app: Sourcebook,
) -> None:
    report, _ = _run(research_app, "support-answer-no", ["no", "yes", "yes"])
    assert report.status == "insufficient_evidence"
    assert unverified(report.markdown.splitlines()[0], "Mayor Ellen Park")
    # the unverified answer is quoted with its reason; what the sources do state stays, cited
    assert any(
        f.sentence.startswith("**Answer:** Mayor Ellen Park") and "do not state" in f.reason
        for f in report.flagged_claims
    )
    assert "The authority was founded in 1921 [1]." in report.markdown
    assert any("not supported by the passages it cites" in r for r in report.status_reasons)


def test_an_answer_of_another_kind_than_asked_is_marked_unverified(
    research_app: Sourcebook,
) -> None:
    # the three claims pass the support check; the answer's kind is judged last, and fails
    report, writer = _run(research_app, "kind-no", ["yes", "yes", "yes", "no"])
    assert report.status == "insufficient_evidence"
    assert unverified(report.markdown.splitlines()[0], "Mayor Ellen Park")
    (flag,) = report.flagged_claims
    assert "not the kind of thing the question asks for (kind check: p(yes) 0.00)" in flag.reason
    asked = [c for c in writer.history if c.kind == "choose"][-1].messages[-1].content
    assert asked.startswith(f"Question: {Q}\nAnswer: Mayor Ellen Park\n")
    events = {e.key: e.payload for e in research_app.task_log().events("kind-no")}
    assert events["answer_kind@1"] == {"p_yes": 0.0, "flagged": True}


def test_an_answer_already_flagged_is_not_asked_its_kind(research_app: Sourcebook) -> None:
    report, writer = _run(research_app, "kind-skipped", ["no", "yes", "yes"])
    assert report.status == "insufficient_evidence"
    assert not any("kind of thing" in c.messages[-1].content for c in writer.history)
    events = {e.key: e.payload for e in research_app.task_log().events("kind-skipped")}
    assert events["answer_kind@1"] == {"p_yes": None, "flagged": False}


def test_the_check_switched_off_asks_nothing(research_app: Sourcebook) -> None:
    report, writer = _run(research_app, "support-off", [], support_check=False)
    asked = [c.messages[-1].content for c in writer.history if c.kind == "choose"]
    assert asked and all("kind of thing" in a for a in asked)  # the answer's kind alone
    assert report.status == "answered"


def test_a_resumed_run_reuses_its_judgements(research_app: Sourcebook) -> None:
    first, _ = _run(research_app, "support-resume", ["yes", "yes", "partly"])
    log = research_app.task_log()
    log.finish("support-resume", "running", None)  # as if it died before saving the report
    log.close()
    # everything replays from the log: no model is asked again
    again = research_app.research(
        Q,
        models=models(ScriptedLLM([]), ScriptedLLM([]), ScriptedLLM([])),
        task="support-resume",
        limits=LIM,
    )
    assert again.status == first.status == "partial"
    assert [f.reason for f in again.flagged_claims] == [f.reason for f in first.flagged_claims]


# ----------------------------------------------------------------------------- units


def fake_embed(texts: list[str]) -> np.ndarray:
    """Bag-of-words vectors over a small vocabulary: enough to rank sentences by overlap."""
    vocab: dict[str, int] = {}
    rows = []
    for t in texts:
        v = np.zeros(64, dtype=np.float32)
        for w in t.lower().replace(".", " ").split():
            v[vocab.setdefault(w, len(vocab) % 64)] += 1
        rows.append(v / (np.linalg.norm(v) or 1))
    return np.stack(rows)


def test_a_long_passage_is_shown_as_its_sentences_most_like_the_claim() -> None:
    filler = [f"Clause {i} covers the filing of form {i} with the registry." for i in range(40)]
    text = " ".join([*filler[:20], "The ferry to Korvo leaves at dawn.", *filler[20:]])
    ev = evidence("ev1:0000000000000001", text)
    view = support.passage_view(ev, "The ferry to Korvo leaves at dawn.", fake_embed)
    assert "The ferry to Korvo leaves at dawn." in view
    assert len(view) <= support.PASSAGE_CHARS + 40 and "… The ferry" in view
    kept = [s.strip() for s in view.replace("…", "|").split("|") if s.strip()]
    assert all(text.find(k) >= 0 for k in kept)  # whole sentences, in passage order
    assert [text.find(k) for k in kept] == sorted(text.find(k) for k in kept)
    short = evidence("ev1:0000000000000002", "A short passage.")
    assert support.passage_view(short, "anything", fake_embed) == "A short passage."


def test_claims_are_judged_answer_first_once_each_and_flagged_below_the_floor() -> None:
    a, b = "ev1:00000000000000aa", "ev1:00000000000000bb"
    texts = {
        a: evidence(a, "Ana Brel, a painter, was born in Tarsk."),
        b: evidence(b, "Tarsk is on the Vell."),
    }
    draft = (
        f"Ana Brel was born in Tarsk [{a}]. The Vell flows past her birthplace [{a}][{b}].\n"
        f"Uncited line.\n**Answer:** the Vell [{b}]."
    )
    asked: list[tuple[str, str]] = []
    verdicts = iter(["yes", "yes", "partly"])

    def choose(key: str, msgs: list[ChatMessage]) -> Choice:
        asked.append((key, msgs[-1].content))
        return choice(next(verdicts))

    def messages(passages: str, claim: str, answer: str | None) -> list[ChatMessage]:
        asks = f"Answer: {answer}" if answer is not None else f"Claim: {claim}"
        return [ChatMessage(role="user", content=f"{passages}\n\n{asks}")]

    judged = support.judge_claims(
        draft, texts.get, choose, messages, question="Which river?", answer_mark="**Answer:**"
    )
    assert [j.sentence.split(" [")[0] for j in judged] == [
        "**Answer:** the Vell",
        "Ana Brel was born in Tarsk",
        "The Vell flows past her birthplace",
    ]
    assert "Answer: the Vell" in asked[0][1] and "Claim:" not in asked[0][1]
    assert "[1] t\nAna Brel" in asked[2][1] and "[2] t\nTarsk is on the Vell." in asked[2][1]
    assert len({k for k, _ in asked}) == 3
    # one passage: the one-passage floor; the answer and a claim joining two: the joined floor
    joined, one = support.ANSWER_FLOOR, support.SUPPORT_FLOOR
    assert [j.floor for j in judged] == [joined, one, joined]
    (flag,) = support.flags(judged)
    assert flag.sentence.startswith("The Vell flows") and flag.evidence_ids == [a, b]
    # claims already flagged are not judged again
    again = support.judge_claims(
        draft,
        texts.get,
        lambda k, m: choice("yes"),
        messages,
        answer_mark="**Answer:**",
        skip={j.sentence for j in judged},
    )
    assert again == []


def test_a_sentence_quoting_its_passage_is_stated_without_asking_the_model() -> None:
    a = "ev1:00000000000000aa"
    texts = {a: evidence(a, "Ana Brel was born in Tarsk in 1931.\nShe painted the Vell.")}
    draft = (
        f"**Answer:** Ana Brel was born in Tarsk in 1931 [{a}].\n\n"
        f"- Ana Brel was born in Tarsk in 1931 [{a}].\n"  # a link quoting its passage
        f"Ana Brel was born in Tarsk in 1932 [{a}]."  # one figure off: asked
    )
    asked: list[str] = []

    def choose(key: str, msgs: list[ChatMessage]) -> Choice:
        asked.append(msgs[-1].content)
        return choice("yes")

    def messages(passages: str, claim: str, answer: str | None) -> list[ChatMessage]:
        return [ChatMessage(role="user", content=answer if answer is not None else claim)]

    judged = support.judge_claims(draft, texts.get, choose, messages, answer_mark="**Answer:**")
    assert asked == ["Ana Brel was born in Tarsk in 1931", "Ana Brel was born in Tarsk in 1932."]
    quoted = [j for j in judged if j.quoted]
    assert [j.sentence for j in quoted] == [f"- Ana Brel was born in Tarsk in 1931 [{a}]."]
    assert quoted[0].supported and quoted[0].support == 1.0
    assert not support.quoted("born in Tarsk [x].", list(texts.values()))  # too short to count


def test_a_link_copying_a_statement_row_is_stated_without_asking_the_model() -> None:
    a = "ev1:00000000000000ab"
    rows = "Total net sales (2016: 45,310; 2017: 52,870)\nHarbor fees (2016: 1,120; 2017: 1,480)"
    texts = {a: evidence(a, rows)}
    draft = (
        f"**Answer:** 1,480 [{a}].\n\n"
        f"- Harbor fees (2017: $1,480) [{a}].\n"  # the row as shown, one period: stated
        f"- Harbor fees (2016: 1,480) [{a}].\n"  # the other year's column: asked
    )
    asked: list[str] = []

    def choose(key: str, msgs: list[ChatMessage]) -> Choice:
        asked.append(msgs[-1].content)
        return choice("yes", 0.55)

    def messages(passages: str, claim: str, answer: str | None) -> list[ChatMessage]:
        return [ChatMessage(role="user", content=answer if answer is not None else claim)]

    judged = support.judge_claims(draft, texts.get, choose, messages, answer_mark="**Answer:**")
    assert asked == ["1,480", "- Harbor fees (2016: 1,480)."]
    assert [j.sentence for j in judged if j.quoted] == [f"- Harbor fees (2017: $1,480) [{a}]."]


def test_only_a_sure_no_makes_a_claim_unstated() -> None:
    def judged(option: str, yes: float) -> support.Judgement:
        rest = (1 - yes) / 2
        return support.Judgement(
            "s",
            ["ev1:aa"],
            Choice(option=option, probabilities={"yes": yes, "partly": rest, "no": rest}),
        )

    flags = support.flags(
        [judged("no", 0.05), judged("no", 0.3), judged("partly", 0.05), judged("yes", 0.5)]
    )
    assert [f.unstated for f in flags] == [True, False, False, False]
    assert all(not f.removed for f in flags)
    unjudged = support.Judgement("s", [], Choice(option="no", probabilities={}), unjudged="why")
    assert support.flags([unjudged])[0].unstated is False


def test_support_is_the_probability_of_yes() -> None:
    j = support.Judgement(
        "s", [], Choice(option="partly", probabilities={"yes": 0.3, "partly": 0.4, "no": 0.3})
    )
    assert abs(j.support - 0.3) < 1e-9 and not j.supported and "only part of" in j.reason()
    j = support.Judgement(
        "s", [], Choice(option="no", probabilities={"yes": 0.2, "partly": 0.2, "no": 0.6})
    )
    assert not j.supported and "do not state this" in j.reason()
    sure = Choice(option="yes", probabilities={"yes": 0.9, "partly": 0.06, "no": 0.04})
    assert support.Judgement("s", [], sure).supported
    # a "yes" the model is not sure of is below a claim's floor; an answer line's is lower
    unsure = Choice(option="yes", probabilities={"yes": 0.45, "partly": 0.3, "no": 0.25})
    j = support.Judgement("s", [], unsure)
    assert not j.supported and j.reason() == (
        "the support check is not sure the cited passages state this (support check: yes, "
        "p(yes) 0.45)"
    )
    fair = Choice(option="yes", probabilities={"yes": 0.6, "partly": 0.2, "no": 0.2})
    assert not support.Judgement("s", [], fair).supported
    assert support.Judgement("s", [], fair, floor=support.ANSWER_FLOOR).supported


def test_a_body_sentence_answering_otherwise_than_the_answer_line_is_flagged(
    research_app: Sourcebook,
) -> None:
    # the claim check off, so that this stage's own effect shows (it would flag the name, which
    # its passage lacks); the support check's model says yes to everything
    other = "The Northport Harbor Authority was founded by Tom Reyes [E1]."
    says = ["yes"] * 4
    report, _ = _run(
        research_app, "other-answer", says, f"{BODY} {other}", stages_off=["claim_check"]
    )
    assert report.markdown.startswith("**Answer:** Mayor Ellen Park [1].")
    (flag,) = report.flagged_claims
    assert flag.sentence.startswith("The Northport Harbor Authority was founded by Tom Reyes")
    assert "otherwise than the answer line (**Answer:** Mayor Ellen Park" in flag.reason
    assert report.status == "partial"
    events = {e.key: e.payload for e in research_app.task_log().events("other-answer")}
    assert len(events["answer_consistency@1"]["flagged"]) == 1
    # switched off too, the two answers stand unflagged
    off, _ = _run(
        research_app,
        "other-answer-off",
        says,
        f"{BODY} {other}",
        stages_off=["claim_check", "answer_consistency"],
    )
    assert off.status == "answered" and not off.flagged_claims


def test_each_stage_logs_what_it_did_and_can_be_switched_off(research_app: Sourcebook) -> None:
    report, _ = _run(research_app, "stages-on", ["no", "yes", "yes"])
    events = {e.key: e.payload for e in research_app.task_log().events("stages-on")}
    names = ("cite_quotations", "method_talk", "passage_talk", "answer_copy", "narrow_citations")
    for name in (*names, "asked_read"):  # the passage cited names what the question does
        assert events[f"{name}@1"]["changed"] is False, name
    assert events["withhold_answer@1"] == {"withheld": True}
    assert report.status == "insufficient_evidence"
    # the checks off: the same unsupported answer is stated, nothing flagged, nothing logged
    off = ["claim_check", "support_check", "answer_kind", "withhold_answer"]
    report, _ = _run(research_app, "stages-off", ["no"], stages_off=off)
    assert report.markdown.startswith("**Answer:** Mayor Ellen Park [1].")
    assert report.status == "answered" and not report.flagged_claims
    keys = {e.key for e in research_app.task_log().events("stages-off")}
    assert not {f"{n}@1" for n in off} & keys and "method_talk@1" in keys


def test_unknown_stage_names_are_refused_with_the_known_ones() -> None:
    with pytest.raises(ValidationError, match=r"unknown research stage.*support_check"):
        ResearchLimits(stages_off=["suport_check"])
    with pytest.raises(ValidationError, match=r"unknown research stage.*support_check"):
        Settings.model_validate({"research": {"stages_off": ["suport_check"]}})
    assert set(STAGES) >= {"short_answer", "trail", "support_check"}


def test_a_table_page_is_cut_into_rows_and_the_claims_rows_are_shown() -> None:
    rows = [f"Line item {i} {1000 + i} {900 + i}" for i in range(80)]
    rows[57] = "Total freight revenue 4,812 4,390"
    ev = evidence("ev1:0000000000000003", "Consolidated statement\n" + "\n".join(rows))
    view = support.passage_view(ev, "Total freight revenue was 4,812.", fake_embed)
    assert "Total freight revenue 4,812 4,390" in view and len(view) <= support.PASSAGE_CHARS + 40


def test_the_kind_check_reads_the_answer_without_its_calculation_or_citations() -> None:
    a = "ev1:00000000000000cc"
    line = f"**Answer:** 20%, worked out as (4,200 - 3,500) / 3,500 * 100 = 20 [{a}]."
    shown: list[str] = []

    def messages(answer: str) -> list[ChatMessage]:
        shown.append(answer)
        return [ChatMessage(role="user", content=answer)]

    def asked(p: float) -> tuple[Any, float]:
        probs = {"yes": p, "no": 1 - p}
        pick = max(probs, key=lambda o: probs[o])
        return support.kind_flag(
            line, "**Answer:**", lambda _k, _m: Choice(option=pick, probabilities=probs), messages
        )

    flag, p = asked(0.2)
    assert shown == ["20%"] and p == 0.2
    assert flag is not None and flag.sentence == line and flag.evidence_ids == [a]
    assert asked(support.KIND_FLOOR)[0] is None  # at the floor, the kind asked


def test_a_sentence_whose_calculation_holds_is_not_judged() -> None:
    a = "ev1:00000000000000cc"
    texts = {a: evidence(a, "Revenue was 4,200 in 2030 and 3,500 in 2029.")}
    draft = f"**Answer:** 20%, worked out as (4,200 - 3,500) / 3,500 * 100 = 20 [{a}]."
    asked: list[str] = []

    def choose(key: str, msgs: list[ChatMessage]) -> Choice:
        asked.append(key)
        return choice("no")

    judged = support.judge_claims(
        draft, texts.get, choose, lambda p, c, a: [], answer_mark="**Answer:**"
    )
    assert judged == [] and asked == []
