"""How a Python guest's fault is read from its stderr (`runtime/sandbox/_component.py`): the
exception of its last traceback, whatever its class is called, and where it was raised; and a
replay matching a failure recorded before Python exceptions had their own trap codes."""

from __future__ import annotations

from amber.runtime.sandbox._component import _innermost, _last_exception
from amber.surgical_pool._replay import _same_trap

CHAINED = """\
Traceback (most recent call last):
  File "/app/trip.py", line 40, in book
    hotel = result["hotel"]
            ~~~~~~^^^^^^^^^
KeyError: 'hotel'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/amber_sdk/_entry.py", line 61, in run_workflow
    return _activate(name, bytes(envelope), host)
  File "/app/trip.py", line 44, in book
    raise OrderRejected("no hotel")
OrderRejected: no hotel
second line of its message
"""


def test_the_last_tracebacks_exception_is_read_whatever_its_class_is_called() -> None:
    assert _last_exception(CHAINED) == "OrderRejected: no hotel"
    assert _innermost(CHAINED) == " (at trip.py:44 in book)"
    assert _last_exception("Traceback (most recent call last):\n  File \"x\", line 1, in f\n"
                           "mod.Custom\n") == "mod.Custom"  # fmt: skip
    assert _last_exception("MemoryError\n") == "MemoryError"  # no traceback printed (no memory)
    assert _last_exception("") == "" and _innermost("") == ""


def test_a_failure_recorded_as_unreachable_matches_a_replayed_python_exception() -> None:
    assert _same_trap("unreachable", "python:KeyError")
    assert _same_trap("python:KeyError", "python:KeyError")
    assert _same_trap(None, "")
    assert not _same_trap("python:KeyError", "python:ValueError")
    assert not _same_trap("unreachable", "memory_out_of_bounds")
