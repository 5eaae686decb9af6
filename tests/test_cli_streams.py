"""What the installed ``sourcebook`` script leaves on stdout and stderr, run as a real process:
quiet when its reader stops early (``| head``), and no native library chatter on stderr."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.service import Sourcebook

pytestmark = pytest.mark.real_model

REPO = Path(__file__).resolve().parent.parent
WORDS = ["harbor", "rail", "budget", "audit", "committee", "river", "bridge", "cargo", "port"]
RECORDS = 400
LANCE_NOISE = ("Deprecation", "_distance", "_score")


def sourcebook_cmd() -> list[str]:
    """The console script users run; ``python -m desktop.entry`` where it is not installed."""
    script = Path(sys.executable).with_name("sourcebook")
    return [str(script)] if script.exists() else [sys.executable, "-m", "desktop.entry"]


def child_env(**extra: str) -> dict[str, str]:
    """This environment without LANCEDB_LOG (the tests' conftest sets it; a user's shell does
    not), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "LANCEDB_LOG"}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO), **extra)
    return env


@pytest.fixture(scope="module")
def big_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A library of 400 short synthetic records: a search for all of them prints ~150 kB,
    more than a pipe holds, so a reader that stops early really cuts the writer off. Built with
    the settings' embedder, the one the child processes search with."""
    root = tmp_path_factory.mktemp("streams")
    rng = random.Random(7)
    corpus = root / "records.jsonl"
    with corpus.open("w", encoding="utf-8") as f:
        for i in range(RECORDS):
            text = f"Record {i}. " + " ".join(rng.choice(WORDS) for _ in range(80)) + "."
            f.write(json.dumps({"id": f"r{i}", "title": f"Record {i}", "text": text}) + "\n")
    app = Sourcebook(root / "home")
    try:
        assert not app.add_jsonl(corpus, id_field="id").failed
        assert len(app.search("harbor cargo", k=RECORDS)) > 300
    finally:
        app.close()
    yield root / "home"


def test_search_piped_into_a_reader_that_stops_early_exits_quietly(
    big_home: Path, tmp_path: Path
) -> None:
    err = tmp_path / "stderr.txt"
    with err.open("wb") as err_file:
        proc = subprocess.Popen(
            [*sourcebook_cmd(), "--home", str(big_home), "search", "harbor cargo", "-k", "400"],
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=err_file,
            cwd=REPO,
        )
        assert proc.stdout is not None
        first = proc.stdout.readline()  # like `| head -1`: one line, then the pipe closes
        proc.stdout.close()
        code = proc.wait(timeout=180)
    stderr = err.read_text(encoding="utf-8", errors="replace")
    assert first.startswith(b" 1. ev1:"), (first, stderr)
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert "Exception ignored" not in stderr, stderr
    assert code == 141, stderr


@pytest.mark.parametrize("lancedb_log", [None, "warn"])
def test_search_prints_no_lance_warnings(big_home: Path, lancedb_log: str | None) -> None:
    """Unset (a user's shell): the app's default keeps lance quiet. ``warn`` (a user who asked
    for lance's warnings): the queries give lance nothing to warn about."""
    extra = {} if lancedb_log is None else {"LANCEDB_LOG": lancedb_log}
    for mode in ("hybrid", "vector", "keyword"):
        done = subprocess.run(
            [*sourcebook_cmd(), "--home", str(big_home), "search", "harbor cargo", "--mode", mode],
            env=child_env(**extra),
            capture_output=True,
            text=True,
            timeout=180,
            cwd=REPO,
        )
        assert done.returncode == 0, done.stderr
        assert "Record" in done.stdout
        noisy = [ln for ln in done.stderr.splitlines() if any(w in ln for w in LANCE_NOISE)]
        assert noisy == [], done.stderr


# A query whose projection leaves out ``_distance`` makes lance warn (at its default level).
OLD_STYLE_QUERY = textwrap.dedent(
    """
    import sys
    if sys.argv[1] == "entry":
        import desktop.entry
        assert "lancedb" not in sys.modules, "the entry point imported lancedb too early"
        try:
            desktop.entry.main(["--home", sys.argv[2], "collections"])
        except SystemExit:
            pass
    import lancedb
    db = lancedb.connect(sys.argv[2] + "/scratch-lance")
    table = db.create_table("t", data=[{"vector": [0.1, 0.2], "n": 1}])
    table.search([0.1, 0.2]).select(["n"]).to_arrow()
    """
)


def test_the_entry_point_defaults_lance_logs_to_errors(tmp_path: Path) -> None:
    """The console script sets lance's log level before lancedb reads it (on import)."""

    def run(how: str) -> str:
        home = tmp_path / how
        home.mkdir()
        done = subprocess.run(
            [sys.executable, "-c", OLD_STYLE_QUERY, how, str(home)],
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=180,
            cwd=REPO,
        )
        assert done.returncode == 0, done.stderr
        return done.stderr

    assert "did not include `_distance`" in run("bare")  # lance does warn by default
    assert "_distance" not in run("entry")
