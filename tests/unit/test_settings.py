"""Operator settings: flags > RB_* > user config > defaults; the repository never sets limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reprobridge.agent.loop import AgentConfig
from reprobridge.errors import ConfigError
from reprobridge.settings import (
    DEFAULT_MAX_OUTPUT_MB,
    default_sign_key,
    load_operator,
    repository_suggestions,
)


def _env(tmp_path: Path, config: str | None = None, **extra: str) -> dict[str, str]:
    home = tmp_path / "xdg"
    if config is not None:
        (home / "rb").mkdir(parents=True)
        (home / "rb" / "config.toml").write_text(config)
    return {"XDG_CONFIG_HOME": str(home), **extra}


def test_precedence_flag_env_file_default(tmp_path: Path) -> None:
    cfg = 'backend = "host"\n[agent]\nbudget_usd = 1.0\nmax_tool_calls = 5\n'
    assert load_operator(_env(tmp_path / "a")).backend(None) == "auto"
    file_only = load_operator(_env(tmp_path / "b", cfg))
    assert file_only.backend(None) == "host"
    env = load_operator(_env(tmp_path / "c", cfg, RB_BACKEND="nix", RB_AGENT_BUDGET_USD="3"))
    assert env.backend(None) == "nix"
    assert env.backend("auto") == "auto"  # the flag wins
    agent = env.agent_config({"max_tool_calls": None})
    assert (agent.budget_usd, agent.max_tool_calls) == (3.0, 5)
    assert env.agent_config({"budget_usd": 7.5}).budget_usd == 7.5
    assert load_operator(_env(tmp_path / "d")).agent_config({}) == AgentConfig()


def test_unknown_key_is_one_line_naming_file_and_field(tmp_path: Path) -> None:
    env = _env(tmp_path, "[agent]\nbudgt_usd = 1.0\n")
    with pytest.raises(ConfigError) as exc:
        load_operator(env)
    path = Path(env["XDG_CONFIG_HOME"]) / "rb" / "config.toml"
    assert str(exc.value) == f"{path}: agent.budgt_usd: unknown key"
    assert exc.value.exit_status() == 2


def test_wrong_type_and_bad_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"agent\.allow_network: Input should be a valid boolean"):
        load_operator(_env(tmp_path / "a", '[agent]\nallow_network = "yes"\n'))
    with pytest.raises(ConfigError, match=r"^RB_AGENT_MAX_TOOL_CALLS: "):
        load_operator(_env(tmp_path / "b", RB_AGENT_MAX_TOOL_CALLS="many"))
    with pytest.raises(ConfigError, match=r"^RB_AGENT_BUDGET: unknown variable"):
        load_operator(_env(tmp_path / "c", RB_AGENT_BUDGET="3"))
    with pytest.raises(ConfigError, match=r"^RB_BACKEND: "):
        load_operator(_env(tmp_path / "d", RB_BACKEND="docker"))


def test_signing_key_follows_xdg_config_home(tmp_path: Path) -> None:
    assert default_sign_key({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "rb/signing-key.pem"
    relative = default_sign_key({"XDG_CONFIG_HOME": "relative/dir"})  # ignored, per the spec
    assert relative == Path.home() / ".config/rb/signing-key.pem"
    op = load_operator(_env(tmp_path, 'sign_key = "~/k.pem"\n'))
    assert op.sign_key(None) == Path.home() / "k.pem"
    assert op.sign_key(tmp_path / "flag.pem") == tmp_path / "flag.pem"


def test_repository_table_is_only_a_suggestion(tmp_path: Path) -> None:
    """Regression (issue 8 item 6): [tool.reprobridge] used to raise budgets and network."""
    (tmp_path / "pyproject.toml").write_text(
        "[tool.reprobridge]\nbudget_usd = 1000.0\nallow_network = true\nmax_tool_calls = 9999\n"
    )
    op = load_operator(_env(tmp_path / "cfg"))
    assert op.agent_config({}) == AgentConfig()
    assert repository_suggestions(tmp_path) == [
        "allow_network = True",
        "budget_usd = 1000.0",
        "max_tool_calls = 9999",
    ]
    # Untrusted text: a symlinked or malformed pyproject yields nothing, never an error.
    (tmp_path / "pyproject.toml").write_text("[tool.reprobridge\n")
    assert repository_suggestions(tmp_path) == []


def test_threads_flag_env_file_default(tmp_path: Path) -> None:
    """The CPU thread share of a run is an operator setting like the backend."""
    assert load_operator(_env(tmp_path / "a")).threads(None) is None
    file_only = load_operator(_env(tmp_path / "b", "threads = 2\n"))
    assert file_only.threads(None) == 2
    env = load_operator(_env(tmp_path / "c", "threads = 2\n", RB_THREADS="3"))
    assert env.threads(None) == 3
    assert env.threads(1) == 1  # the flag wins
    bad = ("threads = 0\n", 'threads = "2"\n', "threads = true\n", "threads = 5000\n")
    for i, text in enumerate(bad):
        with pytest.raises(ConfigError, match=r"config\.toml: threads: "):
            load_operator(_env(tmp_path / f"d{i}", text))
    with pytest.raises(ConfigError, match=r"^RB_THREADS: expected a whole number"):
        load_operator(_env(tmp_path / "e", RB_THREADS="0"))


def test_output_cap_flag_env_file_default(tmp_path: Path) -> None:
    """What a run's output copies may total is the operator's, like the thread share; the
    manifest has no key for it."""
    assert load_operator(_env(tmp_path / "a")).max_output_mb(None) == DEFAULT_MAX_OUTPUT_MB
    file_only = load_operator(_env(tmp_path / "b", "max_output_mb = 20\n"))
    assert file_only.max_output_mb(None) == 20
    env = load_operator(_env(tmp_path / "c", "max_output_mb = 20\n", RB_MAX_OUTPUT_MB="30"))
    assert env.max_output_mb(None) == 30
    assert env.max_output_mb(5) == 5  # the flag wins
    bad = ("max_output_mb = 0\n", 'max_output_mb = "2"\n', "max_output_mb = 1.5\n")
    for i, text in enumerate(bad):
        with pytest.raises(ConfigError, match=r"config\.toml: max_output_mb: "):
            load_operator(_env(tmp_path / f"d{i}", text))
    with pytest.raises(ConfigError, match=r"^RB_MAX_OUTPUT_MB: expected a whole number of MB"):
        load_operator(_env(tmp_path / "e", RB_MAX_OUTPUT_MB="-1"))


def _modules_after_load(tmp_path: Path, env: dict[str, str]) -> tuple[str, list[str]]:
    """load_operator in a fresh interpreter: its backend and which heavy modules it loaded."""
    import subprocess
    import sys

    probe = (
        "import json, sys\n"
        "from reprobridge.settings import load_operator\n"
        f"op = load_operator(json.loads({json.dumps(json.dumps(env))}))\n"
        "heavy = [m for m in ('pydantic', 'reprobridge._config_schema') if m in sys.modules]\n"
        "print(op.backend(None), ','.join(heavy) or '-')\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    backend, heavy = out.stdout.split()
    return backend, [] if heavy == "-" else heavy.split(",")


def test_defaults_load_without_pydantic(tmp_path: Path) -> None:
    # Issue 14: the settings' pydantic models were built for every verb, although with no
    # config file and no RB_* variable there is nothing to validate (pydantic is most of a
    # start; `rb doctor` and `rb keygen` validate nothing else).
    assert _modules_after_load(tmp_path, _env(tmp_path / "a", RB_BACKEND="")) == ("auto", [])
    # Anything that can set or reject a setting is still validated, through pydantic.
    heavy = ["pydantic", "reprobridge._config_schema"]
    assert _modules_after_load(tmp_path, _env(tmp_path / "b", 'backend = "host"\n')) == (
        "host",
        heavy,
    )
    assert _modules_after_load(tmp_path, _env(tmp_path / "c", RB_BACKEND="nix")) == ("nix", heavy)
    assert _modules_after_load(tmp_path, _env(tmp_path / "d", RB_AGENT_MODEL="m")) == (
        "auto",
        heavy,
    )


def test_every_source_is_still_checked_without_a_config_file(tmp_path: Path) -> None:
    # The no-pydantic start must not skip a check: an unknown RB_AGENT_* is an error even
    # when empty, an empty known variable is ignored, and a bad value is named.
    with pytest.raises(ConfigError, match=r"^RB_AGENT_BUDGET: unknown variable"):
        load_operator(_env(tmp_path / "a", RB_AGENT_BUDGET=""))
    assert load_operator(_env(tmp_path / "b", RB_AGENT_BUDGET_USD="")).agent_config({}) == (
        AgentConfig()
    )
    with pytest.raises(ConfigError, match=r"^RB_AGENT_MAX_TOKENS: Input should be greater"):
        load_operator(_env(tmp_path / "c", RB_AGENT_MAX_TOKENS="-1"))
    with pytest.raises(ConfigError, match=r"^RB_THREADS: expected a whole number"):
        load_operator(_env(tmp_path / "d", RB_THREADS="x"))
    (tmp_path / "e" / "xdg" / "rb" / "config.toml").mkdir(parents=True)  # unreadable
    with pytest.raises(ConfigError, match=r"config\.toml: cannot be read"):
        load_operator(_env(tmp_path / "e"))


def test_operator_settings_are_a_hashable_value(tmp_path: Path) -> None:
    # The settings were a frozen pydantic model (hashable); the plain dataclass that
    # replaced it keeps that, and equal sources give equal settings.
    env = _env(tmp_path, "[agent]\nbudget_usd = 1.5\n")
    a, b = load_operator(env), load_operator(env)
    assert a == b and hash(a) == hash(b)
    assert a.settings.agent == {"budget_usd": 1.5}
    assert hash(load_operator(_env(tmp_path / "none")))
