"""The agent with a key but no reachable API: progress per retry, then static recovery
(--agent auto) or one error with a hint (--agent claude, exit 8)."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from reprobridge._log import sink
from reprobridge.agent.backends import ApiRetriesExhausted
from reprobridge.agent.loop import AgentConfig
from reprobridge.agent.session import AgentOptions
from reprobridge.cli._render import print_init_summary, progress_sink
from reprobridge.initializer import init_repository


@pytest.fixture
def closed_port(monkeypatch: pytest.MonkeyPatch) -> str:
    """An API address nothing listens on (connection refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    return url


def _options(fallback: bool, slept: list[float]) -> AgentOptions:
    return AgentOptions(
        config=AgentConfig(),
        api_key="sk-ant-test",
        sleep=slept.append,
        fallback_static=fallback,
        sandbox_unusable=lambda: None,
    )


def test_auto_falls_back_to_static_with_progress_and_a_warning(
    make_repo, closed_port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_repo({"train.py": "print('acc=1')\n"})
    slept: list[float] = []
    events: list[tuple[str, dict[str, Any]]] = []
    show = progress_sink(0)

    def both(event: str, fields: dict[str, Any]) -> None:
        events.append((event, fields))
        show(event, fields)

    with sink(both):
        result = init_repository(root, lock="never", agent=_options(True, slept))
    assert result.agent is None
    assert result.agent_fallback and "static recovery only" in result.agent_fallback
    assert (root / "reprobridge.toml").is_file()
    retries = [f for e, f in events if e == "agent-retry"]
    assert len(retries) == len(slept) == 4  # each wait is announced before it happens
    err = capsys.readouterr().err
    assert "rb: Messages API: cannot connect" in err and "attempt 2 of 5 in 2s" in err
    print_init_summary(result)
    assert "warning: the recovery agent could not start" in capsys.readouterr().out


def test_claude_fails_with_a_hint(make_repo, closed_port: str) -> None:
    root = make_repo({"train.py": "print('acc=1')\n"})
    with pytest.raises(ApiRetriesExhausted) as exc:
        init_repository(root, lock="never", agent=_options(False, []))
    assert exc.value.exit_status() == 8
    assert exc.value.hint and "--agent static" in exc.value.hint
    assert not (root / "reprobridge.toml").exists()
