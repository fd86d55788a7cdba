"""A repository whose ``.git/config`` names a program for every key git may run one from.

Shared (``from hostile_git import ...``; tests/ is on sys.path) by the trust-boundary tests of every command that runs git on a repository
(``rb init``, ``rb check``, ``rb archive``, ``rb bench``, the audit): each program, were
it run, would create its own file in ``marks``; a test runs the command and asserts
:func:`ran` is empty. :func:`arm` also proves the traps are real: plain git, with the
same repository, runs them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

#: Every config key that names a program (beside hooks), with the name of its marker.
PROGRAM_KEYS = {
    "core.fsmonitor": "fsmonitor",
    "core.pager": "pager",
    "core.editor": "editor",
    "sequence.editor": "sequence-editor",
    "core.sshCommand": "ssh",
    "core.askPass": "askpass",
    "credential.helper": "credential",
    "diff.external": "diff-external",
    "diff.x.textconv": "textconv",
    "diff.x.command": "diff-command",
    "filter.x.clean": "filter-clean",
    "filter.x.smudge": "filter-smudge",
    "filter.x.process": "filter-process",
    "merge.x.driver": "merge-driver",
    "gpg.program": "gpg",
    "gpg.openpgp.program": "gpg-openpgp",
    "gpg.x509.program": "gpg-x509",
    "gpg.ssh.program": "gpg-ssh",
}
HOOKS = (
    "pre-commit",
    "commit-msg",
    "post-commit",
    "post-checkout",
    "post-index-change",
    "reference-transaction",
    "pre-auto-gc",
)


def _git(root: Path, *args: str, input: bytes | None = None) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], input=input, capture_output=True, check=True
    ).stdout.decode()


def sign_head(root: Path) -> str:
    """Replace HEAD by the same commit carrying a (fake) ``gpgsig`` header: ``git log``
    with ``log.showSignature`` then runs ``gpg.program`` to check it. The new id."""
    text = _git(root, "cat-file", "commit", "HEAD")
    head, _, message = text.partition("\n\n")
    sig = "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----"
    signed = f"{head}\n{sig}\n\n{message}"
    new = _git(root, "hash-object", "-t", "commit", "-w", "--stdin", input=signed.encode()).strip()
    _git(root, "update-ref", "HEAD", new)
    return new


def arm(root: Path, marks: Path, *, attributes: bool = True) -> None:
    """Make ``root`` (a git repository with at least one commit) hostile: every key of
    :data:`PROGRAM_KEYS` and every hook writes ``marks/<name>``; ``log.showSignature`` is
    on and HEAD carries a signature; with ``attributes``, a committed ``.gitattributes``
    sends every file through filter, diff and merge driver ``x``."""
    marks.mkdir(parents=True, exist_ok=True)
    if attributes:
        (root / ".gitattributes").write_text("* filter=x diff=x merge=x\n")
        _git(root, "add", ".gitattributes")
        ident = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
        _git(root, *ident, "-c", "commit.gpgSign=false", "commit", "-qm", "attributes")
    sign_head(root)
    bin_dir = marks.parent / f"{marks.name}-programs"
    bin_dir.mkdir(exist_ok=True)
    for key, name in PROGRAM_KEYS.items():
        script = bin_dir / name
        # A filter must pass the content through so git's own operation still succeeds.
        script.write_text(f'#!/bin/sh\ntouch "{marks / name}"\ncat 2>/dev/null\nexit 0\n')
        script.chmod(0o755)
        _git(root, "config", key, str(script))
    _git(root, "config", "log.showSignature", "true")
    _git(root, "config", "filter.x.required", "true")
    hooks = bin_dir / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in HOOKS:
        (hooks / hook).write_text(f'#!/bin/sh\ntouch "{marks / ("hook-" + hook)}"\n')
        (hooks / hook).chmod(0o755)
    _git(root, "config", "core.hooksPath", str(hooks))


def ran(marks: Path) -> list[str]:
    """The names of the programs that ran (their markers), sorted."""
    return sorted(p.name for p in marks.iterdir()) if marks.is_dir() else []


def traps_are_real(root: Path, marks: Path) -> None:
    """Plain git in ``root`` runs the traps (the test's own check on its fixture)."""
    subprocess.run(["git", "-C", str(root), "log", "-1"], capture_output=True, check=False)
    subprocess.run(["git", "-C", str(root), "status"], capture_output=True, check=False)
    got = ran(marks)
    assert "fsmonitor" in got and any(n.startswith("gpg") for n in got), got
    for p in marks.iterdir():
        p.unlink()
