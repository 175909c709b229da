"""`/runs`: the run list with its filters and paging, and a run's page (history as a decoded
timeline, open tasks and leases, failures, timers, pending approvals, audit records, queries).

The store filters by tenant, status and workflow type (the query `amber run list` uses) and
pages by run id; workflow id, version and time range are applied here over those pages, at most
`MAX_SCANNED` runs per request. Run ids are UUIDv7, ordered by creation time, so "created before"
becomes the starting cursor and "created after" ends the scan.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from flask import Blueprint, request

from amber.abi import InvalidInput, payload_json
from amber.history import Run, RunQuery, RunStatus
from amber.runtime.model import MAX_HISTORY_PAGE, QueryFailed, QueryTimedOut

from ._pages import field, page, tenant
from ._present import timeline
from ._wiring import ConsoleServices

PAGE_SIZE: Final = 50
"""Runs per page of the list."""
SCAN_BATCH: Final = 500
MAX_SCANNED: Final = 10_000
"""Runs one list request reads at most while filtering; the page then offers to go on."""
QUERY_WAIT_S: Final = 10.0
"""How long the run page waits for a worker to answer a query."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFilters:
    """What the run list is narrowed to (every field optional but the tenant)."""

    tenant: str
    status: RunStatus | None = None
    workflow_type: str = ""
    workflow_id: str = ""
    version: str = ""
    """A digest, a unique prefix or a label."""
    since: datetime | None = None
    until: datetime | None = None
    before: str | None = None
    """Keyset cursor: the last run id of the previous page."""

    @staticmethod
    def from_request(args: Mapping[str, str]) -> RunFilters:
        status = args.get("status", "")
        try:
            chosen = RunStatus(status) if status else None
        except ValueError:
            raise InvalidInput(f"unknown run status {status!r}") from None
        before = args.get("before", "").strip()
        if before:
            try:
                before = str(uuid.UUID(before))
            except ValueError:
                raise InvalidInput("malformed page cursor") from None
        return RunFilters(
            tenant=tenant(),
            status=chosen,
            workflow_type=args.get("workflow_type", "").strip(),
            workflow_id=args.get("workflow_id", "").strip(),
            version=args.get("version", "").strip(),
            since=_moment(args.get("since", ""), "from"),
            until=_moment(args.get("until", ""), "to"),
            before=before or None,
        )


def _moment(text: str, what: str) -> datetime | None:
    """A time from a form (`datetime-local` or ISO), read as UTC when it names no zone."""
    if not text.strip():
        return None
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(f"the '{what}' time must look like 2025-01-31T09:30") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _first_id_at(moment: datetime) -> str:
    """The smallest UUIDv7 of `moment`'s millisecond: every run created before it sorts below."""
    millis = int(moment.timestamp() * 1000)
    return str(uuid.UUID(int=(max(millis, 0) & ((1 << 48) - 1)) << 80))


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPage:
    runs: tuple[Run, ...]
    next_before: str | None
    """The cursor of the next page, or None when there is none."""
    scanned: int
    partial: bool
    """The scan stopped at `MAX_SCANNED` before the page was full: more may match further on."""


def find_runs(services: ConsoleServices, filters: RunFilters) -> RunPage:
    """One page of runs matching `filters`, newest first."""
    digest = services.registry.get(filters.version).digest if filters.version else None
    cursor = filters.before
    if filters.until is not None:
        floor = _first_id_at(filters.until)
        cursor = floor if cursor is None else min(cursor, floor)
    found: list[Run] = []
    scanned = 0
    while True:
        batch = services.runs.list(
            RunQuery(
                tenant=filters.tenant,
                status=filters.status,
                workflow_type=filters.workflow_type or None,
                limit=SCAN_BATCH,
                before=cursor,
            )
        )
        for run in batch:
            scanned += 1
            cursor = run.run_id
            if filters.since is not None and run.created_at < filters.since:
                return RunPage(runs=tuple(found), next_before=None, scanned=scanned, partial=False)
            if _matches(run, filters, digest):
                found.append(run)
                if len(found) == PAGE_SIZE:
                    return RunPage(
                        runs=tuple(found), next_before=cursor, scanned=scanned, partial=False
                    )
        if len(batch) < SCAN_BATCH:
            return RunPage(runs=tuple(found), next_before=None, scanned=scanned, partial=False)
        if scanned >= MAX_SCANNED:
            return RunPage(runs=tuple(found), next_before=cursor, scanned=scanned, partial=True)


def _matches(run: Run, filters: RunFilters, digest: str | None) -> bool:
    if filters.workflow_id and run.workflow_id != filters.workflow_id:
        return False
    if digest is not None and run.digest != digest:
        return False
    return filters.until is None or run.created_at < filters.until


def labels_of(services: ConsoleServices) -> dict[str, tuple[str, ...]]:
    """Every version's labels by digest (for showing digests with their names)."""
    return {v.digest: v.labels for v in services.registry.list()}


def register(bp: Blueprint, services: ConsoleServices) -> None:
    """`/`, `/runs`, `/runs/<ref>` and its query form."""

    @bp.get("/")
    def home() -> str:
        return page("home.html")

    @bp.get("/runs")
    def runs() -> str:
        filters = RunFilters.from_request(request.args)
        found = find_runs(services, filters)
        later = request.args.to_dict()
        later["before"] = found.next_before or ""
        return page(
            "runs.html",
            filters=filters,
            found=found,
            statuses=[s.value for s in RunStatus],
            labels=labels_of(services),
            next_args=later,
        )

    @bp.get("/runs/<ref>")
    def run(ref: str) -> str:
        return _run_page(services, ref, answer=None)

    @bp.post("/runs/<ref>/query")
    def query(ref: str) -> str:
        name = field("name", required="name the query", limit=128)
        try:
            answer = services.runs.query(ref, name, timeout_s=QUERY_WAIT_S, tenant=tenant())
            shown = QueryShown(name=name, value=payload_json(answer.value), problem="")
        except (QueryFailed, QueryTimedOut) as exc:
            shown = QueryShown(name=name, value=None, problem=str(exc))
        return _run_page(services, ref, answer=shown)


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryShown:
    name: str
    value: object
    problem: str


def _run_page(services: ConsoleServices, ref: str, answer: QueryShown | None) -> str:
    where = tenant()
    description = services.runs.describe(ref, tenant=where)
    run = description.run
    after = request.args.get("after", "0")
    if not after.isdigit():
        raise InvalidInput("after must be an event number")
    events = services.runs.history(run.run_id, after_seq=int(after), tenant=where)
    return page(
        "run.html",
        run=run,
        description=description,
        events=timeline(events),
        more_after=events[-1].seq if len(events) == MAX_HISTORY_PAGE else None,
        approvals=services.approvals.list_approvals(
            tenant=run.tenant, status="pending", run_id=run.run_id
        ),
        audit=services.audit.list(run.run_id, 100),
        labels=labels_of(services),
        answer=answer,
        tenant=where,
    )
