"""Regenerate amber_pb2.py / amber_pb2_grpc.py from amber.proto (run after editing the proto).

python -m runtime.api.generate
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    from grpc_tools import protoc

    return protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{ROOT}",
            f"--python_out={ROOT}",
            f"--grpc_python_out={ROOT}",
            f"--pyi_out={ROOT}",
            "runtime/api/amber.proto",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
