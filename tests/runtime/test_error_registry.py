"""Typed errors cross gRPC as the same class, with the same message and fields.

Every class in the registry the error classes build themselves is sent through a real gRPC call on
loopback (the server's own `rpc` wrapper on one side, `error_from_rpc` on the other), so a new
error class is covered without an edit here; a real Amber server shows the same for the errors
its services raise.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import subprocess
import sys
import types
import typing
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import grpc
import pytest

from amber.abi import (
    AmberError,
    Conflict,
    InvalidInput,
    NotFound,
    RetryableError,
    error_fields,
    error_types,
    rebuild_error,
)
from amber.history import LeaseLost, RunNotFound, VersionConflict
from amber.runtime.api import ERROR_FIELDS_KEY, ERROR_TYPE_KEY, error_from_rpc, status_of
from amber.runtime.api._status import MAX_FIELDS_CHARS
from amber.runtime.model import GuestTrap, NonDeterminism, RemoteError
from amber.runtime.server._rpc import rpc
from tests.conftest import ROOT, InProcessServer

# Where the errors a server raises to its callers are defined: the packages the gRPC layer may
# import. (Errors of the replay and the surgical pool stay in the worker: it reports them as data.)
WIRE_PACKAGES = ("abi", "history", "versions", "runtime.model")


def _import_every_module(packages: tuple[str, ...]) -> None:
    """Load each private module of `packages`, so that all their error classes are registered."""
    for package in packages:
        path = [str(ROOT / package.replace(".", "/"))]
        for info in pkgutil.walk_packages(path, prefix=f"amber.{package}."):
            if info.name.rpartition(".")[2].startswith("_") or info.ispkg:
                importlib.import_module(info.name)


_import_every_module(("abi", "history", "versions", "runtime", "surgical_pool"))
AMBER_ERRORS = sorted(
    (name, cls) for name, cls in error_types().items() if cls.__module__.startswith("amber.")
)


# -- a loopback server that raises whatever error a test hands it ------------------------------


class _Raiser:
    def __init__(self) -> None:
        self.errors: dict[str, AmberError] = {}

    @rpc
    def raise_error(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        raise self.errors.pop(request.decode())

    def unknown(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        """What a newer server does with an error class this client has never heard of."""
        context.set_trailing_metadata(((ERROR_TYPE_KEY, "ParcelEaten"), (ERROR_FIELDS_KEY, "{}")))
        context.abort(grpc.StatusCode[request.decode()], "a dog ate the parcel")
        raise AssertionError("unreachable")


Send = Callable[[AmberError], grpc.RpcError]


@pytest.fixture(scope="module")
def raiser() -> _Raiser:
    return _Raiser()


@pytest.fixture(scope="module")
def channel(raiser: _Raiser) -> Iterator[grpc.Channel]:
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    handlers = {
        "Raise": grpc.unary_unary_rpc_method_handler(raiser.raise_error),
        "Unknown": grpc.unary_unary_rpc_method_handler(raiser.unknown),
    }
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("test.Errors", handlers),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as chan:
        yield chan
    server.stop(None)


@pytest.fixture
def send(raiser: _Raiser, channel: grpc.Channel) -> Send:
    """Have the loopback server raise `exc` and return the RpcError the client got."""
    call = channel.unary_unary("/test.Errors/Raise")

    def send(exc: AmberError) -> grpc.RpcError:
        key = f"{id(exc)}"
        raiser.errors[key] = exc
        with pytest.raises(grpc.RpcError) as caught:
            call(key.encode(), timeout=10)
        return caught.value

    return send


# -- examples built from each class's own constructor -------------------------------------------


def _example_value(name: str, hint: Any) -> Any:
    options = [a for a in typing.get_args(hint) if a is not type(None)]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = options[0]
    samples: dict[Any, Any] = {
        str: f"{name}-1",
        int: 40 + len(name),
        float: 1.5,
        bool: True,
        bytes: b"\x00\xff",
    }
    if hint not in samples:
        raise AssertionError(f"no example value for {name}: {hint!r}")
    return samples[hint]


def example(cls: type[AmberError]) -> AmberError:
    """An instance made through `cls`'s constructor, every parameter given a non-default value,
    so its fields are the ones real code would set."""
    if cls.__init__ is Exception.__init__:
        return cls(f"{cls.__name__} happened")
    hints = typing.get_type_hints(cls.__init__)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for param in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        value = _example_value(param.name, hints.get(param.name, str))
        if param.kind is param.KEYWORD_ONLY:
            kwargs[param.name] = value
        else:
            args.append(value)
    return cls(*args, **kwargs)


# -- every registered class round-trips ---------------------------------------------------------


@pytest.mark.parametrize(("name", "cls"), AMBER_ERRORS, ids=[n for n, _ in AMBER_ERRORS])
def test_every_registered_error_crosses_grpc_with_its_type_message_and_fields(
    send: Send, name: str, cls: type[AmberError]
) -> None:
    sent = example(cls)
    got = error_from_rpc(send(sent))
    assert type(got) is cls and type(got).wire_name == name
    assert str(got) == str(sent) and got.args == sent.args
    assert error_fields(got) == error_fields(sent)


@pytest.mark.parametrize(("name", "cls"), AMBER_ERRORS, ids=[n for n, _ in AMBER_ERRORS])
def test_every_registered_error_travels_with_the_status_of_its_place_in_the_tree(
    send: Send, name: str, cls: type[AmberError]
) -> None:
    sent = example(cls)
    assert send(sent).code() == status_of(sent)


def test_the_status_codes_of_the_tree() -> None:
    codes = {name: status_of(example(cls)).name for name, cls in AMBER_ERRORS}
    assert {
        "InvalidInput": "INVALID_ARGUMENT",
        "InvalidModule": "INVALID_ARGUMENT",
        "PayloadTooLarge": "RESOURCE_EXHAUSTED",
        "NotFound": "NOT_FOUND",
        "RunNotFound": "NOT_FOUND",
        "Conflict": "ABORTED",
        "LeaseLost": "ABORTED",
        "WorkflowIdInUse": "ALREADY_EXISTS",
        "RetryableError": "UNAVAILABLE",
        "StoreUnavailable": "UNAVAILABLE",
        "NotAuthorised": "PERMISSION_DENIED",
        "InvalidToken": "PERMISSION_DENIED",
        "AmberError": "INTERNAL",
        "GuestTrap": "INTERNAL",
    }.items() <= codes.items()


def test_the_fields_of_the_errors_that_carry_them_arrive(send: Send) -> None:
    conflict = error_from_rpc(send(VersionConflict("r-1", 4, None)))
    assert isinstance(conflict, VersionConflict)
    assert (conflict.run_id, conflict.expected, conflict.actual) == ("r-1", 4, None)

    diverged = NonDeterminism(
        run_id="r-2", digest="ab" * 32, position=3, recorded="timer", issued="activity", seq=9
    )
    got = error_from_rpc(send(diverged))
    assert isinstance(got, NonDeterminism)
    assert (got.run_id, got.step, got.digest, got.position, got.seq) == ("r-2", 3, "ab" * 32, 3, 9)
    assert (got.recorded, got.issued, got.reason) == ("timer", "activity", diverged.reason)


def test_bytes_fields_arrive_as_bytes(send: Send) -> None:
    fault = GuestTrap("unreachable", run_id="r-3", step=2, trap_code="unreachable")
    fault.published = {"status": b"\x81\xa1s\xa4done", "raw": b"\x00\xff"}
    got = error_from_rpc(send(fault))
    assert isinstance(got, GuestTrap)
    assert got.published == fault.published and got.trap_code == "unreachable"


def test_a_field_over_the_metadata_budget_is_left_out_and_the_rest_arrive(send: Send) -> None:
    fault = GuestTrap("unreachable", run_id="r-4", step=1)
    fault.published = {"big": b"x" * MAX_FIELDS_CHARS}
    got = error_from_rpc(send(fault))
    assert isinstance(got, GuestTrap) and str(got) == str(fault)
    assert (got.run_id, got.step) == ("r-4", 1)
    assert not hasattr(got, "published")


def test_a_field_that_is_not_json_data_is_left_out(send: Send) -> None:
    err = InvalidInput("bad")
    err.culprit = object()  # type: ignore[attr-defined]
    err.line = 7  # type: ignore[attr-defined]
    got = error_from_rpc(send(err))
    assert error_fields(got) == {"line": 7}


# -- names the client does not know ---------------------------------------------------------------


def test_an_unknown_error_type_becomes_a_remote_error_carrying_its_name(
    channel: grpc.Channel,
) -> None:
    call = channel.unary_unary("/test.Errors/Unknown")
    with pytest.raises(grpc.RpcError) as caught:
        call(b"FAILED_PRECONDITION", timeout=10)
    got = error_from_rpc(caught.value)
    assert type(got) is RemoteError and got.error_type == "ParcelEaten"
    assert "a dog ate the parcel" in str(got)


def test_an_unknown_error_type_with_a_retryable_status_stays_retryable(
    channel: grpc.Channel,
) -> None:
    call = channel.unary_unary("/test.Errors/Unknown")
    with pytest.raises(grpc.RpcError) as caught:
        call(b"UNAVAILABLE", timeout=10)
    assert type(error_from_rpc(caught.value)) is RetryableError


def test_malformed_fields_still_give_the_type_and_message() -> None:
    class _Rpc(grpc.RpcError):
        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.ABORTED

        def details(self) -> str:
            return "task 5 is not leased under fencing token 2"

        def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
            return ((ERROR_TYPE_KEY, "LeaseLost"), (ERROR_FIELDS_KEY, "{not json"))

    got = error_from_rpc(_Rpc())
    assert type(got) is LeaseLost and str(got) == "task 5 is not leased under fencing token 2"


# -- the registry follows the classes -------------------------------------------------------------


def test_a_new_subclass_is_registered_and_takes_its_parents_status(send: Send) -> None:
    class ParcelLost(NotFound):
        """Defined here only: no list anywhere names it."""

        def __init__(self, parcel: str) -> None:
            super().__init__(f"parcel {parcel} is nowhere")
            self.parcel = parcel

    assert error_types()["ParcelLost"] is ParcelLost
    rpc_error = send(ParcelLost("P-9"))
    assert rpc_error.code() is grpc.StatusCode.NOT_FOUND
    got = error_from_rpc(rpc_error)
    assert type(got) is ParcelLost and got.parcel == "P-9" and str(got) == "parcel P-9 is nowhere"


def test_two_classes_cannot_travel_under_one_name() -> None:
    with pytest.raises(TypeError, match="both travel as 'LeaseLost'"):
        type("LeaseLost", (Conflict,), {})
    assert error_types()["LeaseLost"] is LeaseLost

    renamed = type("LeaseLost", (Conflict,), {"wire_name": "tests.LeaseLost"})
    assert error_types()["tests.LeaseLost"] is renamed


def test_a_rebuilt_error_takes_no_field_that_would_shadow_its_class() -> None:
    got = rebuild_error(
        GuestTrap, "boom", {"reason": "x", "args": ("y",), "__class__": int, "_p": 1, "step": 3}
    )
    assert type(got) is GuestTrap and got.reason is GuestTrap.reason
    assert got.args == ("boom",) and got.step == 3 and not hasattr(got, "_p")


def test_the_light_client_knows_every_error_the_server_can_raise() -> None:
    code = (
        "import json, sys\n"
        "import amber.runtime.client\n"
        "from amber.abi import error_types\n"
        "print(json.dumps(sorted(error_types())))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    known = set(json.loads(out.stdout))
    on_the_wire = {
        name
        for name, cls in AMBER_ERRORS
        if cls.__module__.startswith(tuple(f"amber.{p}." for p in WIRE_PACKAGES))
    }
    assert len(on_the_wire) > 30 and on_the_wire - known == set()


# -- a real Amber server ----------------------------------------------------------------------


def test_a_stale_fencing_token_reaches_the_client_as_lease_lost_with_its_task(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes]
) -> None:
    srv = make_server()
    srv.client.upload_version(modules["shipment"], promote=True)
    srv.client.start_run("shipment", {"shipment_id": "S-1", "address": "1 Main St"})
    task = srv.client.poll_task(worker_id="w", wait_s=5)
    assert task is not None
    stale = replace(task, fencing=task.fencing + 1)
    with pytest.raises(LeaseLost) as caught:
        srv.client.heartbeat(stale, worker_id="w")
    assert (caught.value.task_id, caught.value.fencing) == (task.task_id, task.fencing + 1)
    assert (
        str(caught.value)
        == f"task {task.task_id} is not leased under fencing token {stale.fencing}"
    )


def test_a_missing_run_reaches_the_client_as_run_not_found_with_its_id(
    make_server: Callable[..., InProcessServer],
) -> None:
    srv = make_server()
    with pytest.raises(RunNotFound) as caught:
        srv.client.describe("no-such-run")
    assert caught.value.run_id == "no-such-run"
