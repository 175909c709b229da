"""A worker's calls (reports, heartbeats, query answers): one form, `ReportCalls`, sent as unary
calls by `AmberClient` or as items of the worker's stream by `WorkStream`."""

from __future__ import annotations

from abc import ABC, abstractmethod

from amber.abi import ActivityOutcome, ErrorInfo
from amber.runtime.api import amber_pb2 as pb
from amber.runtime.api import mapping as m
from amber.runtime.model import (
    ActivationStats,
    FailureReport,
    HeartbeatAck,
    LeasedTask,
    Reported,
    ThenWorkflow,
    WorkflowCompletion,
    from_ms,
)


def workflow_request(
    task: LeasedTask,
    done: WorkflowCompletion,
    *,
    worker_id: str,
    next_queue: str | None,
    stats: ActivationStats | None,
) -> pb.CompleteTaskRequest:
    """A workflow activation's report."""
    request = pb.CompleteTaskRequest(
        stats=m.stats_to_pb(task, stats), workflow=m.workflow_completion_to_pb(done)
    )
    _fill(request, task, worker_id, next_queue)
    return request


def activity_request(
    task: LeasedTask,
    outcome: ActivityOutcome,
    *,
    worker_id: str,
    next_queue: str | None,
    stats: ActivationStats | None,
    then: ThenWorkflow | None,
) -> pb.CompleteTaskRequest:
    """An activity attempt's report, with the run's next activation when the worker ran it."""
    request = pb.CompleteTaskRequest(
        stats=m.stats_to_pb(task, stats), activity=m.activity_completion_to_pb(outcome)
    )
    if then is not None:
        m.then_workflow_to_pb(request, then)
    _fill(request, task, worker_id, next_queue)
    return request


def failure_request(
    task: LeasedTask, report: FailureReport, *, worker_id: str, next_queue: str | None
) -> pb.FailTaskRequest:
    """A failed activation's report."""
    request = pb.FailTaskRequest(
        stats=m.stats_to_pb(task, None, fuel_used=report.fuel_used or 0),
        failure=m.failure_report_to_pb(report),
    )
    _fill(request, task, worker_id, next_queue)
    return request


def heartbeat_request(
    task: LeasedTask, *, worker_id: str, details: bytes | None
) -> pb.HeartbeatRequest:
    """A lease extension (with `details`: an activity's own heartbeat)."""
    return pb.HeartbeatRequest(
        task_id=task.task_id,
        fencing=task.fencing,
        worker_id=worker_id,
        details=details or b"",
        has_details=details is not None,
    )


def query_request(
    task: LeasedTask,
    *,
    worker_id: str,
    result: bytes | None,
    error: ErrorInfo | None,
    ended: str,
) -> pb.CompleteQueryRequest:
    """A query's (or a replay check's) answer."""
    return pb.CompleteQueryRequest(
        task_id=task.task_id,
        fencing=task.fencing,
        worker_id=worker_id,
        result=result or b"",
        error=m.error_to_pb(error),
        ended=ended,
    )


def reported(task: LeasedTask, response: pb.CompleteTaskResponse) -> Reported:
    """What a report's answer says: the next task, the events appended, combined or not."""
    return m.reported_from_pb(task.run_id, response)


def next_task(response: pb.CompleteTaskResponse | pb.FailTaskResponse) -> LeasedTask | None:
    """The next task leased with a report (eager dispatch), if any."""
    return m.leased_from_pb(response.next) if response.HasField("next") else None


def heartbeat_ack(response: pb.HeartbeatResponse) -> HeartbeatAck:
    return HeartbeatAck(
        lease_expires_at=from_ms(response.lease_expires_ms),
        cancel_requested=response.cancel_requested,
    )


def _fill(
    request: pb.CompleteTaskRequest | pb.FailTaskRequest,
    task: LeasedTask,
    worker_id: str,
    next_queue: str | None,
) -> None:
    """Fill in what every task outcome carries: the lease, the worker, the next task wanted."""
    request.task_id = task.task_id
    request.fencing = task.fencing
    request.worker_id = worker_id
    request.run_id = task.run_id
    request.want_next = next_queue is not None
    request.next_queue = next_queue or ""


class ReportCalls(ABC):
    """The calls a worker reports with, over a transport that only sends the requests."""

    @abstractmethod
    def _send_completion(self, request: pb.CompleteTaskRequest) -> pb.CompleteTaskResponse: ...

    @abstractmethod
    def _send_failure(self, request: pb.FailTaskRequest) -> pb.FailTaskResponse: ...

    @abstractmethod
    def _send_heartbeat(self, request: pb.HeartbeatRequest) -> pb.HeartbeatResponse: ...

    @abstractmethod
    def _send_answer(self, request: pb.CompleteQueryRequest) -> None: ...

    # The three outcome calls take `next_queue`: when given, the server leases this worker's
    # next task of that queue in the same transaction and returns it (eager dispatch), which
    # saves a poll round trip and a transaction per task.

    def complete_workflow(
        self,
        task: LeasedTask,
        done: WorkflowCompletion,
        *,
        worker_id: str,
        next_queue: str | None = None,
        stats: ActivationStats | None = None,
    ) -> LeasedTask | None:
        """Report a workflow activation; with `next_queue`, lease the next task in the same call."""
        return self.report_workflow(
            task, done, worker_id=worker_id, next_queue=next_queue, stats=stats
        ).next

    def report_workflow(
        self,
        task: LeasedTask,
        done: WorkflowCompletion,
        *,
        worker_id: str,
        next_queue: str | None = None,
        stats: ActivationStats | None = None,
    ) -> Reported:
        """`complete_workflow`, with the events it appended (for a worker keeping the run's
        history)."""
        request = workflow_request(
            task, done, worker_id=worker_id, next_queue=next_queue, stats=stats
        )
        return reported(task, self._send_completion(request))

    def complete_activity(
        self,
        task: LeasedTask,
        outcome: ActivityOutcome,
        *,
        worker_id: str,
        next_queue: str | None = None,
        stats: ActivationStats | None = None,
    ) -> LeasedTask | None:
        """Report an activity's outcome; with `next_queue`, lease the next task in the same call."""
        return self.report_activity(
            task, outcome, worker_id=worker_id, next_queue=next_queue, stats=stats
        ).next

    def report_activity(
        self,
        task: LeasedTask,
        outcome: ActivityOutcome,
        *,
        worker_id: str,
        next_queue: str | None = None,
        stats: ActivationStats | None = None,
        then: ThenWorkflow | None = None,
    ) -> Reported:
        """`complete_activity`; with `then`, the run's next workflow activation, run by the
        worker after this activity, applied with it if the run has not moved on
        (`Reported.combined` says whether it was)."""
        request = activity_request(
            task, outcome, worker_id=worker_id, next_queue=next_queue, stats=stats, then=then
        )
        return reported(task, self._send_completion(request))

    def fail_task(
        self,
        task: LeasedTask,
        report: FailureReport,
        *,
        worker_id: str,
        next_queue: str | None = None,
    ) -> LeasedTask | None:
        """Report a failed attempt; with `next_queue`, lease the next task in the same call."""
        request = failure_request(task, report, worker_id=worker_id, next_queue=next_queue)
        return next_task(self._send_failure(request))

    def heartbeat(
        self, task: LeasedTask, *, worker_id: str, details: bytes | None = None
    ) -> HeartbeatAck:
        """Extend the task's lease (with `details`: an activity's own heartbeat).

        Raises `LeaseLost` if the task is no longer ours; says if cancellation was requested.
        """
        request = heartbeat_request(task, worker_id=worker_id, details=details)
        return heartbeat_ack(self._send_heartbeat(request))

    def complete_query(
        self,
        task: LeasedTask,
        *,
        worker_id: str,
        result: bytes | None,
        error: ErrorInfo | None,
        ended: str = "",
    ) -> None:
        """Answer a query task (`result` is the published value, or `error` why there is none)."""
        self._send_answer(
            query_request(task, worker_id=worker_id, result=result, error=error, ended=ended)
        )
