"""One workflow activation's replay state: the commands issued so far, the recorded results,
awaiting, cancellation delivery, `is_replaying`, and the recorded `now`/`random`/`patched`.

Every rule here is `amber_workflow.h`'s and `amber_commands.h`'s, line for line, because the
host compares a Python guest's commands with history exactly as it compares a C guest's:

- Handles: a command's handle is its index; its result is the input's result whose `cmd` is
  that index; its *delivery seq* is that result's `seq`.
- Cancellation (`amber__wf_cancel_due`): delivered once, to the first await whose result is
  missing or has a delivery seq above the cancel's seq (for `await_first`: the result it would
  otherwise return). Later awaits behave normally.
- `is_replaying` (`amber_is_replaying`): with `recorded`, fewer commands issued than recorded:
  replaying; more: not; exactly as many: replaying until the newest history entry (the highest
  seq among results and the cancel request) is consumed. Without `recorded`, only that last rule.
- `patched` (`amber_patched`): the ABI's three rules at the next command index.

- Sticky instances (`amber__wf_wait`, `amber__wf_refresh`): an await whose result history lacks
  offers the "suspended" output (every command so far) to `host.await_next`. A host that keeps
  the instance answers with the run's next input envelope: its results and `recorded` replace
  the ones read so far, so does its cancel request unless one was read already, and the await
  checks again. A newer entry than before is unconsumed, unless it is the marker of a
  `now`/`random`/`patched` this instance issued before it waited: a replay from the top reads
  that marker on its way to the await, so it counts as caught up. From that await on the code
  sees exactly what a replay from the top of the same history sees. Queries never wait (the
  host would refuse to keep their instance).

An await whose result history lacks raises `_Suspend` when the host does not keep the instance;
so does a result of the wrong kind (the code no longer matches its history) at once: the
activation then ends "suspended" with every command so far, and the host reports the
non-determinism at that position, as it does for the C SDK. An `await_next` answer that is not
the same run's grown history raises `_HostError` (the host sees a trap). The activation
remembers the first unwind, so code that swallows it and goes on changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple, NoReturn

from . import _commands, _envelopes, _msgpack
from ._commands import Command, CommandKind
from ._envelopes import CancelRequest, Recorded, WorkflowDelta, WorkflowInput, WorkflowStatus
from ._errors import (
    CancelledError,
    NondeterminismError,
    _ContinueAsNew,
    _HostError,
    _Suspend,
    _Unwind,
)
from ._host import GuestHost

__all__ = ["RANDOM_MAX", "Activation", "Outcome", "WorkflowInfo", "active", "current"]

RANDOM_MAX = 1024
"""Most bytes one `random` command may record (the host import's limit)."""

CANCELLED = "Cancelled"

_MARKERS = frozenset({CommandKind.NOW, CommandKind.RANDOM, CommandKind.PATCHED})
"""The kinds whose recorded result is the command's own marker, read without awaiting."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowInfo:
    """What a workflow activation knows about its run."""

    run_id: str
    workflow_id: str
    """The id the run was started under ("" from a host that does not send it): the same in
    every run of a continue-as-new chain and of a reset, unlike `run_id`."""
    workflow_type: str
    query: str | None
    """The query this activation answers (None for a normal activation). Use it only to skip
    work, never to change which commands are issued."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """An awaited command's result: a value, or an error `[type, message]`."""

    ok: bool
    value: Any = None
    """The recorded value when ok: `bytes` for payloads, None for a fired timer."""
    error_type: str = ""
    error_message: str = ""


class _Next(NamedTuple):
    """The run's grown history, as an `await_next` answer brought it. A tuple, not a frozen
    dataclass: one is made on every live step, and a frozen dataclass's `__init__` costs a
    Python call per field in the guest."""

    results: Mapping[int, Recorded]
    recorded: int | None
    cancel: CancelRequest | None
    added: Sequence[tuple[int, Recorded]] | None
    """The results a delta brought (the newest entry, if new, is among them or is the cancel
    request); None for a whole envelope."""


class Activation:
    """The state of one workflow activation (see the module docstring for the rules)."""

    def __init__(
        self, envelope: WorkflowInput, host: GuestHost, memo: _msgpack.ItemMemo | None = None
    ) -> None:
        self.host = host
        self.info = WorkflowInfo(
            run_id=envelope.run_id,
            workflow_id=envelope.workflow_id,
            workflow_type=envelope.workflow,
            query=envelope.query,
        )
        self.commands: list[Command] = []
        self.packed = _msgpack.PackedArray()
        """`commands` encoded, as far as an output needed them."""
        self.unwind: _Unwind | None = None
        """The first unwind raised; the activation's outcome whatever the code does next (no
        command can be issued after it: `issue` re-raises it)."""
        self._input = envelope.input
        self._memo = memo or _envelopes.results_memo()
        """The last input's results, by their bytes (each `await_next` answer repeats them)."""
        self._results = envelope.results
        self._has_recorded = envelope.recorded is not None
        self._recorded = envelope.recorded or 0
        self._cancel = envelope.cancel
        self._cancel_delivered = False
        self._newest_seq = _newest_seq(self._results.values(), self._cancel)
        self._caught_up = False

    # ---- state ----------------------------------------------------------------------------

    def check_live(self) -> None:
        """Re-raise the unwind when code runs on after the activation ended (a `finally`, or a
        swallowed `BaseException`): nothing it does can reach the output any more."""
        if self.unwind is not None:
            raise self.unwind

    @property
    def is_replaying(self) -> bool:
        n = len(self.commands)
        if self._has_recorded and n != self._recorded:
            return n < self._recorded
        return self._newest_seq >= 0 and not self._caught_up

    @property
    def cancel_requested(self) -> bool:
        """Whether the cancellation reached the code (an await raised it)."""
        return self._cancel_delivered

    @property
    def cancel_reason(self) -> str:
        return self._cancel.reason if self._cancel is not None and self._cancel_delivered else ""

    def issue(self, command: Command) -> int:
        """Append a command; returns its index (its handle)."""
        self.check_live()
        self.commands.append(command)
        return len(self.commands) - 1

    def _consumed(self, index: int) -> None:
        recorded = self._results.get(index)
        if recorded is not None and recorded.seq == self._newest_seq:
            self._caught_up = True

    def _end(self, unwind: _Unwind) -> NoReturn:
        self.unwind = unwind
        raise unwind

    def _suspended_output(self) -> bytes:
        return _envelopes.workflow_output(
            WorkflowStatus.SUSPENDED, self.commands, packed=self.packed
        )

    def suspend(self) -> NoReturn:
        """End the activation "suspended" with every command issued so far."""
        self._end(_Suspend(self._suspended_output()))

    def continue_as_new(self, payload: bytes) -> NoReturn:
        self.check_live()
        self._end(_ContinueAsNew(payload))

    # ---- awaiting -------------------------------------------------------------------------

    def _cancel_due(self, recorded: Recorded | None) -> bool:
        return (
            self._cancel is not None
            and not self._cancel_delivered
            and (recorded is None or recorded.seq > self._cancel.seq)
        )

    def _deliver_cancel(self) -> NoReturn:
        assert self._cancel is not None
        self._cancel_delivered = True
        if self._cancel.seq == self._newest_seq:
            self._caught_up = True
        raise CancelledError(self._cancel.reason)

    def _awaitable(self, index: int) -> None:
        if not 0 <= index < len(self.commands):
            raise ValueError(f"no command {index} in this activation")
        if self.commands[index].kind not in _commands.AWAITABLE:
            raise ValueError(f"command {index} ({self.commands[index].kind}) cannot be awaited")

    def await_one(self, index: int) -> Outcome:
        """The result of command `index`: suspends when history lacks it, raises the
        cancellation when it is due here (`amber_await`)."""
        self.check_live()
        self._awaitable(index)
        while True:
            recorded = self._results.get(index)
            if self._cancel_due(recorded):
                self._deliver_cancel()
            if recorded is not None:
                return self._resolve(index, recorded)
            self._wait()

    def await_first(self, indices: Sequence[int]) -> int:
        """The position in `indices` of the command delivered first (smallest delivery seq;
        ties go to the earlier position), after consuming its result; suspends when none has
        one, raises the cancellation when it is due here (`amber_await_any`)."""
        self.check_live()
        if not indices:
            raise ValueError("await_first needs at least one handle")
        for index in indices:
            self._awaitable(index)
        while True:
            first: Recorded | None = None
            at = 0
            for position, index in enumerate(indices):
                recorded = self._results.get(index)
                if recorded is not None and (first is None or recorded.seq < first.seq):
                    first, at = recorded, position
            if self._cancel_due(first):
                self._deliver_cancel()
            if first is not None:
                self._resolve(indices[at], first)
                return at
            self._wait()

    # ---- waiting (sticky instances) -------------------------------------------------------

    def _wait(self) -> None:
        """Offer every command so far to the host and wait for history to grow
        (`amber__wf_wait`). Returns with the state refreshed from the run's next input envelope
        when the host keeps this instance; otherwise ends the activation "suspended" with that
        same output. The caller then checks its await again."""
        output = self._suspended_output()
        if self.info.query is not None:  # a query ends where it waits; the host refuses to keep it
            self._end(_Suspend(output))
        try:
            following = self.host.await_next(output)
            read = None if following is None else self._next_input(following)
        except Exception as exc:
            self._end(_HostError(exc))
        if read is None:
            self._end(_Suspend(output))
        self._refresh(read)

    def _next_input(self, data: object) -> _Next:
        """Read `await_next`'s answer, which must be this run's input with history only grown
        (the checks `amber__wf_refresh` leaves to the host: a Python guest can afford them), or
        a delta from the input read last."""
        if type(data) is not bytes:
            if not isinstance(data, bytes | bytearray | memoryview):
                raise TypeError(f"host.await_next() returned {type(data).__name__}, not bytes")
            data = bytes(data)
        answer = _envelopes.parse_next_input(data, self._memo)
        if isinstance(answer, WorkflowDelta):
            grown = _Next(self._grown(answer), answer.recorded, answer.cancel, answer.more)
        else:
            self._check_same_run(answer)
            for cmd, recorded in self._results.items():
                later = answer.results.get(cmd)
                if later is not recorded and later != recorded:  # reused from the memo: the same
                    raise ValueError(
                        f"await_next: the result of command {cmd} was {recorded}, now "
                        f"{later}: history only grows"
                    )
            grown = _Next(answer.results, answer.recorded, answer.cancel, None)
        if self._has_recorded and grown.recorded is not None and grown.recorded < self._recorded:
            raise ValueError(
                f"await_next: 'recorded' went from {self._recorded} to {grown.recorded}: "
                "history only grows"
            )
        if self._cancel is not None and grown.cancel != self._cancel:
            raise ValueError(
                f"await_next: the cancel request was {self._cancel}, now {grown.cancel}: "
                "history only grows"
            )
        return grown

    def _check_same_run(self, request: WorkflowInput) -> None:
        info = self.info
        if (request.run_id, request.workflow, request.input) != (
            info.run_id,
            info.workflow_type,
            self._input,
        ):
            raise ValueError(
                f"await_next: the next input envelope is run {request.run_id!r} "
                f"({request.workflow!r}), not this activation's run {info.run_id!r} "
                f"({info.workflow_type!r}) with the same input"
            )
        if request.query is not None:
            raise ValueError("await_next: a query's envelope cannot go to a waiting workflow")

    def _grown(self, delta: WorkflowDelta) -> dict[int, Recorded]:
        """The results a delta stands for: those read so far and the new ones."""
        if delta.start != len(self._results):
            raise ValueError(
                f"await_next: a delta from {delta.start} results, but this instance has read "
                f"{len(self._results)}"
            )
        results = dict(self._results)
        beyond = delta.recorded
        for cmd, recorded in delta.more:
            if cmd in results:
                raise ValueError(
                    f"await_next: a delta brings a second result for command {cmd}: "
                    "history only grows"
                )
            if beyond is not None and cmd >= beyond:
                raise ValueError(f"await_next: a result for a command beyond {beyond}")
            results[cmd] = recorded
        return results

    def _refresh(self, grown: _Next) -> None:
        """Take the run's grown history (`amber__wf_refresh`): the code goes on from the await
        exactly as a replay from the top of that history reaches it."""
        newest = self._newest_seq
        self._results, count, cancel, added = grown
        self._has_recorded = count is not None
        self._recorded = count or 0
        if self._cancel is None:  # recorded once, never changes
            self._cancel = cancel
        if added is None:
            self._newest_seq = _newest_seq(self._results.values(), self._cancel)
            candidates: Iterable[tuple[int, Recorded]] = self._results.items()
        else:
            added_newest = _newest_seq((recorded for _, recorded in added), self._cancel)
            self._newest_seq = max(newest, added_newest)
            candidates = added
        if self._newest_seq == newest:
            return
        # A newer entry, not consumed yet, unless it is the marker of a now, random or patched
        # command this instance issued before it waited (recorded since): a replay from the top
        # reads that marker on its way here, and so has caught up with it.
        commands = self.commands
        caught_up = False
        for cmd, recorded in candidates:
            if (
                recorded.seq == self._newest_seq
                and cmd < len(commands)
                and commands[cmd].kind in _MARKERS
            ):
                caught_up = True
                break
        self._caught_up = caught_up

    def _resolve(self, index: int, recorded: Recorded) -> Outcome:
        """Read a recorded result (`amber__wf_resolve`); a value of the wrong kind suspends."""
        value = recorded.value
        if not recorded.ok:
            if (
                not isinstance(value, list)
                or len(value) < 2
                or not isinstance(value[0], str)
                or not isinstance(value[1], str)
            ):
                self.suspend()
            outcome = Outcome(ok=False, error_type=value[0], error_message=value[1])
        elif self.commands[index].kind is CommandKind.TIMER:
            outcome = Outcome(ok=True)
        elif isinstance(value, bytes):
            outcome = Outcome(ok=True, value=value)
        else:
            self.suspend()
        self._consumed(index)
        return outcome

    # ---- recorded values ------------------------------------------------------------------

    def now_ms(self) -> int:
        """A `now` command: the recorded value when replaying, else the host's clock."""
        self.check_live()
        index = len(self.commands)
        recorded = self._results.get(index)
        if recorded is None:
            value = self.host.now()
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"host.now() returned {value!r}, not an int")
        elif (
            recorded.ok and isinstance(recorded.value, int) and not isinstance(recorded.value, bool)
        ):
            value = recorded.value
        else:
            self.issue(_commands.now(0))
            self.suspend()
        self.issue(_commands.now(value))
        self._consumed(index)
        return value

    def random_bytes(self, n: int) -> bytes:
        """A `random` command of `n` bytes: the recorded ones when replaying, else the host's."""
        self.check_live()
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= RANDOM_MAX:
            raise ValueError(f"random_bytes takes 0 to {RANDOM_MAX} bytes, not {n!r}")
        index = len(self.commands)
        recorded = self._results.get(index)
        if recorded is None:
            value = bytes(self.host.random(n))
            if len(value) != n:
                raise ValueError(f"host.random({n}) returned {len(value)} bytes")
        elif recorded.ok and isinstance(recorded.value, bytes):
            value = recorded.value
            if len(value) != n:
                raise NondeterminismError(
                    f"random_bytes({n}) at command {index}: history recorded {len(value)} bytes"
                )
        else:
            self.issue(_commands.random(b""))
            self.suspend()
        self.issue(_commands.random(value))
        self._consumed(index)
        return value

    def patched(self, change_id: str) -> bool:
        """The ABI's patch-marker rules at the next command index."""
        self.check_live()
        index = len(self.commands)
        recorded = self._results.get(index)
        marked = recorded is not None and recorded.ok and recorded.value == change_id
        if not marked and index < self._recorded:
            return False
        self.issue(_commands.patched(change_id))
        if marked:
            self._consumed(index)
        return True


def _newest_seq(results: Iterable[Recorded], cancel: CancelRequest | None) -> int:
    """The newest history entry: the highest seq among the results and the cancel; -1: none."""
    newest = -1 if cancel is None else cancel.seq
    for recorded in results:
        if recorded.seq > newest:
            newest = recorded.seq
    return newest


# ---- the activation workflow code runs in --------------------------------------------------

_current: Activation | None = None


def current() -> Activation:
    """The activation running now; workflow API calls outside one are a mistake."""
    if _current is None:
        raise RuntimeError("not in workflow code: this call works only inside a @workflow.defn")
    return _current


@contextmanager
def active(activation: Activation) -> Iterator[Activation]:
    """Make `activation` the current one while the block runs."""
    global _current
    previous, _current = _current, activation
    try:
        yield activation
    finally:
        _current = previous
