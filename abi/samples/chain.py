"""Benchmark samples, in Python: workflow `chain_py` runs activity `add_one` k times in
sequence; workflow `park_py` waits.

`chain_py` is the Python twin of `chain.c` (its own workflow type, so both can be current on
one server): input {"k": int, "value": int} -> result {"value": value + k}; each `add_one` call
takes {"value": n} and returns {"value": n + 1}. `amber bench` runs both on the same workload
and reports the ratio of their throughputs (`python_vs_c_throughput`).

`park_py` is the twin of `park.c`: input {"days": int 0..3650} races a durable timer of `days`
days against the signal "go" (any payload); result {"woke_by": "timer" | "signal"}. The bench
parks runs of it to check that waiting Python runs cost the worker no memory. It lives in this
module so that the bench builds one component (a build takes tens of seconds) for both.
"""

from datetime import timedelta

from amber_sdk import ApplicationError, activity, workflow


@workflow.defn(name="chain_py")
def chain(payload):
    k, value = payload.get("k"), payload.get("value")
    if not isinstance(k, int) or not isinstance(value, int) or k < 0:
        raise ApplicationError("expected {k: int >= 0, value: int}", type="BadInput")
    for _ in range(k):
        value = workflow.execute_activity("add_one", {"value": value})["value"]
    return {"value": value}


@activity.defn
def add_one(args):
    value = args.get("value")
    if not isinstance(value, int):
        raise ApplicationError("expected {value: int}", type="BadArgs", non_retryable=True)
    return {"value": value + 1}


@workflow.defn(name="park_py")
def park(payload):
    days = payload.get("days") if isinstance(payload, dict) else None
    if not isinstance(days, int) or isinstance(days, bool) or not 0 <= days <= 3650:
        raise ApplicationError("expected {days: 0..3650}", type="BadInput")
    timer = workflow.start_timer(timedelta(days=days))
    go = workflow.start_wait_signal("go")
    first = workflow.wait_any([timer, go])
    if first == 1:
        timer.cancel()
    return {"woke_by": "signal" if first == 1 else "timer"}
