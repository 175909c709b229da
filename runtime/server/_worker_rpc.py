"""What a worker's reports, heartbeats and query answers do, whether they arrive as unary calls
or as the items of its stream (`Work`).

On the stream, a batch's reports are recorded in one transaction (group commit), each under
its own checks, and each item gets its own answer: the response the unary call would have
returned, or the typed error it would have raised. One item's refusal never fails the others.
Heartbeats and query answers are rare beside reports and keep a transaction each.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from amber.abi import AmberError, InvalidInput
from amber.history import LeaseLost, QueryAnswer
from amber.runtime.api import STREAM_MESSAGE_BUDGET, error_parts, status_of
from amber.runtime.api import amber_pb2 as pb
from amber.runtime.api import mapping as m
from amber.runtime.model import Recorded, to_ms
from amber.runtime.services import Claim, Report, TaskService, check_queue

_log = logging.getLogger("amber.runtime.server._servicer")

ITEM_METHODS = {
    "complete": "CompleteTask",
    "fail": "FailTask",
    "heartbeat": "Heartbeat",
    "query": "CompleteQuery",
}
"""A stream item's kind → the unary call it stands for (its authorisation is that call's)."""


MAX_GROUP = 64
"""Reports recorded in one transaction at most: a longer batch (a worker's own is at most 64
items) is recorded as several groups, so that no one transaction holds locks for long."""


class WorkerCalls:
    """The worker-facing calls other than polling, for the unary methods and the stream."""

    def __init__(
        self,
        tasks: TaskService,
        default_queue: str,
        checks_credentials: bool,
        seen: Callable[[str, str, str], None] | None = None,
    ) -> None:
        """`seen(worker_id, queue, pool)`: told of a worker serving a queue (the status board),
        by each report that asks for the worker's next task: a busy worker never polls."""
        self._tasks = tasks
        self._default_queue = default_queue
        self._checks_credentials = checks_credentials
        self._seen = seen
        self._streams: dict[Any, list[bool]] = {}
        """Open streams (their gRPC contexts), each with whether a batch of it is being answered."""
        self._streams_lock = threading.Lock()
        self._ending = threading.Event()

    def holder(self, worker_id: str) -> str | None:
        """Whom a report must come from: on a server that checks credentials, the worker (its
        id prefixed with its principal's) holding the lease; elsewhere the fencing token alone
        names the lease, as before."""
        return worker_id if self._checks_credentials else None

    def _claim(self, want: bool, queue: str, worker_id: str) -> Claim | None:
        if not want:
            return None
        if not worker_id:
            raise InvalidInput("worker_id is required to receive a next task")
        queue = queue or self._default_queue
        check_queue(queue)
        if self._seen is not None:
            self._seen(worker_id[:256], queue, "main")
        return Claim(queue=queue, worker=worker_id)

    # -- one call each ---------------------------------------------------------------------

    def complete(self, request: pb.CompleteTaskRequest) -> pb.CompleteTaskResponse:
        """`CompleteTask`: record a workflow activation or an activity's outcome."""
        what = f"{request.WhichOneof('completion')} report"
        with self._tasks.refused_report(request.run_id, request.worker_id, what):
            recorded = self._tasks.record(self._completion(request))
        return m.recorded_to_pb(recorded)

    def fail(self, request: pb.FailTaskRequest) -> pb.FailTaskResponse:
        """`FailTask`: record a failed activation."""
        with self._tasks.refused_report(request.run_id, request.worker_id, "failure report"):
            recorded = self._tasks.record(self._failure(request))
        return _failed_to_pb(recorded)

    def heartbeat(self, request: pb.HeartbeatRequest) -> pb.HeartbeatResponse:
        """`Heartbeat`: extend a lease (with details: an activity's own heartbeat)."""
        ack = self._tasks.heartbeat(
            task_id=request.task_id,
            fencing=request.fencing,
            details=request.details if request.has_details else None,
            holder=self.holder(request.worker_id),
        )
        return pb.HeartbeatResponse(
            lease_expires_ms=to_ms(ack.lease_expires_at), cancel_requested=ack.cancel_requested
        )

    def complete_query(self, request: pb.CompleteQueryRequest) -> pb.CompleteQueryResponse:
        """`CompleteQuery`: hand a query's (or a replay check's) answer over."""
        if request.HasField("error"):
            answer = QueryAnswer(
                result=None, error_type=request.error.type, message=request.error.message
            )
        else:
            answer = QueryAnswer(result=request.result, message=request.ended)
        self._tasks.complete_query(
            task_id=request.task_id,
            fencing=request.fencing,
            answer=answer,
            holder=self.holder(request.worker_id),
        )
        return pb.CompleteQueryResponse()

    def _completion(self, request: pb.CompleteTaskRequest) -> Report:
        which = request.WhichOneof("completion")
        claim = self._claim(request.want_next, request.next_queue, request.worker_id)
        holder = self.holder(request.worker_id)
        if which == "workflow":
            return self._tasks.workflow_report(
                task_id=request.task_id,
                fencing=request.fencing,
                done=m.workflow_completion_from_pb(request.workflow),
                claim_next=claim,
                fuel=request.stats.fuel_used,
                holder=holder,
                run_id=request.run_id,
            )
        if which == "activity":
            return self._tasks.activity_report(
                task_id=request.task_id,
                fencing=request.fencing,
                outcome=m.activity_completion_from_pb(request.activity),
                claim_next=claim,
                fuel=request.stats.fuel_used,
                then=m.then_workflow_from_pb(request),
                holder=holder,
                run_id=request.run_id,
            )
        raise InvalidInput("CompleteTask needs a workflow or an activity completion")

    def _failure(self, request: pb.FailTaskRequest) -> Report:
        return self._tasks.failure_report(
            task_id=request.task_id,
            fencing=request.fencing,
            failure=m.failure_report_from_pb(request.failure),
            worker=request.worker_id,
            claim_next=self._claim(request.want_next, request.next_queue, request.worker_id),
            holder=self.holder(request.worker_id),
            run_id=request.run_id,
        )

    # -- the stream ------------------------------------------------------------------------

    def stream(self, batches: Iterator[pb.WorkBatch], context: Any) -> Iterator[pb.WorkAnswers]:
        """`Work`: answer each batch with one message, in the order the batches came."""
        busy = [False]
        with self._streams_lock:
            self._streams[context] = busy
        try:
            for batch in batches:
                with self._streams_lock:
                    busy[0] = True
                try:
                    yield from split_answers(self.batch(batch))
                finally:
                    with self._streams_lock:
                        busy[0] = False
                if self._ending.is_set():
                    return  # answered its last batch: the worker moves on
        finally:
            with self._streams_lock:
                self._streams.pop(context, None)

    def end_streams(self) -> int:
        """End every open stream (the server is stopping): an idle one at once, a busy one
        once its batch is answered, so that no committed batch loses its answers. Its worker
        reconnects, to another server if there is one. Returns how many were open."""
        self._ending.set()
        with self._streams_lock:
            idle = [context for context, busy in self._streams.items() if not busy[0]]
            count = len(self._streams)
        for context in idle:
            context.cancel()
        return count

    def batch(self, batch: pb.WorkBatch) -> pb.WorkAnswers:
        """Answer one batch: its reports recorded together, its other items one by one."""
        answers: list[pb.WorkAnswer | None] = [None] * len(batch.items)
        reports: list[Report] = []
        at: list[int] = []
        for i, item in enumerate(batch.items):
            try:
                which = item.WhichOneof("call")
                if which == "complete":
                    reports.append(self._completion(item.complete))
                    at.append(i)
                elif which == "fail":
                    reports.append(self._failure(item.fail))
                    at.append(i)
                elif which == "heartbeat":
                    answers[i] = pb.WorkAnswer(id=item.id, heartbeat=self.heartbeat(item.heartbeat))
                elif which == "query":
                    answers[i] = pb.WorkAnswer(id=item.id, query=self.complete_query(item.query))
                else:
                    raise InvalidInput("a stream item needs a report, a heartbeat or an answer")
            except Exception as exc:
                answers[i] = _refused(item.id, exc)
        for start in range(0, len(reports), MAX_GROUP):  # a long batch: several groups
            group = reports[start : start + MAX_GROUP]
            try:
                results = self._tasks.record_group(group)
            except Exception as exc:  # the whole group failed (the database is down, say)
                results = [exc] * len(group)
            for i, result in zip(at[start : start + MAX_GROUP], results, strict=True):
                answers[i] = self._reported(batch.items[i], result)
        return pb.WorkAnswers(answers=[a for a in answers if a is not None])

    def _reported(self, item: pb.WorkItem, result: Recorded | Exception) -> pb.WorkAnswer:
        request = item.complete if item.WhichOneof("call") == "complete" else item.fail
        if isinstance(result, LeaseLost):
            what = (
                "failure report"
                if isinstance(request, pb.FailTaskRequest)
                else f"{request.WhichOneof('completion')} report"
            )
            try:
                self._tasks.note_refused(request.run_id, request.worker_id, what, result)
            except Exception:  # the refusal stands whether or not its note could be written
                _log.exception("a refused report could not be noted")
        if isinstance(result, Exception):
            return _refused(item.id, result)
        if item.WhichOneof("call") == "complete":
            return pb.WorkAnswer(id=item.id, complete=m.recorded_to_pb(result))
        return pb.WorkAnswer(id=item.id, fail=_failed_to_pb(result))


def split_answers(answers: pb.WorkAnswers, budget: int | None = None) -> Iterator[pb.WorkAnswers]:
    """A batch's answers as messages of about `budget` bytes at most (`STREAM_MESSAGE_BUDGET`;
    one answer alone may be larger), all but the last marked `more`."""
    budget = STREAM_MESSAGE_BUDGET if budget is None else budget
    if answers.ByteSize() <= budget:
        yield answers
        return
    part: list[pb.WorkAnswer] = []
    size = 0
    for answer in answers.answers:
        grows = answer.ByteSize() + 8
        if part and size + grows > budget:
            yield pb.WorkAnswers(answers=part, more=True)
            part, size = [], 0
        part.append(answer)
        size += grows
    yield pb.WorkAnswers(answers=part)


def _failed_to_pb(recorded: Recorded) -> pb.FailTaskResponse:
    return pb.FailTaskResponse(next=m.claimed_to_pb(recorded.next) if recorded.next else None)


def _refused(item_id: int, exc: Exception) -> pb.WorkAnswer:
    """The answer of an item refused by `exc`: the error its unary call would have raised."""
    if not isinstance(exc, AmberError):
        _log.error("internal error in a stream item", exc_info=exc)
        error = pb.WorkError(message="internal error in a stream item", code="INTERNAL")
        return pb.WorkAnswer(id=item_id, error=error)
    name, message, fields = error_parts(exc)
    error = pb.WorkError(type=name, message=message, fields=fields, code=status_of(exc).name)
    return pb.WorkAnswer(id=item_id, error=error)
