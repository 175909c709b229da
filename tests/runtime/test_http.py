"""The HTTP capability's host side against a real loopback payment service: the allowlist, the
screen on the addresses a name resolves to, the idempotency key, exactly-once charges, and every
way a request can fail — each either an error envelope for the guest or a typed fault that ends
the activation, never a hung worker.

Names other than `localhost` resolve through `_Dns`, a table the test passes to `perform`, so no
test depends on external DNS; the service is reached by name only where the allowlist also names
127.0.0.1 literally (a name alone may not reach loopback)."""

from __future__ import annotations

import ipaddress
import json
import socket
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import cache
from typing import Any

import msgpack
import pytest

from amber.abi import ManifestError, parse_manifest
from amber.runtime.model._faults import AbiViolation, DeadlineExceeded
from amber.runtime.sandbox._addresses import IPAddress, internal_kind
from amber.runtime.sandbox._http import (
    MAX_BODY_BYTES,
    MAX_REQUEST_BYTES,
    HttpPolicy,
    check_capabilities,
    http_policy,
    perform,
)
from tests.payment_service import Charge, ChargeResponse, PaymentService

KEY = "run-1/3"


@pytest.fixture
def pay() -> Iterator[PaymentService]:
    with PaymentService() as service:
        yield service


@pytest.fixture
def policy(pay: PaymentService) -> HttpPolicy:
    return HttpPolicy.parse([pay.authority])


def _request(url: str, method: str = "GET", **fields: Any) -> bytes:
    return bytes(msgpack.packb({"method": method, "url": url, **fields}))


class _Dns:
    """A resolver for `perform` that answers from a table and records the names it was asked.
    A name maps to a list of answers, one per call (the last repeats): a rebinding server."""

    def __init__(self, table: dict[str, list[list[str]]]) -> None:
        self._table = table
        self.calls: list[str] = []

    def __call__(self, host: str) -> Sequence[IPAddress]:
        self.calls.append(host)
        answers = self._table.get(host)
        if answers is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        answer = answers[min(len(self.calls) - 1, len(answers) - 1)]
        return [ipaddress.ip_address(a) for a in answer]


def _dns(**names: str | list[str]) -> _Dns:
    """`_dns(svc="127.0.0.1")`: `svc.test` always answers 127.0.0.1."""
    return _Dns(
        {f"{n}.test": [[a] if isinstance(a, str) else a] for n, a in names.items()},
    )


def _call(
    request: bytes,
    policy: HttpPolicy | None,
    *,
    budget: float = 5.0,
    key: str = KEY,
    dns: _Dns | None = None,
) -> dict[str, Any]:
    extra = {} if dns is None else {"resolve": dns}
    raw = perform(
        request, policy=policy, deadline=time.monotonic() + budget, idempotency_key=key, **extra
    )
    doc = msgpack.unpackb(raw)
    assert isinstance(doc, dict)
    return doc


def _error_type(doc: dict[str, Any]) -> str:
    assert "error" in doc, doc
    kind, message = doc["error"]
    assert message
    return str(kind)


def _json(doc: dict[str, Any]) -> Any:
    return json.loads(doc["body"])


def _charge(pay: PaymentService, order: str = "A-1", **fields: Any) -> bytes:
    body = json.dumps({"order_id": order, "amount_cents": 1200}).encode()
    return _request(pay.url("/charge"), "POST", body=body, **fields)


@contextmanager
def _raw_server(serve: Callable[[socket.socket, threading.Event], None]) -> Iterator[int]:
    """A one-connection TCP server on loopback that runs `serve` on the accepted socket; the
    event is set when the test is done with the server (wait on it instead of sleeping)."""
    done = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)

    def run() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn, suppress(OSError):
            serve(conn, done)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        done.set()
        listener.close()
        thread.join(timeout=5)


def _closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        return int(sock.getsockname()[1])


# --- the allowlist ---------------------------------------------------------------------------


def test_an_allowed_host_is_reached(pay: PaymentService, policy: HttpPolicy) -> None:
    doc = _call(_request(pay.url("/status")), policy)
    assert doc["status"] == 200
    assert _json(doc) == {"ok": True}
    assert doc["headers"]["content-type"] == "application/json"
    assert all(name == name.lower() for name in doc["headers"])


def test_a_host_not_in_the_allowlist_is_refused_without_a_request(pay: PaymentService) -> None:
    denied = HttpPolicy.parse(["api.example.com", "localhost"])
    assert _error_type(_call(_request(pay.url("/status")), denied)) == "HostNotAllowed"
    assert pay.requests == 0


def test_a_module_without_the_capability_gets_host_not_allowed(pay: PaymentService) -> None:
    assert _error_type(_call(_request(pay.url("/status")), None)) == "HostNotAllowed"
    assert pay.requests == 0


def test_a_port_specific_entry_allows_only_that_port(pay: PaymentService) -> None:
    other = HttpPolicy.parse([f"127.0.0.1:{pay.port + 1 if pay.port < 65535 else 1}"])
    assert _error_type(_call(_request(pay.url("/status")), other)) == "HostNotAllowed"
    any_port = HttpPolicy.parse(["127.0.0.1"])
    assert _call(_request(pay.url("/status")), any_port)["status"] == 200


def test_names_and_ip_literals_match_only_themselves(pay: PaymentService) -> None:
    by_name = f"http://svc.test:{pay.port}/status"
    dns = _dns(svc="127.0.0.1")
    literal_only = HttpPolicy.parse(["127.0.0.1"])
    assert _error_type(_call(_request(by_name), literal_only, dns=dns)) == "HostNotAllowed"
    both = HttpPolicy.parse(["svc.test", "127.0.0.1"])
    assert _error_type(_call(_request(pay.url("/status")), HttpPolicy.parse(["svc.test"]))) == (
        "HostNotAllowed"
    )
    assert _call(_request(by_name), both, dns=dns)["status"] == 200
    assert dns.calls == ["svc.test"]  # the literal-only policy refused the name unresolved


def test_host_names_compare_case_insensitively(pay: PaymentService) -> None:
    policy = HttpPolicy.parse([f"Svc.Test:{pay.port}", "127.0.0.1"])
    url = f"http://SVC.TEST:{pay.port}/status"
    assert _call(_request(url), policy, dns=_dns(svc="127.0.0.1"))["status"] == 200


def test_a_wildcard_allows_subdomains_only(pay: PaymentService) -> None:
    policy = HttpPolicy.parse(["*.example.com", "*.internal:8443"])
    assert policy.allows("http://api.example.com/")
    assert policy.allows("https://a.b.example.com:9000/x")
    assert policy.allows("https://API.Example.COM/")
    assert not policy.allows("http://example.com/")
    assert not policy.allows("http://badexample.com/")
    assert not policy.allows("http://api.example.com.evil.net/")
    assert policy.allows("https://svc.internal:8443/")
    assert not policy.allows("https://svc.internal/")
    wild_localhost = HttpPolicy.parse(["*.localhost"])
    url = f"http://localhost:{pay.port}/status"
    assert _error_type(_call(_request(url), wild_localhost)) == "HostNotAllowed"


def test_ip_literals_compare_as_addresses() -> None:
    policy = HttpPolicy.parse(["[::1]", "10.0.0.1:8080"])
    assert policy.allows("http://[::1]/")
    assert policy.allows("http://[0:0:0::1]:9000/")
    assert not policy.allows("http://[::ffff:127.0.0.1]/")
    assert policy.allows("http://10.0.0.1:8080/")
    assert not policy.allows("http://10.0.0.1/")
    for disguised in ("http://10.1/", "http://167772161:8080/", "http://0xa.0.0.1:8080/"):
        assert not policy.allows(disguised), disguised


@pytest.mark.parametrize(
    "url",
    [
        "http://{authority}@evil.example/status",
        "http://user@{authority}/status",
        "http://user:pw@{authority}/status",
        "http://evil.example\\@{authority}/status",
    ],
)
def test_userinfo_in_the_url_is_refused(pay: PaymentService, policy: HttpPolicy, url: str) -> None:
    doc = _call(_request(url.format(authority=pay.authority)), policy)
    assert _error_type(doc) == "BadRequest"
    assert pay.requests == 0


# --- names that resolve to internal addresses ---------------------------------------------------

_CONNECTS: list[list[Any]] = []
"""While a test holds a list here, socket connects are recorded in it and refused."""


def _intercept_connects(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect" and _CONNECTS:
        _CONNECTS[-1].append(args[1])
        raise ConnectionRefusedError("connect intercepted by the test")


@cache
def _install_connect_hook() -> None:
    sys.addaudithook(_intercept_connects)  # an audit hook cannot be removed: it idles when unused


@pytest.fixture
def connects() -> Iterator[list[Any]]:
    """The socket addresses `perform` connects to; each connect fails at once instead of going
    out, so a test can use a global address without touching the network."""
    _install_connect_hook()
    seen: list[Any] = []
    _CONNECTS.append(seen)
    try:
        yield seen
    finally:
        _CONNECTS.remove(seen)


_GLOBAL = "93.184.215.14"
"""A globally reachable address; tests connect to it only through `connects`."""


def test_an_allowlisted_name_that_resolves_to_loopback_is_refused(pay: PaymentService) -> None:
    dns = _dns(svc="127.0.0.1")
    doc = _call(
        _request(f"http://svc.test:{pay.port}/status"), HttpPolicy.parse(["svc.test"]), dns=dns
    )
    assert _error_type(doc) == "HostNotAllowed"
    message = doc["error"][1]
    assert "svc.test resolves to 127.0.0.1 (loopback)" in message
    assert "capabilities.http.allow" in message
    assert pay.requests == 0
    assert dns.calls == ["svc.test"]


def test_localhost_by_name_is_refused_through_the_system_resolver(pay: PaymentService) -> None:
    doc = _call(_request(f"http://localhost:{pay.port}/status"), HttpPolicy.parse(["localhost"]))
    assert _error_type(doc) == "HostNotAllowed"
    assert "loopback" in doc["error"][1]
    assert pay.requests == 0


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.2", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("100.100.100.200", "shared"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("255.255.255.255", "reserved"),
        ("192.0.2.1", "reserved"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fd00:ec2::254", "unique-local"),
        ("fc00::1", "unique-local"),
        ("fe80::1", "link-local"),
        ("fec0::1", "site-local"),
        ("ff02::1", "multicast"),
        ("2001:db8::1", "reserved"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
        ("2002:7f00:1::1", "loopback"),
        ("64:ff9b::a9fe:a9fe", "link-local"),
        ("::7f00:1", "reserved"),
        ("4000::1", "reserved"),
    ],
)
def test_every_kind_of_internal_address_is_refused(
    connects: list[Any], address: str, kind: str
) -> None:
    found = internal_kind(ipaddress.ip_address(address))
    assert found is not None and kind in found
    doc = _call(_request("http://svc.test/"), HttpPolicy.parse(["svc.test"]), dns=_dns(svc=address))
    assert _error_type(doc) == "HostNotAllowed"
    assert f"svc.test resolves to {ipaddress.ip_address(address)} (" in doc["error"][1]
    assert connects == []


@pytest.mark.parametrize(
    "address",
    [_GLOBAL, "8.8.8.8", "2606:4700:4700::1111", "64:ff9b::808:808", "2002:808:808::1"],
)
def test_a_name_that_resolves_to_a_global_address_is_connected_to_that_address(
    connects: list[Any], address: str
) -> None:
    assert internal_kind(ipaddress.ip_address(address)) is None
    dns = _dns(svc=address)
    doc = _call(_request("http://svc.test:8080/"), HttpPolicy.parse(["svc.test"]), dns=dns)
    assert _error_type(doc) == "ConnectionError"  # the intercepted connect, past the screen
    assert [(a[0], a[1]) for a in connects] == [(str(ipaddress.ip_address(address)), 8080)]


def test_one_internal_answer_among_global_ones_refuses_the_name(connects: list[Any]) -> None:
    dns = _dns(svc=[_GLOBAL, "10.0.0.7"])
    doc = _call(_request("http://svc.test/"), HttpPolicy.parse(["svc.test"]), dns=dns)
    assert _error_type(doc) == "HostNotAllowed"
    assert "10.0.0.7 (private (RFC 1918))" in doc["error"][1]
    assert connects == []


def test_an_internal_address_allowlisted_literally_is_reached_by_name(pay: PaymentService) -> None:
    dns = _dns(svc="127.0.0.1")
    policy = HttpPolicy.parse(["svc.test", f"127.0.0.1:{pay.port}"])
    doc = _call(_request(f"http://svc.test:{pay.port}/echo"), policy, dns=dns)
    assert doc["status"] == 200
    assert ["Host", f"svc.test:{pay.port}"] in _json(doc)["headers"]  # the name, not the address
    assert dns.calls == ["svc.test"]


def test_the_literal_entry_must_cover_the_port_and_every_internal_answer(
    pay: PaymentService,
) -> None:
    url = f"http://svc.test:{pay.port}/status"
    other_port = HttpPolicy.parse(["svc.test", f"127.0.0.1:{pay.port + 1}"])
    assert _error_type(_call(_request(url), other_port, dns=_dns(svc="127.0.0.1"))) == (
        "HostNotAllowed"
    )
    policy = HttpPolicy.parse(["svc.test", "127.0.0.1"])
    doc = _call(_request(url), policy, dns=_dns(svc=["127.0.0.1", "169.254.169.254"]))
    assert _error_type(doc) == "HostNotAllowed"
    assert "169.254.169.254 (link-local" in doc["error"][1]
    mapped = _call(_request(url), policy, dns=_dns(svc="::ffff:127.0.0.1"))
    assert _error_type(mapped) == "HostNotAllowed"  # 127.0.0.1 names only the IPv4 address
    assert pay.requests == 0


def test_the_name_is_resolved_once_and_the_checked_answer_is_used(
    pay: PaymentService, connects: list[Any]
) -> None:
    rebinding = _Dns({"svc.test": [[_GLOBAL], ["127.0.0.1"]]})  # global first, loopback after
    url = f"http://svc.test:{pay.port}/status"
    doc = _call(_request(url), HttpPolicy.parse(["svc.test"]), dns=rebinding)
    assert _error_type(doc) == "ConnectionError"
    assert rebinding.calls == ["svc.test"]
    assert connects == [(_GLOBAL, pay.port)]
    assert pay.requests == 0


def test_a_rebinding_name_reaches_only_the_address_that_was_checked(pay: PaymentService) -> None:
    rebinding = _Dns({"svc.test": [["127.0.0.1"], ["10.9.9.9"]]})
    policy = HttpPolicy.parse(["svc.test", "127.0.0.1"])
    doc = _call(_request(f"http://svc.test:{pay.port}/status"), policy, dns=rebinding)
    assert doc["status"] == 200
    assert rebinding.calls == ["svc.test"]


def test_tls_names_the_host_while_connecting_to_the_checked_address() -> None:
    hello = bytearray()

    def record_hello(conn: socket.socket, done: threading.Event) -> None:
        hello.extend(conn.recv(65536))  # the ClientHello; then the handshake fails

    with _raw_server(record_hello) as port:
        policy = HttpPolicy.parse(["svc.test", "127.0.0.1"])
        doc = _call(_request(f"https://svc.test:{port}/"), policy, dns=_dns(svc="127.0.0.1"))
    assert _error_type(doc) == "ConnectionError"
    assert hello[:1] == b"\x16"  # a TLS handshake record reached the checked address
    assert b"svc.test" in hello  # with the name as SNI, so the certificate is checked for it


def test_a_redirect_to_an_internal_address_is_not_followed_and_is_refused_when_followed(
    pay: PaymentService,
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as internal:  # listens; never accepts
        location = f"http://svc.test:{internal.getsockname()[1]}/latest/meta-data"
        policy = HttpPolicy.parse([f"127.0.0.1:{pay.port}", "svc.test"])
        dns = _dns(svc="127.0.0.1")
        doc = _call(_request(pay.url(f"/redirect?to={location}")), policy, dns=dns)
        assert doc["status"] == 302
        assert doc["headers"]["location"] == location
        assert dns.calls == []
        followed = _call(_request(location), policy, dns=dns)
        assert _error_type(followed) == "HostNotAllowed"
        assert "127.0.0.1 (loopback)" in followed["error"][1]
        internal.setblocking(False)
        with pytest.raises(BlockingIOError):
            internal.accept()  # no connection is waiting: nothing was sent there


def test_a_name_that_does_not_resolve_is_a_connection_error() -> None:
    doc = _call(_request("http://gone.test/"), HttpPolicy.parse(["gone.test"]), dns=_dns())
    assert _error_type(doc) == "ConnectionError"
    assert "cannot resolve gone.test" in doc["error"][1]
    empty = _call(_request("http://svc.test/"), HttpPolicy.parse(["svc.test"]), dns=_dns(svc=[]))
    assert _error_type(empty) == "ConnectionError"
    assert "no address" in empty["error"][1]


# --- what is sent, what comes back -------------------------------------------------------------


def test_the_idempotency_key_is_added(pay: PaymentService, policy: HttpPolicy) -> None:
    doc = _call(_request(pay.url("/echo"), "POST", body=b"hello"), policy)
    echoed = _json(doc)
    assert ["Idempotency-Key", KEY] in echoed["headers"]
    assert echoed["method"] == "POST"
    assert echoed["body"] == "hello"


def test_the_guests_own_idempotency_key_is_kept(pay: PaymentService, policy: HttpPolicy) -> None:
    doc = _call(_request(pay.url("/echo"), headers={"idempotency-key": "mine"}), policy)
    keys = [v for k, v in _json(doc)["headers"] if k.lower() == "idempotency-key"]
    assert keys == ["mine"]


def test_an_idempotent_charge_is_made_once_across_attempts(
    pay: PaymentService, policy: HttpPolicy
) -> None:
    first = _json(_call(_charge(pay), policy))
    second = _json(_call(_charge(pay), policy))
    assert first["replayed"] is False
    assert second == {**first, "replayed": True}
    assert pay.charges == 1
    assert pay.key_count(KEY) == 2
    _call(_charge(pay, "A-2"), policy, key="run-2/3")
    assert pay.charges == 2
    assert [c.charge_id for c in pay.charge_list] == ["ch_1", "ch_2"]


def test_a_charge_whose_answer_was_lost_is_not_repeated_by_a_retry(
    pay: PaymentService, policy: HttpPolicy
) -> None:
    seen: list[str] = []

    def lose_the_answer(charge: Charge) -> None:
        seen.append(f"charged {charge.charge_id}")
        raise ConnectionAbortedError("the service crashed before answering")

    pay.on_charge(lose_the_answer)
    answered = threading.Event()

    def after(answer: ChargeResponse) -> None:  # runs after the client may have read it
        seen.append(f"answered replayed={answer.replayed}")
        answered.set()

    pay.after_response(after)
    assert _error_type(_call(_charge(pay), policy)) == "ConnectionError"
    pay.on_charge(None)
    retried = _json(_call(_charge(pay), policy))
    assert retried["replayed"] is True
    assert retried["charge_id"] == "ch_1"
    assert pay.charges == pay.charges_for("A-1") == 1
    assert answered.wait(5)
    assert seen == ["charged ch_1", "answered replayed=True"]


def test_error_statuses_are_passed_through(pay: PaymentService, policy: HttpPolicy) -> None:
    pay.fail_next(503)
    assert _call(_charge(pay), policy)["status"] == 503
    assert pay.charges == 0
    assert _call(_charge(pay), policy)["status"] == 200
    bad = _request(pay.url("/charge"), "POST", body=b"not json")
    assert _call(bad, policy)["status"] == 400
    assert _call(_request(pay.url("/nowhere")), policy)["status"] == 404
    assert pay.charges == 1


def test_redirects_are_not_followed(pay: PaymentService, policy: HttpPolicy) -> None:
    doc = _call(_request(pay.url("/redirect?to=/status")), policy)
    assert doc["status"] == 302
    assert doc["headers"]["location"] == "/status"
    assert pay.hits("/status") == 0


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_at_the_cap_is_delivered(
    pay: PaymentService, policy: HttpPolicy, chunked: bool
) -> None:
    url = pay.url(f"/big?bytes={MAX_BODY_BYTES}" + ("&chunked=1" if chunked else ""))
    tracemalloc.start()
    try:
        raw = perform(
            _request(url), policy=policy, deadline=time.monotonic() + 5, idempotency_key=KEY
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    doc = msgpack.unpackb(raw)
    assert doc["status"] == 200
    assert doc["body"] == b"x" * MAX_BODY_BYTES
    assert peak < 10 * 2**20  # the body, once more for the envelope, and change


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_oversized_response_is_refused_in_bounded_memory(
    pay: PaymentService, policy: HttpPolicy, chunked: bool
) -> None:
    url = pay.url(f"/big?bytes={64 * 2**20}" + ("&chunked=1" if chunked else ""))
    tracemalloc.start()
    try:
        doc = _call(_request(url), policy)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert _error_type(doc) == "ConnectionError"
    assert "cap" in doc["error"][1]
    assert peak < 6 * 2**20


# --- time ---------------------------------------------------------------------------------------


def test_the_requests_own_timeout_is_a_timeout_envelope(
    pay: PaymentService, policy: HttpPolicy
) -> None:
    started = time.monotonic()
    doc = _call(_request(pay.url("/slow?ms=3000"), timeout_ms=200), policy, budget=5.0)
    assert _error_type(doc) == "Timeout"
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("timeout_ms", [None, 10_000])
def test_the_activation_deadline_ends_the_activation(
    pay: PaymentService, policy: HttpPolicy, timeout_ms: int | None
) -> None:
    extra: dict[str, Any] = {} if timeout_ms is None else {"timeout_ms": timeout_ms}
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        _call(_request(pay.url("/slow?ms=3000"), **extra), policy, budget=0.3)
    assert time.monotonic() - started < 0.3 + 0.7


def test_a_spent_budget_fails_before_any_request(pay: PaymentService, policy: HttpPolicy) -> None:
    with pytest.raises(DeadlineExceeded):
        _call(_request(pay.url("/status")), policy, budget=-0.01)
    assert pay.requests == 0


def test_a_trickling_body_cannot_outlast_the_deadline(
    pay: PaymentService, policy: HttpPolicy
) -> None:
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        _call(_request(pay.url("/trickle")), policy, budget=0.5)
    assert time.monotonic() - started < 0.5 + 0.7
    started = time.monotonic()
    doc = _call(_request(pay.url("/trickle"), timeout_ms=300), policy, budget=5.0)
    assert _error_type(doc) == "Timeout"
    assert time.monotonic() - started < 0.3 + 0.7


def test_trickling_headers_cannot_outlast_the_deadline() -> None:
    def trickle(conn: socket.socket, done: threading.Event) -> None:
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 200:
            conn.sendall(bytes([byte]))
            if done.wait(0.05):
                return

    with _raw_server(trickle) as port:
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            _call(
                _request(f"http://127.0.0.1:{port}/"), HttpPolicy.parse(["127.0.0.1"]), budget=0.5
            )
        assert time.monotonic() - started < 0.5 + 0.7


def test_a_body_cut_short_by_the_deadline_is_not_a_response() -> None:
    def until_close(conn: socket.socket, done: threading.Event) -> None:
        conn.recv(65536)  # no length: the body ends when the socket does
        conn.sendall(b"HTTP/1.0 200 OK\r\n\r\npartial")
        done.wait(5)

    with _raw_server(until_close) as port:
        url = f"http://127.0.0.1:{port}/"
        doc = _call(_request(url, timeout_ms=300), HttpPolicy.parse(["127.0.0.1"]))
    assert _error_type(doc) == "Timeout"


# --- failures the guest handles ------------------------------------------------------------------


def test_a_refused_connection_is_a_connection_error() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/"
    doc = _call(_request(url), HttpPolicy.parse(["127.0.0.1"]))
    assert _error_type(doc) == "ConnectionError"


def test_a_server_that_is_not_tls_is_a_connection_error() -> None:
    def plain(conn: socket.socket, done: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        done.wait(5)

    with _raw_server(plain) as port:
        doc = _call(_request(f"https://127.0.0.1:{port}/"), HttpPolicy.parse(["127.0.0.1"]))
    assert _error_type(doc) == "ConnectionError"


@pytest.mark.parametrize(
    ("url", "fields"),
    [
        ("ftp://{authority}/file", {}),
        ("{authority}/status", {}),
        ("http://{authority}/a b", {}),
        ("http://{authority}/caf\u00e9", {}),
        ("http://{authority}:/status", {}),
        ("http://127.1/status", {}),
        ("http://{authority}/status", {"method": "GET /x"}),
        ("http://{authority}/status", {"method": "CONNECT"}),
        ("http://{authority}/status", {"headers": {"X-A": "1\r\nX-B: 2"}}),
        ("http://{authority}/status", {"headers": {"Bad Name": "1"}}),
        ("http://{authority}/status", {"headers": {"Host": "evil.example"}}),
        ("http://{authority}/status", {"headers": {"content-length": "0"}}),
        ("http://{authority}/status", {"headers": {"Transfer-Encoding": "chunked"}}),
        ("http://{authority}/echo", {"method": "POST", "body": b"x" * (MAX_BODY_BYTES + 1)}),
    ],
)
def test_requests_the_host_refuses_are_bad_requests(
    pay: PaymentService, url: str, fields: dict[str, Any]
) -> None:
    policy = HttpPolicy.parse(["127.0.0.1"])
    doc = _call(_request(url.format(authority=pay.authority), **fields), policy)
    assert _error_type(doc) == "BadRequest"
    assert pay.requests == 0


# --- faults that end the activation ---------------------------------------------------------------

_URL = "http://127.0.0.1:1/"


@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(b"\xc1", id="not-msgpack"),
        pytest.param(b"", id="empty"),
        pytest.param(msgpack.packb(["GET", _URL]), id="not-a-map"),
        pytest.param(msgpack.packb({"method": "GET", "url": _URL}) + b"\x00", id="trailing"),
        pytest.param(msgpack.packb({"method": "GET"}), id="no-url"),
        pytest.param(msgpack.packb({"method": 1, "url": _URL}), id="method-int"),
        pytest.param(msgpack.packb({"method": "GET", "url": _URL.encode()}), id="url-bin"),
        pytest.param(msgpack.packb({"method": "GET", "url": _URL, "headers": []}), id="hdr-list"),
        pytest.param(
            msgpack.packb({"method": "GET", "url": _URL, "headers": {"a": 1}}), id="hdr-int"
        ),
        pytest.param(msgpack.packb({"method": "GET", "url": _URL, "body": "text"}), id="body-str"),
        pytest.param(msgpack.packb({"method": "GET", "url": _URL, "body": None}), id="body-nil"),
        pytest.param(
            msgpack.packb({"method": "GET", "url": _URL, "timeout_ms": True}), id="timeout-bool"
        ),
        pytest.param(
            msgpack.packb({"method": "GET", "url": _URL, "timeout_ms": 0}), id="timeout-zero"
        ),
        pytest.param(
            msgpack.packb({"method": "GET", "url": _URL, "timeout_ms": 1.5}), id="timeout-float"
        ),
        pytest.param(msgpack.packb({"method": "GET", "url": _URL, "timeout": 5}), id="unknown-key"),
        pytest.param(msgpack.packb({1: "GET", "url": _URL}), id="int-key"),
        pytest.param(b"\x82\xa6method\xa3\xff\xfe\xfd\xa3url\xa0", id="bad-utf8"),
        pytest.param(b"\x00" * (MAX_REQUEST_BYTES + 1), id="over-cap"),
    ],
)
def test_a_malformed_request_is_an_abi_violation(request_bytes: bytes) -> None:
    with pytest.raises(AbiViolation):
        perform(
            request_bytes,
            policy=HttpPolicy.parse(["127.0.0.1"]),
            deadline=time.monotonic() + 5,
            idempotency_key=KEY,
        )


# --- the manifest declaration ------------------------------------------------------------------


def _manifest(**extra: object) -> Any:
    return parse_manifest(
        json.dumps({"abi": 1, "workflows": [], "activities": ["a"], **extra}).encode()
    )


def test_the_policy_comes_from_the_manifest() -> None:
    assert http_policy(_manifest()) is None
    assert http_policy(_manifest(capabilities={})) is None
    empty = http_policy(_manifest(capabilities={"http": {"allow": []}}))
    assert empty is not None and empty.allow == ()
    entries = [
        "api.example.com",
        "127.0.0.1:8080",
        "*.example.com",
        "[::1]:8443",
        "LOCALHOST",
        "svc_a.internal",
    ]
    policy = http_policy(_manifest(capabilities={"http": {"allow": entries}}))
    assert policy is not None
    assert [(r.host, r.wildcard, r.port) for r in policy.allow] == [
        ("api.example.com", False, None),
        ("127.0.0.1", False, 8080),
        ("example.com", True, None),
        ("::1", False, 8443),
        ("localhost", False, None),
        ("svc_a.internal", False, None),
    ]
    check_capabilities(_manifest(capabilities={"http": {"allow": entries}}))


@pytest.mark.parametrize(
    "capabilities",
    [
        ["http"],
        {"fs": {"read": ["/"]}},
        {"http": ["api.example.com"]},
        {"http": {}},
        {"http": {"allow": ["a.com"], "deny": []}},
        {"http": {"allow": "api.example.com"}},
        {"http": {"allow": [1]}},
        {"http": {"allow": ["a.com"] * 257}},
    ]
    + [
        {"http": {"allow": [entry]}}
        for entry in (
            "",
            "*",
            "*.",
            "http://api.example.com",
            "api.example.com/",
            "api.example.com:0",
            "api.example.com:65536",
            "api.example.com:",
            "*.127.0.0.1",
            "a..b",
            "-a.com",
            "127.1",
            "[::1",
            "::1",
            "user@host",
            "exa mple.com",
            "[fe80::1%eth0]",
            "b\u00fccher.de",
            "a." + "b" * 64,
        )
    ],
)
def test_a_bad_capability_declaration_is_refused(capabilities: object) -> None:
    manifest = _manifest(capabilities=capabilities)
    with pytest.raises(ManifestError):
        check_capabilities(manifest)
    with pytest.raises(ManifestError):
        http_policy(manifest)
