"""TLS end to end: a real `amber server` with `--auth` and mutual TLS, a real `amber worker` and
the CLI, all over TLS with certificates made by openssl for the test; and what happens to a
client that speaks plaintext or has no certificate."""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from amber.history import Database
from tests.conftest import ROOT, Process, wait_for

ORDER = '{"order_id": "T-1", "sku": "X", "quantity": 1, "amount_cents": 10}'


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all from that CA."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make the test's certificates (Debian: openssl)")
    d = tmp_path_factory.mktemp("pki")
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=Amber test CA", cwd=d)  # fmt: skip
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name in ("server", "client"):
        _openssl("req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", f"/CN=amber-{name}", cwd=d)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.pem", "-days", "2",
                 "-extfile", f"{name}.ext", cwd=d)  # fmt: skip
    return d


def _amber(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amber.tools.cli", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_server_worker_and_cli_over_mutual_tls(
    amber_process: Callable[..., Process],
    pki: Path,
    database_url: str,
    db: Database,  # an empty engine
    modules: dict[str, bytes],
    tmp_path: Path,
) -> None:
    port_file = tmp_path / "port"
    server = amber_process(
        "server", "--listen", "127.0.0.1:0", "--port-file", str(port_file), "--auth",
        "--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key"),
        "--tls-client-ca", str(pki / "ca.pem"), "--approvals-listen", "127.0.0.1:0",
    )  # fmt: skip
    wait_for(port_file.exists, 60, "the server to start")
    home = tmp_path / "home"
    plain = {
        **os.environ,
        "AMBER_DATABASE_URL": database_url,
        "AMBER_HOME": str(home),
        "AMBER_SERVER": f"127.0.0.1:{port_file.read_text()}",
    }
    for key in ("AMBER_TOKEN", "AMBER_TLS_CA", "AMBER_TLS_CERT", "AMBER_TLS_KEY"):
        plain.pop(key, None)
    tls = {
        **plain,
        "AMBER_TLS_CA": str(pki / "ca.pem"),
        "AMBER_TLS_CERT": str(pki / "client.pem"),
        "AMBER_TLS_KEY": str(pki / "client.key"),
    }
    assert _amber(tls, "auth", "bootstrap", "root", "--save", str(home)).returncode == 0

    # The whole path over TLS: upload, a worker with its own credential, a run to the end.
    wasm = tmp_path / "orders.wasm"
    wasm.write_bytes(modules["orders"])
    done = _amber(tls, "versions", "upload", str(wasm), "--promote")
    assert done.returncode == 0, done.stderr
    done = _amber(tls, "--json", "auth", "grant", "fleet", "--role", "worker", "--reason", "tls")
    assert done.returncode == 0, done.stderr
    worker_env = {**tls, "AMBER_TOKEN": json.loads(done.stdout)["token"]}
    worker_env.pop("AMBER_HOME")
    worker = amber_process(
        "--server", plain["AMBER_SERVER"], "worker", "--guests", "1", env=worker_env
    )
    done = _amber(tls, "--json", "run", "start", "orders", "--input", ORDER, "--wait", "60")
    assert done.returncode == 0, done.stderr + server.output() + worker.output()
    assert json.loads(done.stdout)["status"] == "completed"

    # Plaintext, and TLS without a client certificate, get nowhere.
    done = _amber(plain, "run", "list")
    assert done.returncode != 0 and "unavailable" in done.stderr.lower()
    no_cert = {k: v for k, v in tls.items() if k not in ("AMBER_TLS_CERT", "AMBER_TLS_KEY")}
    done = _amber(no_cert, "run", "list")
    assert done.returncode != 0 and "unavailable" in done.stderr.lower()
    done = _amber({**tls, "AMBER_TLS_CA": str(pki / "client.pem")}, "run", "list")
    assert done.returncode != 0  # a server certificate the client does not trust

    # The approval page and console: the same certificate, the same client CA.
    found = re.search(r"approval page on (https://\S+)", server.output())
    assert found, server.output()
    context = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    context.load_cert_chain(str(pki / "client.pem"), str(pki / "client.key"))
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(f"{found[1]}/approvals/apv_unknown", context=context, timeout=10)
    assert answer.value.code in (403, 404)
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
        bare = ssl.create_default_context(cafile=str(pki / "ca.pem"))
        urllib.request.urlopen(f"{found[1]}/approvals/apv_unknown", context=bare, timeout=10)


def test_bad_certificate_files_are_named_at_start(
    pki: Path, database_url: str, tmp_path: Path
) -> None:
    env = {**os.environ, "AMBER_DATABASE_URL": database_url, "AMBER_HOME": str(tmp_path)}
    not_pem = tmp_path / "junk.pem"
    not_pem.write_text("hello")
    done = _amber(env, "server", "--listen", "127.0.0.1:0", "--tls-cert", str(not_pem),
                  "--tls-key", str(pki / "server.key"))  # fmt: skip
    assert done.returncode == 2 and f"the TLS certificate {not_pem} is not PEM" in done.stderr
    done = _amber(env, "server", "--listen", "127.0.0.1:0", "--tls-cert", str(pki / "server.pem"))
    assert done.returncode == 2 and "needs both --tls-cert and --tls-key" in done.stderr
