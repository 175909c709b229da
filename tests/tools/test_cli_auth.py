"""`amber server` is secure by default and `amber auth ...` manages its credentials, as real
processes: a server reachable beyond loopback will not start open unless told so loudly, the
first admin comes from the database, and the CLI finds its credential where it was saved."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from amber.history import Database
from tests.conftest import ROOT, Process, wait_for


def _amber(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amber.tools.cli", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _env(database_url: str, home: Path) -> dict[str, str]:
    env = {**os.environ, "AMBER_DATABASE_URL": database_url, "AMBER_HOME": str(home)}
    env.pop("AMBER_TOKEN", None)
    return env


def test_a_server_beyond_loopback_does_not_start_open(database_url: str, tmp_path: Path) -> None:
    env = _env(database_url, tmp_path / "home")
    done = _amber(env, "server", "--listen", "0.0.0.0:0")
    assert done.returncode == 2
    assert "0.0.0.0:0 is reachable beyond this machine: start with --auth" in done.stderr
    done = _amber(env, "server", "--listen", "0.0.0.0:0", "--auth")
    assert done.returncode == 2 and "and --tls-cert/--tls-key" in done.stderr
    done = _amber(env, "server", "--listen", "127.0.0.1:0", "--approvals-listen", "0.0.0.0:0")
    assert done.returncode == 2 and "reachable beyond this machine" in done.stderr


def test_insecure_is_explicit_and_loud(
    amber_process: Callable[..., Process], tmp_path: Path
) -> None:
    port_file = tmp_path / "port"
    server = amber_process(
        "server", "--listen", "0.0.0.0:0", "--insecure", "--port-file", str(port_file)
    )
    wait_for(port_file.exists, 60, "the server to start")
    assert "INSECURE: credentials are not checked (--insecure)" in server.output()


def test_bootstrap_then_manage_credentials_from_the_cli(
    amber_process: Callable[..., Process],
    database_url: str,
    db: Database,  # an empty engine
    tmp_path: Path,
) -> None:
    port_file = tmp_path / "port"
    amber_process("server", "--listen", "127.0.0.1:0", "--auth", "--port-file", str(port_file))
    wait_for(port_file.exists, 60, "the server to start")
    home = tmp_path / "home"
    env = {**_env(database_url, home), "AMBER_SERVER": f"127.0.0.1:{port_file.read_text()}"}

    refused = _amber(env, "run", "list")
    assert refused.returncode == 2 and "needs a credential" in refused.stderr
    # A worker without a credential stops at once and says why, rather than retrying forever.
    refused = _amber(env, "worker", "--guests", "1", "--slots", "1")
    assert refused.returncode == 2 and "the server refuses this worker" in refused.stderr

    done = _amber(env, "auth", "bootstrap", "root", "--save", str(home))
    assert done.returncode == 0, done.stderr
    assert f"token saved to {home / 'token'}" in done.stdout and "amb_" not in done.stdout
    assert (home / "token").stat().st_mode & 0o777 == 0o600

    done = _amber(env, "--json", "auth", "grant", "shop", "--role", "application",
                  "--tenant", "acme", "--reason", "checkout service")  # fmt: skip
    assert done.returncode == 0, done.stderr
    shop = json.loads(done.stdout)
    assert shop["token"].startswith("amb_") and shop["tenants"] == ["acme"]

    as_shop = {**env, "AMBER_TOKEN": shop["token"]}
    assert _amber(as_shop, "run", "list", "--tenant", "acme").returncode == 0
    done = _amber(as_shop, "run", "list")
    assert done.returncode == 2 and "may not act in tenant 'default'" in done.stderr
    done = _amber(as_shop, "audit", "list")
    assert done.returncode == 2 and "may not call ListAudit" in done.stderr

    listed = json.loads(_amber(env, "--json", "auth", "list").stdout)
    assert [p["name"] for p in listed["principals"]] == ["root", "shop"]
    assert listed["next_page"] is None and "token" not in listed["principals"][0]

    assert _amber(env, "auth", "revoke", "shop", "--reason", "retired").returncode == 0
    done = _amber(as_shop, "run", "list", "--tenant", "acme")
    assert done.returncode == 2 and "unknown, rotated or revoked" in done.stderr
    actions = [r["action"] for r in json.loads(_amber(env, "--json", "audit", "list").stdout)
               ["records"]]  # fmt: skip
    assert actions == ["auth.grant", "auth.grant", "auth.revoke"]
