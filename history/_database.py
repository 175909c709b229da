"""The connection pool and the transaction discipline every store method follows.

Public store methods own their transaction through `Database.run`, which retries the whole
function on serialization failures (40001), deadlocks and lost connections. Everything else
propagates. Functions handed to `run` must therefore have no side effects outside the
transaction.

A connection lost while COMMIT is in flight leaves the outcome unknown: the transaction may have
committed. Retrying it blindly could apply it twice (a signal without a request id, an audit
record), so `run` learns the transaction's id before committing and, if the commit's answer is
lost, asks PostgreSQL on a fresh connection whether that id committed (`pg_xact_status`): it
returns the result if so, and retries only if not.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pgerrors
from psycopg_pool import ConnectionPool, PoolTimeout

from ._errors import DuplicateRow, StoreUnavailable, UnstorableText

_log = logging.getLogger(__name__)

T = TypeVar("T")
Cursor = psycopg.Cursor[tuple[Any, ...]]

TransactionObserver = Callable[[float, str], None]
"""Told each transaction's seconds (retries included) and outcome (`committed` or `failed`)."""

_pending = threading.local()
"""Per thread, a stack (one per `Database.run` in progress) of callbacks awaiting its commit."""


def after_commit(cur: Cursor, callback: Callable[[], None]) -> None:
    """Run `callback` once the transaction `cur` works in has committed, never if it rolls back
    or is retried: for effects outside the database, such as a metric counting what it did.
    A callback that raises is logged and ignored."""
    del cur  # the transaction is the innermost `Database.run` of this thread
    stack: list[list[Callable[[], None]]] | None = getattr(_pending, "stack", None)
    if not stack:
        raise RuntimeError("after_commit outside Database.run")
    stack[-1].append(callback)


_TRANSIENT_SQLSTATES = ("08", "57P01", "57P02", "57P03", "40001", "40P01")
"""Connection exceptions, server shutdown, serialization failure, deadlock."""


def step_failure(exc: Exception, cur: Cursor) -> Exception | None:
    """What a step that failed inside a larger transaction reports for itself (a duplicate key
    as `DuplicateRow`, as `Database.run` would), or None when the whole transaction must run
    again: the connection is gone, or a serialization failure or deadlock (the retries
    `Database.run` makes). For code that catches errors inside a transaction, after its
    savepoint rolled back: one report of a group commit, one row of a sweep."""
    if _transient(exc, cur.connection):
        return None
    if isinstance(exc, pgerrors.UniqueViolation):
        return DuplicateRow(f"a concurrent write took the same key: {exc}")
    return exc


def _transient(exc: Exception, conn: psycopg.Connection[Any] | None) -> bool:
    """Whether retrying the whole transaction may succeed.

    A lost connection, a server going away, a serialization failure or a deadlock: yes. Any
    other error — including client-side `OperationalError`s such as too many query parameters —
    would fail the same way again, so it propagates at once.
    """
    if isinstance(exc, PoolTimeout | pgerrors.SerializationFailure | pgerrors.DeadlockDetected):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    if conn is None or conn.closed or conn.broken:
        return True
    return (exc.sqlstate or "").startswith(_TRANSIENT_SQLSTATES)


class Database:
    """A pool of connections to one PostgreSQL database. Thread-safe; share one per process."""

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        attempts: int = 5,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.dsn = dsn
        self._attempts = attempts
        self._connect_timeout_s = connect_timeout_s
        self._observers: list[TransactionObserver] = []
        self._around: Callable[[], contextlib.AbstractContextManager[object]] | None = None
        self._ping_lock = threading.Lock()
        self._ping_conn: psycopg.Connection[Any] | None = None
        self._backends: dict[int, weakref.ref[psycopg.Connection[Any]]] = {}
        self._pool = ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            timeout=connect_timeout_s,
            kwargs={"autocommit": False},
            configure=self._remember,
            open=False,
            name="amber",
        )

    def _remember(self, conn: psycopg.Connection[Any]) -> None:
        if len(self._backends) > 4 * (self._pool.max_size + 1):  # reconnects leave dead ones
            for pid, ref in list(self._backends.items()):
                if ref() is None:
                    self._backends.pop(pid, None)
        self._backends[conn.info.backend_pid] = weakref.ref(conn)

    def is_own_backend(self, pid: int) -> bool:
        """Whether a PostgreSQL backend pid (a NOTIFY's sender, say) serves one of this pool's
        live connections: this process did what it announces, and knows it already. (Two
        servers in one process must not share a `Database`, or each ignores the other's.)"""
        ref = self._backends.get(pid)
        conn = None if ref is None else ref()
        return conn is not None and not conn.closed

    def open(self, *, wait: bool = True) -> Database:
        """Open the pool; with `wait`, fail fast with `StoreUnavailable` if unreachable."""
        try:
            self._pool.open(wait=wait, timeout=self._connect_timeout_s)
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreUnavailable(f"cannot connect to PostgreSQL: {self._why_not()}") from exc
        return self

    def _why_not(self) -> str:
        """The cause a pool's timeout hides (refused, unknown host, authentication, ...)."""
        try:
            psycopg.connect(
                self.dsn, connect_timeout=max(1, round(self._connect_timeout_s))
            ).close()
        except psycopg.Error as exc:
            return " ".join(str(exc).split()) or type(exc).__name__
        return f"no connection within {self._connect_timeout_s:g} s"

    def close(self) -> None:
        self._pool.close()
        with self._ping_lock:
            if self._ping_conn is not None:
                self._ping_conn.close()
                self._ping_conn = None

    def __enter__(self) -> Database:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ping(self, timeout_s: float = 2.0) -> str | None:
        """Whether PostgreSQL answers within about `timeout_s`: None if it does, else why not
        (for health probes, which must answer quickly rather than retry).

        It uses a connection of its own, outside the pool: a pool busy with slow work must not
        look like a database that is down."""
        seconds = max(1, round(timeout_s))
        with self._ping_lock:
            conn = self._ping_conn
            try:
                if conn is None or conn.closed or conn.broken:
                    self._ping_conn = conn = psycopg.connect(
                        self.dsn,
                        autocommit=True,
                        connect_timeout=seconds,
                        tcp_user_timeout=seconds * 1000,  # a silent network fails too
                    )
                conn.execute("SELECT 1")
            except psycopg.Error as exc:
                if conn is not None:
                    conn.close()
                self._ping_conn = None
                return f"database unavailable: {str(exc).strip() or type(exc).__name__}"
        return None

    def observe(self, observer: TransactionObserver) -> None:
        """Tell `observer` every transaction's duration and outcome (metrics)."""
        self._observers.append(observer)

    def wrap_transactions(
        self, around: Callable[[], contextlib.AbstractContextManager[object]]
    ) -> None:
        """Run every transaction inside `around()` (a span per transaction, say)."""
        self._around = around

    def run(self, fn: Callable[[Cursor], T]) -> T:
        """Run `fn(cursor)` in one transaction, retrying it on transient failures (never one
        that committed: see the module's docstring)."""
        stack: list[list[Callable[[], None]]] | None = getattr(_pending, "stack", None)
        if stack is None:
            stack = _pending.stack = []
        stack.append([])
        started, outcome = time.perf_counter(), "failed"
        try:
            if self._around is None:
                result = self._run(fn, stack)
            else:
                with self._around():
                    result = self._run(fn, stack)
            outcome = "committed"
        finally:
            callbacks = stack.pop()
            for observer in self._observers:
                observer(time.perf_counter() - started, outcome)
        for callback in callbacks:
            try:
                callback()
            except Exception:
                _log.exception("an after-commit callback failed")
        return result

    def _run(self, fn: Callable[[Cursor], T], stack: list[list[Callable[[], None]]]) -> T:
        delay = 0.01
        for attempt in range(1, self._attempts + 1):
            conn: psycopg.Connection[Any] | None = None
            step = _Step()
            try:
                with self._pool.connection() as conn:
                    return _transaction(conn, fn, step)
            except pgerrors.UniqueViolation as exc:
                raise DuplicateRow(f"a concurrent write took the same key: {exc}") from exc
            except psycopg.DataError as exc:
                if _NUL in str(exc):  # refused by psycopg before it sent anything
                    raise UnstorableText(
                        "a text value holds a NUL character (\\x00), which cannot be stored"
                    ) from None
                raise
            except (psycopg.Error, PoolTimeout) as exc:
                if not _transient(exc, conn):
                    raise
                if step.committing and step.xid is not None and self._committed(step.xid):
                    _log.warning("commit answer lost (%s); the transaction committed", exc)
                    return step.result  # type: ignore[return-value]
                if attempt == self._attempts:
                    raise StoreUnavailable(f"database unavailable: {exc}") from exc
                stack[-1].clear()  # the retry runs `fn` again and registers its own
                _log.warning("transient database error (attempt %d): %s", attempt, exc)
                time.sleep(delay)
                delay = min(delay * 4, 1.0)
        raise AssertionError("unreachable")

    def _committed(self, xid: str) -> bool:
        """Whether transaction `xid` committed, asked on a fresh connection (waiting while it is
        still in progress); `StoreUnavailable` if that cannot be known."""
        deadline = time.monotonic() + self._connect_timeout_s * 3
        status: str | None
        while True:
            try:
                with psycopg.connect(
                    self.dsn, autocommit=True, connect_timeout=int(self._connect_timeout_s)
                ) as conn:
                    row = conn.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()
            except psycopg.OperationalError as exc:
                status = f"unknown ({exc})"
            else:
                status = row[0] if row is not None else None
                if status in ("committed", "aborted"):
                    return bool(status == "committed")
                if status is None:  # too old to tell: cannot happen seconds after the commit
                    raise StoreUnavailable(f"the outcome of transaction {xid} is unknown")
            if time.monotonic() >= deadline:
                raise StoreUnavailable(f"the outcome of transaction {xid} is {status}")
            time.sleep(0.05)

    def connect(self) -> psycopg.Connection[tuple[object, ...]]:
        """A dedicated autocommit connection outside the pool (for LISTEN)."""
        try:
            return psycopg.connect(self.dsn, autocommit=True)
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"cannot connect to PostgreSQL: {exc}") from exc


_NUL = "NUL (0x00)"
"""psycopg's words for a text value PostgreSQL cannot hold."""


class _Step:
    """How far a transaction got: its id (once it wrote) and whether COMMIT was sent."""

    __slots__ = ("committing", "result", "xid")

    def __init__(self) -> None:
        self.xid: str | None = None
        self.committing = False
        self.result: object = None


def _transaction(conn: psycopg.Connection[Any], fn: Callable[[Cursor], T], step: _Step) -> T:
    try:
        with conn.cursor() as cur:
            result = fn(cur)
            # NULL for a transaction that wrote nothing: retrying that one is always safe.
            cur.execute("SELECT pg_current_xact_id_if_assigned()::text")
            row = cur.fetchone()
        step.xid, step.result, step.committing = (row[0] if row else None), result, True
        conn.commit()
        return result
    except BaseException:
        if not step.committing and not conn.closed and not conn.broken:
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
        raise


@contextlib.contextmanager
def savepoint(cur: Cursor, name: str = "amber_step") -> Iterator[None]:
    """Run a block so that its failure rolls back only the block, not the transaction.

    For steps that may legitimately fail inside a larger transaction (starting a child whose
    workflow id is taken; one bad row in a sweep must not block the others; one report of a
    group commit). What the block registered with `after_commit` is dropped with it.
    """
    stack: list[list[Callable[[], None]]] | None = getattr(_pending, "stack", None)
    registered = len(stack[-1]) if stack else 0
    cur.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        if stack:
            del stack[-1][registered:]
        cur.execute(f"ROLLBACK TO SAVEPOINT {name}")
        raise
    cur.execute(f"RELEASE SAVEPOINT {name}")
