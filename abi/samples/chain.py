"""Benchmark sample, in Python: workflow `chain_py` runs activity `add_one` k times in sequence.

The Python twin of `chain.c` (its own workflow type, so both can be current on one server):
input {"k": int, "value": int} -> result {"value": value + k}; each `add_one` call takes
{"value": n} and returns {"value": n + 1}. `amber bench` runs both on the same workload and
reports the ratio of their throughputs (`python_vs_c_throughput`).
"""

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
