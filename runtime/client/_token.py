"""Where a client finds its API credential when it is not given one: `$AMBER_TOKEN`, else the
first of `$AMBER_HOME/token`, `./.amber/token` (`amber dev`'s default home) and
`~/.amber/token`. `amber dev` and `amber auth ... --save` write there (mode 0600), so the CLI,
workers and Python clients on the same machine pick the credential up without being told.
"""

from __future__ import annotations

import os
from pathlib import Path

TOKEN_ENV = "AMBER_TOKEN"
TOKEN_FILE = "token"


def token_files() -> list[Path]:
    """The files looked at, in order."""
    homes = [os.environ.get("AMBER_HOME", ""), ".amber", str(Path.home() / ".amber")]
    return [Path(home) / TOKEN_FILE for home in dict.fromkeys(h for h in homes if h)]


def discover_token() -> str:
    """`$AMBER_TOKEN`, else the first token file found; "" when there is none."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if token:
        return token
    for path in token_files():
        try:
            return path.read_text().strip()
        except OSError:
            continue
    return ""
