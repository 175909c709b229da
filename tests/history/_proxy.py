"""A TCP proxy in front of PostgreSQL that a test can cut and restore, to test outages.

Modelled on psycopg_pool's own proxy fixture: clients connect to `127.0.0.1:<port>`; each
connection is forwarded to the real server (TCP, or the server's unix socket when the DSN names a
socket directory, as the embedded server's does). `cut()` drops every live connection and makes
new ones fail until `restore()`. `strand()` silences the live connections without closing them
(a vanished host). `lose_commit_answer()` lets the next COMMIT reach the server,
waits for the server's answer, and cuts that connection instead of passing the answer on: the
commit happened, and the client cannot know it.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import threading
from pathlib import Path

import psycopg

_DEFAULT_PORT = 5432


def upstream_of(dsn: str) -> tuple[str, int] | str | None:
    """Where a DSN's server listens: `(host, port)`, a unix socket path, or None if unclear."""
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    host = str(info.get("host") or "")
    port_text = str(info.get("port") or os.environ.get("PGPORT") or _DEFAULT_PORT)
    if not host or "," in host or "," in port_text or info.get("hostaddr"):
        return None  # libpq defaults or several hosts: not worth guessing here
    port = int(port_text)
    if host.startswith("/"):
        return str(Path(host) / f".s.PGSQL.{port}")
    return host, port


class PgProxy:
    """Forwards 127.0.0.1:`port` to `upstream`; `cut()`/`restore()` simulate an outage."""

    def __init__(self, upstream: tuple[str, int] | str) -> None:
        self._upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._live: set[socket.socket] = set()
        self._stranded: set[socket.socket] = set()
        self._refusing = False
        self._lose_commit = threading.Event()
        self.commits_lost = 0
        self._stopped = threading.Event()
        self._acceptor = threading.Thread(target=self._accept_loop, name="pg-proxy", daemon=True)
        self._acceptor.start()

    def dsn(self, dsn: str) -> str:
        """`dsn` rewritten to reach its server through this proxy."""
        info = psycopg.conninfo.conninfo_to_dict(dsn)
        info.pop("hostaddr", None)
        info.update(host="127.0.0.1", port=str(self.port))
        return psycopg.conninfo.make_conninfo("", **info)

    def cut(self) -> None:
        """Drop every live connection and refuse new ones until `restore()`."""
        with self._lock:
            self._refusing = True
            live = list(self._live)
        for sock in live:
            _shutdown(sock)

    def strand(self) -> None:
        """Make every live connection go silent without closing: bytes sent on it either way
        are swallowed, as when a host vanishes or the network partitions. New connections
        still go through (to a replacement at the same address)."""
        with self._lock:
            self._stranded.update(self._live)

    def lose_commit_answer(self) -> None:
        """Cut the connection whose next COMMIT goes through, after the server answered it."""
        self._lose_commit.set()

    def restore(self) -> None:
        """Accept and forward connections again."""
        with self._lock:
            self._refusing = False

    def close(self) -> None:
        self._stopped.set()
        self.cut()
        self._acceptor.join(timeout=5)
        self._listener.close()

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                refusing = self._refusing
            if refusing:
                client.close()  # the client sees its connection closed during start-up
                continue
            try:
                upstream = self._connect_upstream()
            except OSError:
                client.close()
                continue
            client.setblocking(True)
            with self._lock:
                self._live.update((client, upstream))
            threading.Thread(
                target=self._pump, args=(client, upstream), name="pg-proxy-pump", daemon=True
            ).start()

    def _connect_upstream(self) -> socket.socket:
        if isinstance(self._upstream, str):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(self._upstream)
            return sock
        return socket.create_connection(self._upstream, timeout=5)

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        # One thread per connection moves bytes both ways; it alone closes the two sockets, so
        # `cut()` (another thread) only shuts them down and never races a reused descriptor.
        peers = {client: upstream, upstream: client}
        upstream.settimeout(None)
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            try:
                while True:
                    for key, _ in selector.select():
                        source: socket.socket = key.fileobj  # type: ignore[assignment]
                        data = source.recv(65536)
                        if not data:
                            return
                        if source in self._stranded:
                            continue  # swallowed: nothing answers, nothing closes
                        peers[source].sendall(data)
                        if source is client and _is_commit(data) and self._lose_commit.is_set():
                            self._lose_commit.clear()
                            upstream.recv(65536)  # the server committed and answered: drop it
                            self.commits_lost += 1
                            return
            except OSError:
                return
            finally:
                with self._lock:
                    self._live.difference_update(peers)
                    self._stranded.difference_update(peers)
                for sock in peers:
                    _shutdown(sock)
                    sock.close()


def _is_commit(data: bytes) -> bool:
    """A simple-protocol query message holding just COMMIT (how psycopg commits)."""
    return data.startswith(b"Q") and data[5:].rstrip(b"\x00").strip().upper() == b"COMMIT"


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already disconnected
        sock.shutdown(socket.SHUT_RDWR)
