"""The report's research trail: for each research step, the finding that answered it, cited.

A multi-hop answer rests on the facts found on the way ("The Eastline railway runs through
Norland", then "Northport is the capital of Norland"). The 1.5B writer states the last hop and
cites its passage, and leaves the bridge out: of the 37 gold passages of the MuSiQue
evaluation, the runs fetched 33 and the reports cited 24. Each researcher's notes already hold
the finding that answered its query, tied to the passages it read, so the trail is built from
them without a model call, and only from findings their passages bear out:

- a finding about its own query (:meth:`ResearchNotes.on_topic`) that names something neither
  the question nor the query names, in its passages' text (a restated question, "The author
  of the play a citizen of", tells nothing, and a filing's title only where to look) and does not
  merely say what is missing;
- cited with only the passages that hold all its names, numbers and dates, and passing the
  claim check the whole report passes (so the trail adds no flagged claim);
- about the question: joined to it, or to the report and its passages, by a chain of shared
  names (a worker asked only "What is the author's name?" noted the name of some other
  passage's author);
- once: a finding naming nothing an earlier line did not, or one the report already states
  from the same passages, is left out.

A finding can still be a small model's misreading of its passage; the trail shows it with the
passage, so the reader can check it, as with every other cited sentence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

import numpy as np

from core.evidence import Evidence
from core.research.citations import check_claims, cited_text, states_absence
from core.research.schemas import ResearchNotes
from core.research.terms import key_terms, terms_missing
from core.research.words import unaccented

TRAIL_HEADING = "## Research trail"
TRAIL_MAX_LINES = 8
_WORD = re.compile(r"\w+")


def trail_lines(
    question: str,
    notes: list[ResearchNotes],
    evidence: Callable[[str], Evidence | None],
    embed: Callable[[list[str]], np.ndarray] | None,
    report: str = "",
    report_ids: Collection[str] = (),
) -> list[str]:
    """The trail's lines, ``"Claim. [ev1:...]"``, at most one per step in the order the steps
    ran (see the module docstring). ``report`` is the text the trail follows and
    ``report_ids`` the evidence ids it cites."""
    found: list[tuple[str, list[str], list[str]]] = []  # (line, its terms, its ids)
    for n in notes:
        if not n.failed:
            step = _step_line(question, n, evidence, embed)
            if step is not None and terms_missing(step[1], "\n".join(x for x, _, _ in found)):
                found.append(step)
    cited = [ev.text for ev in map(evidence, report_ids) if ev is not None]
    linked = _linked(found, "\n".join([question, report, *cited]))
    return [
        line
        for k, (line, terms, ids) in enumerate(found)
        if k in linked and not (set(ids) <= set(report_ids) and not terms_missing(terms, report))
    ][:TRAIL_MAX_LINES]


def _step_line(
    question: str,
    n: ResearchNotes,
    evidence: Callable[[str], Evidence | None],
    embed: Callable[[list[str]], np.ndarray] | None,
) -> tuple[str, list[str], list[str]] | None:
    """The step's first on-topic finding that tells something and that its passages bear out,
    as (line, its terms, the ids it cites), or None."""
    for f in n.on_topic():
        claim = " ".join(f.claim.split()).rstrip(" .,;:")
        if not claim or states_absence(claim):
            continue
        terms = key_terms(claim)
        cited = {i: ev for i in f.evidence_ids if (ev := evidence(i)) is not None}
        news = terms_missing(terms, f"{question}\n{n.query}")
        if not news or not any(
            len(terms_missing(news, ev.text)) < len(news) for ev in cited.values()
        ):
            # names nothing the question and the query do not (a restatement), or only what
            # its passages' titles name: "Acme's free cash flow can be found in the 2022
            # Form 10-K" says where to look, not what is there
            continue
        ids = [i for i, ev in cited.items() if not terms_missing(terms, cited_text(ev))]
        if not ids:
            continue
        line = f"{claim}. " + "".join(f"[{i}]" for i in ids)
        if not check_claims(line, evidence, embed):
            return line, terms, ids
    return None


def _linked(found: list[tuple[str, list[str], list[str]]], start: str) -> set[int]:
    """Indexes of the lines joined to ``start`` (the question, the report and the passages it
    cites) by a chain of shared names: "Ann Lake was born in Northport" joins the question
    about Ann Lake, and "The Eastline railway ends at Northport" joins that line. A finding
    sharing no name with the chain ("The author's name is John Doe", from a worker asked only
    "What is the author's name?") is about something else. Names compare with their case
    ("Society" is not the question's "society")."""
    linked: set[int] = set()
    known = set(_WORD.findall(unaccented(start)))
    grew = True
    while grew:
        grew = False
        for k, (line, terms, _ids) in enumerate(found):
            if k not in linked and any(set(_WORD.findall(unaccented(t))) <= known for t in terms):
                linked.add(k)
                known.update(_WORD.findall(unaccented(line)))
                grew = True
    return linked


def trail_section(lines: list[str]) -> str:
    """The trail as the Markdown section that follows the report's text ("" with no lines)."""
    if not lines:
        return ""
    return f"{TRAIL_HEADING}\n\n" + "\n".join(f"- {line}" for line in lines) + "\n"
