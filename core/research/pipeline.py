"""The optional stages between the writer's draft and the report, by name, in the order they run.

Each can be switched off (``ResearchLimits.stages_off``; the settings' ``research.stages_off``;
``sourcebook eval --off NAME``), so each can be measured on its own (``bench/ablation.py``); a
stage that runs writes a task-log event (``stage_result``, key ``NAME@RUN``) saying what it
changed. The steps that keep a report valid (citations resolved, checked and repaired,
renumbered; links sanitised) are not stages: they never switch off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.research.citations import cited_sentences, excerpt
from core.research.context import RunContext

#: name -> what the stage does, in run order.
STAGES: dict[str, str] = {
    "row_lookup": (
        "answer one line item asked for one year (or its change, a ratio of line items, whether "
        "either rose, a measure the question defines) off the statement rows naming them in "
        "the filings read"
    ),
    "step_answers": "answer a chain of plan steps with its last step's answer, each step cited",
    "short_answer": "open the report with a short answer worked hop by hop (one model call)",
    "body": "under a short answer, the writer's prose (one model call; off: answer and chain)",
    "notes_body": "under a short answer, notes a passage holds, not the writer's prose (off)",
    "prompt_echo": "drop the prompt's data blocks (notes, passages) the writer copied",
    "cite_quotations": "cite the passage a quotation or whole sentence was copied from, if uncited",
    "method_talk": (
        "drop uncited sentences about the writing rather than the subject, and under an answer "
        "uncited lines naming nothing beyond the question"
    ),
    "passage_talk": "say what a passage states, not that it states it, citations kept",
    "answer_copy": (
        "drop draft lines and sentences that only repeat the answer (also in the question's "
        "words) or its chain"
    ),
    "trail": "end the report with the research trail: each step's cited finding",
    "narrow_citations": "keep, of a sentence's citations, those that hold all it names",
    "complete_citations": (
        "also cite fetched passages holding what a sentence's citations lack; a chain link, "
        "the one holding all it states instead"
    ),
    "claim_check": "flag sentences whose names and figures their cited passages lack",
    "answer_subject": "tie the answer line to what the question names by a passage read, else flag",
    "support_check": "flag claims the model judges their cited passages do not state",
    "chain_support": (
        "let the answer stand on its checked links; joined or worked ones only so, and none "
        "whose links all fail"
    ),
    "answer_kind": "flag an answer line that is not the kind of thing the question asks for",
    "worked_change": "flag an answer worked out as a change when the question asks for another",
    "withhold_answer": "mark an answer line a check flags as not verified, in words",
    "answer_consistency": "flag body sentences answering the question otherwise than the answer",
    "unstated_claims": (
        "drop body sentences whose cited passages the checks find do not state them (a name or "
        "figure not in them, or the support check's sure no), listed as removed under Flagged "
        "claims"
    ),
    "asked_read": (
        "under a withheld answer, a read passage's sentence on each thing the question names "
        "that no cited passage names"
    ),
}


def known_stages(names: list[str]) -> list[str]:
    """``names`` without repeats, or ValueError naming the unknown ones and the stages."""
    unknown = [n for n in names if n not in STAGES]
    if unknown:
        raise ValueError(
            f"unknown research stage(s) {', '.join(unknown)}; the stages are " + ", ".join(STAGES)
        )
    return list(dict.fromkeys(names))


def stage_on(ctx: RunContext, name: str) -> bool:
    """Whether stage ``name`` runs (the three older switches still count)."""
    if name not in STAGES:
        raise KeyError(f"no research stage {name!r}")
    if name in ctx.limits.stages_off:
        return False
    return bool(getattr(ctx.limits, name, True))


def changes(before: str, after: str) -> dict[str, Any]:
    """What a stage did to a text: sentences removed and added (up to five of each, cut)."""
    was = [s for s, _, _ in cited_sentences(before)]
    now = [s for s, _, _ in cited_sentences(after)]
    gone = [s for s in was if s not in now]
    new = [s for s in now if s not in was]
    return {
        "changed": before != after,
        "removed": len(gone),
        "added": len(new),
        "examples_removed": [excerpt(s) for s in gone[:5]],
        "examples_added": [excerpt(s) for s in new[:5]],
    }


def record(ctx: RunContext, name: str, payload: dict[str, Any]) -> None:
    ctx.log.append(ctx.task, ctx.run, "stage_result", f"{name}@{ctx.run}", payload)


def apply(ctx: RunContext, name: str, text: str, fn: Callable[[str], str]) -> str:
    """``fn(text)`` if stage ``name`` is on (and what it changed logged), else ``text``."""
    if not stage_on(ctx, name):
        return text
    out = fn(text)
    record(ctx, name, changes(text, out))
    return out
