"""The host side of the HTTP capability (abi/README.md, *HTTP*): the allowlist a module declares
in its manifest, and `perform`, which makes one request for a guest under the activation's
remaining wall-clock budget.

Independent of wasmtime: the `http_request` host import decodes nothing itself, it hands the
guest's bytes to `perform` and keeps the envelope it returns for `take`.

Design: the standard library's `http.client` on a fresh connection per request (no pooling, no
proxies from the environment, no redirects, no decompression), with every step — name
resolution, connect, TLS handshake, send, read — bounded by one deadline: socket timeouts bound
each operation and a watchdog timer shuts the socket down when the deadline passes, so a server
that trickles bytes cannot hold the worker (Extism #717). Name resolution runs on a daemon thread
because `getaddrinfo` cannot be interrupted. Rejected: `urllib.request` (follows redirects and
reads proxy settings from the environment) and a third-party client (a dependency for one
import).

Names are resolved once, before anything is sent, and the addresses are screened: a name that
resolves to any internal address (loopback, private, link-local, ..., see `_addresses`) is
refused with `HostNotAllowed` unless that address is itself an IP literal in the allowlist.
The connection then goes to exactly the screened addresses — `http.client` never resolves the
name again — while the Host header, TLS SNI and certificate check use the name. So an
allowlisted name whose DNS answer changes (rebinding) cannot reach the worker's own network.
Redirects are not followed: a guest that follows one makes a new request, screened the same way.
Rejected: CIDR entries in the allowlist (a literal address says which internal host a module
needs; a range would widen the manifest grammar for a case no module has yet).

What ends the activation and what the guest sees: a request the guest could not have encoded
that way on purpose (not msgpack, wrong types, unknown keys) is an `AbiViolation`; running out of
the activation's budget is `DeadlineExceeded`; everything else — a host not in the allowlist, a
URL or header the host refuses, the request's own `timeout_ms`, a network failure, an oversized
response — comes back to the guest as an error envelope it can handle.
"""

from __future__ import annotations

import contextlib
import enum
import http.client
import ipaddress
import queue
import re
import socket
import ssl
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from amber.abi import Manifest, ManifestError, NotMsgpack, pack, pack_with_bytes, unpack
from amber.runtime.model import AbiViolation, DeadlineExceeded

from ._addresses import IPAddress, Resolver, internal_kind, system_resolver

MAX_BODY_BYTES = 4 * 1024 * 1024
"""Cap on the request body a guest sends and on the response body it gets back."""
MAX_REQUEST_BYTES = MAX_BODY_BYTES + 64 * 1024
"""Cap on a whole request envelope (body plus method, URL and headers); the import's read cap."""
MAX_RESPONSE_HEADER_BYTES = 64 * 1024
"""Cap on the response's header names and values together."""
MAX_ALLOW_ENTRIES = 256
_READ_CHUNK = 64 * 1024
_IDEMPOTENCY_HEADER = "Idempotency-Key"
_HOST_SET_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "upgrade",
        "te",
        "trailer",
        "expect",
    }
)
"""Headers the host writes itself; a guest setting them could smuggle or retarget a request."""
_REQUEST_KEYS = frozenset({"method", "url", "headers", "body", "timeout_ms"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


class HttpErrorType(enum.StrEnum):
    """The `type` of an `{"error": [type, message]}` response envelope."""

    HOST_NOT_ALLOWED = "HostNotAllowed"
    """The module declares no HTTP capability, the URL's host is not in its allowlist, or the
    host's name resolves to an internal address the allowlist does not name literally."""
    TIMEOUT = "Timeout"
    """The request's own `timeout_ms` ran out (the activation's budget did not)."""
    CONNECTION_ERROR = "ConnectionError"
    """Resolution, connect, TLS or the exchange failed, or the response broke a host cap."""
    BAD_REQUEST = "BadRequest"
    """The host refuses the request as asked (URL, scheme, method, header or body size)."""


class _Refused(Exception):
    """Internal: ends `perform` with an error envelope for the guest."""

    def __init__(self, kind: HttpErrorType, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


# --- hosts and the allowlist ---------------------------------------------------------------

_LABEL = r"(?!-)[a-z0-9_-]{1,63}(?<!-)"
_DNS_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_AUTHORITY = re.compile(
    r"(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[^:\[\]]+))(?::(?P<port>[0-9]{1,5}))?"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class _HostPort:
    host: str
    """Lowercase DNS name, or the IP address in its canonical text form."""
    address: IPAddress | None
    """Set when the host is an IP literal."""
    port: int | None


def _host_port(text: str) -> _HostPort:
    """Parse `host`, `host:port`, `1.2.3.4[:port]` or `[v6][:port]`; ValueError when invalid."""
    match = _AUTHORITY.fullmatch(text.lower())
    if match is None:
        raise ValueError("expected host, host:port or [IPv6]:port")
    port = None
    if match["port"] is not None:
        port = int(match["port"])
        if not 1 <= port <= 65535:
            raise ValueError(f"port {port} is out of range")
    if match["v6"] is not None:
        try:
            v6 = ipaddress.IPv6Address(match["v6"])
        except ValueError:
            raise ValueError(f"[{match['v6']}] is not an IPv6 address") from None
        return _HostPort(host=str(v6), address=v6, port=port)
    name = match["name"]
    try:
        v4 = ipaddress.IPv4Address(name)
    except ValueError:
        pass
    else:
        return _HostPort(host=str(v4), address=v4, port=port)
    if len(name) > 253 or not _DNS_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a valid host name")
    try:  # "127.1", "0x7f", "2130706433": names the resolver would read as IPv4 addresses
        socket.inet_aton(name)
    except OSError:
        pass
    else:
        raise ValueError(f"{name!r} is a non-canonical IPv4 address; write it as a.b.c.d")
    return _HostPort(host=name, address=None, port=port)


@dataclass(frozen=True, slots=True, kw_only=True)
class AllowRule:
    """One entry of a module's HTTP allowlist, normalised."""

    host: str
    """Lowercase DNS name (for a wildcard, the suffix after `*.`), or a canonical IP address."""
    address: IPAddress | None = None
    """Set for an IP literal, which matches only that address in a URL, and also lets an allowed
    name reach that address when the name resolves to it (even if the address is internal)."""
    wildcard: bool = False
    """`*.suffix`: matches every subdomain of `suffix`, at any depth, but not `suffix` itself."""
    port: int | None = None
    """The only port allowed; None allows any port."""

    @classmethod
    def parse(cls, entry: str) -> AllowRule:
        """Parse one allowlist entry; raises ValueError saying what is wrong with it."""
        wildcard = entry.startswith("*.")
        parsed = _host_port(entry[2:] if wildcard else entry)
        if wildcard and parsed.address is not None:
            raise ValueError("a wildcard needs a DNS suffix, not an IP address")
        return cls(host=parsed.host, address=parsed.address, wildcard=wildcard, port=parsed.port)

    def _matches(self, target: _HostPort, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.address is not None or target.address is not None:
            return self.address == target.address
        if self.wildcard:
            return target.host.endswith("." + self.host)
        return target.host == self.host


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpPolicy:
    """The hosts a module may reach, from `capabilities.http.allow` in its manifest.

    Build it once per module version with `http_policy(manifest)` and pass it to every
    `perform` call of that module's activities.
    """

    allow: tuple[AllowRule, ...]

    @classmethod
    def parse(cls, entries: object) -> HttpPolicy:
        """Parse an allowlist (a list of strings); raises `ManifestError` naming a bad entry."""
        where = "manifest capabilities.http.allow"
        if not isinstance(entries, list):
            raise ManifestError(f"{where} must be a list of host names")
        if len(entries) > MAX_ALLOW_ENTRIES:
            raise ManifestError(
                f"{where} has {len(entries)} entries; the limit is {MAX_ALLOW_ENTRIES}"
            )
        rules = []
        for entry in entries:
            if not isinstance(entry, str):
                raise ManifestError(f"{where} entries must be strings, got {entry!r}")
            try:
                rules.append(AllowRule.parse(entry))
            except ValueError as exc:
                raise ManifestError(
                    f"{where} entry {entry!r} is invalid ({exc});"
                    " expected 'host', 'host:port' or '*.suffix'"
                ) from None
        return cls(allow=tuple(rules))

    def allows(self, url: str) -> bool:
        """Whether the allowlist admits `url`'s host and port (False for URLs `perform` refuses).

        Judges the URL alone: `perform` also refuses a name that resolves to an internal address.
        """
        try:
            target = _parse_url(url)
        except _Refused:
            return False
        return self._admits(target)

    def _admits(self, target: _Target) -> bool:
        return any(rule._matches(target.host, target.port) for rule in self.allow)

    def _screen(self, target: _Target, addresses: Sequence[IPAddress]) -> None:
        """Refuse a name that resolved to an internal address not allowlisted as a literal."""
        if target.host.address is not None:  # an IP literal URL matched a literal entry
            return
        for address in addresses:
            kind = internal_kind(address)
            if kind is None or self._admits_address(address, target.port):
                continue
            raise _Refused(
                HttpErrorType.HOST_NOT_ALLOWED,
                f"{target.host.host} resolves to {address} ({kind}); a name may reach an"
                " internal address only when that address itself is in the module's"
                " capabilities.http.allow",
            )

    def _admits_address(self, address: IPAddress, port: int) -> bool:
        literal = _HostPort(host=str(address), address=address, port=None)
        return any(r.address is not None and r._matches(literal, port) for r in self.allow)


def _capabilities(manifest: Manifest) -> HttpPolicy | None:
    caps = manifest.extra.get("capabilities")
    if caps is None:
        return None
    if not isinstance(caps, dict):
        raise ManifestError("manifest 'capabilities' must be an object")
    if unknown := sorted(set(caps) - {"http"}):
        raise ManifestError(
            f"manifest declares capability {unknown[0]!r}, which this host does not offer"
            " (it offers: http)"
        )
    http = caps.get("http")
    if http is None:
        return None
    if not isinstance(http, dict) or set(http) != {"allow"}:
        raise ManifestError(
            'manifest capabilities.http must be an object with one key, "allow": [host, ...]'
        )
    return HttpPolicy.parse(http["allow"])


def http_policy(manifest: Manifest) -> HttpPolicy | None:
    """The module's HTTP allowlist, or None when it declares no HTTP capability.

    Raises `ManifestError` for a malformed `capabilities` declaration (which upload refuses).
    """
    return _capabilities(manifest)


def check_capabilities(manifest: Manifest) -> None:
    """Refuse, with `ManifestError`, a manifest whose `capabilities` this host cannot honour.

    Call it at upload, next to the other manifest checks, so a bad allowlist never gets stored.
    """
    _capabilities(manifest)


# --- the request --------------------------------------------------------------------------

_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^/?#]*)(?P<rest>.*)")
_TARGET_CHARS = re.compile(r"[\x21-\x7e]*")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Target:
    scheme: str
    host: _HostPort
    port: int
    path: str
    """Path and query, as sent on the request line (never empty; no fragment)."""


def _parse_url(url: str) -> _Target:
    match = _URL.fullmatch(url)
    if match is None:
        raise _Refused(HttpErrorType.BAD_REQUEST, f"{url[:200]!r} is not an absolute URL")
    scheme = match["scheme"].lower()
    if scheme not in _DEFAULT_PORTS:
        raise _Refused(HttpErrorType.BAD_REQUEST, f"URL scheme {scheme!r} is not http or https")
    authority = match["authority"]
    if "@" in authority:
        raise _Refused(HttpErrorType.BAD_REQUEST, "URLs with user information (user@) are refused")
    try:
        host = _host_port(authority)
    except ValueError as exc:
        raise _Refused(HttpErrorType.BAD_REQUEST, f"URL host {authority[:200]!r}: {exc}") from None
    path = match["rest"].split("#", 1)[0]
    if not _TARGET_CHARS.fullmatch(path):
        raise _Refused(
            HttpErrorType.BAD_REQUEST,
            "URL path and query must be printable ASCII without spaces (percent-encode the rest)",
        )
    if not path.startswith("/"):
        path = "/" + path
    port = host.port if host.port is not None else _DEFAULT_PORTS[scheme]
    return _Target(scheme=scheme, host=host, port=port, path=path)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Request:
    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes | None
    timeout_ms: int | None


def _decode(request: bytes) -> _Request:
    """Decode the guest's request map; anything not shaped as the ABI says is an AbiViolation."""
    if len(request) > MAX_REQUEST_BYTES:
        raise AbiViolation(
            f"http_request envelope is {len(request)} bytes; the cap is {MAX_REQUEST_BYTES}"
        )
    try:
        doc = unpack(request, what="http_request envelope")
    except NotMsgpack as exc:
        raise AbiViolation(f"http_request envelope is not valid msgpack: {exc.detail}") from None
    if not isinstance(doc, dict):
        raise AbiViolation("http_request envelope must be a msgpack map")
    if unknown := sorted(set(doc) - _REQUEST_KEYS):
        raise AbiViolation(f"http_request envelope has unknown key {unknown[0]!r}")
    method, url = doc.get("method"), doc.get("url")
    if not isinstance(method, str) or not isinstance(url, str):
        raise AbiViolation("http_request envelope needs 'method' and 'url' as strings")
    headers = doc.get("headers", {})
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise AbiViolation("http_request 'headers' must be a map of strings to strings")
    body = doc.get("body")
    if "body" in doc and not isinstance(body, bytes):
        raise AbiViolation("http_request 'body' must be bin")
    timeout_ms = doc.get("timeout_ms")
    if "timeout_ms" in doc and (type(timeout_ms) is not int or timeout_ms <= 0):
        raise AbiViolation(f"http_request 'timeout_ms' must be a positive int, got {timeout_ms!r}")
    return _Request(
        method=method, url=url, headers=tuple(headers.items()), body=body, timeout_ms=timeout_ms
    )


def _check_request(request: _Request) -> None:
    if not _TOKEN.fullmatch(request.method) or request.method.upper() == "CONNECT":
        raise _Refused(HttpErrorType.BAD_REQUEST, f"method {request.method[:64]!r} is refused")
    for name, value in request.headers:
        if not _TOKEN.fullmatch(name):
            raise _Refused(HttpErrorType.BAD_REQUEST, f"header name {name[:64]!r} is invalid")
        if name.lower() in _HOST_SET_HEADERS:
            raise _Refused(HttpErrorType.BAD_REQUEST, f"header {name!r} is set by the host")
        if not _HEADER_VALUE.fullmatch(value):
            raise _Refused(
                HttpErrorType.BAD_REQUEST,
                f"header {name!r} has a control character or non-Latin-1 text in its value",
            )
    if request.body is not None and len(request.body) > MAX_BODY_BYTES:
        raise _Refused(
            HttpErrorType.BAD_REQUEST,
            f"request body is {len(request.body)} bytes; the cap is {MAX_BODY_BYTES}",
        )


def _with_idempotency_key(headers: Sequence[tuple[str, str]], key: str) -> dict[str, str]:
    out = dict(headers)
    if not any(name.lower() == _IDEMPOTENCY_HEADER.lower() for name in out):
        out[_IDEMPOTENCY_HEADER] = key
    out["Connection"] = "close"
    return out


# --- the exchange, under one deadline --------------------------------------------------------


class _Watchdog:
    """Shuts the connection's socket down when the deadline passes, waking any blocked call."""

    def __init__(self, deadline: float) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._fired = False
        self._timer = threading.Timer(max(deadline - time.monotonic(), 0.0), self._fire)
        self._timer.daemon = True
        self._timer.name = "amber-http-watchdog"
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock
            if self._fired:
                _shutdown(sock)

    def _fire(self) -> None:
        with self._lock:
            self._fired = True
            if self._sock is not None:
                _shutdown(self._sock)

    def stop(self) -> bool:
        """Disarm; True when the deadline had already passed (the exchange may be truncated)."""
        self._timer.cancel()
        with self._lock:
            self._sock = None
            return self._fired


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # the plain-socket method, also for an SSLSocket:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # a syscall, safe from another thread


def _resolve(target: _Target, deadline: float, resolve: Resolver) -> tuple[IPAddress, ...]:
    """The addresses to screen and connect to: the literal itself, or one call of `resolve`."""
    if target.host.address is not None:
        return (target.host.address,)
    results: queue.SimpleQueue[Sequence[IPAddress] | Exception] = queue.SimpleQueue()

    def lookup() -> None:
        try:
            results.put(resolve(target.host.host))
        except Exception as exc:
            results.put(exc)

    threading.Thread(target=lookup, name="amber-http-resolve", daemon=True).start()
    try:
        found = results.get(timeout=max(deadline - time.monotonic(), 0.0))
    except queue.Empty:
        raise TimeoutError(f"resolving {target.host.host}") from None
    if isinstance(found, OSError):
        raise _Refused(
            HttpErrorType.CONNECTION_ERROR, f"cannot resolve {target.host.host}: {found}"
        )
    if isinstance(found, Exception):
        raise found
    if not found:
        raise _Refused(HttpErrorType.CONNECTION_ERROR, f"{target.host.host} resolves to no address")
    return tuple(found)


class _Connection(http.client.HTTPConnection):
    """An HTTP connection to addresses `perform` already resolved and screened, bounded and
    watched by it; `host` stays the URL's name, for the Host header and TLS."""

    def __init__(
        self,
        target: _Target,
        addresses: Sequence[IPAddress],
        *,
        deadline: float,
        watchdog: _Watchdog,
    ) -> None:
        super().__init__(target.host.host, target.port, timeout=None)
        self._addresses = addresses
        self._deadline = deadline
        self._watchdog = watchdog

    def connect(self) -> None:
        sys.audit("http.client.connect", self, self.host, self.port)
        error: OSError | None = None
        for address in self._addresses:
            v4 = address.version == 4
            sock = socket.socket(socket.AF_INET if v4 else socket.AF_INET6, socket.SOCK_STREAM)
            self._watchdog.watch(sock)
            try:
                sock.settimeout(max(self._deadline - time.monotonic(), 0.001))
                sock.connect((str(address), self.port) if v4 else (str(address), self.port, 0, 0))
            except OSError as exc:
                sock.close()
                if isinstance(exc, TimeoutError):
                    raise
                error = exc
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock = sock
            return
        raise error or OSError(f"no address for {self.host}")


class _TlsConnection(_Connection):
    default_port = http.client.HTTPS_PORT

    def connect(self) -> None:
        super().connect()
        tls = _tls_context().wrap_socket(
            self.sock, server_hostname=self.host, do_handshake_on_connect=False
        )
        self.sock = tls
        self._watchdog.watch(tls)
        tls.do_handshake()


@cache
def _tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()


def _exchange(
    request: _Request,
    target: _Target,
    addresses: Sequence[IPAddress],
    headers: dict[str, str],
    deadline: float,
) -> bytes:
    """Send the request and read the whole response; returns the encoded response envelope.

    Raises `TimeoutError` when `deadline` passed (whatever the exchange itself raised then),
    `_Refused` when the response breaks a cap, or the connection's own errors.
    """
    watchdog = _Watchdog(deadline)
    kind = _TlsConnection if target.scheme == "https" else _Connection
    conn = kind(target, addresses, deadline=deadline, watchdog=watchdog)
    response: http.client.HTTPResponse | None = None
    try:
        conn.request(request.method, target.path, body=request.body, headers=headers)
        response = conn.getresponse()
        envelope = _read_response(response)
    except Exception as exc:
        if watchdog.stop():  # whatever broke, it broke because the socket was shut down
            raise TimeoutError("the deadline passed during the exchange") from exc
        raise
    finally:
        fired = watchdog.stop()  # disarmed before the socket is closed
        if response is not None:
            response.close()
        conn.close()
    if fired:  # the deadline passed just as the read ended: the body may be cut short
        raise TimeoutError("the deadline passed while the response was read")
    return envelope


def _read_response(response: http.client.HTTPResponse) -> bytes:
    header_bytes = sum(len(k) + len(v) for k, v in response.getheaders())
    if header_bytes > MAX_RESPONSE_HEADER_BYTES:
        raise _Refused(
            HttpErrorType.CONNECTION_ERROR,
            f"response headers are {header_bytes} bytes; the cap is {MAX_RESPONSE_HEADER_BYTES}",
        )
    if response.length is not None and response.length > MAX_BODY_BYTES:
        raise _Refused(
            HttpErrorType.CONNECTION_ERROR,
            f"response body is {response.length} bytes (Content-Length); the cap is"
            f" {MAX_BODY_BYTES}",
        )
    body = bytearray()
    while chunk := response.read(min(_READ_CHUNK, MAX_BODY_BYTES + 1 - len(body))):
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise _Refused(
                HttpErrorType.CONNECTION_ERROR,
                f"response body is larger than the cap of {MAX_BODY_BYTES} bytes",
            )
    headers: dict[str, str] = {}
    for name, value in response.getheaders():  # repeated fields are joined, as RFC 9110 allows
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return pack_with_bytes({"status": response.status, "headers": headers}, "body", body)


def _error(kind: HttpErrorType, message: str) -> bytes:
    return pack({"error": [kind.value, message]})


def perform(
    request: bytes,
    *,
    policy: HttpPolicy | None,
    deadline: float,
    idempotency_key: str,
    resolve: Resolver = system_resolver,
) -> bytes:
    """Make the HTTP request a guest asked for and return the response envelope (msgpack).

    Call it from the `http_request` host import of an activity activation, with the module's
    `http_policy`, the activation's `time.monotonic()` deadline and the attempt's idempotency
    key. Raises `AbiViolation` for a malformed request and `DeadlineExceeded` when the
    activation's budget is spent before or during the request; every other failure is an error
    envelope for the guest. Blocks for at most the remaining budget (plus scheduling slack).
    `resolve` turns the URL's host name into addresses (called once; tests pass their own).
    """
    decoded = _decode(request)
    try:
        if policy is None:
            raise _Refused(
                HttpErrorType.HOST_NOT_ALLOWED,
                "the module declares no HTTP capability (capabilities.http.allow in its manifest)",
            )
        target = _parse_url(decoded.url)
        if not policy._admits(target):
            raise _Refused(
                HttpErrorType.HOST_NOT_ALLOWED,
                f"{target.host.host} port {target.port} is not in the module's"
                " capabilities.http.allow",
            )
        _check_request(decoded)
        headers = _with_idempotency_key(decoded.headers, idempotency_key)
        if time.monotonic() >= deadline:
            raise DeadlineExceeded("http_request called after the activation deadline")
        own = None if decoded.timeout_ms is None else time.monotonic() + decoded.timeout_ms / 1000
        limit = deadline if own is None else min(deadline, own)
        try:
            addresses = _resolve(target, limit, resolve)
            policy._screen(target, addresses)
            envelope = _exchange(decoded, target, addresses, headers, limit)
        except TimeoutError:
            if own is None or deadline <= own:
                raise DeadlineExceeded(
                    f"http_request to {target.host.host} ran past the activation deadline"
                ) from None
            raise _Refused(
                HttpErrorType.TIMEOUT, f"no complete response within {decoded.timeout_ms} ms"
            ) from None
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise _Refused(
                HttpErrorType.CONNECTION_ERROR, f"{target.host.host}: {_describe(exc)}"
            ) from None
    except _Refused as refused:
        return _error(refused.kind, refused.message)
    return envelope


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate verification failed: {exc.verify_message}"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text


__all__ = [
    "MAX_BODY_BYTES",
    "MAX_REQUEST_BYTES",
    "AllowRule",
    "HttpErrorType",
    "HttpPolicy",
    "check_capabilities",
    "http_policy",
    "perform",
]
