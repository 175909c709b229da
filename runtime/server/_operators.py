"""Who may run operator commands (triage), and under which name.

When the server is given an operator token file (`AMBER_OPERATOR_TOKENS`, one `name sha256hex`
line per operator, the hash of the operator's token), every triage command must carry a token
whose hash is listed, and the operator's name is the one the file gives — whatever name the
client claims. Without a file (development, `amber dev`) operators name themselves, and their
audit entries say so. Tokens are compared by hash in constant time; the plain token is never
stored.

Rejected: trusting the client-supplied operator name in production (anyone could sign as
anyone); mutual TLS (right for a deployment, but belongs with the API authentication issue).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from dataclasses import dataclass
from pathlib import Path

from amber.abi import InvalidInput
from amber.runtime.model import NotAuthorised

OPERATOR_TOKENS_ENV = "AMBER_OPERATOR_TOKENS"
_LINE = re.compile(r"([A-Za-z0-9_.@\-]{1,128})\s+([0-9a-f]{64})")


@dataclass(frozen=True, slots=True, kw_only=True)
class Operators:
    """The operators allowed to run triage commands (None: anyone, self-named)."""

    by_hash: dict[str, str] | None = None

    @staticmethod
    def from_file(path: Path) -> Operators:
        """Read `name sha256hex` lines (blank lines and `#` comments ignored)."""
        by_hash: dict[str, str] = {}
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            match = _LINE.fullmatch(text)
            if match is None:
                raise InvalidInput(f"{path}:{number}: expected `name sha256-hex-of-token`")
            by_hash[match.group(2)] = match.group(1)
        return Operators(by_hash=by_hash)

    @staticmethod
    def from_environment() -> Operators:
        path = os.environ.get(OPERATOR_TOKENS_ENV)
        return Operators.from_file(Path(path)) if path else Operators()

    def authorise(self, token: str, claimed: str) -> str:
        """The operator's name for this command, or `NotAuthorised`."""
        if self.by_hash is None:
            if not claimed:
                raise InvalidInput("name the operator (--operator) for the audit trail")
            return claimed
        digest = hashlib.sha256(token.encode()).hexdigest()
        for known, name in self.by_hash.items():
            if hmac.compare_digest(known, digest) and token:
                if claimed and claimed != name:
                    raise NotAuthorised(f"the token belongs to {name!r}, not {claimed!r}")
                return name
        raise NotAuthorised("operator commands need a valid operator token on this server")


def token_hash(token: str) -> str:
    """The line to put in the operator token file for `token`."""
    return hashlib.sha256(token.encode()).hexdigest()
