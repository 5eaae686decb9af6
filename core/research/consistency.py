"""Answer consistency: a report's body may not answer its question otherwise than its answer line.

A small writer can open with "**Answer:** Ana Ruiz [1]." and go on "The first president of the
guild was Omar Velt [2].": each sentence may pass its own checks, and the reader is left with two
answers.
A body sentence *restates the question* when it holds most of the question's content words
(:data:`RESTATES`); when it does, the names and figures it adds are its answer to the question. If
none of them is in the answer line, or the answer line says no answer is established, it is
flagged with the answer line it disagrees with. Sentences that carry one hop of the chain ("the
guild's journal is published in Oslo") hold only part of the question and are left alone; the
research trail is the record of what each step found and is not read.
"""

from __future__ import annotations

from collections.abc import Collection

from core.research.citations import cited_sentences, excerpt
from core.research.schemas import FlaggedClaim
from core.research.terms import key_terms, terms_missing
from core.research.trail import TRAIL_HEADING
from core.research.words import content_words

#: Share of the question's content words a sentence holds to be read as answering the question.
RESTATES = 0.75


def restates(sentence: str, question: str) -> bool:
    """Whether ``sentence`` holds at least :data:`RESTATES` of ``question``'s content words (two
    or more of them: a question of one content word is restated by too much)."""
    asked = content_words(question)
    return len(asked) >= 2 and len(content_words(sentence) & asked) >= RESTATES * len(asked)


def answers_given(sentence: str, question: str) -> list[str]:
    """The names and figures ``sentence`` asserts beyond those ``question`` holds."""
    return terms_missing(key_terms(sentence), question)


def other_answers(
    markdown: str,
    question: str,
    answer_mark: str,
    *,
    withheld: bool = False,
    skip: Collection[str] = (),
) -> list[FlaggedClaim]:
    """The body sentences of ``markdown`` (not in ``skip``) that answer ``question`` with none of
    the answer line's names or figures, or, when the answer line is ``withheld`` (no answer
    established), that answer it at all. Without an answer line, or with one naming nothing
    beyond the question (a yes or no), nothing is compared."""
    body = markdown.partition(TRAIL_HEADING)[0]
    answer = next((ln for ln in body.splitlines() if ln.lstrip().startswith(answer_mark)), None)
    if not answer_mark or answer is None:
        return []
    given = [] if withheld else answers_given(answer.replace(answer_mark, " "), question)
    if not given and not withheld:
        return []
    held = " ".join(given)
    out: list[FlaggedClaim] = []
    for sentence, line, ids in cited_sentences(body):
        if line == answer or sentence in skip or not restates(sentence, question):
            continue
        says = answers_given(sentence, question)
        if not says or (given and len(terms_missing(says, held)) < len(says)):
            continue  # nothing asserted, or one of the answer line's own names or figures
        reason = (
            f"it answers the question otherwise than the answer line ({excerpt(answer)})"
            if given
            else "it answers the question, but the checks found no answer the passages establish"
        )
        out.append(FlaggedClaim(sentence=sentence, evidence_ids=ids, reason=reason))
    return out
