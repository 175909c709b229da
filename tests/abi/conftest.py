"""Fixtures for the guest SDK tests: every built guest wrapped in the minimal test host."""

from __future__ import annotations

import pytest

from tests.abi._harness import Guest
from tests.conftest import GUEST_SOURCES as SOURCES
from tools._build import BuildResult

__all__ = ["SOURCES"]


@pytest.fixture(scope="session")
def guests(built: dict[str, BuildResult]) -> dict[str, Guest]:
    return {name: Guest(result.output) for name, result in built.items()}
