"""Rate limits on refusals, per source: the counting itself, then each door it guards against a
real server (failed authentications over gRPC, invalid approval links over gRPC and on the page),
and the log line an operator sees."""

from __future__ import annotations

import logging
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest

from amber.runtime.client import AmberClient
from amber.runtime.model import (
    THROTTLE_LIMIT,
    InvalidToken,
    NotAuthenticated,
    Throttle,
    source_of,
)
from amber.runtime.server import ApprovalPageOptions
from tests.conftest import InProcessServer


def test_a_source_is_blocked_at_the_limit_and_freed_by_the_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    throttle = Throttle("guesses", limit=3, window_s=10.0, clock=lambda: now[0])
    for _ in range(2):
        throttle.refused("ipv4:10.0.0.5")
    assert throttle.blocked("ipv4:10.0.0.5") is None
    with caplog.at_level(logging.WARNING, logger="amber.throttle"):
        throttle.refused("ipv4:10.0.0.5")
        throttle.refused("ipv4:10.0.0.5")  # still blocked: logged once
    assert throttle.blocked("ipv4:10.0.0.5") == pytest.approx(10.0)
    assert throttle.blocked("ipv4:10.0.0.6") is None  # another source is not affected
    assert [r.getMessage() for r in caplog.records] == [
        "rate limit: 3 guesses from ipv4:10.0.0.5 within 10 s; its attempts are refused"
        " unchecked for up to 10 s"
    ]
    now[0] = 10.5  # the two oldest left the window
    assert throttle.blocked("ipv4:10.0.0.5") is None
    assert source_of("ipv4:127.0.0.1:41234") == "ipv4:127.0.0.1"
    assert source_of("ipv6:[::1]:5000") == "ipv6:[::1]"


def test_failed_authentications_are_limited_without_locking_out_known_callers(
    make_server: Callable[..., InProcessServer], caplog: pytest.LogCaptureFixture
) -> None:
    srv = make_server(check_credentials=True)
    grant = srv.server.credentials.grant
    known = AmberClient(srv.target, token=grant("fleet", "application", by="t", reason="t").token)
    late = AmberClient(srv.target, token=grant("late", "application", by="t", reason="t").token)
    guesser = AmberClient(srv.target, token="")
    try:
        assert known.list_runs()[0] == []  # authenticated before the flood
        with caplog.at_level(logging.WARNING, logger="amber.throttle"):
            for i in range(THROTTLE_LIMIT):
                with pytest.raises(NotAuthenticated, match="unknown, rotated or revoked"):
                    AmberClient(srv.target, token=f"amb_guess{i}").list_runs()
        with pytest.raises(NotAuthenticated, match="too many failed authentications from ipv"):
            guesser.list_runs()
        logged = [r.getMessage() for r in caplog.records]
        assert any(f"{THROTTLE_LIMIT} failed authentications from ipv" in m for m in logged)
        # A caller that authenticated before keeps working; one never seen waits it out.
        assert known.list_runs()[0] == []
        with pytest.raises(NotAuthenticated, match="refused unchecked"):
            late.list_runs()
    finally:
        for c in (known, late, guesser):
            c.close()


def test_invalid_approval_links_are_limited_over_grpc_and_on_the_page(
    make_server: Callable[..., InProcessServer],
) -> None:
    srv = make_server(approval_page=ApprovalPageOptions(secret_key=b"k" * 32))
    for i in range(THROTTLE_LIMIT):
        with pytest.raises(InvalidToken, match="invalid, expired, used or revoked"):
            srv.client.decide_approval(f"apv_forged{i}", approve=True)
    with pytest.raises(InvalidToken, match="refused unchecked: too many invalid links"):
        srv.client.decide_approval("apv_another", approve=True)

    base = srv.server.approval_link_base
    for i in range(THROTTLE_LIMIT):
        assert _status(f"{base}/approvals/apv_forged{i}") == 404
    assert _status(f"{base}/approvals/apv_another") == 429


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
