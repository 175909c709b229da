"""What the server hands the console: the services it calls and how operators are checked.

The console never builds services of its own and never imports the server: the composition root
(`runtime.server`) fills these in with the very objects its gRPC handlers use, so an action taken
in a browser runs the same code, in the same transaction, with the same audit record, as the CLI
command that does it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from amber.runtime.approvals import ApprovalService
from amber.runtime.model import Clock
from amber.runtime.services import AuditService, RunService, TaskService, TriageService
from amber.versions import Rollout, VersionRegistry


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsoleServices:
    """The server's own service objects (the ones its gRPC handlers call)."""

    runs: RunService
    tasks: TaskService
    """For forgetting a type's cached upgrade target after a rollout change, as the RPC does."""
    triage: TriageService
    registry: VersionRegistry
    rollout: Rollout
    approvals: ApprovalService
    audit: AuditService
    clock: Clock


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsoleOperators:
    """How the server checks operators (its `Operators`), seen from the console."""

    authorise: Callable[[str, str], str]
    """(token, claimed name) → the operator's name; `NotAuthorised` or `InvalidInput` if not."""
    holder_of: Callable[[str], str | None] | None = None
    """With an operator token file: the sha256 hex of a token → its operator's name, or None
    for a token the file does not list (any more). None when there is no file: operators then
    name themselves, as they do with the CLI."""

    login_links: bool | None = None
    """Whether single-use login links (`amber dev`) log in; None: only without tokens. A server
    that checks API credentials still hands links out, but only through `amber status`, which
    needs an operator credential."""

    @property
    def links_allowed(self) -> bool:
        return not self.tokens_required if self.login_links is None else self.login_links

    @property
    def tokens_required(self) -> bool:
        """Whether the server has an operator token file (then every console page needs a
        login, and a login needs a token)."""
        return self.holder_of is not None
