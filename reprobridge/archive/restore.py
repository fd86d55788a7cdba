"""`rb unpack`: an unpacked archive that carries the source becomes a git repository again.

Contract of :func:`make_repository`: when the archive's ``MANIFEST.json`` says it holds
the source (``with_source``), ``dest`` becomes a git repository with one commit of every
unpacked file except ``wheels/``, ``nix-cache/`` and ``repro/evidence/`` (listed in
``.git/info/exclude``: they are inputs and records beside the source, not the code an
audit copies into each run). The commit is deterministic (a fixed author and committer,
both dated the archive's ``source_date_epoch``), so the same archive always gives the same
commit id; its message names the audited commit. ``rb audit`` (every run starts from a
clean copy of HEAD) then works in ``dest`` as it did in the original repository.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reprobridge import _proc

#: Beside the source, never committed.
EXCLUDED = ("/wheels/", "/nix-cache/", "/repro/evidence/")
_IDENT = ("rb unpack", "unpack@reprobridge.invalid")


def make_repository(dest: Path, doc: dict[str, Any]) -> str | None:
    """The new commit's id, or None when the archive has no source (see the module doc)."""
    if not doc.get("with_source"):
        return None
    epoch = int(doc.get("source_date_epoch") or 0)
    # Through rb's one git runner: the archive's files are untrusted, and git must run
    # nothing they could name (its .gitattributes may name drivers; the archive carries
    # no .git, so the new repository's config is git's default and rb's overrides).
    ident = {
        "GIT_AUTHOR_NAME": _IDENT[0],
        "GIT_AUTHOR_EMAIL": _IDENT[1],
        "GIT_COMMITTER_NAME": _IDENT[0],
        "GIT_COMMITTER_EMAIL": _IDENT[1],
        "GIT_AUTHOR_DATE": f"@{epoch} +0000",
        "GIT_COMMITTER_DATE": f"@{epoch} +0000",
    }

    def git(*args: str) -> str:
        return _proc.git(dest, *args, extra_env=ident).text.strip()

    git("init", "-q", "-b", "main")
    (dest / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (dest / ".git" / "info" / "exclude").write_text("".join(f"{p}\n" for p in EXCLUDED))
    git("add", "-A")
    original = str(doc.get("commit") or "unknown")
    git("commit", "-q", "--allow-empty", "-m", f"Unpacked by rb: the source of {original}")
    return git("rev-parse", "HEAD")
