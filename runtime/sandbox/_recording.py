"""Remembering what a sandbox was asked to run."""

from __future__ import annotations

import threading
from datetime import datetime

from amber.runtime.model import Clock

from ._http import HttpPolicy
from ._sandbox import ActivationRequest, RawOutput, SandboxRunner


class RecordingSandbox:
    """A sandbox that remembers the last activation request each thread ran and when: what
    a failure's repro is made of (the worker), or what an offline replay must compare."""

    def __init__(self, sandbox: SandboxRunner, clock: Clock) -> None:
        self._sandbox = sandbox
        self._clock = clock
        self._local = threading.local()

    @property
    def last(self) -> tuple[ActivationRequest, datetime] | None:
        last: tuple[ActivationRequest, datetime] | None = getattr(self._local, "last", None)
        return last

    @last.setter
    def last(self, value: tuple[ActivationRequest, datetime] | None) -> None:
        self._local.last = value

    def run(self, request: ActivationRequest) -> RawOutput:
        self.last = (request, self._clock.now())
        return self._sandbox.run(request)

    def activities(self, digest: str) -> frozenset[str]:
        return self._sandbox.activities(digest)

    def http_policy(self, digest: str) -> HttpPolicy | None:
        return self._sandbox.http_policy(digest)
