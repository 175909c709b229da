"""`amber bench --peers`: run the peers' harness in the same invocation and read its figures.

The harness (`../shared/bench/peers/run_all.sh`) installs and runs the Temporal dev server and
DBOS on this machine with the workload `amber bench` has just run. It is slow (Temporal does
about 6 workflows/s, so a configuration takes minutes at N=1000) and it depends on PyPI and on
processes of its own, so it is treated as something that can fail: its output is streamed with a
prefix, it runs under a timeout, and whatever goes wrong comes back as a `PeersOutcome` with the
reason — never as an exception that would lose Amber's figures.

Each invocation gets its own results folder under `PEERS_WORK/runs/`, because the harness's
summary collects every result file in its folder and an older run's configuration must not show
up as if it had been measured beside this one. The venvs in `PEERS_WORK` are reused
(`SKIP_INSTALL=1`) once they hold the engines' packages.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

_ROOT: Final = Path(__file__).resolve().parent.parent
DEFAULT_SCRIPT: Final = _ROOT.parent / "shared" / "bench" / "peers" / "run_all.sh"
DEFAULT_WORK: Final = Path(os.environ.get("PEERS_WORK") or "/tmp/amber-peers")

TEMPORAL_CONFIGS: Final = (
    "t_file_sandbox",
    "t_file_nosandbox",
    "t_file_local",
    "t_file_sandbox_2w",
    "t_mem_sandbox",
)
"""Every configuration `run_all.sh` knows for Temporal, in its order."""
DBOS_CONFIGS: Final = (
    "d_inproc_sync",
    "d_inproc_async",
    "d_queue_default",
    "d_queue_tuned",
    "d_queue_tuned_2w",
)
"""Every configuration `run_all.sh` knows for DBOS, in its order."""
HEADLINE_TEMPORAL: Final = ("t_file_sandbox", "t_file_local")
"""The default Temporal rows: SDK defaults, and its fastest durable mode (local activities)."""
HEADLINE_DBOS: Final = ("d_inproc_sync", "d_inproc_async", "d_queue_tuned")
"""The default DBOS rows: both in-process modes and the like-for-like client → queue → worker."""

_TAIL_LINES: Final = 40
_PREFIX: Final = "[peers] "


def parse_configs(text: str, engine: str) -> tuple[str, ...]:
    """Config names from a flag: comma- or space-separated, `all`, or `none`/empty for none.

    Use it on user input before anything slow starts, so a typo fails at once.
    """
    known = TEMPORAL_CONFIGS if engine == "temporal" else DBOS_CONFIGS
    names = tuple(name for name in text.replace(",", " ").split() if name)
    if names in ((), ("none",)):
        return ()
    if names == ("all",):
        return known
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"unknown {engine} config(s) {unknown}; known: {', '.join(known)}")
    return tuple(dict.fromkeys(names))


@dataclass(frozen=True, slots=True, kw_only=True)
class PeersOptions:
    """How to run the peers' harness: the workload knobs are the ones Amber just ran."""

    n: int
    """Workflows in the throughput phase (`N`)."""
    k: int
    """Sequential steps per workflow (`K`)."""
    w: int
    """Concurrent starters (`W`)."""
    latency_runs: int
    """Sequential runs of the idle-latency test (`LAT_RUNS`)."""
    temporal: tuple[str, ...] = HEADLINE_TEMPORAL
    """Temporal configurations to run (empty: none)."""
    dbos: tuple[str, ...] = HEADLINE_DBOS
    """DBOS configurations to run (empty: none)."""
    script: Path = DEFAULT_SCRIPT
    """The harness's `run_all.sh` (it copies itself into `work`)."""
    work: Path = DEFAULT_WORK
    """`PEERS_WORK`: venvs, the peers' PostgreSQL data, logs and `runs/<stamp>/` results."""
    timeout_s: float = 3600.0
    """Longest the whole harness may take; then it is stopped and the run counts as failed."""
    stop_grace_s: float = 60.0
    """After a timeout or Ctrl-C: how long the harness gets to stop what it started."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PeersOutcome:
    """What one harness invocation produced, or why it did not."""

    ok: bool
    """Every requested configuration has a throughput figure and the harness exited 0."""
    error: str | None
    """Why not, in one line (None when ok)."""
    returncode: int | None
    """The harness's exit status (None: it never started)."""
    wall_s: float
    run_dir: Path
    """This invocation's folder: `results/`, `results.json`, `logs/`, `harness.log`."""
    requested: tuple[str, ...]
    missing: tuple[str, ...]
    """Requested configurations without a throughput figure (failed in the harness)."""
    summary: tuple[dict[str, Any], ...]
    """The harness's `summarize.py` rows (one per configuration that wrote results)."""
    meta: dict[str, Any]
    """Versions, host and knobs the harness recorded."""
    tail: tuple[str, ...]
    """The last lines of its output, kept when it failed."""

    def to_json(self) -> dict[str, Any]:
        """The outcome as it goes into the bench JSON."""
        return {
            "ok": self.ok,
            "error": self.error,
            "returncode": self.returncode,
            "wall_s": round(self.wall_s, 1),
            "run_dir": str(self.run_dir),
            "results_json": str(self.run_dir / "results.json"),
            "requested": list(self.requested),
            "missing": list(self.missing),
            "summary": list(self.summary),
            "meta": self.meta,
            "output_tail": list(self.tail) if not self.ok else [],
        }


def run_peers(options: PeersOptions, echo: Callable[[str], None] | None = None) -> PeersOutcome:
    """Run the harness on `options`' workload and return its figures; never raises for its
    failures (missing script, non-zero exit, timeout, Ctrl-C, unreadable results).

    `echo` receives each output line, prefixed (default: this process's stderr).
    """
    show = echo or _stderr
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    run_dir = options.work / "runs" / stamp
    requested = options.temporal + options.dbos
    tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
    began = time.monotonic()

    def outcome(error: str | None, returncode: int | None) -> PeersOutcome:
        summary, meta, read_error = _read_results(run_dir / "results.json")
        rows = tuple(r for r in summary if r.get("config") in requested)
        have = {r["config"] for r in rows if r.get("workflows_per_s") is not None}
        missing = tuple(c for c in requested if c not in have)
        reason = error
        if reason is None and returncode:
            reason = f"the harness exited with status {returncode}"
        if reason is None and read_error and returncode is not None:
            reason = read_error
        if reason is None and missing:
            reason = f"no throughput figure for {', '.join(missing)} (see {run_dir}/logs)"
        return PeersOutcome(
            ok=reason is None,
            error=reason,
            returncode=returncode,
            wall_s=time.monotonic() - began,
            run_dir=run_dir,
            requested=requested,
            missing=missing,
            summary=rows,
            meta=meta,
            tail=tuple(tail),
        )

    if not requested:
        return outcome("no peer configuration was asked for", None)
    if not options.script.is_file():
        return outcome(f"the harness script {options.script} does not exist", None)
    postmaster = options.work / "pg" / "data" / "postmaster.pid"
    if _live_postmaster(postmaster) is not None:
        busy = f"a PostgreSQL of the harness already runs ({postmaster}): another harness run?"
        return outcome(busy, None)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        log = (run_dir / "harness.log").open("w", encoding="utf-8")
    except OSError as exc:
        return outcome(f"cannot create {run_dir}: {exc}", None)
    env = _environment(options, run_dir)
    show(
        f"{_PREFIX}{options.script} in {options.work}: N={options.n} K={options.k} W={options.w}"
        f" LAT_RUNS={options.latency_runs}; temporal {list(options.temporal)}, dbos"
        f" {list(options.dbos)}; install {'skipped' if env['SKIP_INSTALL'] == '1' else 'on'}"
    )
    with log:
        try:
            popen = subprocess.Popen(
                ["bash", str(options.script)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                bufsize=1,
                start_new_session=True,  # one process group: stopped together, by its id
            )
        except OSError as exc:
            return outcome(f"cannot start the harness: {exc}", None)
        assert popen.stdout is not None
        reader = threading.Thread(
            target=_pump, args=(popen.stdout, log, tail, show), name="peers-output", daemon=True
        )
        reader.start()
        error: str | None = None
        try:
            popen.wait(timeout=options.timeout_s)
        except subprocess.TimeoutExpired:
            error = f"timed out after {options.timeout_s:.0f} s"
        except KeyboardInterrupt:
            error = "interrupted (Ctrl-C)"
        if error is not None:
            show(f"{_PREFIX}{error}: stopping the harness")
            _stop_group(popen, options.stop_grace_s)
            _stop_leftover_postgres(postmaster)
        reader.join(timeout=10.0)
        _salvage(options.work, run_dir, log)
    return outcome(error, popen.returncode)


def _salvage(work: Path, run_dir: Path, log: Any) -> None:
    """When the harness stopped before its summary, summarize the configurations it finished
    (its `summarize.py` is stdlib-only and was copied into `work`)."""
    results = run_dir / "results"
    if (run_dir / "results.json").exists() or not any(results.glob("[td]_*.json")):
        return
    command = [sys.executable, str(work / "summarize.py"), "--results", str(results)]
    command += ["--out", str(run_dir / "results.json")]
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=60, check=False)


def _environment(options: PeersOptions, run_dir: Path) -> dict[str, str]:
    engines = [name for name, configs in (("temporal", options.temporal), ("dbos", options.dbos))
               if configs]  # fmt: skip
    env = {
        **os.environ,
        "N": str(options.n),
        "K": str(options.k),
        "W": str(options.w),
        "LAT_RUNS": str(options.latency_runs),
        "REPEAT": "1",
        "PEERS_WORK": str(options.work),
        "ONLY": " ".join(engines),
        "TEMPORAL_CONFIGS": " ".join(options.temporal),
        "DBOS_CONFIGS": " ".join(options.dbos),
        "RES_DIR": str(run_dir / "results"),
        "OUT_JSON": str(run_dir / "results.json"),
        "LOGS_DIR": str(run_dir / "logs"),
        "SKIP_INSTALL": "1" if all(_installed(options.work, e) for e in engines) else "0",
    }
    env.pop("AMBER_DATABASE_URL", None)  # the DBOS runs use the harness's own PostgreSQL
    return env


def _installed(work: Path, engine: str) -> bool:
    """The venv exists with the engine's package in it (a half-done install is redone)."""
    venv = work / f"venv-{engine}"
    package = "temporalio" if engine == "temporal" else "dbos"
    has_package = any(venv.glob(f"lib/python*/site-packages/{package}/__init__.py"))
    tool = venv / "bin" / ("temporal" if engine == "temporal" else "python")
    return has_package and tool.exists()


def _pump(stream: Any, log: Any, tail: collections.deque[str], show: Callable[[str], None]) -> None:
    for line in stream:
        text = line.rstrip("\n")
        log.write(line)
        log.flush()
        tail.append(text)
        show(_PREFIX + text)


def _stop_group(popen: subprocess.Popen[str], grace_s: float) -> None:
    """SIGTERM the harness's process group until it exits, then SIGKILL it.

    One SIGTERM is not enough: `run_all.sh` traps TERM to stop its servers and then carries on
    with its next configuration, so the signal is repeated until the script itself is gone.
    """
    deadline = time.monotonic() + grace_s
    while popen.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=2.0)
    if popen.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait(timeout=30.0)
    with contextlib.suppress(ProcessLookupError):  # children that outlived the script
        os.killpg(popen.pid, signal.SIGKILL)


def _stop_leftover_postgres(postmaster_pid_file: Path) -> None:
    """The harness starts its PostgreSQL with `pg_ctl`, in a session of its own: when the
    script was killed before its clean-up, fast-shutdown that postmaster (it was not running
    before this invocation, see `run_peers`)."""
    pid = _live_postmaster(postmaster_pid_file)
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + 30.0
    while _live_postmaster(postmaster_pid_file) == pid and time.monotonic() < deadline:
        time.sleep(0.2)


def _live_postmaster(pid_file: Path) -> int | None:
    """The pid in `postmaster.pid` if that process runs and is a PostgreSQL server (a stale
    file's pid may since belong to anything)."""
    try:
        pid = int(pid_file.read_text().split("\n", 1)[0])
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
    except (OSError, ValueError, IndexError):
        return None
    alive = state not in ("Z", "X") and program.rsplit(b"/", 1)[-1] == b"postgres"
    return pid if alive else None


def _read_results(path: Path) -> tuple[tuple[dict[str, Any], ...], dict[str, Any], str | None]:
    """The harness's `results.json`: its summary rows and metadata (its raw runs are left in
    the file)."""
    try:
        data = json.loads(path.read_text())
        summary: Sequence[dict[str, Any]] = data.get("summary") or []
        meta: dict[str, Any] = data.get("meta") or {}
    except (OSError, ValueError, AttributeError) as exc:
        return (), {}, f"no readable {path}: {exc}"
    return tuple(summary), meta, None


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
