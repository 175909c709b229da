"""`ServingThreads`: the threads a worker serves tasks on.

`slots` of them, and one more for each task whose thread waits in the sandbox's background lane
(a heavy or poisoned activity held back for quiet moments), up to `extra_cap` (the worker gives
its slot count): such a task must not take one of the slots. A worker then holds at most twice
its slots in leased tasks. A thread added that way stops serving once the background task it
made room for has ended, at the top of its next loop.

Rejected: a fixed number of extra threads (idle ones hold a thread each for nothing, and too few
still let a batch of poison take every slot; measured: twenty held fuel bombs took all sixteen
slots and halved healthy throughput); a cap at the lane's own capacity (`--guests`, two here):
the lane runs that many at once, but a poisoned batch leaves more waiting, each on a slot
(isolation 0.917 against 0.994 with the cap at the slots, back to back).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

Serve = Callable[[Callable[[], bool]], bool]
"""A thread's serving loop; it is given `retire` (call it before each task: True means stop, the
thread is already uncounted) and returns whether it stopped because of it."""


class ServingThreads:
    """Runs `serve` on `slots` threads, plus one per task in the background lane (up to
    `extra_cap`). Thread-safe."""

    def __init__(self, serve: Serve, slots: int, extra_cap: int) -> None:
        self._serve = serve
        self._slots = max(slots, 1)
        self._extra_cap = extra_cap
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._serving = 0
        """Threads serving now (0 unless `run` runs)."""
        self._in_background = 0

    def run(self) -> None:
        """Serve on this thread and `slots` - 1 more until every one has stopped."""
        with self._lock:
            self._serving = self._slots
            for _ in range(1, self._slots):
                self._start()
        self._main()
        while True:
            with self._lock:
                threads, self._threads = self._threads, []
            if not threads:
                return
            for thread in threads:
                thread.join()

    def background_started(self) -> None:
        """A task's thread now waits in the background lane: another serves meanwhile."""
        with self._lock:
            self._in_background += 1
            if 0 < self._serving < self._wanted():
                self._serving += 1
                self._start()

    def background_ended(self) -> None:
        with self._lock:
            self._in_background -= 1

    def _retire(self) -> bool:
        with self._lock:
            if self._serving > self._wanted():
                self._serving -= 1
                return True
            return False

    def _wanted(self) -> int:
        # Holding self._lock.
        return self._slots + min(self._in_background, self._extra_cap)

    def _start(self) -> None:
        # Holding self._lock.
        self._threads = [t for t in self._threads if t.is_alive()]
        thread = threading.Thread(
            target=self._main, name=f"amber-slot-{len(self._threads) + 1}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _main(self) -> None:
        retired = False
        try:
            retired = self._serve(self._retire)
        finally:
            if not retired:  # stopped, or an error escaped: it no longer serves either
                with self._lock:
                    self._serving -= 1
