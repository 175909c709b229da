"""The one replay path: a workflow activation (history in, commands out, matched position by
position) and an activity attempt, used alike by live workers, queries, checks and offline bundle
replay.

Rule: imports `sandbox` and `model` only; no database, no gRPC.
"""

from __future__ import annotations

from ._activity import (
    ActivityAttempt,
    ActivityReport,
    activity_request,
    run_activity,
    run_activity_request,
)
from ._divergence import WRONG_RESULT_FAULTS, first_divergence
from ._memo import ReplayMemo
from ._replay import (
    QueryNotPublished,
    QueryResult,
    WorkflowActivation,
    WorkflowStep,
    activate_workflow,
    answer_query,
)

__all__ = [
    "WRONG_RESULT_FAULTS",
    "ActivityAttempt",
    "ActivityReport",
    "QueryNotPublished",
    "QueryResult",
    "ReplayMemo",
    "WorkflowActivation",
    "WorkflowStep",
    "activate_workflow",
    "activity_request",
    "answer_query",
    "first_divergence",
    "run_activity",
    "run_activity_request",
]
