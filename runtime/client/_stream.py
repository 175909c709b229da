"""A worker's stream to the server: its reports, heartbeats and query answers travel as batches
on one bidirectional gRPC stream instead of a unary call each.

Callers block as they would on the unary call and get the same answer or the same typed error
(each item is answered on its own). While a batch is with the server, the items that arrive
queue up and leave together as the next batch, once its answer is back: the busier the worker,
the larger its batches, and a lone item goes at once. The server records a batch's reports in
one transaction (group commit).

A broken stream fails the items waiting on it with the error it ended with (`RetryableError`
when the server went away) and the next item opens a new stream. Resending an item whose answer
was lost is safe, as it is for the unary calls: the report carries its lease's fencing token,
so a report the server already applied is refused as `LeaseLost`, never applied twice.

Rejected: several batches in flight at once (the server answers a stream's batches in order,
so a second batch would only wait there, smaller than it could have been); grpc.aio (the worker
is threaded, and on a stream the two APIs cost the same per message).
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from amber.abi import AmberError, RetryableError
from amber.runtime.api import STREAM_MESSAGE_BUDGET, error_from_rpc, error_of
from amber.runtime.api import amber_pb2 as pb
from amber.runtime.model import Wakeup
from amber.runtime.tracing import current_traceparent

from ._reports import ReportCalls

OpenStream = Callable[[Iterator[pb.WorkBatch]], Any]
"""Opens the `Work` call on an iterator of batches: an iterator of answers that can `cancel()`."""


class WorkStream(ReportCalls):
    """A worker's reports over its streams, in batches. Thread-safe: every slot of a worker
    sends through the same one. Its methods are `AmberClient`'s for the same calls.

    `lines` streams are open at once; an item goes to one without a batch at the server if there
    is one, else to the one with the fewest items waiting. The server records each stream's
    batches one after another, so a second stream lets it record one batch while the next one
    gathers on the other."""

    def __init__(
        self, open_stream: OpenStream, *, timeout_s: float, max_batch: int = 64, lines: int = 2
    ) -> None:
        self._open = open_stream
        self._timeout = timeout_s
        self._max_batch = max(1, max_batch)
        self._lock = threading.Lock()
        self._lines: list[_Line | None] = [None] * max(1, lines)
        self._ids = itertools.count(1)
        self._closed = False
        self._counting = threading.Lock()
        self.batches = 0
        """Batches sent (for the metrics and the benchmark: items per batch)."""
        self.items = 0

    def close(self) -> None:
        """End the stream; items still waiting fail with `RetryableError`."""
        with self._lock:
            self._closed = True
            lines, self._lines = self._lines, [None] * len(self._lines)
        for line in lines:
            if line is not None:
                line.close()

    def _ask(self, item: pb.WorkItem) -> pb.WorkAnswer:
        waiter = _Waiter()
        with self._lock:
            if self._closed:
                raise RetryableError("the worker's stream is closed")
            item.id = next(self._ids)
            item.traceparent = current_traceparent()  # the item's run's trace, as a call's would
            line = self._line_for_next()
            line.send(item, waiter)
        try:
            return waiter.wait(self._timeout)
        except _Unanswered:
            # Nothing came back on this stream within the timeout: its connection may be dead
            # without anyone having said so. Give it up, so that the next item opens a new one
            # instead of queueing behind a batch nobody will answer (the items it held fail
            # and are resent: a report the server did apply is refused by its fencing token).
            line.close()
            raise

    def _line_for_next(self) -> _Line:
        """The line the next item goes to (opening one where a line is missing or ended)."""
        best: _Line | None = None
        for i, line in enumerate(self._lines):
            if line is None or line.ended is not None:
                line = self._lines[i] = _Line(self._open, self._max_batch, self._sent)
            if best is None or line.load < best.load:
                best = line
        assert best is not None
        return best

    def _sent(self, items: int) -> None:
        with self._counting:  # each line's sender thread counts here
            self.batches += 1
            self.items += items

    # -- the calls (`ReportCalls`), each as an item ----------------------------------------

    def _send_completion(self, request: pb.CompleteTaskRequest) -> pb.CompleteTaskResponse:
        return self._ask(pb.WorkItem(complete=request)).complete

    def _send_failure(self, request: pb.FailTaskRequest) -> pb.FailTaskResponse:
        return self._ask(pb.WorkItem(fail=request)).fail

    def _send_heartbeat(self, request: pb.HeartbeatRequest) -> pb.HeartbeatResponse:
        return self._ask(pb.WorkItem(heartbeat=request)).heartbeat

    def _send_answer(self, request: pb.CompleteQueryRequest) -> None:
        self._ask(pb.WorkItem(query=request))


class _Unanswered(RetryableError):
    """An item's answer did not come within the stream's timeout."""


class _Waiter:
    """One item's caller, waiting for its answer."""

    __slots__ = ("_answer", "_done", "_error")

    def __init__(self) -> None:
        self._done = Wakeup()
        self._answer: pb.WorkAnswer | None = None
        self._error: AmberError | None = None

    def answer(self, answer: pb.WorkAnswer) -> None:
        self._answer = answer
        self._done.wake()

    def fail(self, error: AmberError) -> None:
        self._error = error
        self._done.wake()

    def wait(self, timeout_s: float) -> pb.WorkAnswer:
        if not self._done.wait(timeout_s):
            raise _Unanswered(f"no answer on the worker's stream within {timeout_s:g} s")
        if self._error is not None:
            raise self._error
        answer = self._answer
        assert answer is not None
        if answer.WhichOneof("answer") == "error":
            e = answer.error
            code = getattr(grpc.StatusCode, e.code, grpc.StatusCode.INTERNAL)
            raise error_of(code, e.message, e.type, e.fields)
        return answer


class _Line:
    """One open stream: the batches it sends, the answers it reads, the items awaiting them."""

    def __init__(self, open_stream: OpenStream, max_batch: int, sent: Callable[[int], None]):
        self._max_batch = max_batch
        self._sent = sent
        self._queue: queue.SimpleQueue[pb.WorkItem | None] = queue.SimpleQueue()
        self._window = threading.Semaphore(1)
        """One batch at the server at a time: the next one gathers what comes meanwhile."""
        self._lock = threading.Lock()
        self._waiting: dict[int, _Waiter] = {}
        self._at_server = False
        self.ended: AmberError | None = None
        """Why the stream ended (None while it is open)."""
        self._answers = open_stream(self._batches())
        threading.Thread(target=self._read, name="amber-work-stream", daemon=True).start()

    @property
    def load(self) -> tuple[bool, int]:
        """How busy it is: a batch at the server, then the items waiting for an answer."""
        return self._at_server, len(self._waiting)

    def send(self, item: pb.WorkItem, waiter: _Waiter) -> None:
        with self._lock:
            if self.ended is not None:
                raise self.ended
            self._waiting[item.id] = waiter
        self._queue.put(item)

    def close(self) -> None:
        self._queue.put(None)
        self._answers.cancel()

    def _batches(self) -> Iterator[pb.WorkBatch]:
        """What gRPC sends: each batch as soon as the one before it is answered."""
        carried: pb.WorkItem | None = None  # the item that did not fit in the last batch
        while True:
            first = carried if carried is not None else self._queue.get()
            carried = None
            if first is None:
                return
            self._window.acquire()
            if self.ended is not None:
                return
            items = [first]
            size = first.ByteSize()
            while len(items) < self._max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # ends the stream after this batch
                    break
                if size + item.ByteSize() > STREAM_MESSAGE_BUDGET:
                    carried = item  # it leads the next batch
                    break
                items.append(item)
                size += item.ByteSize()
            self._sent(len(items))
            self._at_server = True
            yield pb.WorkBatch(items=items)

    def _read(self) -> None:
        error: AmberError
        try:
            for answers in self._answers:
                if not answers.more:  # the batch is answered: the next one may go
                    self._at_server = False
                    self._window.release()
                for answer in answers.answers:
                    with self._lock:
                        waiter = self._waiting.pop(answer.id, None)
                    if waiter is not None:
                        waiter.answer(answer)
            error = RetryableError("the server ended the worker's stream")
        except grpc.RpcError as exc:
            error = error_from_rpc(exc)
            if isinstance(error, RetryableError) or exc.code() is grpc.StatusCode.CANCELLED:
                error = RetryableError(f"the worker's stream broke: {error}")
        except Exception as exc:  # a transport bug must not strand the waiting slots
            error = RetryableError(f"the worker's stream failed: {exc!r}")
        with self._lock:
            self.ended = error
            waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            waiter.fail(error)
        self._window.release()
        self._queue.put(None)
