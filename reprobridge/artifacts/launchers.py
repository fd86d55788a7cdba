"""repro/launchers/<exp>.sh: one readable bash entry point per experiment.

A launcher changes to the repository root (found from its own location), then to the
experiment's workdir, picks the tier's parameter values, seed, timeout and extra arguments
(a tier's ``args``, appended to the command), runs the experiment's ``setup`` commands in
order (each under ``bash -c``, within the same timeout), and runs the manifest's command under
coreutils ``timeout`` with unbuffered Python output (``PYTHONUNBUFFERED=1``, so a run
killed at its timeout still leaves its log). It uses ``repro/python/.venv`` when that
exists and no virtual environment is active, and where the machine has ``python3`` but
no ``python`` (stock Debian) it puts a ``python`` link to ``python3`` first on ``PATH``.
The flake's ``reproduce-<exp>`` app runs it inside the pinned environment; it also runs by hand (``bash repro/launchers/exp3.sh``).

The command is shell words with ``{seed}`` and ``{param}`` placeholders. Two renderings:

- a *simple* command (words only: no pipes, redirections, ``$``, globs, leading ``VAR=``)
  becomes a bash array whose words are exactly ``shlex.split(command)`` with the
  placeholders filled, so a value with spaces or quotes stays one argument and nothing is
  expanded a second time;
- a command that uses shell syntax runs under ``bash -c`` as written, with each placeholder
  replaced by a quoted reference to an exported variable that fits its quoting context.

Rendering is pure and deterministic.
"""

from __future__ import annotations

import math
import posixpath
import re
import shlex
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from reprobridge.constants import LAUNCHERS_DIR, MANIFEST_FILE, REGENERATE_COMMAND
from reprobridge.errors import RenderError
from reprobridge.manifest.schema import (
    PLACEHOLDER,
    SHELL_ASSIGNMENT,
    SHELL_CHARS,
    Experiment,
    Manifest,
    Scalar,
    parse_duration,
)

#: Environment switches that keep well-known ML libraries from reaching the network.
OFFLINE_ENV = (
    ("HF_HUB_OFFLINE", "1"),
    ("TRANSFORMERS_OFFLINE", "1"),
    ("HF_DATASETS_OFFLINE", "1"),
    ("WANDB_MODE", "offline"),
)

#: Grace period between SIGTERM and SIGKILL when a run exceeds its timeout.
KILL_AFTER = "30s"

#: Characters that make an unquoted command need a shell (operators, expansions, globs).
TierName = Literal["full", "smoke"]
_TIER_ORDER: tuple[TierName, ...] = ("full", "smoke")


@dataclass(frozen=True)
class _Part:
    """One piece of a command and the quotes it stands in.

    ``kind`` is ``"lit"`` (one character, or a backslash and the character it escapes),
    ``"ph"`` (a placeholder; ``text`` is its name) or ``"delim"`` (a quote that opens or
    closes a quoted span). ``quote`` is ``""``, ``"'"`` or ``'"'``.
    """

    text: str
    kind: Literal["lit", "ph", "delim"]
    quote: str

    @property
    def is_placeholder(self) -> bool:
        return self.kind == "ph"


def launcher_path(exp_id: str) -> str:
    """Path of the launcher of ``exp_id``, relative to the repository root."""
    return f"{LAUNCHERS_DIR}/{exp_id}.sh"


def variable(name: str) -> str:
    """The shell variable holding placeholder ``name``.

    ``seed`` is ``seed``; parameters get a ``p_`` prefix so no parameter can clobber PATH,
    HOME or one of the launcher's own variables, and ``lr`` and ``LR`` stay distinct.
    """
    return "seed" if name == "seed" else f"p_{name}"


def _shell_value(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"  # TOML's spelling, what CLI parsers accept
    if isinstance(value, float):
        return repr(value)  # shortest round-trip form: 0.0005 stays 0.0005
    return str(value)


def _scan(command: str, *, field: str) -> list[_Part]:
    """Split ``command`` into literal characters and placeholders, tracking quotes.

    Follows bash's quoting rules: a backslash escapes the next character outside quotes
    and ``$ ` " \\`` inside double quotes; nothing is special inside single quotes.
    """
    parts: list[_Part] = []
    quote = ""
    i = 0
    while i < len(command):
        ch = command[i]
        # Placeholders count in every quoting context, as the manifest schema counts them.
        match = PLACEHOLDER.match(command, i)
        if match:
            parts.append(_Part(match.group(1), "ph", quote))
            i = match.end()
        elif ch == "\\" and quote != "'" and i + 1 < len(command):
            parts.append(_Part(command[i : i + 2], "lit", quote))
            i += 2
        elif (quote == "" and ch in "'\"") or ch == quote:
            parts.append(_Part(ch, "delim", ""))
            quote = "" if quote else ch
            i += 1
        else:
            parts.append(_Part(ch, "lit", quote))
            i += 1
    if quote:
        raise RenderError(
            f"the command has an unterminated {quote} quote",
            path=MANIFEST_FILE,
            field=field,
        )
    return parts


def _needs_shell(command: str, parts: list[_Part]) -> bool:
    for part in parts:
        if part.kind != "lit":
            continue
        if part.quote == "" and part.text in SHELL_CHARS:
            return True
        if part.quote == '"' and part.text in "$`":
            return True
    try:
        words = shlex.split(PLACEHOLDER.sub("x", command))
    except ValueError:  # e.g. a trailing backslash: bash -c reports it the way bash would
        return True
    # `VAR=value cmd` is an assignment only to a shell; as an argv word it is a program name.
    return bool(words) and bool(SHELL_ASSIGNMENT.match(words[0]))


def _words(parts: list[_Part]) -> list[list[_Part]]:
    """Group parts into shell words (unquoted whitespace separates them)."""
    words: list[list[_Part]] = []
    current: list[_Part] = []
    started = False
    for part in parts:
        if part.kind == "lit" and part.quote == "" and part.text in " \t":
            if started:
                words.append(current)
            current, started = [], False
            continue
        current.append(part)
        started = True
    if started:
        words.append(current)
    return words


def _array_word(word: list[_Part]) -> str:
    """One array element: literal text shell-quoted, placeholders as ``"${var}"``."""
    out: list[str] = []
    literal: list[str] = []

    def flush() -> None:
        if literal:
            out.append(shlex.quote("".join(literal)))
            literal.clear()

    for part in word:
        if part.is_placeholder:
            flush()
            out.append(f'"${{{variable(part.text)}}}"')
        elif part.kind == "delim":
            continue  # the text between quotes is literal; the quotes are not part of it
        elif len(part.text) == 2 and (part.quote == "" or part.text[1] in '$`"\\\n'):
            # a backslash escape; backslash-newline is a line continuation and vanishes
            literal.append("" if part.text[1] == "\n" else part.text[1])
        else:
            literal.append(part.text)
    flush()
    return "".join(out) or "''"


def _shell_text(parts: list[_Part]) -> str:
    """The command as written, with each placeholder a variable reference fit for its quotes."""
    out: list[str] = []
    for part in parts:
        if not part.is_placeholder:
            out.append(part.text)
        elif part.quote == "":
            out.append(f'"${{{variable(part.text)}}}"')
        elif part.quote == '"':
            out.append(f"${{{variable(part.text)}}}")
        else:  # inside single quotes: close them, splice the value in, reopen
            out.append(f"'\"${{{variable(part.text)}}}\"'")
    return "".join(out)


def _display_text(parts: list[_Part]) -> str:
    """The command for ``printf`` inside double quotes, showing the values filled in."""
    out: list[str] = []
    for part in parts:
        if part.is_placeholder:
            out.append(f"${{{variable(part.text)}}}")
        else:
            out.append(re.sub(r'([\\"$`])', r"\\\1", part.text))
    return "".join(out)


def _tier_settings(exp: Experiment, tier: TierName) -> tuple[dict[str, Scalar], list[int], str]:
    spec = exp.tier(tier)
    params = {**exp.params, **spec.params}
    seeds = spec.seeds if spec.seeds is not None else exp.seeds
    timeout = spec.timeout if spec.timeout is not None else exp.timeout
    return params, seeds, timeout


def _comment(text: str) -> list[str]:
    return [f"# {line}".rstrip() for line in text.strip().splitlines()]


def _entry_word(words: list[list[_Part]], workdir: str, file: str) -> int | None:
    """The index of the command word that names ``file`` (a repository path) from
    ``workdir``: the word a tier with ``edits`` replaces by the file's copy (the first word
    too: an executable script run as the program, whose copy keeps its mode)."""
    for i, word in enumerate(words):
        if any(p.kind == "ph" for p in word):
            continue
        text = "".join(p.text for p in word if p.kind == "lit")
        if posixpath.normpath(posixpath.join(workdir, text)) == file:
            return i
    return None


def _copy_word(word: list[_Part], copy: str) -> str:
    """The word that names ``copy`` the way the command's word named the original:
    relative to the workdir, with the original's own spelling of the folder."""
    text = "".join(p.text for p in word if p.kind == "lit")
    folder = posixpath.dirname(text)
    name = posixpath.basename(copy)
    return f"{folder}/{name}" if folder else name


def render_launcher(manifest: Manifest, exp_id: str, *, version: str) -> str:
    """The text of ``repro/launchers/<exp_id>.sh``, written by rb ``version``.

    The script accepts ``--tier full|smoke`` (smoke only when the experiment defines it;
    default full), ``--seed N`` (default: the tier's first seed) and, after ``--``, extra
    arguments appended to a simple command. It exits with the command's status; 124 means
    the tier's timeout was hit. Raises :class:`RenderError` for an unknown experiment, a
    command with an unterminated quote, or a tier without seeds.
    """
    field = f"experiments.{exp_id}"
    exp = manifest.experiments.get(exp_id)
    if exp is None:
        raise RenderError(f"no experiment {exp_id!r}", path=MANIFEST_FILE, field="experiments")
    tiers = [t for t in _TIER_ORDER if t == "full" or t in exp.tiers]
    parts = _scan(exp.command, field=f"{field}.command")
    shell_mode = _needs_shell(exp.command, parts)
    name = launcher_path(exp_id)

    lines = [
        "#!/usr/bin/env bash",
        f"# {name}, generated by ReproBridge (rb {version}); regenerate with: {REGENERATE_COMMAND}",
        f"# Experiment {exp_id}" + (":" if exp.description else ""),
    ]
    if exp.description:
        lines += _comment(exp.description)
    usage = f"usage: bash {name} [--tier {'|'.join(tiers)}] [--seed N]" + (
        "" if shell_mode else " [-- EXTRA-ARGS]"
    )
    lines += [
        "#",
        f"# {usage}",
        "# Runs from any directory: it changes to the repository root, then to the workdir.",
        "set -euo pipefail",
        "",
        f"me={shlex.quote(name)}",
        f"usage={shlex.quote(usage)}",
        "tier=full",
        "seed=",
        "extra=()",
        'while [ "$#" -gt 0 ]; do',
        '  case "$1" in',
        "    --tier) tier=${2:-}; shift 2 || shift ;;",
        "    --tier=*) tier=${1#--tier=}; shift ;;",
        "    --seed) seed=${2:-}; shift 2 || shift ;;",
        "    --seed=*) seed=${1#--seed=}; shift ;;",
        '    -h | --help) echo "$usage"; exit 0 ;;',
        '    --) shift; extra=("$@"); break ;;',
        '    *) echo "$me: unknown argument \'$1\'" >&2; echo "$usage" >&2; exit 2 ;;',
        "  esac",
        "done",
        "",
        "# Parameters, seed and timeout of each tier (from reprobridge.toml).",
        'case "$tier" in',
    ]
    used = sorted({p.text for p in parts if p.is_placeholder and p.text != "seed"})
    has_args = any(exp.tier(t).args for t in tiers)
    # A tier with `edits` runs a copy of the file the command names (repro/derive.py writes
    # it next to the original): that word of the command becomes ${rb_entry}.
    words = _words(parts)
    derived = {t: d for t in tiers if (d := exp.tier(t).derived(t)) is not None}
    entry_at: int | None = None
    if derived:
        edited = next(iter(derived.values()))[0]
        others = sorted({f for f, _ in derived.values()} - {edited})
        if others:
            # One word of the command becomes the copy: every tier must edit the same file.
            raise RenderError(
                f"the tiers' edits change different files ({edited}, {', '.join(others)}); "
                "the command can run a copy of one of them only",
                path=MANIFEST_FILE,
                field=f"{field}.tiers",
            )
        entry_at = _entry_word(words, exp.workdir, edited)
        if shell_mode or entry_at is None:
            raise RenderError(
                f"the tier's edits change {edited}, which the command does not name as one "
                "of its words"
                + (" (a command with shell syntax cannot run a copy)" if shell_mode else ""),
                path=MANIFEST_FILE,
                field=f"{field}.tiers.{next(iter(derived))}.edits",
            )
    for tier in tiers:
        params, seeds, timeout = _tier_settings(exp, tier)
        if not seeds:
            raise RenderError("the tier has no seeds", path=MANIFEST_FILE, field=f"{field}.{tier}")
        lines.append(f"  {tier})")
        for key in used:
            lines.append(f"    {variable(key)}={shlex.quote(_shell_value(params[key]))}")
        unused = [f"{k}={_shell_value(params[k])}" for k in sorted(params) if k not in used]
        if unused:
            # Shown for the reader; a parameter reaches the program only through a placeholder.
            lines.append(f"    # not in the command: {' '.join(unused)}".replace("\n", " "))
        if has_args:
            quoted = " ".join(shlex.quote(a) for a in exp.tier(tier).args)
            lines.append(f"    tier_args=({quoted})  # appended to the command")
        if entry_at is not None:
            original = "".join(p.text for p in words[entry_at] if p.kind == "lit")
            pair = derived.get(tier)
            if pair is None:
                lines.append(f"    rb_entry={shlex.quote(original)}")
                lines.append("    derive=()")
            else:
                copy = _copy_word(words[entry_at], pair[1])
                lines.append(f"    rb_entry={shlex.quote(copy)}  # a copy, with the edits below")
                specs = [
                    word
                    for e in exp.tier(tier).edits
                    for word in (
                        *([f"--if={e.when}"] if e.when else []),
                        f"{e.cell or ''}:{e.line}:{e.column}:{e.value}:{e.was}",
                    )
                ]
                quoted = " ".join(shlex.quote(x) for x in [pair[0], pair[1], *specs])
                lines.append(f"    derive=({quoted})  # repro/derive.py SOURCE COPY EDIT...")
        lines.append(f"    default_seed={seeds[0]}")
        lines.append(f"    timeout_s={math.ceil(parse_duration(timeout))}  # {timeout}")
        lines.append("    ;;")
    lines += [
        f"  *) echo \"$me: unknown tier '$tier' (this experiment has: {' '.join(tiers)})\" >&2; "
        "exit 2 ;;",
        "esac",
        "seed=${seed:-$default_seed}",
        'case "$seed" in',
        "  '' | *[!0-9-]*) echo \"$me: --seed must be an integer, not '$seed'\" >&2; exit 2 ;;",
        "esac",
        "",
        'cd "$(dirname "${BASH_SOURCE[0]}")/../.."',
        "rb_root=$PWD",
    ]
    if manifest.environment.pythonpath:
        # The repository's own package imports from any workdir (environment.pythonpath;
        # the schema admits only plain relative paths, so no word needs quoting).
        roots = ":".join(
            "$PWD" if d == "." else f"$PWD/{d}" for d in manifest.environment.pythonpath
        )
        # Appended to, not replaced: rb audit may add where it installed the project's
        # metadata (environment.install_project).
        lines.append(f'export PYTHONPATH="{roots}${{PYTHONPATH:+:$PYTHONPATH}}"')
    if exp.workdir not in ("", "."):
        lines.append(f"cd {shlex.quote(exp.workdir)}")
    lines += [
        "",
        "# The pinned Python packages: use repro/python's venv when it exists and no",
        "# environment is active (`nix develop` and `rb audit` activate one themselves).",
        'if [ -z "${VIRTUAL_ENV:-}" ] && [ -x "$rb_root/repro/python/.venv/bin/python" ]; then',
        '  export VIRTUAL_ENV="$rb_root/repro/python/.venv"',
        '  PATH="$VIRTUAL_ENV/bin:$PATH"',
        "fi",
        "# Stock Debian has no `python`, only `python3`: give commands the name they use.",
        "# The link lives in the user's own cache (not a world-writable /tmp) and is reused,",
        "# since the command is exec'd and no trap could remove a per-run directory.",
        "if ! command -v python >/dev/null 2>&1 && rb_py3=$(command -v python3); then",
        '  rb_shim="${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/reprobridge/python-shim"',
        '  if [ "$(readlink "$rb_shim/python" 2>/dev/null)" = "$rb_py3" ] ||',
        '    { mkdir -p "$rb_shim" 2>/dev/null && ln -sfn "$rb_py3" "$rb_shim/python.$$" &&',
        '      mv -fT "$rb_shim/python.$$" "$rb_shim/python"; }; then',
        '    PATH="$rb_shim:$PATH"',
        "  fi",
        "fi",
        "export PATH",
        "# Unbuffered output: a run killed at its timeout still leaves its log.",
        "export PYTHONUNBUFFERED=1",
        "export PYTHONHASHSEED=0",
        f"export RB_EXPERIMENT={shlex.quote(exp_id)}",
        'export RB_TIER="$tier"',
        'export RB_SEED="$seed"',
    ]
    if not exp.network:
        lines.append("# network = false in the manifest: keep ML libraries from downloading.")
        lines += [f"export {k}={v}" for k, v in OFFLINE_ENV]
    if entry_at is not None:
        lines += [
            "# This tier runs a copy of the file with its literal bounds lowered or the names",
            "# its packages removed renamed (written next to it, from the repository root; the",
            "# original is left as it is).",
            'if [ "${#derive[@]}" -gt 0 ]; then',
            "  rb_py=$(command -v python3 || command -v python) ||",
            '    { echo "$me: no python3 to write the copy with" >&2; exit 2; }',
            '  (cd "$rb_root" && "$rb_py" repro/derive.py "${derive[@]}") || exit 2',
            "fi",
        ]
    lines.append("")
    run = f'timeout --signal=TERM --kill-after={KILL_AFTER} "$timeout_s"'
    if exp.setup:
        lines += [
            f"# Setup (experiments.{exp_id}.setup): run first, in this workdir; the tier's",
            "# timeout covers them and the command. A failing step ends the run (set -e).",
            "rb_start=$SECONDS",
        ]
        for command in exp.setup:
            lines += [
                f"printf '+ %s\\n' {shlex.quote(command)}",
                f"{run} bash -c {shlex.quote(command)}",
                "timeout_s=$((timeout_s - (SECONDS - rb_start)))",
                "rb_start=$SECONDS",
                'if [ "$timeout_s" -le 0 ]; then',
                '  echo "$me: the setup took the whole timeout" >&2',
                "  exit 124",
                "fi",
            ]
        lines.append("")
    if shell_mode:
        lines += [
            "# The command uses shell syntax, so bash runs it as written; placeholders read",
            "# the exported variables.",
        ]
        if any(p.is_placeholder for p in parts):
            names = sorted({variable(p.text) for p in parts if p.is_placeholder})
            lines.append("export " + " ".join(names))
        if has_args:
            # Appended words would land after a pipe or a redirection, not on the program.
            lines += [
                'if [ "${#tier_args[@]}" -gt 0 ]; then',
                '  echo "$me: the tier\'s args need a command without shell syntax" >&2',
                "  exit 2",
                "fi",
            ]
        lines += [
            'if [ "${#extra[@]}" -gt 0 ]; then',
            '  echo "$me: extra arguments do not apply to a shell-syntax command" >&2',
            "  exit 2",
            "fi",
            "# shellcheck disable=SC2016 # expanded by bash -c, from the exported variables",
            f"cmd={shlex.quote(_shell_text(parts))}",
            f'printf "+ %s\\n" "{_display_text(parts)}"',
            f'exec {run} bash -c "$cmd"',
        ]
    else:
        rendered = [
            '"${rb_entry}"' if i == entry_at else _array_word(w) for i, w in enumerate(words)
        ]
        lines += [
            "cmd=(" + " ".join(rendered) + ")",
            *(['cmd+=(${tier_args[@]+"${tier_args[@]}"})'] if has_args else []),
            'cmd+=(${extra[@]+"${extra[@]}"})',
            "printf '+'",
            "printf ' %q' \"${cmd[@]}\"",
            "printf '\\n'",
            f'exec {run} "${{cmd[@]}}"',
        ]
    return "\n".join(lines) + "\n"


def needs_derive_script(manifest: Manifest) -> bool:
    """Whether a launcher of ``manifest`` calls ``repro/derive.py`` (a tier has ``edits``)."""
    return any(t.edits for exp in manifest.experiments.values() for t in exp.tiers.values())


def render_derive_script() -> str:
    """The text of ``repro/derive.py``: this package's ``derive.py``, byte for byte (as
    :func:`render_check_script`; the tests import the same module)."""
    return resources.files("reprobridge.artifacts").joinpath("derive.py").read_text("utf-8")


def render_check_script() -> str:
    """The text of ``repro/check.py``: this package's ``check.py``, byte for byte.

    The checker is copied rather than rendered so that the auditor (which imports
    :mod:`reprobridge.artifacts.check`) and the flake's apps judge metrics with the same
    code. Its header names the command that rewrites it.
    """
    return resources.files("reprobridge.artifacts").joinpath("check.py").read_text("utf-8")
