"""Fixtures for the guest SDK tests: every built guest wrapped in the minimal test host.

The samples for durable semantics (shipment, payments), the three versions of the rollout sample
(`rollout_v1`..`rollout_v3`) and the durable probe are built here, on first use, unless the
shared `GUEST_SOURCES` lists them already: a guest that fails to build fails only its own tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from amber.tools._build import BuildResult, build_module
from tests.abi._harness import Guest
from tests.conftest import GUEST_SOURCES, ROOT

SOURCES: dict[str, tuple[Path, dict[str, str]]] = (
    {
        "shipment": (ROOT / "abi" / "samples" / "shipment.c", {}),
        "payments": (ROOT / "abi" / "samples" / "payments.c", {}),
        "durable_probe": (ROOT / "tests" / "abi" / "durable_probe.c", {}),
    }
    | {
        f"rollout_v{v}": (ROOT / "abi" / "samples" / "rollout.c", {"ROLLOUT_V": str(v)})
        for v in (1, 2, 3)
    }
    | GUEST_SOURCES
)

__all__ = ["SOURCES"]


class _Built(dict[str, BuildResult]):
    """The session's shared builds, plus the SOURCES they lack, built when first asked for."""

    def __init__(self, shared: dict[str, BuildResult], out: Path) -> None:
        super().__init__(shared)
        self._out = out

    def __missing__(self, name: str) -> BuildResult:
        source, defines = SOURCES[name]
        result = self[name] = build_module(source, self._out / f"{name}.wasm", defines=defines)
        return result


class _Guests(dict[str, Guest]):
    def __init__(self, built: dict[str, BuildResult]) -> None:
        super().__init__()
        self._built = built

    def __missing__(self, name: str) -> Guest:
        guest = self[name] = Guest(self._built[name].output)
        return guest


@pytest.fixture(scope="session")
def built(
    built: dict[str, BuildResult], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, BuildResult]:
    return _Built(built, tmp_path_factory.mktemp("abi-modules"))


@pytest.fixture(scope="session")
def guests(built: dict[str, BuildResult]) -> dict[str, Guest]:
    return _Guests(built)
