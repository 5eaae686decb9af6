"""``sourcebook mcp`` over stdio with scripted role models, for the research tool's tests.

The MCP server runs in its own process, so a test cannot hand it ScriptedLLM objects; this
launcher builds them from a JSON file (``{"planner": [...], "researcher": [...], "writer":
[...]}``, the planner also serving as the default role, as ``research_fixtures.models`` does)
and then serves exactly as the command does.

    python tests/mcp_scripted_server.py HOME SCRIPT.json [--collection NAME ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from core.logging_setup import native_log_defaults


def main() -> int:
    native_log_defaults()
    p = argparse.ArgumentParser()
    p.add_argument("home", type=Path)
    p.add_argument("script", type=Path)
    p.add_argument("--collection", action="append", default=[])
    args = p.parse_args()

    from core.mcp_server import serve
    from core.mcp_session import EvidenceSession
    from core.research.schemas import Boundary
    from core.service import Sourcebook
    from models.llm import LLM
    from models.scripted import ScriptedLLM

    answers = json.loads(args.script.read_text(encoding="utf-8"))
    llms: dict[str, LLM] = {r: ScriptedLLM(a, name=f"scripted-{r}") for r, a in answers.items()}
    llms["default"] = llms["planner"]
    app = Sourcebook(args.home, llms=llms)
    session = EvidenceSession(app, Boundary(collections=tuple(args.collection)))
    try:
        serve(session)
    finally:
        session.close()
        app.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
