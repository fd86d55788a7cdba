"""Which environment files count: repo2docker's precedence rules, applied before reading.

A repository can declare its environment several ways at once; the reproducible answer is
the one a reproduction tool actually uses, and repo2docker (Binder) defines it:

1. **A configuration directory wins.** When ``binder/`` (else ``.binder/``) holds files,
   the environment files at the root (``environment.yml``, ``Pipfile``, ``Pipfile.lock``,
   ``requirements.txt``, ``runtime.txt``, ``.python-version``, ``apt.txt``, ``setup.py``,
   ``setup.cfg``, ``pyproject.toml``, ``uv.lock``, ``poetry.lock``) are ignored, so a broken
   root ``environment.yml`` no longer stops ``rb init``; the directory's own files are
   declared sources (as the root's would be).
2. **One Python declaration per directory.** ``environment.yml`` > ``Pipfile.lock`` /
   ``Pipfile`` > ``requirements.txt``: a lower one next to a higher one is ignored (the
   Pipfile pair is read together, and its lock's versions win; see
   :mod:`~reprobridge.detect.declared.lockfiles`).
3. **Pipenv's Python wins.** With a ``Pipfile`` or ``Pipfile.lock`` (or an
   ``environment.yml``) in the directory, ``runtime.txt`` there is ignored (the Pipfile's
   ``python_version`` decides).

:func:`env_scope` computes this once per index; detectors of environment files skip
:meth:`EnvScope.ignores` paths and treat :meth:`EnvScope.declared` ones as the repository's
declaration (errors propagate) rather than a subproject's (skipped with a warning). Every
ignored file is reported once as a warning, with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reprobridge.detect.index import RepoIndex

#: Files at the root that a configuration directory replaces (repo2docker's list plus the
#: Python project files rb reads).
ROOT_ENV_FILES = frozenset(
    {
        "environment.yml",
        "environment.yaml",
        "Pipfile",
        "Pipfile.lock",
        "requirements.txt",
        "runtime.txt",
        ".python-version",
        "apt.txt",
        "setup.py",
        "setup.cfg",
        "pyproject.toml",
        "uv.lock",
        "poetry.lock",
        "install.R",
        "postBuild",
    }
)
CONFIG_DIRS = ("binder", ".binder")
_CONDA = ("environment.yml", "environment.yaml")
_PIPENV = ("Pipfile", "Pipfile.lock")
_MEMO = "envscope"


@dataclass(frozen=True)
class EnvScope:
    """The outcome of the precedence rules (see the module docstring)."""

    #: ``""`` (the root), ``"binder"`` or ``".binder"``.
    config_dir: str = ""
    #: Ignored file -> why.
    ignored: dict[str, str] = field(default_factory=dict)

    def ignores(self, path: str) -> bool:
        return path in self.ignored

    def declared(self, path: str) -> bool:
        """True for a file in the configuration directory (the root when there is none)."""
        return path.rpartition("/")[0] == self.config_dir and not self.ignores(path)


def env_scope(index: RepoIndex) -> EnvScope:
    """The :class:`EnvScope` of ``index`` (computed once, kept in ``index.memo``)."""
    cached = index.memo.get(_MEMO)
    if isinstance(cached, EnvScope):
        return cached
    paths = {entry.path for entry in index}
    config_dir = ""
    ignored: dict[str, str] = {}
    dirs = [d for d in CONFIG_DIRS if any(p.startswith(d + "/") for p in paths)]
    if dirs:
        config_dir = dirs[0]
        why = f"{config_dir}/ takes precedence over the root (repo2docker's rule)"
        for name in sorted(ROOT_ENV_FILES):
            if name in paths:
                ignored[name] = why
        if len(dirs) > 1:
            for p in sorted(p for p in paths if p.startswith(dirs[1] + "/")):
                ignored[p] = f"{dirs[0]}/ is used; {dirs[1]}/ is ignored (both exist)"
    prefix = f"{config_dir}/" if config_dir else ""
    here = {p[len(prefix) :] for p in paths if p.startswith(prefix) and "/" not in p[len(prefix) :]}
    conda = next((n for n in _CONDA if n in here), None)
    pipenv = [n for n in _PIPENV if n in here]
    if conda:
        for name in (*pipenv, "requirements.txt", "runtime.txt"):
            if name in here:
                ignored[prefix + name] = f"{prefix}{conda} takes precedence (repo2docker's rule)"
    elif pipenv:
        for name in ("requirements.txt", "runtime.txt"):
            if name in here:
                ignored[prefix + name] = (
                    f"{prefix}{pipenv[-1]} takes precedence"
                    + (" (its python_version decides)" if name == "runtime.txt" else "")
                    + " (repo2docker's rule)"
                )
    scope = EnvScope(config_dir, ignored)
    index.memo[_MEMO] = scope
    return scope
