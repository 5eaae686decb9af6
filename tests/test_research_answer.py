"""The short cited answer that opens a report (scripted models, real library)."""
# ruff: noqa: F811  (pytest fixtures imported from research_fixtures are redefined as arguments)

from __future__ import annotations

from typing import Any

import pytest
from research_fixtures import (
    act,
    models,
    notes,
    pid_with,
    plan,
    research_app,  # noqa: F401 - fixture
    unverified,
    worker_script,
)

from core.evidence import Evidence
from core.research import writer as writer_module
from core.research.chain import CHAIN_HEAD
from core.research.citations import states_absence
from core.research.drafts import strip_restatement, without_method_talk, without_passage_talk
from core.research.schemas import ResearchLimits
from core.research.support import WORKED_UNTRACED
from core.research.writer import key_sentences, unlike_asked
from core.service import Sourcebook
from models.scripted import ScriptedCall, ScriptedLLM

LIM = ResearchLimits(
    tool_loop=True, max_workers=1, max_rounds=1, read_top=0
)  # short_answer on (the default)
QUESTION = "Who founded the Northport Harbor Authority?"


def short(
    answer: str,
    labels: list[str],
    *,
    answered: bool = True,
    steps: Any = (),
    calculation: str = "",
) -> dict[str, Any]:
    return {
        "steps": list(steps),
        "calculation": calculation,
        "answer": answer,
        "labels": labels,
        "answered": answered,
    }


def generations(llm: ScriptedLLM) -> list[ScriptedCall]:
    """The calls that wrote something (not the support check's reads)."""
    return [c for c in llm.history if c.kind != "choose"]


def _run(
    app: Sourcebook,
    task: str,
    writer: ScriptedLLM,
    tokens: list[str] | None = None,
    question: str = QUESTION,
    passage: str = "founded in 1921",
    finding: str = "Founded in 1921 by Ellen Park.",
) -> Any:
    found = pid_with(app, passage)
    planner = ScriptedLLM([plan(("q1", question, []))])
    researcher = ScriptedLLM(worker_script(question, found, finding))
    report = app.research(
        question,
        models=models(planner, researcher, writer),
        task=task,
        limits=LIM,
        on_token=tokens.append if tokens is not None else None,
    )
    assert writer.pending == 0
    return report


def _run_two_passages(app: Sourcebook, task: str, writer: ScriptedLLM) -> tuple[Any, str, str]:
    """A run whose worker reads the dredging passage, then the founding one; (report, founding
    passage id, dredging passage id)."""
    founded = pid_with(app, "founded in 1921")
    dredging = pid_with(app, "Dredging of the main channel")
    planner = ScriptedLLM([plan(("q1", QUESTION, []))])
    researcher = ScriptedLLM(
        [
            act("fetch_evidence", evidence_id=dredging),
            act("fetch_evidence", evidence_id=founded),
            act("finish"),
            notes(("Founded in 1921 by Ellen Park.", [founded])),
        ]
    )
    report = app.research(
        QUESTION, models=models(planner, researcher, writer), task=task, limits=LIM
    )
    assert writer.pending == 0
    return report, founded, dredging


def test_report_opens_with_the_cited_short_answer(research_app: Sourcebook) -> None:
    founded = pid_with(research_app, "founded in 1921")
    writer = ScriptedLLM(
        [
            short(
                "Mayor Ellen Park",
                ["E1"],
                steps=[
                    {
                        "question": "Who founded it?",
                        "answer": "Ellen Park",
                        "fact": "Mayor Ellen Park founded the authority",
                        "label": "E1",
                    }
                ],
            ),
            # the writer copies the answer line first, three ways: the copies are dropped
            "**Answer:** Mayor Ellen Park [E1].\n"
            "The short answer is: **Answer:** Mayor Ellen Park [E1][E1].\n"
            "The short answer is: Mayor Ellen Park [E1].\n"
            "The Northport Harbor Authority was founded in 1921 by Mayor Ellen Park [E1].",
        ]
    )
    tokens: list[str] = []
    report = _run(research_app, "short-answer", writer, tokens)
    assert report.status == "answered", report.status_reasons
    first = report.markdown.splitlines()[0]
    assert first == "**Answer:** Mayor Ellen Park [1]."
    assert report.markdown.count("**Answer:**") == 1
    # the step's fact is shown below the answer as its chain, citing its passage
    assert report.markdown.splitlines()[2:4] == [
        "*How the sources lead there:*",
        "- Mayor Ellen Park founded the authority [1].",
    ]
    assert "short answer" not in report.markdown
    assert [c.evidence_id for c in report.citations] == [founded]
    assert "".join(tokens).startswith("**Answer:** Mayor Ellen Park [E1].\n\n")
    # the answer step is schema-bound: labels are an enum, the steps come before the answer
    schema = writer.history[0].json_schema
    assert schema is not None and "E1" in str(schema)
    assert list(schema["properties"])[:3] == ["steps", "calculation", "answer"]
    # the writer is told the answer is already written and asked for its support
    body_prompt = writer.history[1].messages
    assert "Short answer (above your text): **Answer:** Mayor Ellen Park [E1]." in (
        body_prompt[-1].content
    )
    assert "Do not repeat it" in body_prompt[0].content
    # ... and to cite each hop on the way to it (MuSiQue citation recall .61 -> .64)
    assert "one sentence that cites the passage stating it" in body_prompt[0].content
    assert "Answer the question in your first sentence" not in body_prompt[0].content


def test_a_bare_figure_answer_says_what_its_passage_says(research_app: Sourcebook) -> None:
    """An answer "12.00" names no amount; its passage's "12 million" does."""
    q = "How much did dredging the main channel cost in 2020?"
    writer = ScriptedLLM([short("12.00", ["E1"]), "The main channel was dredged in 2020 [E1]."])
    report = _run(
        research_app,
        "bare-figure",
        writer,
        question=q,
        passage="Dredging of the main channel",
        finding="Dredging cost 12 million dollars in 2020.",
    )
    assert report.markdown.splitlines()[0].startswith("**Answer:** 12 million [1].")


def test_no_answer_in_the_passages_keeps_the_plain_report(research_app: Sourcebook) -> None:
    writer = ScriptedLLM(
        [
            short("", [], answered=False),
            "The Northport Harbor Authority was founded in 1921 by Mayor Ellen Park [E1].",
        ]
    )
    report = _run(research_app, "short-unanswered", writer)
    assert report.markdown.startswith("The Northport Harbor Authority was founded")
    assert "Answer the question in your first sentence" in writer.history[1].messages[0].content


def test_answer_without_labels_cites_its_last_steps(research_app: Sourcebook) -> None:
    writer = ScriptedLLM(
        [
            short(
                "Ellen Park",
                [],
                steps=[
                    {
                        "question": "Who founded the authority?",
                        "answer": "Ellen Park",
                        "fact": "Ellen Park founded the authority",
                        "label": "E1",
                    }
                ],
            ),
            "It was founded in 1921 [E1].",
        ]
    )
    report = _run(research_app, "short-steps", writer)
    assert report.markdown.startswith("**Answer:** Ellen Park [1].")


def test_a_figure_worked_out_from_the_passages_is_computed_not_read(
    research_app: Sourcebook,
) -> None:
    ships = pid_with(research_app, "4,200 ships")
    question = "How many ships a day did Northport harbor handle in 2019?"
    step = {
        "question": "How many ships did Northport harbor handle in 2019?",
        "answer": "4,200",
        "fact": "The Northport harbor handled 4,200 ships in 2019",
        "label": "E1",
    }
    writer = ScriptedLLM(
        [  # the model copies the figure right and divides wrong
            short("12 ships a day", ["E1"], calculation="4200 / 365 = 12", steps=[step]),
            "Northport handled 4,200 ships in 2019 [E1].",
        ]
    )
    report = _run(
        research_app, "short-worked", writer, None, question, "4,200 ships", "4,200 ships."
    )
    lines = report.markdown.splitlines()
    assert lines[0] == "**Answer:** 11.51 ships a day, worked out as 4,200 / 365 = 11.51 [1]."
    # the step stating the figure is shown below it, and checked: the answer stands on it
    assert lines[2:4] == [CHAIN_HEAD, "- The Northport harbor handled 4,200 ships in 2019 [1]."]
    # the claim check redoes it: the result and the 365 need no source
    assert report.status == "answered", (report.status_reasons, report.flagged_claims)
    assert [c.evidence_id for c in report.citations] == [ships]
    # no step says what 4,200 is (in the passage, but maybe another year's figure): flagged
    other = dict(step, fact="The 2019 season set a record for the port")
    for task, steps in (("short-worked-bare", []), ("short-worked-other", [other])):
        writer = ScriptedLLM(
            [
                short("12 ships a day", ["E1"], calculation="4200 / 365 = 12", steps=steps),
                "Northport handled 4,200 ships in 2019 [E1].",
            ]
        )
        report = _run(research_app, task, writer, None, question, "4,200 ships", "4,200 ships.")
        assert unverified(report.markdown.splitlines()[0], "11.51 ships a day, worked out as")
        assert [f.reason for f in report.flagged_claims if "**Answer:**" in f.sentence] == [
            WORKED_UNTRACED
        ]
    # a figure no passage holds is not worked out: the model's answer stands, and is flagged
    writer = ScriptedLLM(
        [
            short("12 ships a day", ["E1"], calculation="4,400 / 365"),
            short("12 ships a day", ["E1"]),  # asked again (no passage states 12), the same
            "Northport handled 4,200 ships in 2019 [E1].",
        ]
    )
    report = _run(
        research_app, "short-unworked", writer, None, question, "4,200 ships", "4,200 ships."
    )
    # ... and, unsupported, it is not stated as a finding: the answer line says so, the flag why
    assert unverified(report.markdown.splitlines()[0], "12 ships a day")
    assert "worked out" not in report.markdown
    assert any("12 ships" in f.sentence and "12" in f.reason for f in report.flagged_claims)
    assert report.status == "insufficient_evidence"


def test_an_answer_worked_out_as_a_change_where_none_is_asked_is_marked_unverified(
    research_app: Sourcebook,
) -> None:
    step = {
        "question": "How many ships did Northport harbor handle in 2019?",
        "answer": "4,200",
        "fact": "The Northport harbor handled 4,200 ships in 2019",
        "label": "E1",
    }
    change = short("20%", ["E1"], calculation="(4200 - 3500) / 3500 * 100 = 20", steps=[step])
    body = "Northport handled 4,200 ships in 2019 [E1]."

    def run(task: str, question: str, choices: list[str] | None = None) -> tuple[Any, list[str]]:
        writer = ScriptedLLM([change, body])
        if choices is not None:
            writer.enqueue_choices(choices)
        report = _run(research_app, task, writer, None, question, "4,200 ships", "4,200 ships.")
        asked = [c.messages[-1].content for c in writer.history if c.kind == "choose"]
        return report, asked

    # asked for a change (the figure before it given in the question), and the model agrees
    grew = "By what percentage did Northport's ships grow in 2019 from 3,500 in 2018?"
    report, asked = run("worked-change", grew)
    line = "**Answer:** 20.0%, worked out as (4,200 - 3,500) / 3,500 * 100 = 20.0% [1]."
    assert report.markdown.splitlines()[0] == line
    assert report.status == "answered", (report.status_reasons, report.flagged_claims)
    assert asked[-1].startswith(f"Question: {grew}\n") and "change between two periods" in asked[-1]
    events = {e.key: e.payload for e in research_app.task_log().events("worked-change")}
    assert events["worked_change@1"] == {"p_change": 1.0, "flagged": False}

    # the model reads the question as asking for something else: the answer is a lead only
    share = "What share of 3,500 were the ships Northport harbor handled in 2019?"
    report, asked = run("worked-change-other", share, ["yes"] * (len(asked) - 1) + ["other"])
    assert unverified(report.markdown.splitlines()[0], "20.0%, worked out as")
    (flag,) = [f for f in report.flagged_claims if "**Answer:**" in f.sentence]
    assert "change of a figure between two periods" in flag.reason
    assert "p(change) 0.00" in flag.reason and report.status == "insufficient_evidence"

    # a calculation that is no change is not asked about
    writer = ScriptedLLM([short("12", ["E1"], calculation="4200 / 365 = 12", steps=[step]), body])
    _run(research_app, "worked-ratio", writer, None, share, "4,200 ships", "4,200 ships.")
    assert not any("change between" in c.messages[-1].content for c in writer.history)
    events = {e.key: e.payload for e in research_app.task_log().events("worked-ratio")}
    assert events["worked_change@1"] == {"p_change": None, "flagged": False}


def test_talk_about_the_writing_is_left_out(research_app: Sourcebook) -> None:
    writer = ScriptedLLM(
        [
            short("Mayor Ellen Park", ["E1"]),
            # the 1.5B writer's own ways of talking about its answer, seen on benchmark runs
            "This answer shape covers the key points:\n"
            "To arrive at this answer, we need to follow these steps:\n"
            "1. The authority was founded in 1921 by Mayor Ellen Park [E1].\n"
            "To answer this question, we need to focus on the founding. "
            "It was founded in 1921 [E1].\n"
            "- Let's look at its founder. Mayor Ellen Park founded it [E1].\n"
            "| Founded | 1921 as follows: |",
        ]
    )
    report = _run(research_app, "short-method-talk", writer)
    assert report.markdown.split("\n\n")[1].splitlines() == [
        "1. The authority was founded in 1921 by Mayor Ellen Park [1].",
        "It was founded in 1921 [1].",
        "- Mayor Ellen Park founded it [1].",  # the bullet outlives its first sentence
        "| Founded | 1921 as follows: |",  # a table row is data, kept as written
    ]
    assert report.status == "answered", (report.status_reasons, report.flagged_claims)


def test_a_narrated_method_is_left_out_and_what_the_sources_lack_stays() -> None:
    draft = "\n".join(
        [
            "Explanation:",
            "To arrive at this answer, I analyzed the given passages step by step:",
            "1. Identify the founder of the authority.",
            "2. Find out which harbor the authority runs.",
            "3. Confirm that it still runs it.",
            "We can see:",
            "2. The question asks who founded the Northport Harbor Authority.",
            "Step 3: We need to find the year. It was founded in 1921 [E1].",
            "Therefore, Mayor Ellen Park is the correct answer based on the passages.",
            "Mayor Ellen Park founded it [E1], making it the most accurate answer.",
            "None of the passages names the harbor master.",
            "The final survey gave the answer to the dredging dispute in 2020.",
        ]
    )
    assert without_method_talk(draft).splitlines() == [
        "It was founded in 1921 [E1].",
        "Mayor Ellen Park founded it [E1], making it the most accurate answer.",  # cited: stays
        "None of the passages names the harbor master.",  # what the sources lack is no method
        "The final survey gave the answer to the dredging dispute in 2020.",
    ]


def test_under_an_answer_an_uncited_line_naming_only_what_the_question_names_goes() -> None:
    question = "Which harbor does the authority Ellen Park founded in Northport run?"
    draft = "\n".join(
        [
            "Ellen Park founded the Northport Harbor Authority in 1921 [E1].",
            "This confirms that Ellen Park is indeed the founder in Northport.",
            "The facts that lead to this answer are:",
            "- Ellen Park chaired it until 1931.",  # a date of its own: the claim check flags it
            "## Northport",
            "| Harbor | Berths |",
            "None of the passages names the harbor master.",
            "No passage read gives the harbor's depth.",  # what the sources lack: no claim
            "Ellen Park ran it. It has 40 berths [E2].",  # a line citing once, at its end
        ]
    )
    kept = without_method_talk(draft, question).splitlines()
    assert kept == [ln for ln in draft.splitlines() if ln[:4] not in ("This", "The ")]
    # without the question (no answer line above it), only method talk goes, as before
    assert "This confirms that Ellen Park" in without_method_talk(draft)
    # what the sources lack, said of the sources, not of the subject's own sources of anything
    assert states_absence("None of the passages names the harbor master.")
    assert not states_absence("Northport has no other sources of dredging funds.")


def test_a_sentence_says_what_its_passage_states_not_that_it_states_it() -> None:
    draft = "\n".join(
        [
            "1. The passage [E1] states that the mill closed in 1931.",
            "Step 2: We can see from the passage [E2] that Kelmor is on the Dravin River. "
            "According to the document [E3], revenue rose 4% in 2021.",
            '- The text [E4] says: "The harbor was dredged."',
            "The weir was rebuilt in 1950, as stated in the passage [E5].",
            "In the passages [E1][E2], iPhone sales rose [E2].",
            "The passage [E2] mentions the weir.",  # no claim to keep without the frame
            "Fact 3: The passage does not name the harbor master.",
            "The passage [E1] does not name the harbor master.",  # cited: a claim about [E1]
            "The passage of the Dravin River Act in 1998 ended the dispute [E1].",
            "| The passage [E1] states | 12 |",
        ]
    )
    assert without_passage_talk(draft).splitlines() == [
        "1. The mill closed in 1931 [E1].",
        "Kelmor is on the Dravin River [E2]. Revenue rose 4% in 2021 [E3].",
        '- "The harbor was dredged." [E4]',
        "The weir was rebuilt in 1950 [E5].",
        "iPhone sales rose [E2][E1].",  # a citation the sentence has already is not repeated
        "The passage [E2] mentions the weir.",
        "The sources read do not name the harbor master.",
        "The passage [E1] does not name the harbor master.",
        "The passage of the Dravin River Act in 1998 ended the dispute [E1].",
        "| The passage [E1] states | 12 |",
    ]


def test_passage_talk_is_checked_as_the_claim_it_frames(research_app: Sourcebook) -> None:
    step = {
        "question": "Who founded it?",
        "answer": "Ellen Park",
        "fact": "The passage states that Mayor Ellen Park founded the authority",
        "label": "E1",
    }
    writer = ScriptedLLM(
        [
            short("Mayor Ellen Park", ["E1"], steps=[step]),
            "We can see from the passage [E1] that the authority was founded in 1921.",
        ]
    )
    report = _run(research_app, "passage-talk", writer)
    parts = report.markdown.split("\n\n")
    assert parts[1].splitlines()[1] == "- Mayor Ellen Park founded the authority [1]."  # chain
    assert parts[2] == "The authority was founded in 1921 [1]."
    assert report.status == "answered", (report.status_reasons, report.flagged_claims)
    events = {e.key: e.payload for e in research_app.task_log().events("passage-talk")}
    assert events["passage_talk@1"]["changed"] is True


def test_labels_on_a_line_of_their_own_cite_the_line_above(research_app: Sourcebook) -> None:
    writer = ScriptedLLM(
        [short("Mayor Ellen Park", ["E1"]), "The authority was founded in 1921.\n[E1]"]
    )
    report = _run(research_app, "labels-alone", writer)
    assert report.markdown.split("\n\n")[1] == "The authority was founded in 1921 [1]."
    assert report.status == "answered", (report.status_reasons, report.flagged_claims)


def test_invalid_short_answer_twice_is_skipped_not_fatal(research_app: Sourcebook) -> None:
    writer = ScriptedLLM(
        ["not json at all", "still not json", "It was founded in 1921 by Mayor Ellen Park [E1]."]
    )
    report = _run(research_app, "short-invalid", writer)
    assert report.status == "answered", report.status_reasons
    assert report.markdown.startswith("It was founded in 1921")


def test_short_answer_naming_what_the_passage_lacks_is_withheld(research_app: Sourcebook) -> None:
    writer = ScriptedLLM(
        [
            short("Victor Hale", ["E1"]),
            short("Victor Hale", ["E1"]),  # asked again, it says the same: the first is kept
            "The Northport Harbor Authority was founded in 1921 by Mayor Ellen Park [E1].",
        ]
    )
    report = _run(research_app, "short-flagged", writer)
    assert report.status == "insufficient_evidence"
    assert any("not supported by the passages it cites" in r for r in report.status_reasons)
    assert any("Victor Hale" in f.sentence and "Hale" in f.reason for f in report.flagged_claims)
    lines = report.markdown.splitlines()
    assert unverified(lines[0], "Victor Hale")
    assert "Victor Hale" not in "\n".join(lines[1:]).split("## Flagged")[0]  # nowhere else
    # what the sources do state stays, cited
    assert "founded in 1921 by Mayor Ellen Park [1]." in report.markdown


def test_an_answer_its_passages_lack_is_asked_for_once_more(research_app: Sourcebook) -> None:
    writer = ScriptedLLM(
        [
            short("Victor Hale of Northport", ["E1"]),
            short("Mayor Ellen Park", ["E1"]),
            "The Northport Harbor Authority was founded in 1921 by Mayor Ellen Park [E1].",
        ]
    )
    report = _run(research_app, "short-retry", writer)
    first, retry, _ = generations(writer)
    assert "Your earlier answer" not in first.messages[-1].content
    told = retry.messages[-1].content
    # the question's own name (Northport) is not held against the answer
    assert 'Your earlier answer was "Victor Hale of Northport", citing [E1]' in told
    assert "do not state: Victor, Hale." in told
    assert report.markdown.startswith("**Answer:** Mayor Ellen Park [1].")
    assert report.status == "answered", (report.status_reasons, report.flagged_claims)


def test_an_answer_of_the_wrong_kind_is_asked_for_once_more(research_app: Sourcebook) -> None:
    # a question asking "when" first answered with a name, which gives no date
    question = "The Northport Harbor Authority was founded when?"
    writer = ScriptedLLM(
        [
            short("Mayor Ellen Park", ["E1"]),
            short("1921", ["E1"]),
            "The Northport Harbor Authority was founded in 1921 by Mayor Ellen Park [E1].",
        ]
    )
    report = _run(research_app, "short-kind", writer, question=question)
    told = writer.history[1].messages[-1].content
    assert (
        'Your earlier answer was "Mayor Ellen Park", but the question asks for a date or year.'
        in told
    )
    assert "do not state" not in told  # its passage does state it
    assert report.markdown.startswith("**Answer:** 1921 [1].")


def test_what_a_question_asks_for_and_an_answer_lacks() -> None:
    assert unlike_asked("When was it founded?", "Mayor Marcela Decker") == "a date or year"
    assert unlike_asked("It was started when?", "the Northport regatta") == "a date or year"
    assert unlike_asked("In what year did it open?", "the harbor") == "a date or year"
    assert (
        unlike_asked("How many shops does Corley Mart run in the county?", "Westmarch")
        == "a number"
    )
    assert unlike_asked("How much did revenue grow?", "it grew") == "a number"
    for question, answer in [
        ("When was it founded?", "1921"),
        ("When was it founded?", "in March"),
        ("When was it founded?", "the 19th century"),
        ("How many stores?", "42"),
        ("How many stores?", "none"),
        ("What happened when the river flooded?", "a fire"),  # "when" only in a clause
        ("Who founded it?", "Ellen Park"),
    ]:
        assert unlike_asked(question, answer) == "", (question, answer)


def test_an_answer_still_unsupported_cites_the_shown_passages_that_hold_it(
    research_app: Sourcebook,
) -> None:
    # the answer cited to a passage that lacks it, while another passage shown beside it
    # states it
    writer = ScriptedLLM(
        [
            short("Mayor Ellen Park", ["E2"]),
            short("Mayor Ellen Park", ["E2"]),  # told E2 lacks the name, the same again
            "It was founded in 1921 [E1].",
        ]
    )
    report, founded, dredging = _run_two_passages(research_app, "short-holders", writer)
    shown = writer.history[0].messages[-1].content
    assert "[E2] Northport Harbor Report\nNorthport Harbor Report Dredging" in shown
    # the passage that says it first, the model's own label kept after it (one document
    # version: one number)
    assert report.markdown.startswith("**Answer:** Mayor Ellen Park [1].")
    assert [c.evidence_id for c in report.citations] == [founded, dredging]
    assert not any("Ellen" in f.reason for f in report.flagged_claims)


def test_an_answer_cites_its_first_label_and_only_those_after_it_that_state_it(
    research_app: Sourcebook,
) -> None:
    # the model fills its labels: the dredging passage says nothing of the founder
    writer = ScriptedLLM([short("Mayor Ellen Park", ["E1", "E2"]), "It was founded in 1921 [E1]."])
    report, founded, _ = _run_two_passages(research_app, "short-first-label", writer)
    assert report.markdown.startswith("**Answer:** Mayor Ellen Park [1].")
    assert [c.evidence_id for c in report.citations] == [founded]
    # a later label whose passage states the answer stays, after the first
    writer = ScriptedLLM([short("Mayor Ellen Park", ["E2", "E1"]), "It was founded in 1921 [E1]."])
    report, founded, dredging = _run_two_passages(research_app, "short-later-label", writer)
    assert report.markdown.startswith("**Answer:** Mayor Ellen Park [")
    assert {c.evidence_id for c in report.citations} == {founded, dredging}


def test_an_answer_citing_nothing_cites_the_shown_passages_that_hold_it(
    research_app: Sourcebook,
) -> None:
    # no labels and no steps: the passage stating the answer is found for it, and the answer
    # is checked like any other, instead of the report losing its answer line
    writer = ScriptedLLM([short("Mayor Ellen Park", []), "It was founded in 1921 [E1]."])
    report, founded, _ = _run_two_passages(research_app, "short-no-labels", writer)
    assert report.markdown.startswith("**Answer:** Mayor Ellen Park [1].")
    assert report.citations[0].evidence_id == founded
    # an answer naming nothing any passage holds still has no line
    writer = ScriptedLLM([short("Mayor Oskel Brant", []), "It was founded in 1921 [E1]."])
    report, _, _ = _run_two_passages(research_app, "short-no-labels-unheld", writer)
    assert not report.markdown.startswith("**Answer:**")


def test_a_report_sentence_naming_what_its_citation_lacks_also_cites_the_passage_holding_it(
    research_app: Sourcebook,
) -> None:
    # a sentence naming a person cited only a passage about something else; the run had
    # fetched the passage about that person
    writer = ScriptedLLM(
        [
            short("", [], answered=False),
            "The Northport Harbor Authority, founded by Mayor Ellen Park, dredged its main "
            "channel [E2]. Then Mayor Ellen Park paid 12 million dollars in 2020 [E1].",
        ]
    )
    report, founded, dredging = _run_two_passages(research_app, "complete-cites", writer)
    assert writer.history[1].messages[-1].content.count("[E2] Northport Harbor Report") == 1
    assert [c.evidence_id for c in report.citations] == [dredging, founded]
    # the first sentence, all of which the founding passage holds, passes the check; the
    # second holds all it names only with both passages, and is flagged for it
    assert [(f.sentence.split(" [")[0], f.reason) for f in report.flagged_claims] == [
        (
            "Then Mayor Ellen Park paid 12 million dollars in 2020",
            "its own citations lack 12, 2020; the passages added for them do not hold the "
            "whole claim",
        )
    ]
    assert "channel [1]." in report.markdown and "in 2020 [1]. ⚠" in report.markdown


def test_a_supported_answer_is_not_asked_for_again(research_app: Sourcebook) -> None:
    writer = ScriptedLLM(
        [short("Mayor Ellen Park", ["E1"]), "It was founded in 1921 by Mayor Ellen Park [E1]."]
    )
    report = _run(research_app, "short-once", writer)  # _run asserts no output is left over
    assert len(generations(writer)) == 2
    assert report.markdown.startswith("**Answer:** Mayor Ellen Park [1].")


@pytest.mark.parametrize(
    "second",
    [short("", [], answered=False), "not json", short("Victor Hale and Ivo Brandt", ["E1"])],
    ids=["unanswered", "invalid", "lacks-more"],
)
def test_a_retry_no_better_than_the_first_answer_is_not_taken(
    research_app: Sourcebook, second: Any
) -> None:
    retries = [second, "still not json"] if second == "not json" else [second]
    writer = ScriptedLLM(
        [
            short("Victor Hale", ["E1"]),
            *retries,
            "The Northport Harbor Authority was founded in 1921 by Mayor Ellen Park [E1].",
        ]
    )
    report = _run(research_app, f"short-retry-{len(retries)}-{len(str(second))}", writer)
    # the first answer is kept, and, unsupported, marked not verified
    assert unverified(report.markdown.splitlines()[0], "Victor Hale")
    answers = [f.sentence for f in report.flagged_claims if "**Answer:**" in f.sentence]
    assert len(answers) == 1 and answers[0].startswith("**Answer:** Victor Hale [ev1:")


def test_answer_step_reads_the_sentences_most_related_to_the_question(
    research_app: Sourcebook, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = ScriptedLLM([short("Mayor Ellen Park", ["E1"]), "It was founded in 1921 [E1]."])
    monkeypatch.setattr(writer_module, "ANSWER_SENTENCES", 1)
    report, _, _ = _run_two_passages(research_app, "short-sentences", writer)
    answer_call, body_call = generations(writer)
    shown = answer_call.messages[-1].content
    assert "[E1] Northport Harbor Report\n" in shown and "founded in 1921 by Mayor" in shown
    assert "Dredging" not in shown
    assert answer_call.json_schema is not None and "E2" not in str(answer_call.json_schema)
    # the writer still gets every passage read, whole
    assert "Dredging" in body_call.messages[-1].content
    assert report.markdown.startswith("**Answer:** Mayor Ellen Park [1].")


def test_key_sentences_pick_the_answering_sentence_across_passages(embedder: Any) -> None:
    def ev(eid: str, title: str, text: str) -> Evidence:
        return Evidence(
            evidence_id=eid,
            passage_id=eid,
            doc_id="d",
            title=title,
            source_uri="",
            kind="text",
            text=text,
            passage_text=text,
        )

    ferry = ev(
        "a",
        "Tidewater ferry",
        "The Tidewater ferry leaves from Kessel Harbour. Its captain is Petra Lind. "
        "Timetables are posted at both piers.",
    )
    harbour = ev(
        "b",
        "Harbour works",
        "Harbour building on the coast began in 1911. Northcote, who designed Kessel Harbour, "
        "drew the first of its plans. Later engineers disputed his tide tables.",
    )
    picked = key_sentences(
        ["Who designed Kessel Harbour?"], [ferry, harbour], embedder.embed, limit=2
    )
    assert any(s.startswith("Northcote, who designed Kessel Harbour") for s in picked["b"])
    assert not any("Petra Lind" in s for s in picked.get("a", []))
    # in passage order within a passage, and nothing beyond the limit
    assert sum(len(v) for v in picked.values()) == 2


def test_a_restated_question_is_cut_from_the_answer() -> None:
    q = "Who was the first conductor of the orchestra that recorded the Tidewater Suite?"
    restated = "The first conductor of the orchestra that recorded the Tidewater Suite was Ann Lee"
    assert strip_restatement(restated, q) == "Ann Lee"
    # the question's own clause has a copula too: the cut is after the whole restatement
    # (cut at the first copula, the answer line would open "built is Edda Fenn")
    q2 = "Who is the mayor of the town where the Corran bridge is built?"
    restated = "The mayor of the town where the Corran bridge is built is Edda Fenn"
    assert strip_restatement(restated, q2) == "Edda Fenn"
    # kept whole: a subject the question does not name, no copula, or nothing after it
    kept = [
        "The average rainfall in Port Ellery is 41 inches",
        "Valdoria had trading posts in Kessin",
        "Ann Lee",
    ]
    for answer in kept:
        assert strip_restatement(answer, q) == answer


@pytest.mark.parametrize("sentences", [1, 0])
def test_under_a_short_answer_the_writer_reads_the_sentences_most_like_the_question(
    research_app: Sourcebook, sentences: int
) -> None:
    founded = pid_with(research_app, "founded in 1921")
    dredging = pid_with(research_app, "Dredging of the main channel")
    writer = ScriptedLLM([short("Mayor Ellen Park", ["E1"]), "It was founded in 1921 [E1]."])
    limits = LIM.model_copy(update={"writer_sentences": sentences})
    researcher = ScriptedLLM(
        [
            act("fetch_evidence", evidence_id=dredging),
            act("fetch_evidence", evidence_id=founded),
            act("finish"),
            notes(("Founded in 1921 by Ellen Park.", [founded]), ("Dredged in 2020.", [dredging])),
        ]
    )
    research_app.research(
        QUESTION,
        models=models(ScriptedLLM([plan(("q1", QUESTION, []))]), researcher, writer),
        task=f"writer-sentences-{sentences}",
        limits=limits,
    )
    body = generations(writer)[1].messages[-1].content
    passages = body.rsplit("<data>", 1)[1]
    assert "founded in 1921 by Mayor Ellen Park" in passages
    # one sentence: the dredging passage, least like the question, is not shown; 0: all whole
    assert ("Dredging of the main channel" in passages) == (sentences == 0)
    assert ResearchLimits().writer_sentences == 0  # whole passages: fresh runs cited more
