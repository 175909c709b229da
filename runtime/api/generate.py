"""Regenerate amber_pb2.py / amber_pb2_grpc.py from amber.proto (run after editing the proto).

python -m amber.runtime.api.generate
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    from grpc_tools import protoc

    os.chdir(ROOT)  # the proto is named through the `amber/` links, so its imports are amber.*

    return protoc.main(
        [
            "grpc_tools.protoc",
            "-I.",
            "--python_out=.",
            "--grpc_python_out=.",
            "--pyi_out=.",
            "amber/runtime/api/amber.proto",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
