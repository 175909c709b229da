"""The documentation points at files that exist: every relative Markdown link, and every
`something.md` a document names in code style, resolves inside the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
NAMED_MD = re.compile(r"`([A-Za-z0-9_./-]+\.md)`")
SKIP = {".venv", "node_modules", ".git", "amber"}  # amber/ links the packages: no duplicates
OUTSIDE = "../shared/"
"""The team's workspace beside the checkout (the peers' harness): named, never linked."""


def _documents() -> list[Path]:
    return [
        md
        for md in ROOT.rglob("*.md")
        if not SKIP & set(md.relative_to(ROOT).parts) and "pytest" not in str(md)
    ]


def test_relative_links_and_named_documents_exist() -> None:
    missing = []
    for md in _documents():
        text = md.read_text(encoding="utf-8", errors="replace")
        for target in LINK.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            if not (md.parent / target).exists():
                missing.append(f"{md.relative_to(ROOT)} links {target}")
        for named in NAMED_MD.findall(text):
            if named.startswith(OUTSIDE):
                continue
            here, top = md.parent / named, ROOT / named
            if not here.exists() and not top.exists() and not list(ROOT.rglob(Path(named).name)):
                missing.append(f"{md.relative_to(ROOT)} names {named}")
    assert not missing, "\n".join(missing)


def test_the_check_sees_the_documents() -> None:
    names = {md.relative_to(ROOT).as_posix() for md in _documents()}
    assert {"README.md", "abi/README.md", "bench/README.md", "docs/execution.md"} <= names
