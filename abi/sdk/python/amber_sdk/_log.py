"""A small logger that writes through the host's `log` import.

Not a `logging.Logger`: a workflow's logger must drop lines while replaying, and the host, not
the guest, adds timestamps (a timestamp read in workflow code would be a clock read).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum

__all__ = ["LogLevel", "Logger"]


class LogLevel(IntEnum):
    """The `level` argument of the host's `log` import."""

    DEBUG = 0
    INFO = 1
    WARN = 2
    ERROR = 3


class Logger:
    """`logger.info("charged %s", order_id)`: %-formatting as in `logging`, done only when the
    line is written."""

    __slots__ = ("_emit",)

    def __init__(self, emit: Callable[[LogLevel, Callable[[], str]], None]) -> None:
        self._emit = emit

    def debug(self, msg: object, *args: object) -> None:
        self._log(LogLevel.DEBUG, msg, args)

    def info(self, msg: object, *args: object) -> None:
        self._log(LogLevel.INFO, msg, args)

    def warning(self, msg: object, *args: object) -> None:
        self._log(LogLevel.WARN, msg, args)

    def error(self, msg: object, *args: object) -> None:
        self._log(LogLevel.ERROR, msg, args)

    def _log(self, level: LogLevel, msg: object, args: tuple[object, ...]) -> None:
        self._emit(level, lambda: str(msg) % args if args else str(msg))
