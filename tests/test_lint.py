"""The bar every change meets: ruff (lint and format) and mypy --strict are clean.

Run inside the suite so that CI's one test command enforces them.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("command", "where"),
    [
        (["ruff", "check", "."], "."),
        (["ruff", "format", "--check", "."], "."),
        (["mypy"], "."),
        # The Python guest SDK is its own root (`amber_sdk`), outside the host's packages.
        (
            ["mypy", "--strict", "--config-file", "", "--explicit-package-bases", "amber_sdk"],
            "abi/sdk/python",
        ),
    ],
    ids=["ruff-check", "ruff-format", "mypy", "mypy-python-sdk"],
)
def test_the_code_is_clean(command: list[str], where: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=ROOT / where,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
