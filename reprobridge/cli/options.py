"""Options shared by several verbs, declared once (as pip-tools does), and the one printer of
``--json`` results.

Each verb takes its shared options from here, so ``--json``, ``-q``/``-v``, ``-C``/``--repo``
and ``--backend`` mean the same thing everywhere. The operator's settings (user config file,
``RB_*`` variables; :mod:`reprobridge.settings`) are loaded once by the group and reached
with :func:`state`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliState:
    """What the group decided for every verb: verbosity (-1 quiet, 0 normal, 1+ verbose)
    and the operator's settings (loaded by the group; see :func:`state`)."""

    verbosity: int = 0
    operator: Any = None  # reprobridge.settings.Operator; Any keeps pydantic out of `rb --help`
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def quiet(self) -> bool:
        return self.verbosity < 0

    @property
    def verbose(self) -> bool:
        return self.verbosity > 0


def state() -> CliState:
    """The current invocation's :class:`CliState` (settings loaded on first use)."""
    ctx = click.get_current_context()
    st = ctx.ensure_object(CliState)
    if st.operator is None:
        from reprobridge.settings import load_operator

        st.operator = load_operator()
    return st


def _set_quiet(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(CliState).verbosity = -1


def _add_verbose(ctx: click.Context, _param: click.Parameter, value: int) -> None:
    if value:
        st = ctx.ensure_object(CliState)
        st.verbosity = max(st.verbosity, 0) + value


def verbosity_options(f: F) -> F:
    """``-q/--quiet`` and ``-v/--verbose``: accepted on the group and on every verb
    (``rb -q audit`` = ``rb audit -q``)."""
    f = click.option(
        "-v",
        "--verbose",
        count=True,
        expose_value=False,
        callback=_add_verbose,
        help="More detail on stderr (repeatable).",
    )(f)
    return click.option(
        "-q",
        "--quiet",
        is_flag=True,
        expose_value=False,
        callback=_set_quiet,
        help="No progress lines on stderr; results and errors only.",
    )(f)


def json_option(f: F) -> F:
    """``--json``: the verb's result as one JSON document on stdout (see :func:`print_json`);
    progress, warnings and errors stay on stderr."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print the result as JSON on stdout (stable, sorted keys).",
    )(f)


class JsonResult(Protocol):
    """A verb's result: its ``--json`` document is ``to_json()`` (stable keys)."""

    def to_json(self) -> Any: ...


def print_json(result: JsonResult | Mapping[str, Any] | Sequence[Any]) -> None:
    """The one printer of ``--json`` results: a result's :meth:`JsonResult.to_json` (or a
    document a verb assembles), indented, sorted keys, paths as strings."""
    doc = result.to_json() if hasattr(result, "to_json") else result
    click.echo(json.dumps(doc, indent=2, sort_keys=True, default=str))


class Verification(JsonResult, Protocol):
    """What a verify verb found: ``problems`` (none: ``ok``)."""

    problems: list[str]

    @property
    def ok(self) -> bool: ...


def finish_verification(
    result: Verification, as_json: bool, subject: str, facts: Sequence[str]
) -> None:
    """The one ending of `rb verify` and `rb archive verify`: the result as JSON, or its
    problems, ``facts`` and a last line ``<subject>: OK`` or ``<subject>: N problem(s)``;
    then exit 1 when there was a problem."""
    if as_json:
        print_json(result)
    else:
        for p in result.problems:
            click.echo(f"problem: {p}")
        for line in facts:
            click.echo(line)
        click.echo(
            f"{subject}: OK" if result.ok else f"{subject}: {len(result.problems)} problem(s)"
        )
    if not result.ok:
        raise click.exceptions.Exit(1)


def common_options(f: F) -> F:
    """What every verb accepts: ``--json`` and the verbosity flags."""
    return verbosity_options(json_option(f))


def _discoverer(required: bool) -> Callable[[click.Context, click.Parameter, Path], Path]:
    def _discover(ctx: click.Context, _param: click.Parameter, value: Path) -> Path:
        if ctx.resilient_parsing:  # shell completion: never touch the file system
            return value
        from reprobridge.discovery import find_repository

        return find_repository(value, required=required)

    return _discover


def repo_option(
    help_text: str = "The repository (default: the one holding the current directory).",
    *,
    required: bool = True,
) -> Callable[[F], F]:
    """``-C/--repo DIR``: the repository, found upwards from DIR (default: .) as git does.
    ``required=False``: DIR itself when no repository holds it."""
    return click.option(
        "-C",
        "--repo",
        "root",
        type=click.Path(file_okay=False, path_type=Path),
        default=".",
        callback=_discoverer(required),
        help=help_text,
    )


def repo_argument(f: F) -> F:
    """A ``PATH`` argument (default: .) naming the repository, found upwards as git does."""
    return click.argument(
        "path",
        type=click.Path(file_okay=False, path_type=Path),
        default=".",
        callback=_discoverer(True),
    )(f)


def key_option(help_text: str) -> Callable[[F], F]:
    """``--key PEM``: a signer's public key (the verbs that check a signature)."""
    return click.option(
        "--key",
        "public_key",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help=help_text,
    )


def sign_option(what: str) -> Callable[[F], F]:
    """``--sign KEY``: sign ``what`` with an Ed25519 private key; the default comes from the
    operator's settings (:meth:`reprobridge.settings.Operator.sign_key`)."""
    return click.option(
        "--sign",
        "sign_key",
        type=click.Path(dir_okay=False, path_type=Path),
        help=f"Sign {what} with this Ed25519 private key (see `rb keygen`). "
        "Default: RB_SIGN_KEY, else `sign_key` in the user config, else unsigned.",
    )


def override_input_option(help_text: str) -> Callable[[F], F]:
    """``--override-input NAME=URL`` (repeatable; read with :func:`parse_overrides`)."""
    return click.option(
        "--override-input", "overrides", multiple=True, metavar="NAME=URL", help=help_text
    )


def tier_option(default: str) -> Callable[[F], F]:
    """``--tier full|smoke``: which of each experiment's tiers runs (the manifest's
    ``TierName``, spelled out here so that loading the CLI does not load pydantic)."""
    return click.option(
        "--tier", type=click.Choice(["full", "smoke"]), default=default, show_default=True
    )


def runs_option(default: int, most: int = 100) -> Callable[[F], F]:
    """``--runs N``: how many times each experiment runs (1 to ``most``)."""
    return click.option(
        "--runs",
        type=click.IntRange(1, most),
        default=default,
        show_default=True,
        help="Runs per experiment.",
    )


def backend_option(
    help_text: str = "auto: nix when it can materialize the pinned devShell, else the host "
    "(not hermetic). Default: RB_BACKEND, else `backend` in the user config, else auto.",
    *,
    default: str | None = None,
) -> Callable[[F], F]:
    """``--backend auto|nix|host``; without it (``default`` None) ``RB_BACKEND``, then the
    user config, then ``auto``: the caller reads it with ``state().operator.backend``."""
    return click.option(
        "--backend",
        type=click.Choice(["auto", "nix", "host"]),
        default=default,
        show_default=default is not None,
        help=help_text,
    )


def agent_option(default: str, help_text: str) -> Callable[[F], F]:
    """``--agent static|claude|auto`` (read as ``agent_mode``): how `rb init` recovers."""
    return click.option(
        "--agent",
        "agent_mode",
        type=click.Choice(["static", "claude", "auto"]),
        default=default,
        show_default=True,
        help=help_text,
    )


def _threads(_ctx: click.Context, _param: click.Parameter, value: str | None) -> int | None:
    """``--threads`` as a number; a bad one is rb's one-line ``error: --threads: ...``
    (exit 2), the message ``RB_THREADS`` gets (:func:`reprobridge.settings.parse_threads`)."""
    if value is None:
        return None
    from reprobridge.settings import parse_threads

    return parse_threads(value, "--threads")


def threads_option(default_text: str) -> Callable[[F], F]:
    """``--threads N``: CPU threads each audited run may use (every variable of
    :data:`reprobridge.audit.threads.THREAD_VARS` set to N); ``default_text`` says what
    applies without it."""
    return click.option(
        "--threads",
        metavar="N",
        default=None,
        callback=_threads,
        help="CPU threads each run may use: OMP_NUM_THREADS, MKL_NUM_THREADS, "
        f"OPENBLAS_NUM_THREADS, ... = N in its environment. Default: {default_text}",
    )


def _max_output_mb(_ctx: click.Context, _param: click.Parameter, value: str | None) -> int | None:
    """``--max-output-mb`` as a number; a bad one is rb's one-line error (exit 2), the
    message ``RB_MAX_OUTPUT_MB`` gets (:func:`reprobridge.settings.parse_max_output_mb`)."""
    if value is None:
        return None
    from reprobridge.settings import parse_max_output_mb

    return parse_max_output_mb(value, "--max-output-mb")


def max_output_option() -> Callable[[F], F]:
    """``--max-output-mb N``: what the copies of one run's declared outputs may total in
    the bundle (:mod:`reprobridge.audit.collect`)."""
    return click.option(
        "--max-output-mb",
        metavar="N",
        default=None,
        callback=_max_output_mb,
        help="MB that the copies of one run's declared outputs and metric files may total "
        "in the bundle; a file past it, or a sparse file, is not copied and its output "
        "fails. Default: RB_MAX_OUTPUT_MB, else `max_output_mb` in the user config, "
        "else 1024.",
    )


def parse_overrides(items: tuple[str, ...]) -> dict[str, str]:
    """``--override-input NAME=URL`` values as a mapping; a malformed one is a usage error."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, url = item.partition("=")
        if not sep or not name or not url:
            raise click.BadParameter(
                f"expected NAME=URL, got {item!r}", param_hint="--override-input"
            )
        out[name] = url
    return out
