"""ReproBridge: recover, pin and audit the reproduction of ML research repositories."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
