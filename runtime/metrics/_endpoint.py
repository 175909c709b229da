"""The operations endpoint: `/metrics` (Prometheus), `/healthz` (the process answers) and
`/readyz` (it can do its work: the server reaches its database, a worker its server).

The standard library's threaded HTTP server: three read-only routes need no framework, and a
worker must not load Flask to be scraped.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from amber.abi import InvalidInput

_log = logging.getLogger(__name__)

Readiness = Callable[[], tuple[bool, str]]
"""Whether the process can do its work now, and a sentence saying why (or why not)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OpsListen:
    """Where to serve the operations endpoint."""

    host: str = "127.0.0.1"
    port: int = 0
    any_port_if_taken: bool = False
    """Serve on a free port when `port` is taken (`amber dev`: the same port every start,
    unless something else holds it)."""


class OpsEndpoint:
    """Serves `/metrics`, `/healthz` and `/readyz` on a thread until `stop()`."""

    def __init__(self, registry: CollectorRegistry, ready: Readiness, where: OpsListen) -> None:
        handler = _handler(registry, ready)
        try:
            self._http = ThreadingHTTPServer((where.host, where.port), handler)
        except OSError as exc:
            if not where.any_port_if_taken:
                raise InvalidInput(
                    f"cannot serve metrics on {where.host}:{where.port}:"
                    f" {exc.strerror or exc} (another worker or server there, or one that just"
                    " stopped? --metrics-listen picks another address)"
                ) from None
            self._http = ThreadingHTTPServer((where.host, 0), handler)
        self._http.daemon_threads = True
        host = where.host
        self.host = host
        self.port = int(self._http.server_address[1])
        self._thread = threading.Thread(
            target=self._http.serve_forever, name="amber-ops-http", daemon=True
        )

    @property
    def url(self) -> str:
        """The endpoint's base URL (`/metrics` is below it)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> OpsEndpoint:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() waits for a serve loop that never began
            self._http.shutdown()
        self._http.server_close()


def _handler(registry: CollectorRegistry, ready: Readiness) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, CONTENT_TYPE_LATEST, generate_latest(registry))
            elif path == "/healthz":
                self._json(200, {"status": "alive"})
            elif path == "/readyz":
                try:
                    ok, detail = ready()
                except Exception as exc:  # a probe must answer, not hang up
                    ok, detail = False, f"readiness check failed: {exc}"
                self._json(200 if ok else 503, {"ready": ok, "detail": detail})
            else:
                self._json(404, {"error": f"no such path: {path} (/metrics, /healthz, /readyz)"})

        def _json(self, status: int, body: object) -> None:
            self._send(status, "application/json", json.dumps(body).encode())

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            _log.debug("ops http: " + format, *args)

    return Handler
