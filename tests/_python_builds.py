"""The test session's Python guests, built once for every process of the session.

A Python guest takes 10–60 s of CPU to build (componentize-py, then compiling the component for
the artifact cache), and the suite runs in several pytest-xdist worker processes. Each guest is
built by the first process that needs it, under a file lock in a directory the whole session
shares; the others wait on that lock and read the result, so no guest is built twice and no
process holds up another for more than the build it waits for.

Rejected: building in the xdist controller (it does not collect, so it cannot tell whether any
selected test needs a Python guest), and one build per worker (it doubles minutes of CPU on the
two cores the suite already fills).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

from amber.tools._build import BuildResult
from amber.tools._build_python import build_python_guest


class PythonBuilds(Mapping[str, BuildResult]):
    """`sources` built into `directory` (shared by the session's processes) and compiled into
    the artifact cache `artifacts`; looking a guest up waits for its build only, and raises its
    build error."""

    def __init__(self, sources: Mapping[str, Path], directory: Path, artifacts: Path) -> None:
        self._sources = dict(sources)
        self._dir = directory
        self._artifacts = artifacts
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()
        self._results: dict[str, BuildResult] = {}
        self._errors: dict[str, BaseException] = {}

    def start(self) -> None:
        """Build every guest on a thread, in order, while the session's other tests run."""
        with self._guard:
            if self._thread is None:
                self._thread = threading.Thread(target=self._all, name="python-guests", daemon=True)
                self._thread.start()

    def digests(self) -> dict[str, str]:
        """Guest name by digest, for the guests this process has seen built so far."""
        return {result.sha256: name for name, result in self._results.items()}

    def _all(self) -> None:
        for name in self._sources:
            with contextlib.suppress(BaseException):  # kept, raised where a test looks it up
                self[name]

    def __getitem__(self, name: str) -> BuildResult:
        if name in self._results:
            return self._results[name]
        if name in self._errors:
            raise self._errors[name]
        source = self._sources[name]  # KeyError for a name that is not a Python guest
        self._dir.mkdir(parents=True, exist_ok=True)
        # A separate open file per call: flock then also serialises this process's own threads.
        with (self._dir / f"{name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                result = self._read(name) or self._build(name, source)
            except BaseException as exc:
                self._errors[name] = exc
                raise
        self._results[name] = result
        return result

    def _read(self, name: str) -> BuildResult | None:
        record = self._dir / f"{name}.json"
        if not record.exists():
            return None
        fields = json.loads(record.read_text())
        return BuildResult(**{**fields, "output": Path(fields["output"])})

    def _build(self, name: str, source: Path) -> BuildResult:
        result = build_python_guest(source, self._dir / f"{name}.wasm", artifacts=self._artifacts)
        record = {**dataclasses.asdict(result), "output": str(result.output)}
        partial = self._dir / f".{name}.json.partial"
        partial.write_text(json.dumps(record))
        partial.replace(self._dir / f"{name}.json")
        return result

    def __iter__(self) -> Iterator[str]:
        return iter(self._sources)

    def __len__(self) -> int:
        return len(self._sources)
