"""The README's triage sequence, run as written against a real server.

The commands are read from the README itself. Only its placeholders are replaced: RUN (a run
in the state the command needs), the fingerprint, and the step. The label `orders@2` is real:
the fixed module is uploaded under it.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from amber.runtime.model._clock import SystemClock
from amber.runtime.model._settings import EngineSettings, PoisonPolicy
from amber.runtime.sandbox._engine import SandboxEngine
from amber.runtime.sandbox._sandbox import Sandbox
from amber.runtime.worker._worker import Worker, WorkerSettings
from amber.tools._build import build_module
from amber.tools.cli import main
from tests.conftest import ROOT, InProcessServer, wait_for

POLICY = PoisonPolicy(
    crashes_to_poison=3,
    surgical_delays=(timedelta(minutes=30),),  # no surgical worker here: they stay poisoned
    suspend_after=timedelta(hours=24),
    crash_backoff=timedelta(milliseconds=10),
)


def readme_triage_commands() -> list[list[str]]:
    """The `amber triage ...` lines of the README's "When a task keeps crashing" block."""
    text = (ROOT / "README.md").read_text()
    block = text.split("When a task keeps crashing", 1)[1].split("```sh\n", 1)[1]
    block = block.split("```", 1)[0]
    return [
        shlex.split(line, comments=True)[1:]
        for line in block.splitlines()
        if line.startswith("amber triage ")
    ]


@pytest.fixture
def poisoned(
    make_server: Callable[..., InProcessServer],
    modules: dict[str, bytes],
    sandbox_engine: SandboxEngine,
    tmp_path: Path,
) -> Iterator[tuple[InProcessServer, list[str]]]:
    """A server with a worker, the fixed module uploaded as `orders@2`, and five runs whose
    activity was poisoned by the same crash."""
    srv = make_server(settings=EngineSettings(poison=POLICY))
    srv.client.upload_version(modules["hostile"], promote=True)
    fixed = tmp_path / "fixed.wasm"
    build_module(ROOT / "tests/guests/hostile.c", fixed, defines={"AMBER_VARIANT_FIXED": "1"})
    srv.client.upload_version(fixed.read_bytes(), label="orders@2")
    runs = [srv.client.start_run("good", {"crash": True, "n": i}).run.run_id for i in range(5)]
    sandbox = Sandbox(sandbox_engine, SystemClock(), srv.client.get_module)
    worker = Worker(srv.client, sandbox, WorkerSettings(worker_id="readme", poll_wait_s=0.2))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    wait_for(
        lambda: all(srv.client.describe(r).tasks[0].pool == "surgical" for r in runs),
        60,
        "the runs to be poisoned",
    )
    yield srv, runs
    worker.stop()
    thread.join(timeout=10)


def test_the_readme_triage_sequence_runs_as_written(
    poisoned: tuple[InProcessServer, list[str]],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    srv, runs = poisoned
    monkeypatch.chdir(tmp_path)  # `export ... -o run.bundle` writes where it is run
    commands = readme_triage_commands()
    verbs = [c[1] for c in commands]
    assert verbs == [
        "list", "show", "export", "replay", "resume", "retry", "skip", "terminate"
    ]  # fmt: skip
    task = srv.client.describe(runs[0]).tasks[0]
    assert task.crash is not None
    # resume takes runs[0]; retry (by fingerprint) the runs poisoned by the same crash, which
    # by then are runs[1:] (skip and terminate still find theirs poisoned: retry crashes them
    # again at once); skip runs[3]; terminate runs[4].
    target = {"show": runs[0], "export": runs[0], "resume": runs[0], "skip": runs[3]}
    target["terminate"] = runs[4]
    for command in commands:
        verb = command[1]
        args = [target.get(verb, a) if a == "RUN" else a for a in command]
        if verb == "retry":
            args[args.index("--fingerprint") + 1] = task.crash.fingerprint
        if verb == "skip":
            args[args.index("--step") + 1] = str(task.cmd)
            wait_for(
                lambda: srv.client.describe(runs[3]).tasks[0].pool == "surgical",
                60,
                "runs[3] to be poisoned again after the retry",
            )
        code = main(["--server", srv.target, *args])
        out, err = capsys.readouterr()
        assert code == 0, f"{' '.join(args)} exited {code}: {out}{err}"
        if verb == "replay":
            assert "REPRODUCED" in out
        if verb == "resume":
            wait_for(lambda: srv.client.result(runs[0]).status.closed, 30, "the resumed run")
        if verb == "skip":  # the worker then runs the workflow past the skipped step
            wait_for(lambda: srv.client.result(runs[3]).status.closed, 30, "the skipped run")
    assert srv.client.result(runs[0]).status.value == "completed"
    assert srv.client.result(runs[3]).status.value == "completed"
    assert srv.client.result(runs[4]).status.value == "terminated"
