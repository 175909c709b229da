"""Human approval as a whole feature: the decision service (tokens, quorum, refusals), the
approval page (the only Flask user) and the token sinks.

Rule: imports `services` and `model`; nothing but `server` imports it.
"""

from __future__ import annotations

from ._page import ApprovalPage, make_approval_app
from ._service import ApprovalService, ApprovalSink
from ._sinks import WEBHOOK_ENV, ConsoleSink, WebhookSink

__all__ = [
    "WEBHOOK_ENV",
    "ApprovalPage",
    "ApprovalService",
    "ApprovalSink",
    "ConsoleSink",
    "WebhookSink",
    "make_approval_app",
]
