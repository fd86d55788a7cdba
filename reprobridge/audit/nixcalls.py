"""How rb calls Nix on a repository's flake: options, environment, errors, the sandbox.

Contract:

* :func:`nix_env` is the whole environment of every such call: an allowlist of what Nix
  needs to find its store, its configuration, its caches and the network (never the
  operator's other variables: a flake that evaluates impurely could read them);
* :data:`RESTRICTED_EVAL` makes an evaluation of repository-chosen Nix code restricted
  (``builtins.getEnv`` answers ``""``, no file outside the allowed paths, no URI, no
  import from a derivation); :data:`SANDBOXED_BUILDS` asks for Nix's build sandbox with no
  fallback to an unsandboxed build;
* :func:`sandbox_problem` says, from ``nix config show``, why those options would not take
  effect (the daemon does the builds and ignores an untrusted client's ``sandbox``): the
  backend then refuses as a machine problem instead of building on the host;
* :func:`error_line` is what of a failed Nix command may enter the evidence: its first
  ``error:`` line, redacted and at most :data:`ERROR_LINE_MAX` characters (Nix prints the
  code around an error, and a ``throw`` can carry any text the evaluation could read);
* :func:`machine_cause` says when a failed Nix command failed because of this machine (no
  network to fetch the pin, a Nix older than :data:`~reprobridge._machine.MIN_NIX`) rather
  than because of the repository's pin: the environment is then not judged, never failed.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
from collections.abc import Mapping, Sequence
from typing import Unpack

from reprobridge import _machine, _proc
from reprobridge._machine import Runner, Where
from reprobridge.errors import CommandFailed, MachineError
from reprobridge.evidence.redact import Redactor, secrets_from_env

#: The variables a Nix command gets, when set: where the store, its daemon and the
#: configuration are, caches, TLS roots and proxies for fetching inputs.
NIX_ENV_PASSTHROUGH = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "TZ",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "NIX_CONFIG",
    "NIX_REMOTE",
    "NIX_CONF_DIR",
    "NIX_USER_CONF_FILES",
    "NIX_STORE_DIR",
    "NIX_STATE_DIR",
    "NIX_LOG_DIR",
    "NIX_DATA_DIR",
    "NIX_DAEMON_SOCKET_PATH",
    "NIX_SSL_CERT_FILE",
    "CURL_CA_BUNDLE",
    # TLS roots and proxies: the same names uv gets.
    *(v for v in _proc.UV_PASSTHROUGH if v.startswith("SSL_") or v.upper().endswith("_PROXY")),
)
#: Options of an evaluation of repository-chosen Nix code that is not a flake's (which Nix
#: evaluates purely): restricted, no URI allowed, no build during evaluation, offline.
RESTRICTED_EVAL = (
    "--option",
    "restrict-eval",
    "true",
    "--option",
    "allowed-uris",
    "",
    "--option",
    "allow-import-from-derivation",
    "false",
    "--offline",
)
#: Options of every Nix command that may build a repository's derivations.
SANDBOXED_BUILDS = ("--option", "sandbox", "true", "--option", "sandbox-fallback", "false")
#: Most characters of a Nix error that enter the evidence.
ERROR_LINE_MAX = 200
#: What curl and git say when the network is not there (not when the server answers: an
#: HTTP 404 for a pinned URL is the pin's problem, not this machine's).
NETWORK_ERRORS = (
    "couldn't resolve host",
    "could not resolve host",
    "couldn't resolve proxy",
    "temporary failure in name resolution",
    "couldn't connect to server",
    "could not connect to server",
    "failed to connect to",
    "network is unreachable",
    "timeout was reached",
    "connection timed out",
)


def nix_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a Nix command on a repository's flake (see the module docstring)."""
    source = os.environ if environ is None else environ
    return {k: source[k] for k in NIX_ENV_PASSTHROUGH if k in source}


def nix_runner(run: Runner, nix: str) -> Runner:
    """``run`` with ``nix`` in place of the literal ``nix`` at argv[0] (the probes, and
    :func:`reprobridge._machine.nix_config`'s, name the program ``nix``) and with
    :func:`nix_env` as the whole environment."""

    def swapped(argv: Sequence[str], *, timeout: float, **where: Unpack[Where]) -> _proc.Result:
        if argv and argv[0] == "nix":
            argv = [nix, *argv[1:]]
        return run(argv, timeout=timeout, cwd=where.get("cwd"), env=nix_env())

    return swapped


def error_line(exc: CommandFailed, environ: Mapping[str, str] | None = None) -> str:
    """The last ``error:`` line of a failed Nix command (the innermost cause; else only its
    exit status or timeout), redacted (the operator's secret values and secret-looking
    text) and capped. Never the code excerpts and traces Nix prints around it."""
    lines = [line.strip() for line in exc.stderr_tail.splitlines()]
    errors = [line for line in lines if line.startswith("error:")]
    if errors:
        line = errors[-1]
    elif exc.returncode is not None:
        line = f"nix exited with {exc.returncode}"
    else:
        line = "nix did not finish in time"
    source = os.environ if environ is None else environ
    text = Redactor(secrets_from_env(source)).redact_text(" ".join(line.split()))
    return text if len(text) <= ERROR_LINE_MAX else text[: ERROR_LINE_MAX - 1] + "…"


def machine_cause(exc: CommandFailed, version: tuple[int, int] | None) -> str | None:
    """Why a failed Nix command (``exc``) is this machine's problem, or None when it may be
    the repository's: no network to fetch what the pin names, or a Nix (``version``, as
    :func:`~reprobridge._machine.nix_version` reads it) older than
    :data:`~reprobridge._machine.MIN_NIX`, which current pins do not evaluate with (what it
    does not evaluate says nothing about the pin)."""
    text = exc.stderr_tail.lower()
    if any(sign in text for sign in NETWORK_ERRORS):
        return "no network to fetch the pinned inputs"
    if version is not None and version < _machine.MIN_NIX:
        return (
            f"nix {_machine.dotted(version)} is older than {_machine.dotted(_machine.MIN_NIX)} "
            "and could not evaluate the pin"
        )
    return None


def require_sandbox(run: Runner, nix: str, hint: str) -> None:
    """Raise :class:`MachineError` (with ``hint``) when Nix, run as ``nix`` through
    ``run``, would build a repository's derivations outside its sandbox although rb asks for
    it (:func:`sandbox_problem`), or when that cannot be told."""
    probe = nix_runner(run, nix)
    got = _machine.try_run(probe, ["nix", "--version"], 60.0)
    version = None if isinstance(got, str) else _machine.parse_version(got.text)
    config = _machine.nix_config(probe, version or (0, 0), 60.0)
    if isinstance(config, str):
        raise MachineError(
            f"cannot tell whether Nix builds in its sandbox (`nix config show`: {config})",
            hint=hint,
        )
    problem = sandbox_problem(config)
    if problem is not None:
        raise MachineError(problem, hint=hint)


def _user_trusted(trusted: str, uid: int) -> bool:
    """Whether the user ``uid`` is among ``trusted-users`` (names, ``@group``s, ``*``)."""
    try:
        user = pwd.getpwuid(uid)
    except KeyError:
        return False
    groups = {g.gr_name for g in grp.getgrall() if user.pw_name in g.gr_mem}
    with contextlib.suppress(KeyError):
        groups.add(grp.getgrgid(user.pw_gid).gr_name)
    for entry in trusted.split():
        if entry in ("*", user.pw_name) or (entry.startswith("@") and entry[1:] in groups):
            return True
    return False


def sandbox_problem(
    config: Mapping[str, str], *, uid: int | None = None, environ: Mapping[str, str] | None = None
) -> str | None:
    """Why rb cannot make Nix build in its sandbox (None when it can), from ``nix config
    show`` as configured (without :data:`SANDBOXED_BUILDS`).

    ``sandbox = true`` is enough. Otherwise the options take effect only where this process
    opens the store itself (root, no daemon) or the daemon trusts this user; elsewhere the
    daemon keeps its own setting and builds a repository's derivations on the host.
    """
    configured = config.get("sandbox", "")
    if configured == "true":
        return None
    uid = os.geteuid() if uid is None else uid
    source = os.environ if environ is None else environ
    store = source.get("NIX_REMOTE") or config.get("store", "auto") or "auto"
    direct = uid == 0 and store in ("auto", "local")
    if direct or _user_trusted(config.get("trusted-users", ""), uid):
        return None
    return (
        f"Nix's build sandbox is off (sandbox = {configured or 'unset'}) and the Nix daemon "
        "does not let this user turn it on: rb does not build a repository's derivations "
        "outside the sandbox; set `sandbox = true` in /etc/nix/nix.conf and restart the daemon"
    )
