"""Where the agent's model calls go: the Anthropic Messages API (the only importer of
``anthropic``), behind a small protocol the agent loop depends on.

Contract of :class:`AnthropicBackend`:

* ``anthropic`` (and its HTTP client) is imported when the backend is built, never at
  module import, so ``rb --help`` and static ``rb init`` stay fast and work without it;
* the SDK's own retries are off (``max_retries=0``): :meth:`AnthropicBackend.create`
  retries 429, 5xx and ``overloaded_error`` (529) itself, sleeping for the response's
  ``retry-after`` when it has one (else exponential backoff), through an injected
  ``sleep``, and returns every wait it made so the ledger and transcript record them;
* every SDK exception leaves as a :class:`RecoveryError` subclass (``raise ... from exc``);
  the API key is held by the client in this process only and appears in no message.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from reprobridge._log import emit
from reprobridge.errors import RecoveryError

DEFAULT_MODEL = "claude-sonnet-4-5"
#: Status codes worth another try: rate limit, server errors, overloaded (529).
RETRYABLE = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


class ApiError(RecoveryError):
    """The Messages API refused or failed a request (after any retries)."""

    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.status = status


class ApiAuthError(ApiError):
    """The API key was missing, invalid or not allowed to use the model."""


class ApiRetriesExhausted(ApiError):
    """Retryable failures (429/5xx/overloaded) went on past the retry limit."""


@dataclass(frozen=True)
class Retry:
    """One wait before a retry: the failure's status and type, and the seconds slept."""

    status: int
    error_type: str
    slept_s: float
    from_header: bool


@dataclass
class Reply:
    """A response in the Messages API wire format (a plain dict) and the retries it took."""

    message: dict[str, Any]
    retries: list[Retry] = field(default_factory=list)


class Backend(Protocol):
    """What the agent loop needs from a model: one Messages API request in, one reply out.

    ``request`` holds ``model``, ``max_tokens``, ``system``, ``tools`` and ``messages``
    exactly as the Messages API takes them. Raises :class:`ApiError` (a RecoveryError).
    """

    name: str

    def create(self, request: Mapping[str, Any]) -> Reply: ...


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``retry-after`` header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class AnthropicBackend:
    """The Messages API through the official SDK (see the module docstring).

    ``transport`` replaces the HTTP transport (tests replay recorded responses with
    ``httpx2.MockTransport``); ``sleep`` replaces :func:`time.sleep`.
    """

    name = "claude"

    def __init__(
        self,
        api_key: str,
        *,
        transport: Any = None,
        base_url: str | None = None,
        max_retries: int = 4,
        backoff_s: float = 2.0,
        max_backoff_s: float = 60.0,
        timeout_s: float = 600.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        try:
            import anthropic
            import httpx2
        except ImportError as exc:  # an install without the optional SDK
            raise RecoveryError(
                "the anthropic package is not installed",
                hint="pip install anthropic, or run `rb init --agent static`",
            ) from exc
        http = httpx2.Client(transport=transport, timeout=timeout_s) if transport else None
        self._client = anthropic.Anthropic(
            api_key=api_key,
            base_url=base_url,
            http_client=http,
            max_retries=0,  # we retry, so retry-after is honoured and recorded
            timeout=timeout_s,
        )
        self._anthropic = anthropic
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.sleep = sleep

    def _announce(self, retries: list[Retry], why: str) -> None:
        """Say each wait before it happens (event ``agent-retry``): never a silent pause."""
        emit(
            "agent-retry",
            reason=why,
            delay=retries[-1].slept_s,
            attempt=len(retries) + 1,
            attempts=self.max_retries + 1,
        )

    def create(self, request: Mapping[str, Any]) -> Reply:
        """Send ``request``; retry what is retryable; map failures to :class:`ApiError`.
        Each retry is announced first (:meth:`_announce`)."""
        a = self._anthropic
        retries: list[Retry] = []
        while True:
            try:
                message = self._client.messages.create(**dict(request))
                return Reply(message.model_dump(mode="json", exclude_none=True), retries)
            except a.APIStatusError as exc:
                status = exc.status_code
                body = exc.body if isinstance(exc.body, dict) else {}
                raw_err = body.get("error")
                err: dict[str, Any] = raw_err if isinstance(raw_err, dict) else {}
                etype = str(err.get("type") or type(exc).__name__)
                detail = str(err.get("message") or exc.message)
                retryable = status in RETRYABLE or etype in {
                    "overloaded_error",
                    "rate_limit_error",
                    "api_error",
                }
                if not retryable:
                    cls = ApiAuthError if status in (401, 403) else ApiError
                    raise cls(
                        f"the Messages API answered {status} {etype}: {detail}", status=status
                    ) from exc
                if len(retries) >= self.max_retries:
                    raise ApiRetriesExhausted(
                        f"the Messages API answered {status} {etype} "
                        f"{len(retries) + 1} times: {detail}",
                        status=status,
                        hint="try again later, or lower the request rate",
                    ) from exc
                header = parse_retry_after(exc.response.headers.get("retry-after"))
                delay = (
                    header
                    if header is not None
                    else min(self.max_backoff_s, self.backoff_s * 2 ** len(retries))
                )
                retries.append(Retry(status, etype, delay, header is not None))
                self._announce(retries, f"{status} {etype}")
                self.sleep(delay)
            except a.APIConnectionError as exc:
                if len(retries) >= self.max_retries:
                    raise ApiRetriesExhausted(
                        f"cannot reach the Messages API after {len(retries) + 1} attempts: "
                        f"{exc.message}",
                        hint="check the network (or HTTPS_PROXY) to api.anthropic.com, "
                        "or run `rb init --agent static`",
                    ) from exc
                delay = min(self.max_backoff_s, self.backoff_s * 2 ** len(retries))
                retries.append(Retry(0, "connection_error", delay, False))
                self._announce(retries, f"cannot connect ({exc.message})")
                self.sleep(delay)
            except a.AnthropicError as exc:
                raise ApiError(f"the Anthropic client failed: {exc}") from exc
