"""The user config file's and the ``RB_*`` variables' pydantic models, and their validation.

Imported by :func:`reprobridge.settings.load_operator` only when there is something to
validate (a config file, or an ``RB_*`` variable that sets or may reject a setting): with
neither, every verb starts without pydantic (it is most of a start: benchmarks/log-2026-11.md).
Contract: :func:`validated_settings` returns the config file's values under the
variables', validated, or raises :class:`~reprobridge.errors.ConfigError` naming the file
or variable and the key.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from reprobridge.errors import ConfigError
from reprobridge.settings import (
    AGENT_KEYS,
    MAX_OUTPUT_MB_LIMIT,
    MAX_THREADS,
    BackendName,
    Settings,
    parse_max_output_mb,
    parse_threads,
)


class AgentSettings(BaseModel):
    """The recovery agent's model, budgets and permission (every key optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = Field(None, min_length=1)
    max_tokens: int | None = Field(None, gt=0)
    budget_usd: float | None = Field(None, gt=0)
    budget_tokens: int | None = Field(None, gt=0)
    max_tool_calls: int | None = Field(None, gt=0)
    max_wall: float | None = Field(None, gt=0, description="seconds")
    command_timeout: float | None = Field(None, gt=0, description="seconds")
    allow_network: StrictBool | None = None


class UserConfig(BaseModel):
    """``$XDG_CONFIG_HOME/rb/config.toml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: BackendName | None = None
    sign_key: Path | None = None
    #: CPU threads each audited run may use (:mod:`reprobridge.audit.threads`).
    threads: StrictInt | None = Field(None, ge=1, le=MAX_THREADS)
    #: Whether `rb init` probes the draft (runs its smoke tier in the sandbox).
    probe: StrictBool | None = None
    #: Seconds all probe rounds of one `rb init` may take together.
    probe_budget: float | None = Field(None, gt=0, le=86400)
    #: MiB the copies of a run's outputs may total (:mod:`reprobridge.audit.collect`).
    max_output_mb: StrictInt | None = Field(None, ge=1, le=MAX_OUTPUT_MB_LIMIT)
    agent: AgentSettings = AgentSettings()


def one_error(exc: ValidationError, source: str, prefix: str = "") -> ConfigError:
    """The first of ``exc``'s errors as one ConfigError naming ``source`` and the key."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
    more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return ConfigError(f"{msg}{more}", path=source, field=f"{prefix}{loc}" if loc else None)


def validated_settings(text: str | None, source: str, environ: Mapping[str, str]) -> Settings:
    """The config file's ``text`` (None: there is no file; ``source`` names it in errors)
    under the ``RB_*`` variables of ``environ``, validated."""
    merged = _merge(_from_file(text, source), _from_environ(environ))
    return Settings(
        backend=merged.backend,
        sign_key=merged.sign_key,
        threads=merged.threads,
        probe=merged.probe,
        probe_budget=merged.probe_budget,
        max_output_mb=merged.max_output_mb,
        agent=merged.agent.model_dump(exclude_none=True),
    )


def _from_file(text: str | None, source: str) -> UserConfig:
    if text is None:
        return UserConfig()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", path=source) from exc
    try:
        return UserConfig.model_validate(data)
    except ValidationError as exc:
        raise one_error(exc, source) from exc


def _from_environ(environ: Mapping[str, str]) -> UserConfig:
    """The RB_* variables as a config (strings converted and checked like the file's)."""
    top: dict[str, Any] = {
        key: environ[var]
        for key, var in (("backend", "RB_BACKEND"), ("sign_key", "RB_SIGN_KEY"))
        if environ.get(var)
    }
    if environ.get("RB_THREADS"):
        top["threads"] = parse_threads(environ["RB_THREADS"], "RB_THREADS")
    if environ.get("RB_PROBE"):
        top["probe"] = _boolean(environ["RB_PROBE"], "RB_PROBE")
    if environ.get("RB_PROBE_BUDGET"):
        try:
            top["probe_budget"] = float(environ["RB_PROBE_BUDGET"])
        except ValueError:
            raise ConfigError(
                f"expected seconds (a number); got {environ['RB_PROBE_BUDGET']!r}",
                path="RB_PROBE_BUDGET",
            ) from None
    if environ.get("RB_MAX_OUTPUT_MB"):
        top["max_output_mb"] = parse_max_output_mb(environ["RB_MAX_OUTPUT_MB"], "RB_MAX_OUTPUT_MB")
    agent: dict[str, Any] = {}
    for key in AGENT_KEYS:
        var = f"RB_AGENT_{key.upper()}"
        value = environ.get(var)
        if not value:
            continue
        if key == "allow_network":
            agent[key] = _boolean(value, var)
        else:
            agent[key] = value
    for var in environ:
        if var.startswith("RB_AGENT_") and var[len("RB_AGENT_") :].lower() not in AGENT_KEYS:
            known = ", ".join(f"RB_AGENT_{k.upper()}" for k in AGENT_KEYS)
            raise ConfigError("unknown variable", path=var, hint=f"known: {known}")
    try:
        # Lax validation here: every value arrives as a string ("2.5", "40").
        settings = AgentSettings.model_validate(agent, strict=False)
        return UserConfig.model_validate({**top, "agent": settings})
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][-1])
        var = {
            "backend": "RB_BACKEND",
            "sign_key": "RB_SIGN_KEY",
            "probe_budget": "RB_PROBE_BUDGET",
        }.get(key, f"RB_AGENT_{key.upper()}")
        raise ConfigError(err["msg"], path=var) from exc


def _boolean(value: str, var: str) -> bool:
    """A yes/no variable's value (1/0, true/false, yes/no, on/off)."""
    low = value.strip().lower()
    if low not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
        raise ConfigError("expected true or false", path=var)
    return low in ("1", "true", "yes", "on")


def _merge(low: UserConfig, high: UserConfig) -> UserConfig:
    """``high``'s set values over ``low``'s."""
    agent = {**low.agent.model_dump(exclude_none=True), **high.agent.model_dump(exclude_none=True)}
    top = {
        **low.model_dump(exclude_none=True, exclude={"agent"}),
        **high.model_dump(exclude_none=True, exclude={"agent"}),
    }
    return UserConfig.model_validate({**top, "agent": AgentSettings(**agent)})
