"""The cost ledger of one agent run: every API call's token usage and its price.

Contract: pure bookkeeping (no I/O beyond reading the packaged price table); the caller
stores :meth:`Ledger.to_jsonl` in ``.reprobridge/ledger.jsonl``. A model missing from
``prices.toml`` never crashes: its cost is ``None`` ("unknown") and the total says so.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from reprobridge.data import PRICES_FILE, load

_PER = 1_000_000


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input: float
    output: float
    cache_write: float
    cache_read: float


#: The Messages API's usage fields, in :class:`Usage`'s field order.
_KINDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


@dataclass(frozen=True)
class Usage:
    """Token counts of one response, as the Messages API reports them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    @classmethod
    def from_api(cls, usage: Mapping[str, Any] | None) -> Usage:
        """From the ``usage`` object of a response (missing or null fields count as 0)."""
        u = usage or {}
        return cls(*(int(u.get(k) or 0) for k in _KINDS))

    @property
    def total(self) -> int:
        """Every token billed (input of all kinds plus output)."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
        )


@functools.cache
def price_table() -> dict[str, Price]:
    """The packaged ``prices.toml`` (:mod:`reprobridge.data`) as ``{model prefix: Price}``."""
    raw = load(PRICES_FILE)
    return {name: Price(**{k: float(v) for k, v in p.items()}) for name, p in raw["models"].items()}


def price_for(model: str, table: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model``: the longest table key it starts with, or None."""
    table = price_table() if table is None else table
    keys = sorted((k for k in table if model == k or model.startswith(k + "-")), key=len)
    return table[keys[-1]] if keys else None


def cost_of(usage: Usage, price: Price | None) -> float | None:
    """Dollars for ``usage`` at ``price``; None when the price is unknown."""
    if price is None:
        return None
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_creation_input_tokens * price.cache_write
        + usage.cache_read_input_tokens * price.cache_read
    ) / _PER


@dataclass(frozen=True)
class Entry:
    """One API call: which step, which model, its usage, its cost (None: unknown)."""

    step: int
    model: str
    usage: Usage
    cost_usd: float | None
    retries: int = 0


@dataclass
class Ledger:
    """All calls of one run, in order, with running totals."""

    run_id: str
    entries: list[Entry] = field(default_factory=list)
    prices: Mapping[str, Price] | None = None

    def record(self, step: int, model: str, usage: Usage, *, retries: int = 0) -> Entry:
        """Add one call; returns its entry (with the cost computed from the price table)."""
        entry = Entry(step, model, usage, cost_of(usage, price_for(model, self.prices)), retries)
        self.entries.append(entry)
        return entry

    @property
    def tokens(self) -> Usage:
        """Usage summed over every call."""
        return Usage(*(sum(getattr(e.usage, k) for e in self.entries) for k in _KINDS))

    @property
    def cost_usd(self) -> float | None:
        """Total dollars, or None as soon as one call's price is unknown."""
        costs = [e.cost_usd for e in self.entries]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    def cost_text(self) -> str:
        """``$0.0123`` or ``unknown``."""
        cost = self.cost_usd
        return "unknown" if cost is None else f"${cost:.4f}"

    def summary(self) -> str:
        """One line: calls, tokens of each kind, total cost."""
        t = self.tokens
        return (
            f"{len(self.entries)} API call(s); tokens: {t.input_tokens} input, "
            f"{t.output_tokens} output, {t.cache_creation_input_tokens} cache write, "
            f"{t.cache_read_input_tokens} cache read; cost {self.cost_text()}"
        )

    def to_jsonl(self) -> bytes:
        """One JSON object per call plus a closing ``total`` line (append to the ledger file)."""
        lines = [
            {"run": self.run_id, "kind": "call", **asdict(e)}  # usage nests as a dict
            for e in self.entries
        ]
        lines.append(
            {
                "run": self.run_id,
                "kind": "total",
                "calls": len(self.entries),
                "usage": asdict(self.tokens),
                "cost_usd": self.cost_usd,
            }
        )
        return "".join(json.dumps(x, sort_keys=True) + "\n" for x in lines).encode()
