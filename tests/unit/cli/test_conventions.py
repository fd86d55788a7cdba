"""CLI conventions (issue 10): discovery, global flags, --json everywhere, completion,
operator settings, `rb check` on every artifact, `rb run` streaming, honest hints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from rbcli import rb

from reprobridge import __version__
from reprobridge.cli import COMMANDS, cli
from reprobridge.discovery import find_repository
from reprobridge.doctor import next_step_after_init
from reprobridge.errors import ManifestNotFoundError


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


def _all_commands() -> dict[str, click.Command]:
    ctx = click.Context(cli)
    out: dict[str, click.Command] = {}
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None, name
        out[name] = command
        if isinstance(command, click.Group):
            for sub, subcommand in command.commands.items():
                out[f"{name} {sub}"] = subcommand
    return out


def test_every_verb_has_the_shared_json_and_verbosity_options() -> None:
    for name, command in _all_commands().items():
        opts = {tuple(p.opts): p for p in command.params}
        assert ("--json",) in opts, name
        assert (
            opts[("--json",)].help == "Print the result as JSON on stdout (stable, sorted keys)."
        ), name
        assert ("-q", "--quiet") in opts and ("-v", "--verbose") in opts, name


def test_version_and_global_quiet() -> None:
    out = rb("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"rb, version {__version__}"
    assert rb("-V").stdout == out.stdout
    assert rb("-q", "schema").returncode == 0
    assert rb("schema", "-q", "--json").returncode == 0


def test_shell_completion() -> None:
    src = subprocess.run(
        [sys.executable, "-m", "reprobridge"],
        env=_env(_RB_COMPLETE="bash_source"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert (
        "_rb_completion()" in src.stdout and "complete -o nosort -F _rb_completion rb" in src.stdout
    )
    got = subprocess.run(
        [sys.executable, "-m", "reprobridge"],
        env=_env(_RB_COMPLETE="bash_complete", COMP_WORDS="rb che", COMP_CWORD="1"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert got.stdout.split() == ["plain,check", "plain,check-links"]


def test_no_color(make_repo, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_repo({"train.py": "print('acc=1')\n"})
    runner = CliRunner()
    args = ["init", str(root), "--no-lock", "--dry-run"]
    coloured = runner.invoke(cli, args, color=True)  # as on a terminal
    assert coloured.exit_code == 0, coloured.output
    assert "\x1b[" in coloured.output
    monkeypatch.setenv("NO_COLOR", "1")
    plain = runner.invoke(cli, args, color=True)
    assert plain.exit_code == 0 and "\x1b[" not in plain.output


def test_discovery_walks_up_to_the_repository(tmp_path: Path, make_repo) -> None:
    root = make_repo({"reprobridge.toml": "schema = 1\n", "a/b/c.txt": "x"})
    assert find_repository(root / "a" / "b") == root
    assert find_repository(root / "a" / ".." / "a") == root
    nested = make_repo({"x.txt": "x"})  # a repository without a manifest: stop at its top
    with pytest.raises(ManifestNotFoundError, match="not found in"):
        find_repository(nested)
    assert find_repository(nested, required=False) == nested


def test_user_config_error_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "rb").mkdir()
    (tmp_path / "rb" / "config.toml").write_text('backend = "docker"\n')
    out = subprocess.run(
        [sys.executable, "-m", "reprobridge", "doctor", "--json"],
        env=_env(XDG_CONFIG_HOME=str(tmp_path)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    assert out.stderr.startswith(f"error: {tmp_path}/rb/config.toml: backend: Input should be")


def test_keygen_default_follows_xdg_config_home(tmp_path: Path) -> None:
    xdg = tmp_path / "cfg"
    out = subprocess.run(
        [sys.executable, "-m", "reprobridge", "keygen", "--json"],
        env=_env(XDG_CONFIG_HOME=str(xdg)),
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["private_key"] == str(xdg / "rb" / "signing-key.pem")
    assert (xdg / "rb" / "signing-key.pem").is_file()


def test_repository_cannot_raise_agent_limits(
    make_repo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression (issue 8 item 6): a repository's [tool.reprobridge] raised the agent's
    budgets and gave its commands the network. Now it is shown, never applied."""
    import reprobridge.initializer as initializer
    from reprobridge.cli import main

    root = make_repo(
        {
            "train.py": "print('acc=1')\n",
            "pyproject.toml": "[project]\nname='x'\nversion='0'\n[tool.reprobridge]\n"
            "budget_usd = 1000.0\nallow_network = true\nmax_wall = 99999\n",
        }
    )
    seen = []
    real = initializer.init_repository

    def fake(path, **kw):  # record the agent's config; recover statically
        seen.append(kw["agent"].config)
        return real(path, lock="never", dry_run=True, git_add=False, agent=None)

    monkeypatch.setattr(initializer, "init_repository", fake)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root.parent / "xdg"))
    with pytest.raises(SystemExit) as exc:
        main(["init", str(root), "--agent", "claude", "--dry-run"])
    assert exc.value.code == 0
    (config,) = seen
    assert config.allow_network is False
    assert config.budget_usd == 2.0 and config.max_wall_s == 1800.0
    err = capsys.readouterr().err
    assert "the repository suggests allow_network = True, budget_usd = 1000.0" in err
    assert "not applied" in err


def test_check_compares_every_artifact(tiny_repo) -> None:
    """After an edit of python_requirements, `rb check` used to say "in sync"."""
    root = tiny_repo()
    sub = root / "deep" / "er"
    sub.mkdir(parents=True)
    assert rb("check", cwd=sub).returncode == 0  # found upwards from a subdirectory
    manifest = root / "reprobridge.toml"
    text = manifest.read_text()
    assert "[environment]\n" in text
    manifest.write_text(
        text.replace(
            "[environment]\n", '[environment]\npython_requirements = ["numpy==1.26.4"]\n', 1
        )
    )
    out = rb("check", "--json", cwd=sub)
    assert out.returncode == 1, out.stderr
    stale = json.loads(out.stdout)["stale"]
    assert {"repro/python/pyproject.toml", "repro/python/requirements.txt", "REPRODUCE.md"} <= set(
        stale
    )
    dry = json.loads(rb("init", str(root), "--dry-run", "--no-lock", "--json").stdout)
    assert sorted(dry["files"]["changed"] + dry["files"]["created"]) == stale


def test_run_streams_output_live_from_a_subdirectory(tiny_repo) -> None:
    root = tiny_repo("echo first-line\nsleep 4\necho acc=0.9\n")
    (root / "sub").mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "reprobridge", "run", "main", "--backend", "host"],
        cwd=root / "sub",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    seen = []
    while not seen or seen[-1] not in ("first-line\n", ""):
        seen.append(proc.stdout.readline())
    # The line arrived while the experiment still sleeps: streamed, not replayed at the end.
    still_running = proc.poll() is None
    rest, err = proc.communicate(timeout=120)
    assert seen[-1] == "first-line\n", "".join(seen) + rest + err
    assert still_running
    assert "acc=0.9" in rest and "verdict: " in rest
    assert proc.returncode == 0, err


def test_next_step_is_one_that_works_here() -> None:
    from reprobridge.doctor import Check

    def rows(version: str | None, flakes: dict[str, bool]) -> list[Check]:
        if version is None:
            return [Check("nix", "missing", "nix is not on PATH", "install")]
        return [
            Check("nix", "ok", version, None, {"version": version}),
            Check("flakes", "ok" if flakes.get("enabled") else "warn", "", None, flakes),
        ]

    good = rows("2.26.3", {"enabled": True})
    assert next_step_after_init("base", good).startswith("nix run .#reproduce-base")
    no_flakes = next_step_after_init("base", rows("2.26.3", {"enabled": False, "supported": True}))
    assert no_flakes.startswith("nix --extra-experimental-features 'nix-command flakes' run")
    old = next_step_after_init("base", rows("2.8.0", {"enabled": True}))
    assert old.startswith("rb run base --backend host") and "Nix >= 2.18" in old
    assert "nix 2.8.0 here cannot evaluate the pin" in old
    assert "no nix here" in next_step_after_init("base", rows(None, {}))


def test_init_does_not_suggest_nix_run_with_an_old_nix(make_repo, tmp_path: Path) -> None:
    bin_dir = tmp_path / "oldnix"
    bin_dir.mkdir()
    (bin_dir / "nix").write_text("#!/bin/sh\necho 'nix (Nix) 2.8.0'\n")
    (bin_dir / "nix").chmod(0o755)
    root = make_repo({"train.py": "print('acc=1')\n", "README.md": "```\npython train.py\n```\n"})
    out = subprocess.run(
        [sys.executable, "-m", "reprobridge", "init", str(root), "--no-lock"],
        env=_env(PATH=f"{bin_dir}:{os.environ['PATH']}"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    nxt = [line for line in out.stdout.splitlines() if line.startswith("Next")]
    assert nxt and "nix run" not in nxt[0].split("(")[0] and "--backend host" in nxt[0]


def test_verbosity_changes_what_init_says(make_repo) -> None:
    root = make_repo({"train.py": "print('acc=1')\n"})
    args = ("init", str(root), "--dry-run", "--no-lock")
    normal = rb(*args).stderr
    verbose = rb("-v", *args).stderr
    quiet = rb(*args, "-q").stderr
    assert "rb: indexed" in normal and "rb: detect detector=" not in normal
    assert "rb: detect detector=requirements" in verbose
    assert quiet == ""
