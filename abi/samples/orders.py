"""Order processing: the sample workflow `orders` and its activities, in Python.

The port of `orders.c`, and a drop-in for it: the same workflow and activity names, the same
payloads and results, the same commands in the same order (an order's history replays on
either module).

Input:  {"order_id": str, "sku": str, "quantity": int, "amount_cents": int, "card"?: str}
Flow:   now (placed_at) → reserve_inventory → charge_payment → ship_order → send_confirmation.
        A declined card (charge_payment fails with PaymentDeclined) is compensated with
        release_inventory and the run completes with status "payment_declined".
Result: {"order_id", "status": "shipped", "reservation", "charge", "tracking", "placed_at"}

Any other error an activity returns fails the run with that error. So does a cancellation, as in
the C sample: a cancelled order ends *failed* with ["Cancelled", reason] and compensates nothing.

Test hooks: card "declined" fails charge_payment non-retryably; card "flaky" fails it
(retryably, GatewayTimeout) on the first attempt. The C sample's AMBER_VARIANT_REORDERED build
(charging before reserving, to break replay) has no Python counterpart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amber_sdk import ActivityError, ApplicationError, CancelledError, activity, workflow

BAD_INPUT = (
    "expected {order_id: str, sku: str, quantity: int, amount_cents: int} and optionally card: str"
)


# ---- payload fields (absent or of another type: None) --------------------------------------


def _str(doc: object, key: str) -> str | None:
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def _int(doc: object, key: str) -> int | None:
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _refused(kind: str, message: str) -> ApplicationError:
    """An activity's answer no retry can change."""
    return ApplicationError(message, type=kind, non_retryable=True)


# ---- workflow ------------------------------------------------------------------------------


def _call(fn: Callable[..., Any], args: dict[str, object]) -> Any:
    """The activity's result. Its error propagates and fails the run; a cancellation fails it
    too, with ["Cancelled", reason], as `amber_wf_fail(wf, r.error_type, ...)` does in C."""
    try:
        return workflow.execute_activity(fn, args)
    except CancelledError as exc:
        raise ApplicationError(exc.message, type="Cancelled") from None


def _field(result: object, key: str, activity_name: str) -> str:
    value = _str(result, key)
    if value is None:
        raise ApplicationError(f"{activity_name} returned no {key}", type="BadResult")
    return value


@workflow.defn
def orders(order: object) -> dict[str, object]:
    order_id, sku = _str(order, "order_id"), _str(order, "sku")
    quantity, amount_cents = _int(order, "quantity"), _int(order, "amount_cents")
    if order_id is None or sku is None or quantity is None or amount_cents is None:
        raise ApplicationError(BAD_INPUT, type="BadInput")
    card = _str(order, "card")
    if card is None:
        card = "visa"

    placed_at = workflow.now_ms()
    workflow.logger.info("order placed")

    reserved = _call(reserve_inventory, {"order_id": order_id, "sku": sku, "quantity": quantity})
    reservation = _field(reserved, "reservation", "reserve_inventory")
    try:
        charged = _call(
            charge_payment, {"order_id": order_id, "amount_cents": amount_cents, "card": card}
        )
    except ActivityError as exc:
        if exc.type != "PaymentDeclined":
            raise
        workflow.logger.warning("payment declined; releasing inventory")
        _call(release_inventory, {"order_id": order_id, "reservation": reservation})
        return {
            "order_id": order_id,
            "status": "payment_declined",
            "reservation": reservation,
            "placed_at": placed_at,
        }
    charge = _field(charged, "charge", "charge_payment")

    shipped = _call(ship_order, {"order_id": order_id, "reservation": reservation})
    tracking = _field(shipped, "tracking", "ship_order")
    _call(send_confirmation, {"order_id": order_id, "tracking": tracking})
    workflow.logger.info("order shipped")
    return {
        "order_id": order_id,
        "status": "shipped",
        "reservation": reservation,
        "charge": charge,
        "tracking": tracking,
        "placed_at": placed_at,
    }


# ---- activities ----------------------------------------------------------------------------


@activity.defn
def reserve_inventory(args: object) -> dict[str, str]:
    """{"order_id", "sku", "quantity"} → {"reservation": "rsv-<order_id>"}"""
    order_id, sku, quantity = _str(args, "order_id"), _str(args, "sku"), _int(args, "quantity")
    if order_id is None or sku is None or quantity is None:
        raise _refused("BadArgs", "expected {order_id, sku, quantity}")
    if quantity <= 0:
        raise _refused("InvalidQuantity", "quantity must be > 0")
    return {"reservation": f"rsv-{order_id}"}


@activity.defn
def charge_payment(args: object) -> dict[str, str]:
    """{"order_id", "amount_cents", "card"} → {"charge": "ch-<order_id>-<idempotency key>"}"""
    order_id, card, amount = _str(args, "order_id"), _str(args, "card"), _int(args, "amount_cents")
    if order_id is None or card is None or amount is None:
        raise _refused("BadArgs", "expected {order_id, amount_cents, card}")
    if card == "declined":
        raise _refused("PaymentDeclined", "the card was declined")
    if card == "flaky" and activity.info().attempt < 2:
        raise ApplicationError("the payment gateway timed out", type="GatewayTimeout")
    if amount <= 0:
        raise _refused("InvalidAmount", "amount_cents must be > 0")
    return {"charge": f"ch-{order_id}-{activity.info().idempotency_key}"}


@activity.defn
def ship_order(args: object) -> dict[str, str]:
    """{"order_id", "reservation"} → {"tracking": "trk-<order_id>"}"""
    order_id = _str(args, "order_id")
    if order_id is None or _str(args, "reservation") is None:
        raise _refused("BadArgs", "expected {order_id, reservation}")
    return {"tracking": f"trk-{order_id}"}


@activity.defn
def send_confirmation(args: object) -> dict[str, bool]:
    """{"order_id", "tracking"} → {"sent": true}"""
    if _str(args, "order_id") is None or _str(args, "tracking") is None:
        raise _refused("BadArgs", "expected {order_id, tracking}")
    activity.logger.info("confirmation sent")
    return {"sent": True}


@activity.defn
def release_inventory(args: object) -> dict[str, bool]:
    """{"order_id", "reservation"} → {"released": true}"""
    if _str(args, "order_id") is None or _str(args, "reservation") is None:
        raise _refused("BadArgs", "expected {order_id, reservation}")
    return {"released": True}
