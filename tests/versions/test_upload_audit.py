"""Uploads are control-plane changes: audited under their actor, and refused to an anonymous
caller where the server checks operator tokens (nothing stored)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest

from amber.runtime.client import AmberClient
from amber.runtime.model import NotAuthorised
from amber.runtime.server import Operators, token_hash
from tests.conftest import InProcessServer

TOKEN = "s3cret-operator-token-for-uploads"


def test_an_upload_is_audited_with_its_actor_and_what_it_made_current(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes]
) -> None:
    srv = make_server()
    digest = srv.client.upload_version(modules["chain"], operator="dana").version.digest
    srv.client.upload_version(modules["chain"], operator="dana")  # same bytes: nothing new
    (entry,) = [e for e in srv.client.list_audit(target=digest) if e.action == "version.upload"]
    assert entry.actor == "dana"
    assert entry.detail["workflows"] == ["chain"] and entry.detail["current_for"] == ["chain"]
    anonymous = srv.client.upload_version(modules["orders"]).version.digest
    (entry,) = [e for e in srv.client.list_audit(target=anonymous) if e.action == "version.upload"]
    assert entry.actor.startswith("unnamed client 127.0.0.1")


def test_with_operator_tokens_an_anonymous_upload_is_refused_and_nothing_is_stored(
    make_server: Callable[..., InProcessServer], modules: dict[str, bytes]
) -> None:
    srv = make_server(operators=Operators(by_hash={token_hash(TOKEN): "erin"}))
    wasm = modules["shipment"]
    with pytest.raises(NotAuthorised):
        srv.client.upload_version(wasm, promote=True)
    digest = hashlib.sha256(wasm).hexdigest()
    assert all(v.digest != digest for v in srv.client.list_versions())
    with AmberClient(srv.target, operator_token=TOKEN) as client:
        stored = client.upload_version(wasm, promote=True).version.digest
        actors = {e.action: e.actor for e in client.list_audit(target=stored)}
    assert stored == digest and actors["version.upload"] == "erin"
