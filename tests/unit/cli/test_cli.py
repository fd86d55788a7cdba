"""CLI wiring: exit codes, one-line errors, --json. Behaviour is tested in the library tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rbcli import rb

from reprobridge.cli import main


def test_help_lists_every_verb() -> None:
    from reprobridge.cli import COMMANDS, cli

    out = rb("--help")
    assert out.returncode == 0
    listed = out.stdout.split("Commands:")[1]
    # A verb starts a row at two spaces; wrapped help continues further right.
    verbs = [line.split()[0] for line in listed.splitlines() if line[:3].strip() and line.strip()]
    # Every registered verb, each resolvable to a command with its own help.
    assert verbs == sorted(COMMANDS) and len(verbs) >= 14
    import click

    ctx = click.Context(cli)
    for verb in verbs:
        command = cli.get_command(ctx, verb)
        assert command is not None and command.name == verb


def test_usage_error_exits_2() -> None:
    assert rb("init", "--no-such-flag").returncode == 2


def test_not_a_repository_is_one_line_exit_4(tmp_path: Path) -> None:
    out = rb("init", str(tmp_path))
    assert out.returncode == 4
    lines = out.stderr.strip().splitlines()
    assert lines[0] == f"error: {tmp_path}: is not a git repository"
    assert lines[1].startswith("hint: ")


def test_broken_manifest_exit_3(make_repo) -> None:
    root = make_repo(
        {"train.py": "print('acc=1')\n", "reprobridge.toml": "schema = 1\n[project]\nnmae = 'x'\n"}
    )
    out = rb("init", str(root), "--no-lock")
    assert out.returncode == 3
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert errors == ["error: reprobridge.toml: project.nmae: unknown key (did you mean 'name'?)"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("\"os.system('rm -rf ~')\"", "\"os.system('rm -rf ~')\" is not a dotted Python name"),
        ('"np.float64 if True else 1"', "'np.float64 if True else 1' is not a dotted"),
        ("1.5", "must be a whole number or a dotted Python name"),
    ],
)
def test_an_edit_that_writes_code_is_a_one_line_error_exit_3(
    make_repo, value: str, message: str
) -> None:
    manifest = (
        "schema = 1\n[project]\nname = 'x'\n[experiments.train]\ncommand = 'python train.py'\n"
        "[experiments.train.tiers.full]\nedits = [{file = 'train.py', line = 1, column = 6, "
        f"was = 'np.float', value = {value}}}]\n"
    )
    root = make_repo({"train.py": "x = np.float(1)\n", "reprobridge.toml": manifest})
    out = rb("init", str(root), "--no-lock")
    assert out.returncode == 3
    errors = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1
    assert errors[0].startswith(
        "error: reprobridge.toml: experiments.train.tiers.full.edits.0.value: " + message
    )


def test_init_json_and_check(make_repo) -> None:
    root = make_repo(
        {"train.py": "print('acc=1')\n", "README.md": "```bash\npython train.py --seed 1\n```\n"}
    )
    out = rb("init", str(root), "--no-lock", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert "reprobridge.toml" in doc["files"]["created"]
    assert doc["manifest"]["experiments"]
    assert rb("check", str(root)).returncode == 0
    launcher = next((root / "repro/launchers").glob("*.sh"))
    launcher.write_text(launcher.read_text() + "# hand edit\n")
    stale = rb("check", str(root), "--json")
    assert stale.returncode == 1
    assert json.loads(stale.stdout)["stale"] == [f"repro/launchers/{launcher.name}"]


def test_schema_is_json() -> None:
    out = rb("schema")
    assert out.returncode == 0
    schema = json.loads(out.stdout)
    assert "experiments" in schema["properties"]


@pytest.mark.slow
def test_demo_runs_the_example_on_the_host(tmp_path: Path) -> None:
    out = rb("demo", "--dir", str(tmp_path / "demo"), "--backend", "host", "--runs", "2")
    # Every level passes; the claim holds on the means of two seeds, not significantly.
    assert out.returncode == 20, out.stderr + out.stdout
    assert "verdict: INCOMPLETE" in out.stdout
    assert (
        "claim mixup.test_accuracy > baseline.test_accuracy: HOLDS ON THE MEANS, NOT SIGNIFICANT"
        in out.stdout
    )
    assert "paired t test" in out.stdout and "alpha = 0.05" in out.stdout
    assert "(tolerance from: 3 x the spread the paper states): PASS" in out.stdout
    assert "claim        mixup.test_accuracy > baseline.test_accuracy" in out.stdout
    assert (tmp_path / "demo" / "REPRODUCE.md").is_file()
    assert (
        out.stdout.rstrip().splitlines()[-1].startswith(f"Next: rb report -C {tmp_path / 'demo'}")
    )


def test_main_maps_errors_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["init", str(tmp_path)])
    assert exc.value.code == 4
    assert capsys.readouterr().err.startswith("error: ")


def test_init_summary_warns_without_experiment_and_lists_unmatched_paper_numbers(
    make_repo,
) -> None:
    """Issue 9: zero experiments passed without a word; unmatched paper numbers were cut."""
    root = make_repo(
        {
            "lib/__init__.py": "",
            "lib/ops.py": "def f():\n    return 1\n\nif __name__ == '__main__':\n    f()\n",
            "paper.md": "| Model | Acc |\n|---|---|\n"
            + "".join(f"| m{i} | 0.{i}1 |\n" for i in range(25)),
        }
    )
    out = rb("init", str(root), "--no-lock", "--paper", str(root / "paper.md"))
    assert out.returncode == 0, out.stderr
    assert "experiment   none found" in out.stdout
    assert "lib/ops.py: has a __main__ block but neither" in out.stdout
    assert "no experiment found" in out.stdout
    assert "Paper numbers not matched to an experiment metric (25)" in out.stdout
    assert "0.241 at paper.md" in out.stdout  # the 25th: every one is listed
    guide = (root / "REPRODUCE.md").read_text()
    assert "## Other candidates" in guide and "lib/ops.py" in guide


def test_verb_help_imports_neither_pydantic_nor_the_initializer() -> None:
    # Issue 14: `rb init --help` cost 217 ms of CPU because the group loaded the operator's
    # settings (pydantic) and the verb module imported the initializer (every detector).
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from reprobridge.cli import main\n"
        "try:\n"
        "    main(['init', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in ('pydantic', 'reprobridge.initializer', 'reprobridge.settings')"
        " if m in sys.modules)\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert "Usage: rb init" in out.stdout
    assert "HEAVY []" in out.stderr, out.stderr


def test_broken_user_config_still_stops_a_verb_that_runs(tmp_path: Path) -> None:
    # --help skips loading the settings; any other invocation of a verb must not.
    import os
    import subprocess
    import sys

    (tmp_path / "rb").mkdir()
    (tmp_path / "rb" / "config.toml").write_text("[agent]\nno_such_key = 1\n")
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    run = [sys.executable, "-m", "reprobridge"]
    broken = subprocess.run(
        [*run, "init", str(tmp_path)], capture_output=True, text=True, env=env, check=False
    )
    assert broken.returncode != 0 and "config.toml" in broken.stderr
    helped = subprocess.run(
        [*run, "init", "--help"], capture_output=True, text=True, env=env, check=False
    )
    assert helped.returncode == 0 and "Usage: rb init" in helped.stdout


def test_each_verify_verb_names_the_other_for_the_wrong_kind(tmp_path: Path) -> None:
    """`rb verify` takes a bundle (directory), `rb archive verify` an archive (file): each
    refuses the other's input in one line whose hint is the right command."""
    archive = tmp_path / "x.tar.gz"
    archive.write_bytes(b"not really")
    got = rb("verify", str(archive))
    assert got.returncode == 9, got.stderr
    assert got.stderr.splitlines() == [
        f"error: {archive}: is a file, not an evidence bundle (a directory)",
        f"hint: an archive is checked with `rb archive verify {archive}`",
    ]
    got = rb("archive", "verify", str(tmp_path))
    assert got.returncode == 10, got.stderr
    assert (
        got.stderr.splitlines()[1]
        == f"hint: an evidence bundle is checked with `rb verify {tmp_path}`"
    )


def test_audit_help_lists_the_executor_options_in_order() -> None:
    """`rb audit`'s executor options come from one table (cli/audit._EXECUTOR_OPTIONS):
    each declared, in order, with its metavar, and --executor with its default."""
    import re

    out = rb("audit", "--help")
    assert out.returncode == 0
    shown = re.findall(r"^  (--[\w-]+)(?: ([A-Z][\w=-]*|\[[\w|]+\]))?", out.stdout, re.M)
    start = [name for name, _ in shown].index("--executor")
    assert shown[start : start + 9] == [
        ("--executor", "[local|slurm]"),
        ("--partition", "TEXT"),
        ("--account", "TEXT"),
        ("--qos", "TEXT"),
        ("--slurm-opt", "KEY=VALUE"),
        ("--jobs", "K"),
        ("--detach", ""),
        ("--attach", "AUDIT-ID"),
        ("--pending-timeout", "SECONDS"),
    ]
    assert "[default: local]" in out.stdout
    assert rb("audit", "--jobs", "0").returncode == 2  # at least one job at once


def test_init_summary_says_each_experiments_smoke_tier_once(make_repo) -> None:
    """A bounded experiment's summary said `smoke tier: max_steps=20` and then `smoke tier:
    none (no parameter bounds the run)` (openai/grok): the second line belongs to
    experiments without a smoke tier only."""
    root = make_repo(
        {
            "train.py": "import argparse\np = argparse.ArgumentParser()\n"
            "p.add_argument('--max-steps', type=int, default=100000)\n"
            "a = p.parse_args()\nfor s in range(a.max_steps):\n    pass\nprint('loss=0.1')\n",
            "plain.py": "if __name__ == '__main__':\n    print('acc=1')\n",
            "README.md": "```bash\npython train.py --max-steps 100000\npython plain.py\n```\n",
        }
    )
    out = rb("init", str(root), "--no-lock")
    assert out.returncode == 0, out.stderr
    lines = [ln.strip() for ln in out.stdout.splitlines()]
    blocks: dict[str, list[str]] = {}
    for line in lines:
        if line.startswith("experiment"):
            current = blocks.setdefault(line.split()[1].rstrip(":"), [])
        elif line.startswith("smoke tier:"):
            current.append(line)
    assert sorted(blocks) == ["plain", "train"], out.stdout
    assert blocks["train"] == ["smoke tier: max_steps=20"], out.stdout
    assert len(blocks["plain"]) == 1, out.stdout
