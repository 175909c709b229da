"""A projection extended with a run's new events is the projection of the whole history.

`extend_projection` is what lets a worker project only the events an activation adds; it must
agree with `project` on every history, which the goldens (every event type, signals buffered
and awaited, cancellations, cancelled timers, migrations and resets) check at every cut and in
steps of every size. `ReplayMemo`, the worker's memo, must give `project`'s answer whatever
history it is handed.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from amber.history import ActivityCompleted, ActivityScheduled, Event, TimerFired
from amber.runtime.model import CorruptHistory, Projection, extend_projection, project
from amber.runtime.replay import ReplayMemo

from .test_goldens import NAMES, load_golden

_AT = datetime(2026, 1, 1, tzinfo=UTC)


def _whole(p: Projection) -> tuple[object, ...]:
    """Everything a projection holds, what a later extension reads included."""
    return (p, p.pending)


@pytest.mark.parametrize("name", NAMES)
def test_extending_a_golden_at_every_cut_gives_its_projection(name: str) -> None:
    events = load_golden(name)
    whole = project(events)
    for cut in range(1, len(events) + 1):
        extended = extend_projection(project(events[:cut]), events)
        assert extended is not None, f"{name}: could not extend after event {cut}"
        assert _whole(extended) == _whole(whole), f"{name}: extended after event {cut}"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("stride", [1, 2, 3, 7])
def test_extending_a_golden_step_by_step_gives_each_prefix_s_projection(
    name: str, stride: int
) -> None:
    events = load_golden(name)
    p = project(events[:1])
    for end in range(1 + stride, len(events) + stride, stride):
        cut = events[:end]
        extended = extend_projection(p, cut)
        assert extended is not None
        assert _whole(extended) == _whole(project(cut)), f"{name}: up to event {end}"
        p = extended


def _event(seq: int, payload: object) -> Event:
    return Event.of(run_id="r", seq=seq, payload=payload, digest="d", created_at=_AT)  # type: ignore[arg-type]


def _scheduled(seq: int, cmd: int) -> Event:
    return _event(seq, ActivityScheduled(cmd=cmd, name="a", args=b"\x80"))


def test_what_cannot_be_shown_cheaply_is_left_to_project() -> None:
    events = (_scheduled(1, 0), _event(2, ActivityCompleted(cmd=0, result=b"\xc0", attempt=1)))
    p = project(events)
    # A new event that is not after the old ones.
    assert extend_projection(p, (*events, _event(2, TimerFired(cmd=0)))) is None
    # A history shorter than the projection's.
    assert extend_projection(p, events[:1]) is None
    # Commands out of order: project says where.
    bad = (*events, _scheduled(3, 5))
    assert extend_projection(p, bad) is None
    with pytest.raises(CorruptHistory, match="command 1 is recorded with index 5"):
        project(bad)
    # Nothing new: the same projection.
    assert extend_projection(p, events) is p


def test_the_memo_answers_as_project_does_whatever_it_is_handed() -> None:
    events = load_golden(NAMES[0])
    memo = ReplayMemo()
    for end in range(1, len(events) + 1):  # a run's history, one activation per event
        assert memo.project("r", events[:end]) == project(events[:end])
    assert memo.extended == len(events) - 1 and memo.projected == 1
    # The same events read again (other objects, equal as a projection reads them) go on.
    again = tuple(replace(e, created_at=_AT) for e in events)
    assert memo.project("r", again) == project(again)
    assert memo.extended == len(events)
    # Another history of the run (a reset kept fewer events, then went its own way).
    other = (*events[:3], _event(4, TimerFired(cmd=99)))
    assert memo.project("r", other) == project(other)
    assert memo.projected == 2
    # A changed payload at an old position is never taken for the old one.
    first = (_scheduled(1, 0), _event(2, ActivityCompleted(cmd=0, result=b"\x01", attempt=1)))
    second = (first[0], _event(2, ActivityCompleted(cmd=0, result=b"\x02", attempt=1)))
    memo.project("s", first)
    assert memo.project("s", (*second, _scheduled(3, 1))).results[0].value == b"\x02"


def test_the_memo_keeps_its_bounds() -> None:
    memo = ReplayMemo(runs=2, max_events=100)
    events = (_scheduled(1, 0),)
    for run in ("a", "b", "c"):
        memo.project(run, events)
    assert len(memo) == 2  # least recently used out first
    memo.project("big", tuple(_scheduled(i + 1, i) for i in range(11)))
    assert len(memo) == 2  # more than a tenth of max_events: not kept
    memo.drop("c")
    assert len(memo) == 1
