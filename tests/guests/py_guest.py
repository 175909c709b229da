"""A Python guest for the tests: ordinary workflows and activities beside hostile ones.

Built with `amber build` (a componentize-py component) once per test session. The hostile
workflows do what a careless or malicious Python author might: loop, allocate without bound,
recurse, read the clock, open files, reach for sockets, return garbage.
"""

import amber_sdk._entry as _entry
from amber_sdk import ActivityError, ApplicationError, RetryPolicy, activity, workflow

# ---- ordinary ------------------------------------------------------------------------------


@activity.defn
def greet(args):
    return {"greeting": f"hello {args['name']}", "attempt": activity.info().attempt}


@activity.defn
def flaky(args):
    attempt = activity.info().attempt
    if attempt < args["succeed_at"]:
        raise RuntimeError(f"attempt {attempt} fails")
    return {"attempt": attempt, "key": activity.info().idempotency_key}


@activity.defn
def refuse(args):
    raise ApplicationError("not today", type="Refused", non_retryable=True)


@workflow.defn
def hello(payload):
    started = workflow.now_ms()
    greeting = workflow.execute_activity("greet", {"name": payload["name"]})
    retried = workflow.execute_activity(
        "flaky",
        {"succeed_at": 2},
        start_to_close_timeout=10,
        retry_policy=RetryPolicy(initial_interval=0.01, maximum_attempts=3),
    )
    workflow.set_query("stage", {"stage": "done", "name": payload["name"]})
    workflow.logger.info("greeted %s", payload["name"])
    return {
        "greeting": greeting["greeting"],
        "attempt": retried["attempt"],
        "started": started,
        "roll": workflow.random(),
        "new_path": workflow.patched("v2-greeting"),
    }


@workflow.defn
def gated(payload):
    info = workflow.info()
    workflow.set_query("who", {"run": info.run_id, "workflow_id": info.workflow_id})
    workflow.set_query("stage", "waiting")
    decision = workflow.wait_signal("go")
    return {"decision": decision, "payload": payload}


@workflow.defn
def refused(payload):
    try:
        workflow.execute_activity("refuse", payload)
    except ActivityError as exc:
        return {"caught": exc.type, "message": exc.message}
    return {"caught": None}


@workflow.defn
def fails(payload):
    raise ApplicationError("the order is void", type="VoidOrder")


@workflow.defn
def calls_c_child(payload):
    # A child of another module: the C `chain` sample (same envelopes, msgpack payloads).
    child = workflow.execute_child_workflow(
        "chain", {"k": payload["k"], "value": payload["value"]}, id=f"c-child-{payload['k']}"
    )
    return {"from_c": child}


@workflow.defn
def counts_down(payload):
    n = payload["n"]
    if n <= 0:
        return "done"
    workflow.execute_activity("greet", {"name": str(n)})
    workflow.continue_as_new({"n": n - 1})


_seen_steps = []
"""Module state a workflow mutates between its activations (see `remembers`)."""


@workflow.defn
def remembers(payload):
    # Deterministic all the same: a fresh instance starts from the built snapshot and replays
    # every step, a live instance of the run goes on from its last step; never shared by runs.
    for _ in range(3):
        _seen_steps.append(1)
        workflow.execute_activity("greet", {"name": str(len(_seen_steps))})
    return {"seen": len(_seen_steps)}


_served = []
"""Module state activities mutate: the runs this instance's `tallies` calls served."""


@activity.defn
def tallies(args):
    # In a fresh instance this is the first call; a run's later activities may go on in the
    # instance its last one left (the worker keeps it), never in another run's.
    _served.append(args["run"])
    return {"calls": len(_served), "runs": sorted(set(_served))}


@workflow.defn
def tallying(payload):
    run = workflow.info().run_id
    return [workflow.execute_activity("tallies", {"run": run}) for _ in range(payload["times"])]


@activity.defn
def spins_when_warm(args):
    # Completes in a fresh instance, loops until its fuel runs out in one that served before:
    # a fault in a kept instance is run again in a fresh one, whose outcome is the one recorded.
    _served.append(args["run"])
    while len(_served) > 1:
        pass
    return {"fresh": True}


# ---- hostile ---------------------------------------------------------------------------------


@workflow.defn
def returns_a_set(payload):
    return {1, 2}  # msgpack (JSON) has no sets


@workflow.defn
def schedules_its_input(payload):
    # The activity's name comes with the input: the build cannot see it, the host refuses it.
    return workflow.execute_activity(payload["name"], {})


@workflow.defn
def late_imports(payload):
    # Imported only here, when it runs: `amber build` imports them in the snapshot too (a
    # component has no file system to import from later).
    import statistics
    from fractions import Fraction

    return {"half": str(Fraction(1, 2)), "mean": statistics.mean([1, 2, 3])}


@activity.defn
def dials(args):
    import socket

    with socket.create_connection(("127.0.0.1", 5432), timeout=1):
        return "connected"


@workflow.defn
def dialing(payload):
    return workflow.execute_activity(
        "dials", {}, retry_policy=RetryPolicy(maximum_attempts=1), start_to_close_timeout=10
    )


@workflow.defn
def spins(payload):
    while True:
        pass


@workflow.defn
def hoards(payload):
    kept = []
    while True:
        kept.append(bytearray(1 << 20))


@workflow.defn
def recurses(payload):
    def down(n):
        return down(n + 1) + 1

    return down(0)


@workflow.defn
def reads_clock(payload):
    import time

    return time.time()


@workflow.defn
def draws_random(payload):
    import os

    return os.urandom(8).hex()


@workflow.defn
def breaks(payload):
    return {}["missing"]


@workflow.defn
def opens_files(payload):
    with open("/etc/passwd") as f:
        return f.read()


@workflow.defn
def sleeps(payload):
    workflow.execute_activity("naps", {})
    return "rested"


@activity.defn
def naps(args):
    import time

    time.sleep(0.01)  # time.sleep is real WASI in CPython: Amber does not provide it
    return "rested"


@activity.defn
def hoards_memory(args):
    kept = []
    while True:
        kept.append(bytearray(1 << 20))


@workflow.defn
def hoarding_activity(payload):
    return workflow.execute_activity("hoards_memory", {})


@workflow.defn
def garbage(payload):
    return "replaced below"


_run_workflow = _entry.run_workflow


def _hostile_entry(name, envelope, host):
    if name == "garbage":
        return b"\xc1 not msgpack"
    return _run_workflow(name, envelope, host)


_entry.run_workflow = _hostile_entry
