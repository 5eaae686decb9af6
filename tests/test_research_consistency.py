"""A report's body may not answer its question otherwise than its answer line (synthetic text)."""

from __future__ import annotations

from core.research.consistency import other_answers, restates
from core.research.trail import TRAIL_HEADING

MARK = "**Answer:**"
Q = "Who was the first president of the guild that publishes the Harbor Review?"
A, B = "[ev1:00000000000000a1]", "[ev1:00000000000000b2]"


def test_a_sentence_restating_the_question_with_another_answer_is_flagged() -> None:
    report = (
        f"{MARK} Ana Ruiz {A}.\n\n"
        f"The Harbor Review is published by the Tern Guild {B}. "
        f"The first president of the guild that publishes the Harbor Review was Omar Velt {A}. "
        f"The first president of the Tern Guild, which publishes the Harbor Review, was Ana Ruiz "
        f"{A}."
    )
    (flag,) = other_answers(report, Q, MARK)
    assert flag.sentence.startswith("The first president of the guild that publishes") and (
        "Omar Velt" in flag.sentence
    )
    assert flag.evidence_ids == ["ev1:00000000000000a1"]
    assert "otherwise than the answer line (**Answer:** Ana Ruiz" in flag.reason
    # a hop of the chain holds only part of the question: not an answer to it
    assert not restates("The Harbor Review is published by the Tern Guild.", Q)


def test_an_answer_line_withheld_means_any_answer_in_the_body_is_flagged() -> None:
    report = (
        f"{MARK} The sources read do not establish an answer.\n\n"
        f"The first president of the guild that publishes the Harbor Review was Omar Velt {A}."
    )
    assert other_answers(report, Q, MARK) == []  # names nothing beyond the question: no answer
    (flag,) = other_answers(report, Q, MARK, withheld=True)
    assert "no answer the passages establish" in flag.reason


def test_nothing_is_compared_without_an_answer_line_and_the_trail_is_not_read() -> None:
    body = f"The first president of the guild that publishes the Harbor Review was Omar Velt {A}."
    assert other_answers(body, Q, MARK) == []
    trail = f"{MARK} Ana Ruiz {A}.\n\n{TRAIL_HEADING}\n\n- {body}\n"
    assert other_answers(trail, Q, MARK) == []
    # already flagged by another check: not flagged twice
    report = f"{MARK} Ana Ruiz {A}.\n\n{body}"
    assert other_answers(report, Q, MARK, skip={body}) == []
    assert len(other_answers(report, Q, MARK)) == 1
