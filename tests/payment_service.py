"""A loopback "payment service" for tests of side effects: it honours idempotency keys, counts
what it receives, and lets a test inject failures or act at the exact moment a charge is made.

    with PaymentService() as pay:
        ...  # guest posts to pay.url("/charge") with an Idempotency-Key
        assert pay.charges == 1

Endpoints:
- `POST /charge` — JSON `{"order_id": str, "amount_cents": int}` and an `Idempotency-Key` header
  (missing → 400). The first request with a key makes charge `ch_<n>` and answers
  `{"charge_id", "order_id", "amount_cents", "replayed": false}`; a repeat answers the same charge
  with `"replayed": true` and makes no new charge; a repeat with a different body → 422.
- `GET /status` → `{"ok": true}`.
- `GET /slow?ms=N` → sleeps N ms, then `{"slept_ms": N}`.
- `GET /trickle?bytes=N&interval_ms=M` → declares N bytes (default 600) and sends one every M ms
  (default 100).
- `GET /big?bytes=N[&chunked=1]` → N bytes of `x`, with Content-Length or chunked.
- `GET /redirect?to=URL` → 302 to URL.
- any method on `/echo` → `{"method", "path", "headers": [[name, value], ...], "body"}`.
- anything else → 404.

Hooks run on the server's request thread: `on_charge` after a new charge is recorded and before
its response is written (a test may SIGKILL a worker there: the charge exists, the caller never
hears of it; a callback that raises drops the response); `after_response` after a `/charge`
response was written and flushed.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

_CHUNK = 64 * 1024
_MAX_REQUEST_BODY = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Charge:
    """One distinct charge the service made."""

    charge_id: str
    """`ch_<n>`, n counting from 1."""
    order_id: str
    amount_cents: int
    idempotency_key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ChargeResponse:
    """What a `/charge` request got back, as passed to `after_response`."""

    charge: Charge
    replayed: bool


class PaymentService:
    """The service, on 127.0.0.1 and an ephemeral port, served from a background thread.

    Use it as a context manager (or call `start`/`stop`). Counters and hooks are thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._charges_by_key: dict[str, Charge] = {}
        self._charge_list: list[Charge] = []
        self._key_counts: Counter[str] = Counter()
        self._hits: Counter[str] = Counter()
        self._requests = 0
        self._failures: list[tuple[int, str | None]] = []
        self._on_charge: Callable[[Charge], None] | None = None
        self._after_response: Callable[[ChargeResponse], None] | None = None

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> PaymentService:
        """Bind and start serving; returns self."""
        if self._server is not None:
            raise RuntimeError("PaymentService already started")
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="payment-service",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; slow and trickling responses end promptly."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> PaymentService:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- where it is ------------------------------------------------------------------------

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("PaymentService not started")
        return int(self._server.server_address[1])

    @property
    def authority(self) -> str:
        """`127.0.0.1:<port>`, the entry to put in a module's HTTP allowlist."""
        return f"{self.host}:{self.port}"

    def url(self, path: str = "/") -> str:
        """The absolute URL of `path` on this service."""
        return f"http://{self.authority}{path}"

    # --- what it saw ------------------------------------------------------------------------

    @property
    def charges(self) -> int:
        """Distinct charges made (repeats with a known key do not count)."""
        with self._lock:
            return len(self._charge_list)

    @property
    def charge_list(self) -> tuple[Charge, ...]:
        """Every distinct charge, in the order made."""
        with self._lock:
            return tuple(self._charge_list)

    def charges_for(self, order_id: str) -> int:
        """Distinct charges made for one order."""
        with self._lock:
            return sum(1 for c in self._charge_list if c.order_id == order_id)

    @property
    def requests(self) -> int:
        """Every request received, on any path, including injected failures."""
        with self._lock:
            return self._requests

    def key_count(self, key: str) -> int:
        """How many `/charge` requests carried Idempotency-Key `key` (replays included)."""
        with self._lock:
            return self._key_counts[key]

    @property
    def key_counts(self) -> dict[str, int]:
        """`/charge` requests per Idempotency-Key, a snapshot."""
        with self._lock:
            return dict(self._key_counts)

    def hits(self, path: str) -> int:
        """Requests received for `path` (without its query)."""
        with self._lock:
            return self._hits[path]

    # --- behaviour ---------------------------------------------------------------------------

    def fail_next(self, status: int, times: int = 1, *, path: str | None = None) -> None:
        """Answer the next `times` requests (to `path`, or to any path) with `status`.

        A failed `/charge` makes no charge (its key is still counted by `key_count`).
        """
        with self._lock:
            self._failures.extend([(status, path)] * times)

    def on_charge(self, callback: Callable[[Charge], None] | None) -> None:
        """Call `callback(charge)` after a new charge is recorded, before its response is sent.

        If the callback raises, the charge stands and the connection is closed without an
        answer: the caller sees its request fail although the charge was made.
        """
        with self._lock:
            self._on_charge = callback

    def after_response(self, callback: Callable[[ChargeResponse], None] | None) -> None:
        """Call `callback(response)` after a `/charge` response was fully written and flushed."""
        with self._lock:
            self._after_response = callback

    # --- used by the handler -----------------------------------------------------------------

    def _arrived(self, path: str, key: str | None) -> int | None:
        """Count a request; return the injected status to answer it with, if any."""
        with self._lock:
            self._requests += 1
            self._hits[path] += 1
            if path == "/charge" and key is not None:
                self._key_counts[key] += 1
            for i, (status, only) in enumerate(self._failures):
                if only is None or only == path:
                    del self._failures[i]
                    return status
            return None

    def _charge(self, key: str, order_id: str, amount_cents: int) -> tuple[Charge, bool]:
        with self._lock:
            known = self._charges_by_key.get(key)
            if known is not None:
                return known, True
            charge = Charge(
                charge_id=f"ch_{len(self._charge_list) + 1}",
                order_id=order_id,
                amount_cents=amount_cents,
                idempotency_key=key,
            )
            self._charges_by_key[key] = charge
            self._charge_list.append(charge)
            return charge, False

    def _hooks(
        self,
    ) -> tuple[Callable[[Charge], None] | None, Callable[[ChargeResponse], None] | None]:
        with self._lock:
            return self._on_charge, self._after_response

    def _wait(self, seconds: float) -> bool:
        """Sleep unless the service stops first; False when it is stopping."""
        return not self._stopping.wait(seconds)


def _handler_for(service: PaymentService) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        pass

    Handler.service = service
    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    service: PaymentService

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests read counters, not logs

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        injected = self.service._arrived(split.path, self.headers.get("Idempotency-Key"))
        body = self._body()
        if body is None:
            return
        if injected is not None:
            self._json(injected, {"error": "injected failure"})
            return
        route = {
            ("POST", "/charge"): self._charge,
            ("GET", "/status"): lambda b, q: self._json(200, {"ok": True}),
            ("GET", "/slow"): self._slow,
            ("GET", "/trickle"): self._trickle,
            ("GET", "/big"): self._big,
            ("GET", "/redirect"): self._redirect,
        }.get((self.command, split.path))
        if split.path == "/echo":
            route = self._echo
        if route is None:
            self._json(404, {"error": f"no route {self.command} {split.path}"})
            return
        route(body, query)

    def _body(self) -> bytes | None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_REQUEST_BODY:
            self._json(413, {"error": "request body too large"})
            return None
        return self.rfile.read(length) if length else b""

    def _json(self, status: int, doc: object, extra: dict[str, str] | None = None) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()

    def _charge(self, body: bytes, query: dict[str, str]) -> None:
        key = self.headers.get("Idempotency-Key")
        if not key:
            self._json(400, {"error": "Idempotency-Key header is required"})
            return
        try:
            doc = json.loads(body)
            order_id, amount = doc["order_id"], doc["amount_cents"]
        except (ValueError, TypeError, KeyError):
            self._json(400, {"error": "body must be JSON {order_id, amount_cents}"})
            return
        if not isinstance(order_id, str) or type(amount) is not int:
            self._json(400, {"error": "order_id must be a string and amount_cents an int"})
            return
        charge, replayed = self.service._charge(key, order_id, amount)
        if replayed and (charge.order_id, charge.amount_cents) != (order_id, amount):
            self._json(422, {"error": "Idempotency-Key reused with different parameters"})
            return
        on_charge, after_response = self.service._hooks()
        if not replayed and on_charge is not None:
            try:
                on_charge(charge)
            except Exception:  # the charge stands but its answer is lost, as in a crash
                self.close_connection = True
                return
        self._json(
            200,
            {
                "charge_id": charge.charge_id,
                "order_id": charge.order_id,
                "amount_cents": charge.amount_cents,
                "replayed": replayed,
            },
        )
        if after_response is not None:
            after_response(ChargeResponse(charge=charge, replayed=replayed))

    def _slow(self, body: bytes, query: dict[str, str]) -> None:
        ms = int(query.get("ms", "1000"))
        if self.service._wait(ms / 1000):
            self._json(200, {"slept_ms": ms})

    def _trickle(self, body: bytes, query: dict[str, str]) -> None:
        total = int(query.get("bytes", "600"))
        interval = int(query.get("interval_ms", "100")) / 1000
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(total))
        self.end_headers()
        self.wfile.flush()
        try:
            for _ in range(total):
                if not self.service._wait(interval):
                    break
                self.wfile.write(b".")
                self.wfile.flush()
        except OSError:  # the client gave up: what a trickle test expects
            pass
        self.close_connection = True

    def _big(self, body: bytes, query: dict[str, str]) -> None:
        total = int(query.get("bytes", str(_CHUNK)))
        chunked = query.get("chunked") == "1"
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(total))
        self.end_headers()
        block = b"x" * _CHUNK
        sent = 0
        started = time.monotonic()
        try:
            while sent < total and not self.service._stopping.is_set():
                part = block[: min(_CHUNK, total - sent)]
                if chunked:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                else:
                    self.wfile.write(part)
                sent += len(part)
                if time.monotonic() - started > 30:
                    break
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:  # the client refused the rest
            self.close_connection = True

    def _redirect(self, body: bytes, query: dict[str, str]) -> None:
        self._json(302, {"to": query.get("to", "/")}, {"Location": query.get("to", "/")})

    def _echo(self, body: bytes, query: dict[str, str]) -> None:
        self._json(
            200,
            {
                "method": self.command,
                "path": self.path,
                "headers": [[k, v] for k, v in self.headers.items()],
                "body": body.decode("latin-1"),
            },
        )
