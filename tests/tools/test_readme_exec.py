"""The README's command blocks, run in the order shown against a live `amber dev`.

Every `amber ...` line of the README's fenced `sh`/`bash`/`console` blocks runs as its own
process, from a directory where `abi/` is the checkout's (the README's paths are relative to the
checkout) and with `AMBER_SERVER` naming the dev server; each must exit 0. Lines that start a
process that does not return (`amber dev`, `amber server`, `amber worker`) or take minutes
(`amber bench`) are left out, as are lines that are not `amber` commands (`tools/bootstrap.sh`).

Only the README's placeholders are replaced, by what earlier commands printed (those commands
run with `--json` so their output can be read): `DIGEST` (`versions upload`), `RUN` (`run start`;
in the triage block, a run in the state the command needs), `APPROVAL` (`approvals list`),
`TOKEN` (`approvals issue`), and the fingerprint and step of the triage block (`triage list`).
What no README command can make is set up beforehand: a module whose activity crashes (the test
guest `hostile`, five runs poisoned by it) and its fix at `build/orders-fixed.wasm`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from amber.history import Database, EventType
from amber.runtime.client._client import AmberClient
from amber.tools._build import build_module
from tests.conftest import ROOT, Process, wait_for

FENCE = re.compile(r"^```(sh|bash|console|shell)\n(.*?)^```", re.MULTILINE | re.DOTALL)
NOT_RUN = {"dev", "server", "worker", "bench"}
"""Verbs whose lines are left out: processes that run until stopped, or a minutes-long bench."""


def readme_commands(text: str) -> list[list[str]]:
    """The README's `amber ...` command lines, in order, as words (continuations joined,
    comments and a console block's `$ ` prompt dropped)."""
    commands = []
    for block in FENCE.finditer(text):
        joined = block[2].replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("amber "):
                commands.append(shlex.split(line, comments=True))
    return commands


@dataclass
class Session:
    """The dev server, a client for the setup and the waits, and what commands printed."""

    target: str
    client: AmberClient
    work: Path
    env: dict[str, str]
    poisoned: list[str]
    values: dict[str, str] = field(default_factory=dict)
    ran: list[list[str]] = field(default_factory=list)

    def run(self, words: list[str], *, as_json: bool = False) -> tuple[int, str, str]:
        argv = [*words[1:], *(["--json"] if as_json else [])]
        done = subprocess.run(
            [sys.executable, "-m", "amber.tools.cli", *argv],
            cwd=self.work, env=self.env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        self.ran.append(words)
        return done.returncode, done.stdout, done.stderr

    def pool(self, run_id: str) -> str:
        tasks = self.client.describe(run_id).tasks
        return tasks[0].pool if tasks else "-"


def _parked(s: Session, workflow_id: str) -> bool:
    return any(e.type is EventType.SIGNAL_AWAITED for e in s.client.history(workflow_id))


# Waits a reader does not notice (a moment passes between lines typed by hand), before a line.
BEFORE: dict[tuple[str, str], Callable[[Session], None]] = {
    # The run started above waits for its signal before it is checked and migrated.
    ("versions", "check"): lambda s: wait_for(
        lambda: _parked(s, "onboard-ann"), 30, "onboard-ann to wait for its signal"
    ),
    ("triage", "list"): lambda s: wait_for(
        lambda: all(s.pool(r) == "surgical" for r in s.poisoned), 60, "the runs to be poisoned"
    ),
    ("triage", "retry"): lambda s: wait_for(
        lambda: s.client.result(s.poisoned[0]).status.closed, 30, "the resumed run to finish"
    ),
    # retry ran it again: it crashed again, and is poisoned again at its first crash.
    ("triage", "skip"): lambda s: wait_for(
        lambda: s.pool(s.poisoned[3]) == "surgical", 60, "the retried run to be poisoned again"
    ),
}


def _substitute(s: Session, words: list[str]) -> list[str]:
    verb = tuple(words[1:3])
    triage = {"show": 0, "export": 0, "resume": 0, "skip": 3, "terminate": 4}
    out = []
    for i, word in enumerate(words):
        previous = words[i - 1]
        if word == "RUN" and verb[0] == "triage":
            word = s.poisoned[triage[verb[1]]]
        elif word in ("RUN", "DIGEST", "APPROVAL", "TOKEN"):
            word = s.values[word]
        elif verb == ("triage", "retry") and previous == "--fingerprint":
            word = s.values["fingerprint"]
        elif verb == ("triage", "skip") and previous == "--step":
            word = s.values["step"]
        out.append(word)
    return out


def _capture(s: Session, words: list[str]) -> dict[str, str] | None:
    """Run a command whose output later lines need, with `--json`; what it hands on."""
    verb = tuple(words[1:3])
    if verb == ("versions", "upload"):
        return {"DIGEST": _json(s, words)["digest"]}
    if verb == ("run", "start"):
        return {"RUN": _json(s, words)["run_id"]}
    if verb == ("triage", "list"):
        row = _json(s, words)["runs"][0]
        return {"fingerprint": row["fingerprint"], "step": str(row["step"])}
    if verb == ("approvals", "list"):  # the request appears once the worker ran the run
        found: list[Any] = []

        def pending() -> bool:
            found[:] = _json(s, words)["approvals"]
            return bool(found)

        wait_for(pending, 30, "the approval request")
        return {"APPROVAL": found[0]["approval_id"]}
    if verb == ("approvals", "issue"):
        return {"TOKEN": _json(s, words)["token"]}
    return None


def _json(s: Session, words: list[str]) -> Any:
    code, out, err = s.run(words, as_json=True)
    assert code == 0, f"{shlex.join(words)} --json exited {code}: {out}{err}"
    return json.loads(out)


@pytest.fixture
def live(
    amber_process: Callable[..., Process],
    db: Database,  # an empty engine: the README starts from nothing
    tmp_path: Path,
    modules: dict[str, bytes],
    database_url: str,
) -> Iterator[Session]:
    """`amber dev` as a user starts it, a directory to type in, and runs poisoned by a crash."""
    dev = amber_process("dev", "--listen", "127.0.0.1:0")
    wait_for(
        lambda: "[dev] serving on" in dev.output() or dev.popen.poll() is not None, 180, "amber dev"
    )
    found = re.search(r"\[dev\] server listening on (\S+)", dev.output())
    assert found and dev.popen.poll() is None, dev.output()
    target = found[1]
    work = tmp_path / "work"
    (work / "build").mkdir(parents=True)
    (work / "abi").symlink_to(ROOT / "abi")
    build_module(
        ROOT / "tests/guests/hostile.c",
        work / "build/orders-fixed.wasm",
        defines={"AMBER_VARIANT_FIXED": "1"},
    )
    # amber dev checks credentials and keeps its admin's token under its home, as the CLI finds it.
    token = (tmp_path / "home" / "token").read_text().strip()
    client = AmberClient(target, timeout_s=20, token=token)
    client.upload_version(modules["hostile"], promote=True)
    poisoned = [client.start_run("good", {"crash": True, "n": i}).run.run_id for i in range(5)]
    env = {
        **os.environ,
        "AMBER_SERVER": target,
        "AMBER_HOME": str(tmp_path / "home"),
        "AMBER_DATABASE_URL": database_url,
    }
    env.pop("AMBER_OPERATOR_TOKEN", None)
    yield Session(target=target, client=client, work=work, env=env, poisoned=poisoned)
    client.close()


@pytest.mark.slow
def test_the_readme_runs_as_written_against_amber_dev(live: Session) -> None:
    s = live
    commands = [c for c in readme_commands((ROOT / "README.md").read_text()) if c[1] not in NOT_RUN]
    for words in commands:
        verb = (words[1], words[2] if len(words) > 2 else "")
        if verb in BEFORE:
            BEFORE[verb](s)
        words = _substitute(s, words)
        captured = _capture(s, words)
        if captured is not None:
            s.values.update(captured)
            continue
        code, out, err = s.run(words)
        assert code == 0, f"{shlex.join(words)} exited {code}:\n{out}{err}"
        if verb == ("triage", "replay"):
            assert "REPRODUCED" in out, out
    # The README's stories end where they say they do.
    c = s.client
    ran = {tuple(w[1:3]) for w in s.ran}
    assert {("versions", "retire"), ("triage", "resume"), ("approvals", "decide")} <= ran
    assert c.get_version("onboard@1").retired_at is not None
    assert c.result("ship-1").status.value == "completed"
    assert c.result("ship-3").status.value == "terminated"
    assert c.result(s.poisoned[0]).status.value == "completed"  # resumed on the fix
    assert c.result(s.poisoned[3]).status.value == "completed"  # skipped by hand
    assert c.result(s.poisoned[4]).status.value == "terminated"
    approval = c.list_approvals(run_id=c.result("expense-E-7").run_id)
    assert [a.status for a in approval] == ["approved"]
