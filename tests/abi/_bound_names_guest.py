"""A workflow module that binds the clock and randomness by name at import, as a user would
(`from datetime import datetime`): the guard covers these names during its activations."""

from __future__ import annotations

from datetime import date, datetime
from random import random
from time import time as clock
from typing import Any

from amber_sdk import workflow

READS: dict[str, Any] = {
    "datetime.now": lambda: datetime.now(),
    "date.today": lambda: date.today(),
    "time.time": lambda: clock(),
    "random.random": lambda: random(),
}


@workflow.defn(name="t_bound")
def t_bound(which: str) -> Any:
    if which == "constructed":
        return datetime(2024, 1, 2).isoformat()
    return str(READS[which]())
