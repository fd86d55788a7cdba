"""Finding the repository a command is about, from wherever it was started (as git does).

Every verb that works on a repository (`rb audit`, `rb run`, `rb check`, `rb report`,
`rb archive`, `rb check-links`) resolves its ``-C``/``PATH`` with :func:`find_repository`;
`rb init` gets the same answer from git (``RepoIndex.from_git``: the work tree's top level).
"""

from __future__ import annotations

import os
from pathlib import Path

from reprobridge.constants import MANIFEST_FILE
from reprobridge.errors import ManifestNotFoundError


def find_repository(start: Path, *, required: bool = True) -> Path:
    """The nearest directory at or above ``start`` that holds ``reprobridge.toml``.

    The walk stops at the first directory that has a ``.git`` entry (the repository's top
    level: a manifest above it belongs to another project) or at the filesystem root. The
    path is made absolute without resolving symlinks, so errors name what the user typed.
    With nothing found, :class:`ManifestNotFoundError` (exit 3) when ``required``, else
    ``start`` itself (for commands that can also work on a path outside any repository).
    """
    # abspath, not resolve(): '..' is collapsed but symlinks are kept as the user typed them.
    here = Path(os.path.abspath(start))  # noqa: PTH100
    for directory in (here, *here.parents):
        if os.path.lexists(directory / MANIFEST_FILE):
            return directory
        if os.path.lexists(directory / ".git"):
            break
    if not required:
        return start
    raise ManifestNotFoundError(
        f"not found in {here} or a parent directory",
        path=MANIFEST_FILE,
        hint="run `rb init` in the repository first",
    )
