"""bench/research_speed.py: how series figures are saved (no model, no eval run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import bench_module


def _fig(p50: float, p90: float, n: int = 5) -> dict[str, Any]:
    return {"questions": n, "median_s": p50, "p50_s": p50, "p90_s": p90, "mean_s": p50}


def test_asks_top_figures_are_the_slower_sets_and_a_lever_leaves_the_top_alone() -> None:
    speed = bench_module("research_speed")
    saved: dict[str, Any] = {}
    speed.merge(saved, "default", "ask", _fig(11.0, 14.0, 15))
    speed.merge(saved, "default", "ask_financebench", _fig(20.0, 30.0, 37))
    assert saved["ask"]["musique"] == {"questions": 15, "p50_s": 11.0, "p90_s": 14.0}
    assert saved["ask"]["financebench"]["p50_s"] == 20.0
    assert (saved["ask"]["questions"], saved["ask"]["p50_s"], saved["ask"]["p90_s"]) == (52, 20, 30)
    speed.merge(saved, "default", "ask", _fig(25.0, 28.0, 15))  # a new MuSiQue series replaces
    assert (saved["ask"]["p50_s"], saved["ask"]["p90_s"]) == (25.0, 30.0)
    speed.merge(saved, "default", "musique", _fig(100.0, 120.0, 15))
    assert saved["musique"] == {"questions": 15, "median_s": 100.0, "p90_s": 120.0, "mean_s": 100.0}
    speed.merge(saved, "faster", "musique", _fig(50.0, 60.0, 15))
    assert saved["musique"]["median_s"] == 100.0
    assert saved["levers"]["faster"]["musique"]["median_s"] == 50.0


def test_a_series_given_under_another_sets_name_is_refused(tmp_path: Path) -> None:
    result = tmp_path / "r.json"
    result.write_text(json.dumps({"summary": {"dataset": "financebench"}, "questions": []}))
    out = tmp_path / "speed.json"
    with pytest.raises(SystemExit):
        bench_module("research_speed").main(
            ["--set", "ask", str(result), str(tmp_path), "--out", str(out)]
        )
    assert not out.exists()
