"""What the SDK needs from the host: the ABI's imports, as one object per activation.

The build tool's generated glue implements it on top of the component's `amber:guest/host`
imports; tests pass a fake. Bytes are msgpack where the method says so.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["GuestHost"]


class GuestHost(Protocol):
    """The host imports an activation may call (abi/README.md, "Host imports")."""

    def await_next(self, envelope: bytes) -> bytes | None:
        """Workflows: an await lacks its result, and `envelope` is the output so far (status
        "suspended", every command issued). Return the run's next input envelope to keep this
        instance (same run, history only grown: the workflow goes on from the await), or None
        to end the activation with `envelope` as its output."""
        ...

    def now(self) -> int:
        """Milliseconds since the Unix epoch. Workflows: only for a new `now` command."""
        ...

    def random(self, n: int) -> bytes:
        """`n` (<= 1024) bytes from the host's CSPRNG. Workflows: only for a new `random`."""
        ...

    def log(self, level: int, line: str) -> None:
        """A log line: 0 debug, 1 info, 2 warn, 3 error."""
        ...

    def publish(self, name: str, value: bytes) -> None:
        """Workflows: the value (msgpack) queries named `name` answer with."""
        ...

    def heartbeat(self, details: bytes) -> bool:
        """Activities: report progress (msgpack, or b""); True when the run asked to stop."""
        ...

    def cancel_requested(self) -> bool:
        """Activities: whether the run asked the activity to stop."""
        ...

    def http_request(self, request: bytes) -> bytes:
        """Activities: perform the request (msgpack map); returns the response envelope."""
        ...

    def sleep(self, ms: int) -> None:
        """Activities: block for `ms` within the attempt's wall-clock budget."""
        ...
