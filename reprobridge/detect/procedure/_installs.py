"""Which optional requirement sets an install line of a README installs.

A README often installs an optional set right before the commands that need it::

    uv pip install ".[atari]"
    python cleanrl/ppo_atari.py --env-id BreakoutNoFrameskip-v4

The environment rb builds holds the project's base requirements, not its optional sets
(extras, variant requirement files), so such a command cannot run there as written.
:func:`optional_sets` reads one shell segment and names the optional sets it installs:

* an extra of the repository's own project: ``pip install ".[atari]"``, ``pip install -e
  .[atari,mujoco]``, ``uv pip install ./[x]`` (a local path, not a PyPI package's extra),
  ``poetry install -E x`` / ``--extras x``, ``uv sync --extra x``, ``--all-extras``;
* a requirements file the caller knows to be an optional set for running code
  (``pip install -r requirements/requirements-atari.txt``; see
  :func:`~reprobridge.detect.declared.requirements.optional_run_sets`), resolved against
  the command's working directory, else the repository's root.

Extras named for development tools (``dev``, ``test``, ``docs``, ``lint``) are not sets a
run needs and are left out.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Set

from reprobridge.detect.declared.requirements import is_auxiliary

#: A local project with extras: ``.[atari]``, ``./[a,b]``, ``.[x]`` after ``-e``.
_LOCAL_EXTRAS = re.compile(r"^\.{1,2}(?:/[\w.\-/]*)?\[([\w,\s.\-]+)\]$")


def _extras(names: str) -> list[str]:
    """The run extras of a comma-separated list (development tools' left out)."""
    return [f".[{n}]" for n in (x.strip() for x in names.split(",")) if n and not is_auxiliary(n)]


def _pip_args(words: list[str]) -> list[str] | None:
    """The arguments after ``install`` of a pip command (``pip``, ``pip3``, ``python -m
    pip``, ``uv pip``), else None."""
    for i, w in enumerate(words[:-1]):
        name = w.rsplit("/", 1)[-1]
        is_pip = re.fullmatch(r"pip[\d.]*", name) is not None or (
            name == "pip" and i > 0 and words[i - 1] == "-m"
        )
        if is_pip and words[i + 1] == "install":
            return words[i + 2 :]
    return None


def _option_values(args: list[str], names: Set[str]) -> list[str]:
    """The values of options ``names`` in ``args`` (``-r f``, ``--extras=x``, ``-rf``)."""
    out: list[str] = []
    for i, a in enumerate(args):
        flag, eq, value = a.partition("=")
        if flag in names and eq:
            out.append(value)
        elif a in names and i + 1 < len(args):
            out.append(args[i + 1])
        elif any(len(n) == 2 and a.startswith(n) and len(a) > 2 for n in names if n[1] != "-"):
            out.append(a[2:])
    return out


def optional_sets(segment: str, workdir: str, optional_files: Set[str]) -> list[str]:
    """The optional requirement sets shell ``segment`` installs (see the module docstring),
    in order: ``.[name]`` for a project extra, ``.[all extras]``, or a requirements file's
    repository path; ``optional_files`` are the requirement files that are optional sets."""
    try:
        words = shlex.split(segment, comments=True)
    except ValueError:
        words = segment.split()
    found: list[str] = []
    pip = _pip_args(words)
    if pip is not None:
        for req in _option_values(pip, {"-r", "--requirement"}):
            # From the working directory, or from the root: a docs page's commands are
            # written to run from the repository's root (as its scripts are resolved).
            paths = [posixpath.normpath(posixpath.join(workdir, req)), posixpath.normpath(req)]
            found += [p for p in dict.fromkeys(paths) if p in optional_files][:1]
        for a in pip:
            match = _LOCAL_EXTRAS.match(a)
            if match:
                found += _extras(match.group(1))
        return found
    tool, sub = (words[0].rsplit("/", 1)[-1], words[1]) if len(words) > 1 else ("", "")
    if (tool, sub) in {("poetry", "install"), ("uv", "sync"), ("pdm", "install")}:
        if "--all-extras" in words:
            found.append(".[all extras]")
        for value in _option_values(words, {"-E", "--extras", "--extra"}):
            found += _extras(value.replace(" ", ","))
    return found
