"""The `rb` command line: a click group, one module per verb, one error mapper.

Contract: verb modules parse arguments, call the library and render its events; they never
hold logic of their own. :func:`main` is the only place that turns a
:class:`~reprobridge.errors.ReproBridgeError` into ``error: <one line>`` (plus an optional
``hint: ...`` line) on stderr and the error's exit code. Heavy libraries (anthropic, pypdf,
pydantic models) are imported inside the commands that need them, so ``rb --help`` is fast.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click

from reprobridge import __version__
from reprobridge.cli.options import CliState, verbosity_options

#: verb -> "module:function", imported only when that verb runs (keeps `rb --help` fast).
COMMANDS: dict[str, tuple[str, str]] = {
    "init": (
        "reprobridge.cli.init",
        "Recover a repository's reproduction knowledge; write the artifacts.",
    ),
    "demo": (
        "reprobridge.cli.demo",
        "Recover the bundled example paper with `rb init`, then audit it.",
    ),
    "doctor": (
        "reprobridge.cli.doctor",
        "Say what this machine can do: nix, flakes, bubblewrap, uv, GPUs, disk.",
    ),
    "schema": ("reprobridge.cli.schema", "Print the JSON Schema of reprobridge.toml."),
    "report": ("reprobridge.cli.report", "Show an audit as one HTML page or as Markdown."),
    "check": ("reprobridge.cli.check", "Validate reprobridge.toml and the generated artifacts."),
    "audit": (
        "reprobridge.cli.audit",
        "Run experiments in isolation several times; judge the evidence.",
    ),
    "run": ("reprobridge.cli.audit", "Run one experiment once with live output, then judge it."),
    "verify": (
        "reprobridge.cli.verify",
        "Re-check an evidence bundle: hashes, signature, re-derived verdicts.",
    ),
    "keygen": (
        "reprobridge.cli.keygen",
        "Create an Ed25519 key pair for signing evidence bundles.",
    ),
    "archive": (
        "reprobridge.cli.archive",
        "Pack a deterministic, verifiable archive of the reproduction package.",
    ),
    "unpack": ("reprobridge.cli.unpack", "Verify an archive and unpack it safely."),
    "bench": (
        "reprobridge.cli.bench",
        "Init and smoke-audit every repository of a suite; tabulate what ran.",
    ),
    "check-links": (
        "reprobridge.cli.check_links",
        "Say which flake inputs and dataset URLs still resolve or are archived.",
    ),
}


#: ctx.meta key: the invoked verb was given --help/-h, so nothing but its help will run.
_HELP_ONLY = "reprobridge.help_only"


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        import importlib

        module = importlib.import_module(COMMANDS[cmd_name][0])
        # Verbs may contain a dash (check-links); Python names use an underscore.
        command: click.Command = getattr(module, f"{cmd_name.replace('-', '_')}_command")
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        # `rb VERB --help` only prints: the group need not load the operator's settings
        # (pydantic, ~100 ms). A verb that runs still loads them through state().
        options = rest[: rest.index("--")] if "--" in rest else rest
        ctx.meta[_HELP_ONLY] = any(a in ctx.help_option_names for a in options)
        return name, command, rest

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Short help from the table, so `rb --help` imports no verb module.
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="rb")
@verbosity_options
@click.pass_context
def cli(ctx: click.Context) -> None:
    """ReproBridge: make an ML paper repository reproducible, and prove it.

    \b
    rb init        recover what a reproduction needs; write reprobridge.toml, flake.nix,
                   repro/ and REPRODUCE.md
    rb demo        the same on the bundled example
    rb doctor      what this machine can do

    \b
    Settings: flags > RB_* variables > $XDG_CONFIG_HOME/rb/config.toml > defaults.
    Colour only on a terminal, never with NO_COLOR set.
    Shell completion: eval "$(_RB_COMPLETE=bash_source rb)" (zsh_source, fish_source).
    """
    from reprobridge.cli.options import state

    ctx.ensure_object(CliState)
    # https://no-color.org: any non-empty value turns colour off; click already drops
    # styles when stdout is not a terminal.
    if os.environ.get("NO_COLOR"):
        ctx.color = False
    if not ctx.meta.get(_HELP_ONLY):
        state()  # load the user config now: a broken one is one error line before any work


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of `rb`: run the group, map errors to one line and an exit code."""
    from reprobridge.errors import ReproBridgeError

    try:
        # With standalone_mode=False click returns a command's Exit code instead of raising.
        # prog_name fixes the completion variable to _RB_COMPLETE also under `python -m`.
        code = cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="rb",
            standalone_mode=False,
        )
    except ReproBridgeError as exc:
        click.echo(f"error: {exc}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
        sys.exit(exc.exit_status())
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)
