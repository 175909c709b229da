"""Answers to queries: written by the worker that ran the query task, taken once by the server
waiting for them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._database import Cursor


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryAnswer:
    result: bytes | None
    error_type: str | None = None
    message: str | None = None


def put_query_answer_txn(cur: Cursor, task_id: int, answer: QueryAnswer, now: datetime) -> None:
    cur.execute(
        "INSERT INTO amber_query_results (task_id, result, error_type, message, created_at)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (task_id, answer.result, answer.error_type, answer.message, now),
    )


def take_query_answer_txn(cur: Cursor, task_id: int) -> QueryAnswer | None:
    cur.execute(
        "DELETE FROM amber_query_results WHERE task_id = %s RETURNING result, error_type, message",
        (task_id,),
    )
    row = cur.fetchone()
    if row is None:
        return None
    return QueryAnswer(
        result=None if row[0] is None else bytes(row[0]), error_type=row[1], message=row[2]
    )


def take_query_answers_txn(cur: Cursor, task_ids: list[int]) -> dict[int, QueryAnswer]:
    """Take every answer that has arrived among `task_ids`."""
    cur.execute(
        "DELETE FROM amber_query_results WHERE task_id = ANY(%s)"
        " RETURNING task_id, result, error_type, message",
        (task_ids,),
    )
    return {
        row[0]: QueryAnswer(
            result=None if row[1] is None else bytes(row[1]), error_type=row[2], message=row[3]
        )
        for row in cur.fetchall()
    }


def drop_read_tasks_txn(cur: Cursor, task_ids: list[int]) -> None:
    """Forget query or check tasks nobody waits for any more (and any late answers)."""
    cur.execute(
        "DELETE FROM amber_tasks WHERE task_id = ANY(%s) AND kind IN ('query', 'check')",
        (task_ids,),
    )
    cur.execute("DELETE FROM amber_query_results WHERE task_id = ANY(%s)", (task_ids,))
