"""A recorded MCP session: a client of ``sourcebook mcp`` builds a cited answer whose Sources
list comes only from the server's ``citation_markdown`` fields.

What an assistant does with the server, without a model, so the record is deterministic: the
bundled sample reports go into a fresh library (collection "samples"); the SDK's client starts
``sourcebook mcp --collection samples`` over stdio; it lists the tools, discovers passages for
the question, fetches the best ones (one more cut short, to show that a partial fetch carries no
citation_markdown), checks the ids with ``check_citations``, and writes an answer of sentences
quoted from the valid passages, each cited [n], and a Sources list of ``n. citation_markdown``
(one number per distinct line). Every step's request and result is printed; the transcript is
also saved to ``bench/results/mcp_session.md`` (with the checkout's path as ``<checkout>``).

Run (from the checkout):
    HF_HUB_OFFLINE=1 LANCEDB_LOG=error .venv/bin/python bench/mcp_session.py
``--home DIR`` keeps the library in DIR and reuses it; ``--question`` asks something else.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.service import Sourcebook

REPO = Path(__file__).resolve().parents[1]
SAMPLES = ["DOL2022.pdf", "NARA2022.pdf"]
QUESTION = "What is the mission of the National Archives (NARA) in its 2022-2026 strategic plan?"


class Transcript:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)


def _library(home: Path) -> None:
    app = Sourcebook(home)
    try:
        if not app.documents():
            changes = app.add(
                [REPO / "resources" / "samples" / n for n in SAMPLES], collection="samples"
            )
            assert not changes.failed, changes.failed
    finally:
        app.close()


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]{4,}", text.lower())) - {"what", "which", "does", "with"}


def _sentence(text: str, question: str) -> str | None:
    """The passage's full sentence (six words or more) sharing most words with the question, if
    it shares two: what a careful client would quote. None for a passage that says too little."""
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split()))]
    scored = [
        (len(_words(question) & _words(s)), s)
        for s in sentences
        if len(s.split()) >= 6 and s[-1] in ".!?"
    ]
    best = max(scored, default=(0, ""), key=lambda t: t[0])
    return best[1] if best[0] >= 2 else None


async def session(home: Path, question: str, out: Transcript) -> None:
    env = {k: v for k, v in os.environ.items() if k.startswith(("SOURCEBOOK_", "HF_", "LANCEDB"))}
    env.setdefault("HOME", os.environ.get("HOME", ""))
    params = StdioServerParameters(
        command=str(Path(sys.executable).parent / "sourcebook"),
        args=["--home", str(home), "mcp", "--collection", "samples"],
        env=env,
    )
    out.say(f"$ sourcebook --home {home.name} mcp --collection samples   (stdio, SDK client)")

    async def call(tool: str, **arguments: Any) -> Any:
        out.say(f"\n> {tool} {json.dumps(arguments)}")
        result = await client.call_tool(tool, arguments)
        if result.is_error:
            out.say("< error: " + " ".join(getattr(c, "text", "") for c in result.content))
            return None
        return result.structured_content

    async with Client(params, read_timeout_seconds=120) as client:
        tools = (await client.list_tools()).tools
        out.say("< tools: " + ", ".join(t.name for t in tools))

        found = await call("discover_evidence", query=question, k=5)
        for h in found["hits"]:
            out.say(f"< {h['evidence_id']}  {h['title']}, p. {h['pages']}: {h['snippet'][:90]}…")

        cited: list[str] = []
        for hit in found["hits"][:4]:
            got = await call("fetch_evidence", evidence_id=hit["evidence_id"])
            out.say(
                f"< complete={got['complete']} characters={got['characters']} "
                f"citation_markdown={json.dumps(got['citation_markdown'], ensure_ascii=False)}"
            )
            cited.append(got["evidence_id"])
        last = found["hits"][-1]["evidence_id"]
        cut = await call("fetch_evidence", evidence_id=last, max_characters=80)
        out.say(
            f"< complete={cut['complete']} citation_markdown={json.dumps(cut['citation_markdown'])}"
        )
        never = "ev1:00000000deadbeef"
        checked = await call("check_citations", cited_ids=[*cited, never])
        for v in checked["valid"]:
            out.say(f"< valid   [{v['number']}] {v['evidence_id']}")
        for i in checked["invalid"]:
            out.say(f"< invalid {i['evidence_id']}: {i['reason']}")

    # The answer: quoted sentences of the valid passages, each cited by its record's number; the
    # Sources list is the records' citation_markdown, one line per number, and nothing else.
    # A passage with no sentence worth quoting is left out (its number with it).
    out.say(f"\n## Answer (built from the session)\n\n**Question:** {question}\n")
    quoted = [(v, q) for v in checked["valid"] if (q := _sentence(v["quote"], question))]
    numbers = {
        line: n
        for n, line in enumerate(dict.fromkeys(v["citation_markdown"] for v, _ in quoted), 1)
    }
    for v, q in quoted:
        out.say(f"- “{q}” [{numbers[v['citation_markdown']]}]")
    out.say("\n## Sources\n")
    for line, n in numbers.items():
        out.say(f"{n}. {line}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--home", type=Path, help="Keep the library here (reused when present).")
    p.add_argument("--question", default=QUESTION)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="sourcebook-mcp-") as scratch:
        home = args.home or Path(scratch) / "home"
        _library(home)
        out = Transcript()
        anyio.run(session, home, args.question, out)
    result = REPO / "bench" / "results" / "mcp_session.md"
    text = "\n".join(out.lines).replace(str(REPO), "<checkout>")  # no machine's own path
    result.write_text("```\n" + text + "\n```\n", encoding="utf-8")
    print(f"\nwrote {result.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
