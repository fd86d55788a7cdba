"""Operator settings: what the person running `rb` chooses, never the repository under audit.

Sources, highest first (click, uv and DVC use the same order):

1. command-line flags;
2. environment variables ``RB_BACKEND``, ``RB_SIGN_KEY``, ``RB_THREADS``, ``RB_PROBE``,
   ``RB_PROBE_BUDGET``, ``RB_MAX_OUTPUT_MB`` and
   ``RB_AGENT_<KEY>`` (for example ``RB_AGENT_BUDGET_USD=1.5``,
   ``RB_AGENT_ALLOW_NETWORK=false``);
3. the user config file ``$XDG_CONFIG_HOME/rb/config.toml`` (default
   ``~/.config/rb/config.toml``)::

       backend = "host"                       # auto | nix | host
       sign_key = "~/.config/rb/signing-key.pem"
       threads = 2                            # CPU threads per audited run
       probe = true                           # rb init runs the draft's smoke tier to repair it
       probe_budget = 600                     # seconds, every probe round together
       max_output_mb = 1024                   # output copies per run, into the bundle

       [agent]
       model = "claude-sonnet-4-5"
       max_tokens = 4096                      # per response
       budget_usd = 2.0
       budget_tokens = 2000000
       max_tool_calls = 60
       max_wall = 1800                        # seconds
       command_timeout = 120                  # seconds, per sandboxed command
       allow_network = false

4. built-in defaults (:class:`~reprobridge.agent.loop.AgentConfig`, backend ``auto``,
   no signing, no thread setting: a run's libraries pick their own thread counts;
   :data:`DEFAULT_MAX_OUTPUT_MB` of output copies per run).

Limits and permissions come only from here. A repository's ``pyproject.toml``
``[tool.reprobridge]`` table is untrusted: :func:`repository_suggestions` reads it as data to
show, and nothing here ever applies it. Unknown keys and wrong types are errors
(:class:`~reprobridge.errors.ConfigError`) that name the file or variable and the key.
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from reprobridge.errors import ConfigError

if TYPE_CHECKING:
    from reprobridge.agent.loop import AgentConfig

BackendName = Literal["auto", "nix", "host"]
#: The largest thread count accepted (more than any machine's cores; keeps the value a
#: number every library parses).
MAX_THREADS = 4096
#: What the copies of one run's declared outputs may total in the bundle, in MiB, unless
#: the operator says otherwise (:mod:`reprobridge.audit.collect`); the manifest has no say.
DEFAULT_MAX_OUTPUT_MB = 1024
#: The largest output cap accepted (1 TiB).
MAX_OUTPUT_MB_LIMIT = 1 << 20

#: The user config's ``[agent]`` key -> the AgentConfig field it sets.
AGENT_KEYS = {
    "model": "model",
    "max_tokens": "max_tokens",
    "budget_usd": "budget_usd",
    "budget_tokens": "budget_tokens",
    "max_tool_calls": "max_tool_calls",
    "max_wall": "max_wall_s",
    "command_timeout": "command_timeout_s",
    "allow_network": "allow_network",
}


@dataclass(frozen=True)
class Settings:
    """The operator's validated settings: the config file's values under the ``RB_*``
    variables'; None (and a missing agent key) means not set."""

    backend: BackendName | None = None
    sign_key: Path | None = None
    #: CPU threads each audited run may use (:mod:`reprobridge.audit.threads`).
    threads: int | None = None
    #: Whether `rb init` probes (runs the draft's smoke tier in the sandbox and repairs it).
    probe: bool | None = None
    #: Seconds every probe round of one `rb init` may take together.
    probe_budget: float | None = None
    #: MiB the copies of a run's outputs may total (:mod:`reprobridge.audit.collect`).
    max_output_mb: int | None = None
    #: The ``[agent]`` keys that are set (user-config key -> value; see :data:`AGENT_KEYS`).
    #: Left out of the hash (a dict has none), so Settings and Operator stay hashable as the
    #: frozen pydantic model before them was.
    agent: dict[str, Any] = field(default_factory=dict, hash=False)


def parse_threads(text: str, source: str) -> int:
    """A thread count given as text (``--threads``, ``RB_THREADS``): a whole number from 1
    to :data:`MAX_THREADS`; ConfigError naming ``source`` otherwise (exit 2, like a bad
    flag)."""
    value = text.strip()
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= MAX_THREADS:
        raise ConfigError(
            f"expected a whole number of CPU threads from 1 to {MAX_THREADS}; got {text!r}",
            path=source,
            hint="e.g. 2: each run's OMP_NUM_THREADS, MKL_NUM_THREADS, ... are set to it",
        )
    return int(value)


def parse_max_output_mb(text: str, source: str) -> int:
    """An output cap given as text (``--max-output-mb``, ``RB_MAX_OUTPUT_MB``): a whole
    number of MiB from 1 to :data:`MAX_OUTPUT_MB_LIMIT`; ConfigError naming ``source``
    otherwise (exit 2, like a bad flag)."""
    value = text.strip()
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= MAX_OUTPUT_MB_LIMIT:
        raise ConfigError(
            f"expected a whole number of MB from 1 to {MAX_OUTPUT_MB_LIMIT}; got {text!r}",
            path=source,
            hint=f"e.g. {DEFAULT_MAX_OUTPUT_MB}: what the copies of a run's outputs may total",
        )
    return int(value)


def config_home(environ: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/rb`` (an empty or relative value is ignored, as the spec says),
    else ``~/.config/rb``."""
    xdg = environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    return base / "rb"


def config_path(environ: Mapping[str, str]) -> Path:
    """Where the user config file lives (it need not exist)."""
    return config_home(environ) / "config.toml"


def default_sign_key(environ: Mapping[str, str]) -> Path:
    """Where `rb keygen` writes the private key by default: under :func:`config_home`."""
    return config_home(environ) / "signing-key.pem"


@dataclass(frozen=True)
class Operator:
    """The operator's settings after the config file and the environment (flags come last,
    through the methods). ``config_file`` is None when no config file exists."""

    settings: Settings = field(default_factory=Settings)
    config_file: Path | None = None
    sign_key_default: Path = field(default_factory=lambda: default_sign_key(os.environ))

    def backend(self, flag: str | None) -> BackendName:
        """``--backend`` > ``RB_BACKEND`` > config ``backend`` > ``auto``."""
        chosen = flag or self.settings.backend or "auto"
        if chosen not in ("auto", "nix", "host"):
            raise ConfigError(f"unknown backend {chosen!r}", field="backend")
        return chosen  # type: ignore[return-value]

    def sign_key(self, flag: Path | None) -> Path | None:
        """``--sign`` > ``RB_SIGN_KEY`` > config ``sign_key`` > none (no signing)."""
        chosen = flag or self.settings.sign_key
        return chosen.expanduser() if chosen is not None else None

    def threads(self, flag: int | None) -> int | None:
        """``--threads`` > ``RB_THREADS`` > config ``threads`` > None (not set: a run's
        libraries choose, and the host's own ``OMP_NUM_THREADS``-like variables pass)."""
        return flag if flag is not None else self.settings.threads

    def probe(self, flag: bool | None) -> bool:
        """``--probe/--no-probe`` > ``RB_PROBE`` > config ``probe`` > on."""
        if flag is not None:
            return flag
        return True if self.settings.probe is None else self.settings.probe

    def probe_budget(self, flag: float | None) -> float:
        """``--probe-budget`` > ``RB_PROBE_BUDGET`` > config ``probe_budget`` > 600 s."""
        if flag is not None:
            return flag
        return 600.0 if self.settings.probe_budget is None else self.settings.probe_budget

    def max_output_mb(self, flag: int | None) -> int:
        """``--max-output-mb`` > ``RB_MAX_OUTPUT_MB`` > config ``max_output_mb`` >
        :data:`DEFAULT_MAX_OUTPUT_MB`."""
        if flag is not None:
            return flag
        configured = self.settings.max_output_mb
        return configured if configured is not None else DEFAULT_MAX_OUTPUT_MB

    def agent_config(self, flags: Mapping[str, Any]) -> AgentConfig:
        """The agent's config: ``flags`` (AgentConfig field -> value, None = not given) over
        the environment and config file over AgentConfig's defaults. The repository has no
        say (see :func:`repository_suggestions`)."""
        from pydantic import ValidationError

        from reprobridge._config_schema import one_error
        from reprobridge.agent.loop import AgentConfig

        values: dict[str, Any] = {AGENT_KEYS[k]: v for k, v in self.settings.agent.items()}
        for name, value in flags.items():
            if name not in AgentConfig.model_fields:
                raise ValueError(f"not an AgentConfig field: {name}")
            if value is not None:
                values[name] = value
        try:
            return AgentConfig(**values)
        except ValidationError as exc:  # the flags and the config are checked first; belt
            raise one_error(exc, "agent settings") from None


def load_operator(environ: Mapping[str, str] | None = None) -> Operator:
    """The operator's settings from the user config file and ``RB_*`` variables.

    Validation (pydantic, :mod:`reprobridge._config_schema`) runs only when there is
    something to validate: with no config file and no ``RB_*`` variable that sets or may
    reject a setting, the settings are the defaults and pydantic is not imported (it is
    most of a verb's start: benchmarks/log-2026-11.md).
    """
    env = os.environ if environ is None else environ
    path = config_path(env)
    text = _config_text(path)
    if text is None and not _variables_set(env):
        settings = Settings()
    else:
        from reprobridge._config_schema import validated_settings

        settings = validated_settings(text, str(path), env)
    return Operator(
        settings=settings,
        config_file=path if path.is_file() else None,
        sign_key_default=default_sign_key(env),
    )


def _config_text(path: Path) -> str | None:
    """The config file's text; None when it does not exist."""
    try:
        return path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot be read: {exc}", path=str(path)) from exc


def _variables_set(environ: Mapping[str, str]) -> bool:
    """Whether an ``RB_*`` variable sets a setting or may be rejected: a non-empty one of
    :data:`_SETTING_VARIABLES` (empty ones are ignored), or any ``RB_AGENT_*`` (an unknown
    name is an error even when empty)."""
    return any(environ.get(var) for var in _SETTING_VARIABLES) or any(
        var.startswith("RB_AGENT_") for var in environ
    )


#: The ``RB_*`` variables of the top-level settings.
_SETTING_VARIABLES = (
    "RB_BACKEND",
    "RB_SIGN_KEY",
    "RB_THREADS",
    "RB_MAX_OUTPUT_MB",
    "RB_PROBE",
    "RB_PROBE_BUDGET",
)


#: A suggestion shown from a repository is cut to this many characters (it is untrusted text).
_SUGGESTION_CHARS = 60


def repository_suggestions(root: Path) -> list[str]:
    """``key = value`` for each agent setting the repository's ``pyproject.toml``
    ``[tool.reprobridge]`` table names: shown to the operator as a suggestion, never applied.

    The file is untrusted: a symlink, an unreadable or malformed file, or a value of an
    unexpected type yields nothing; values are shown with ``repr`` and cut short.
    """
    path = root / "pyproject.toml"
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return []
        table = tomllib.loads(path.read_text("utf-8")).get("tool", {}).get("reprobridge", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        return []
    if not isinstance(table, dict):
        return []
    out = []
    for key in sorted(AGENT_KEYS):
        value = table.get(key)
        if isinstance(value, (str, int, float, bool)):
            out.append(f"{key} = {value!r}"[:_SUGGESTION_CHARS])
    return out
