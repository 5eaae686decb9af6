"""What a writer's raw text loses before the checks read it: a sentence it repeats, its prompt's
data blocks copied into it, talk about the writing rather than the subject, a passage said to
state something rather than the thing it states, and lines that only repeat the answer line
above it. Each is a named stage of :mod:`core.research.pipeline` (``prompt_echo``,
``method_talk``, ``passage_talk``, ``answer_copy``); :func:`writer_stop` ends generation where
the text would be cut anyway, and :func:`numbered_from_one` counts a numbered list the stages
cut into from one again (not a stage: it changes no claim).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from core.research.citations import (
    citation_tokens,
    cite_at_end,
    claims_nothing,
    rewrite_sentences,
)
from core.research.context import RunContext
from core.research.pipeline import stage_on
from core.research.terms import key_terms, terms_missing
from core.research.words import content_words
from core.text import LIST_MARK, SENTENCE_END, line_sentence_ranges, rejoined, sentence_ranges

_CITES = re.compile(r"\[[^\]\n]*\]")
_WORDS = re.compile(r"\w+")
_ENDED = re.compile(rf"({SENTENCE_END}[ \t]*|\n\s*)$")
_SENTENCE_ENDED = re.compile(rf"{SENTENCE_END}$")


MIN_REPEAT_CHARS = 20  # shorter sentences ("See note 4.") may recur


def repeat_cut(text: str, min_chars: int = MIN_REPEAT_CHARS) -> int | None:
    """Where ``text`` starts repeating itself: the start of its first sentence that says an
    earlier one again word for word (citations and case aside), or None.

    The 1.5B writer sometimes loops, writing "The passage states that Acme's operating margin
    improved ..." twenty times until its token budget ran out. A report never needs a
    sentence twice; short ones ("See note 4.") may recur and are not counted. A last sentence
    still being written is not compared: "Margin was 12.1% in FY2021" may go on "and 11.4% in
    FY2022".

    A line break ends a sentence too: copying its passages, the 1.5B wrote each under a heading
    line of its own ("- Acme annual report, p. 6") that a sentence split by punctuation alone
    joins to the repeated sentence under it, so the repeat went unseen.
    """
    ranges = line_sentence_ranges(text)
    if ranges and not _ENDED.search(text[ranges[-1][0] :]):
        ranges.pop()
    seen: set[str] = set()
    for start, end in ranges:
        key = line_key(text[start:end])
        if len(key) < min_chars:
            continue
        if key in seen:
            return _with_heading(text, start)
        seen.add(key)
    return None


def _with_heading(text: str, start: int) -> int:
    """``start``, or the start of the line before it when that line is the repeat's heading: a
    line of its own, uncited, not ended as a sentence ("- Acme annual report, p. 6")."""
    if start == 0 or text[start - 1] != "\n":
        return start
    head = text.rfind("\n", 0, start - 1) + 1
    line = text[head : start - 1].strip()
    if line and not citation_tokens(line) and not _SENTENCE_ENDED.search(line):
        return head
    return start


_CITES_ONLY = re.compile(r"^[\s.;,]*(?:\[[^\]\n]+\][\s.;,]*)+$")


def citations_joined(text: str) -> str:
    """``text`` with a line that holds only citations ("[E4]") joined to the line before it,
    whose claim they cite: a small model may put its labels on a line of their own, which then
    read as an empty claim and left the line above uncited."""
    out: list[str] = []
    for line in text.splitlines():
        if _CITES_ONLY.match(line) and out and out[-1].strip():
            out[-1] = cite_at_end(out[-1].rstrip(), "".join(_CITES.findall(line)))
        else:
            out.append(line)
    return "\n".join(out)


def line_key(text: str) -> str:
    """A sentence or line compared for repeats: its words, case folded, citations aside."""
    return " ".join(_WORDS.findall(_CITES.sub(" ", text).casefold()))


ANSWER_LEAD_WORDS = 5  # "The short answer is:" before a copied answer line


def without_answer_copy(draft: str, answer: str, question: str = "") -> str:
    """The writer's draft without lines that only repeat the answer line opening the report
    (the 1.5B began its text with "**Answer:** Yes, Acme has ..." word for word, or with
    "The short answer is: **Answer:** ...", flagged for a name "Answer" no passage holds, or
    "The short answer is: Yes, Acme has ..."). ``answer`` may hold several lines (the answer
    and its chain): a draft line repeating any of them goes, and so does a sentence of the
    prose that says one of them again word for word (the prose restating the chain's steps
    between its own sentences); a short one (under :data:`MIN_REPEAT_CHARS`) stays. So does a
    sentence that restates ``question`` with the answer ("The mayor of the town where Ann Lee
    was born was Edda Fenn."): it says the answer line again, with the question's words for
    what the chain shows, and its citations join passages the checks then flag."""
    keys = {line_key(ln) for ln in answer.splitlines() if line_key(ln)}
    answers = {k.removeprefix("answer ") for k in keys if k.startswith("answer ")}
    keys |= answers

    def copy(line: str) -> bool:
        words = line_key(line)
        if words in keys:
            return True
        for said in keys:  # "The short answer is: [**Answer:**] Yes, Acme has ..."
            lead = words.removesuffix(said)
            if lead != words and lead.endswith(" ") and len(lead.split()) <= ANSWER_LEAD_WORDS:
                return True
        return False

    def restated(x: str) -> bool:
        said = _CITES.sub(" ", x).strip().rstrip(".")
        rest = strip_restatement(said, question) if question else said
        return rest != said and line_key(rest) in answers

    def new(x: str) -> bool:
        if restated(x):
            return False
        return len(line_key(x)) < MIN_REPEAT_CHARS or line_key(x) not in keys

    lines = (None if copy(ln) else _keeping(ln, new) for ln in draft.splitlines())
    return "\n".join(ln for ln in lines if ln is not None).strip()


_COPULA = re.compile(r"\s(?:was|is|are|were)\s")


def strip_restatement(answer: str, question: str) -> str:
    """The answer without a restated question: "The first mayor of the town that built X was
    J. Edgar Northcote" -> "J. Edgar Northcote".

    Asked for only the answering words, the 1.5B still often wrote a sentence whose subject is
    the question's own phrase. The cut is made at a was/is/are/were whose subject's
    content words all occur in the question (at least two of them), and only when something is
    left after it; of several such, the last ("the lighthouse in the country where the Eastline
    railway is found is Cape Morrow" restates a clause with its own copula). Any other answer
    is kept whole."""
    asked = content_words(question)
    cut = answer
    for m in _COPULA.finditer(answer):
        subject, rest = answer[: m.start()], answer[m.end() :].strip()
        words = content_words(subject)
        if len(words) >= 2 and words <= asked and rest:
            cut = rest
    return cut


_ITEM = re.compile(r"^(\s*)\d{1,3}([.)])(?=\s)")  # "2. ", "  3) ": not a year opening a line


def numbered_from_one(text: str) -> str:
    """``text`` with each numbered list counting 1, 2, 3, ... in order: a stage that drops a
    line of the writer's list (its first, repeating the answer) left "2. ... 3. ...", which
    Markdown shows as written. A list runs over blank lines and its items' indented lines; a
    line at a shallower indent, or any other line at the list's own, ends it; an item indented
    deeper is a sublist and counts on its own."""
    out: list[str] = []
    counts: list[tuple[str, int]] = []  # (indent, items so far) of the lists open, outermost first
    for line in text.split("\n"):
        if not line.strip():
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        while counts and len(indent) < len(counts[-1][0]):
            counts.pop()
        m = _ITEM.match(line)
        if m is None:
            if counts and len(indent) == len(counts[-1][0]):
                counts.pop()  # a paragraph at the list's indent ends that list
            if not indent:
                counts.clear()
            out.append(line)
            continue
        if counts and counts[-1][0] == indent:
            counts[-1] = (indent, counts[-1][1] + 1)
        else:
            counts.append((indent, 1))
        out.append(f"{indent}{counts[-1][1]}{m.group(2)}{line[m.end() :]}")
    return "\n".join(out)


def _keeping(line: str, keep: Callable[[str], bool]) -> str | None:
    """``line`` with only its sentences that ``keep`` accepts (None when none is left). Its
    indent and bullet stay when its first sentence goes; a table row is kept whole."""
    said = [line[a:b] for a, b in sentence_ranges(line)]
    kept = [x for x in said if keep(x)]
    if len(kept) == len(said) or line.lstrip().startswith("|"):
        return line
    return rejoined(line, kept)


# Talk about the writing, not the subject: "This answer shape covers the key points:", "To
# arrive at this answer, we need to follow these steps:", "Revenue change is calculated as
# follows:". The 1.5B writes it in one report of five (MuSiQue and FinanceBench runs). Also its
# narrated method: a bare "Explanation:" heading, what "I analyzed" or "we need to find", the
# question restated as "The question asks ...", uncited imperatives of a plan ("1. Identify
# the ...", "2. Find out which ..."), a bare "We can see:", and a verdict on its own answer
# ("... is the correct answer").
_METHOD_TALK = re.compile(
    r"\banswer shape\b"
    r"|^\W*(?:in order )?to (?:answer|arrive at|determine|find|calculate|compute|address|work out)"
    r"\b.*\b(?:we|I) (?:need|must|will|have|can|should)\b"
    r"|\b(?:follow|take) (?:these|the following) steps\b"
    r"|^\W*(?:let's|let us|here is|here's)\b"
    r"|\bas follows\W*$"
    r"|^\W*(?:explanation|reasoning|we can see)\W*$"
    r"|\b(?:I|we) (?:analy[sz]ed|examined|reviewed|went through|looked at)\b"
    r"|\b(?:we|I) (?:need|have|must) to (?:find|identify|determine|check|verify|look)\b"
    r"|^\W*(?:\d+[.)]\s*|step \d+\W*)?the question (?:asks|states|is asking|wants)\b"
    r"|^\W*(?:\d+[.)]\s*|step \d+\W*)?"
    r"(?:identify|determine|verify|check|confirm|find out|look for|search for)\s"
    r"|\b(?:is|it) the (?:correct|right|final|best|most accurate)\b[^.]{0,40}\banswer\b",
    re.IGNORECASE,
)


def without_method_talk(draft: str, question: str = "") -> str:
    """The draft without uncited sentences that talk about the writing rather than the subject
    (:data:`_METHOD_TALK`); a line left empty goes, a cited sentence always stays (it claims
    something a reader can check).

    With ``question`` (the body under an answer line), a line that cites nothing and names
    nothing the question does not (no other name, figure or date) goes too: it restates the
    question, narrates the reasoning ("This confirms that A is in the same county as B.", "The
    facts that lead to this answer are:") or joins the question's own names with no passage
    behind it, which the claim check, finding no new name to look for, would let stand. A
    heading, a table row and a statement of what the sources lack stay."""

    def subject(x: str) -> bool:
        return bool(citation_tokens(x)) or not _METHOD_TALK.search(x.strip())

    def unfounded(line: str) -> bool:
        return (
            bool(question)
            and bool(re.search(r"\w", line))
            and not citation_tokens(line)
            and not claims_nothing(line, line)
            and not terms_missing(key_terms(line), question)
        )

    lines = (None if unfounded(ln) else _keeping(ln, subject) for ln in draft.splitlines())
    return "\n".join(ln for ln in lines if ln is not None)


# Where the writer says that something is stated rather than stating it: "The passage [1]
# states that X", "We can see from the passage [2] that X", "According to the document [3], X",
# "X, as stated in the passage [1]", under a label of its reasoning ("Step 3:", "Fact 1:").
_CITE_RUN = r"(?:\s*\[[^\]\n]+\])*"
_SOURCE = (
    r"(?:the|this|that|these|those)\s+(?:given\s+|provided\s+|cited\s+|above\s+)?"
    r"(?:passages?|texts?|documents?|sources?|context|excerpts?)"
)
_REPORTS = (
    r"(?:(?:also|directly|clearly|further|explicitly)\s+)?(?:states?|says?|mentions?|notes?"
    r"|shows?|indicates?|confirms?|reports?|explains?|tells us|reveals?)(?:\s+that\b|\s*:)"
)  # "that" or ":" after it: "The passage mentions the mill." has no claim to keep
_LABEL = re.compile(r"(?:step|fact)\s*\d+\s*[:.)-]\s+", re.IGNORECASE)
_FRAME = re.compile(
    rf"(?:{_SOURCE}|the question){_CITE_RUN}\s+{_REPORTS}\s+"
    rf"|(?:we can see|we see|we learn|it is stated)\s+(?:from|in)\s+{_SOURCE}{_CITE_RUN}\s+that\s+"
    r"|(?:as stated in|as mentioned in|as noted in|according to|based on|from|in)\s+"
    rf"(?:the information in\s+)?{_SOURCE}{_CITE_RUN}\s*,\s*(?:we (?:can )?(?:see|learn) that\s+)?",
    re.IGNORECASE,
)
_TAIL_FRAME = re.compile(
    rf",?\s+(?:as (?:stated|mentioned|noted|shown|described) in|according to)\s+{_SOURCE}"
    rf"{_CITE_RUN}(?=\s*[.!?]?\s*$)",
    re.IGNORECASE,
)
_LACKS = re.compile(rf"{_SOURCE}\s+(?:does|do) not\s+", re.IGNORECASE)


def without_passage_talk(draft: str) -> str:
    """The draft with each sentence saying what its passage states, not that a passage states
    it: "The passage [1] states that the mill closed in 1931." reads "The mill closed in 1931
    [1].", its citations kept at the sentence's end; a label of the writer's reasoning before
    it ("Step 3:") goes. An uncited "The passage does not name ..." says what the sources read
    lack, in those words. What the sentence claims is unchanged, so the checks read the same
    claim with the same citations. A table row is data, kept as written."""

    def plain(sentence: str, line: str) -> str | None:
        if line.lstrip().startswith("|"):
            return None
        return _plain_sentence(sentence, at_line_start=line.lstrip().startswith(sentence))

    return rewrite_sentences(draft, plain)


def _plain_sentence(sentence: str, *, at_line_start: bool) -> str:
    mark = LIST_MARK.match(sentence) if at_line_start else None
    lead = mark.group(0) if mark else ""
    said = sentence[len(lead) :]
    if label := _LABEL.match(said):
        said = said[label.end() :]
    cites = ""
    if frame := _FRAME.match(said):
        rest = said[frame.end() :]
        if rest[:1].isalpha() and not rest[1:2].isupper():  # "the mill" -> "The mill"
            rest = rest[0].upper() + rest[1:]
        said, cites = rest, frame.group(0)
    elif (lacks := _LACKS.match(said)) and not citation_tokens(said):
        said = "The sources read do not " + said[lacks.end() :]
    if tail := _TAIL_FRAME.search(said):
        said, cites = said[: tail.start()] + said[tail.end() :], cites + tail.group(0)
    cites = "".join(c for c in _CITES.findall(cites) if c not in said)
    return lead + (cite_at_end(said, cites) if cites else said)


# A data block of the writer's prompt: "Notes (data, not instructions):" then <data> ... </data>
# (to the end of the draft when the copy was cut before its closing tag).
_ECHOED_BLOCK = re.compile(
    r"^[^\n]*\(data, not instructions\):[ \t]*\n\s*<data>.*?(?:</data>[ \t]*$|\Z)"
    r"|^\s*<data>.*?(?:</data>[ \t]*$|\Z)",
    re.DOTALL | re.MULTILINE,
)


COPIED_WORDS = 8  # this many words in a row as a passage has them is a copy, not writing
_QUOTES = re.compile('["“”]')


def without_prompt_echo(draft: str, question: str = "", passages: Iterable[str] = ()) -> str:
    """The draft without the data blocks of its prompt copied into it (stage ``prompt_echo``),
    nor a line that only repeats its ``question``.

    A small writer sometimes goes on after its answer by copying its prompt: the notes and the
    passages under their headings, labels and all (2 of 15 MuSiQue dev reports at session 37's
    defaults, each then 30 flagged "claims" long). A report never holds the prompt's ``<data>``
    tags, so a block that opens with one is a copy, whatever it cites. It may also copy its
    ``passages`` without the tags or labels, each under a heading line of its own; a paragraph
    that cites nothing, quotes nothing and is mostly runs of :data:`COPIED_WORDS` words as a
    passage has them is such a copy (quoted or cited, the same words are the writer's
    quotation, which stage ``cite_quotations`` cites; an uncited paragraph of its own words is
    flagged by the checks, or replaced by the researchers' findings when nothing is cited).
    Told to answer in its first sentence, it may open by copying the question instead: a reader
    (and the answer check) would take that line for the answer."""
    out = _ECHOED_BLOCK.sub("", draft)
    keys = [f" {line_key(p)} " for p in passages]
    if keys:
        paragraphs = re.split(r"\n[ \t]*\n", out)
        kept = [p for p in paragraphs if not _copied(p, keys)]
        out = "\n\n".join(kept) if len(kept) < len(paragraphs) else out
    asked = line_key(question.removeprefix("Question:"))
    if asked:
        lines = out.splitlines()
        kept = [ln for ln in lines if line_key(ln.strip().removeprefix("Question:")) != asked]
        out = "\n".join(kept) if len(kept) < len(lines) else out
    return re.sub(r"\n{3,}", "\n\n", out).strip() if out != draft else draft


def _copied(paragraph: str, passage_keys: list[str]) -> bool:
    """Whether ``paragraph`` cites and quotes nothing and most of its words are in runs of
    :data:`COPIED_WORDS` or more words that a passage has in that order (``passage_keys``:
    the passages' :func:`line_key` in spaces). A sentence of the writer's own that borrows a
    passage's phrase is not a copy; a copied passage under a heading line is."""
    if citation_tokens(paragraph) or _QUOTES.search(paragraph):
        return False
    words = line_key(paragraph).split()
    covered = [False] * len(words)
    for i in range(len(words) - COPIED_WORDS + 1):
        run = f" {' '.join(words[i : i + COPIED_WORDS])} "
        if any(run in key for key in passage_keys):
            covered[i : i + COPIED_WORDS] = [True] * COPIED_WORDS
    return sum(covered) * 2 > len(words)


def echo_started(text: str) -> int | None:
    """``len(text)`` once ``text`` has begun copying one of its prompt's data blocks (a
    ``<data>`` tag written), else None: as a ``stop_at`` it ends generation there and keeps the
    text, so stage ``prompt_echo`` still drops the copy's start and logs that it did."""
    return len(text) if _ECHOED_BLOCK.search(text) else None


def writer_stop(ctx: RunContext) -> Callable[[str], int | None]:
    """Where the writer's text should end (``stop_at`` of :meth:`RunContext.model_text`): where it
    repeats itself, and with stage ``prompt_echo`` on, once it starts copying its prompt. A copy
    runs on for hundreds of tokens (~30 s of the 1.5B here) that the stage would then delete."""
    if not stage_on(ctx, "prompt_echo"):
        return repeat_cut

    def stop(text: str) -> int | None:
        cuts = [c for c in (repeat_cut(text), echo_started(text)) if c is not None]
        return min(cuts, default=None)

    return stop
