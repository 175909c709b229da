"""Where minted approval tokens go: a webhook (a mail or chat gateway), or a console (dev).

A sink receives the plain token once, in memory, right after the transaction that stored its
hash committed; nothing Amber keeps can give it back. A delivery that fails is logged and the
operator re-issues (`amber approvals issue`).
"""

from __future__ import annotations

import json
import logging
import urllib.parse
import urllib.request
from collections.abc import Callable

from amber.runtime.model import IssuedToken

_log = logging.getLogger(__name__)
WEBHOOK_ENV = "AMBER_APPROVAL_WEBHOOK"


class WebhookSink:
    """POSTs each token's link as JSON to a URL (`AMBER_APPROVAL_WEBHOOK`), e.g. a mail gateway:
    {approval_id, approver, link, token, action, tenant, run_id, expires_at}."""

    def __init__(self, url: str, *, timeout_s: float = 10.0) -> None:
        parsed = urllib.parse.urlsplit(url)
        loopback = parsed.hostname in ("127.0.0.1", "::1", "localhost")
        if parsed.scheme != "https" and not (parsed.scheme == "http" and loopback):
            raise ValueError(f"{WEBHOOK_ENV} must be an https URL (http only on loopback)")
        self._url = url
        self._timeout = timeout_s

    def deliver(self, issued: IssuedToken) -> None:
        body = json.dumps(
            {
                "approval_id": issued.approval_id,
                "approver": issued.approver,
                "link": issued.link,
                "token": issued.token,
                "action": issued.action,
                "tenant": issued.tenant,
                "run_id": issued.run_id,
                "expires_at": issued.expires_at.isoformat(),
            }
        ).encode()
        request = urllib.request.Request(
            self._url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=self._timeout) as response:
            if response.status >= 300:
                raise OSError(f"webhook answered {response.status}")


class ConsoleSink:
    """Prints each approval link (for `amber dev`: the developer is every approver)."""

    def __init__(self, write: Callable[[str], None] = print) -> None:
        self._write = write

    def deliver(self, issued: IssuedToken) -> None:
        where = issued.link or f"token {issued.token}"
        self._write(f"[approval] {issued.approver}, please decide {issued.action!r}: {where}")
