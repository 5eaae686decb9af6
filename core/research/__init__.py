"""Research runs: planner, concurrent researchers, writer, verified citations.

Public entry points: :func:`run_research`, :func:`clarify_questions`, :func:`draft_plan`,
:class:`ResearchRequest` and the schemas in :mod:`core.research.schemas`.
"""

from core.research.run import (
    ResearchRequest,
    clarify_questions,
    draft_plan,
    run_research,
    task_name,
)
from core.research.schemas import Boundary, Report, ResearchLimits, ResearchPlan, ResearchQuery

__all__ = [
    "Boundary",
    "Report",
    "ResearchLimits",
    "ResearchPlan",
    "ResearchQuery",
    "ResearchRequest",
    "clarify_questions",
    "draft_plan",
    "run_research",
    "task_name",
]
