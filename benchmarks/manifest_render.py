"""Rendering a new reprobridge.toml: rb's emitter against the tomlkit documents it replaced.

Usage: python benchmarks/manifest_render.py [--keys 1000,5000,20000] [--old-limit 5000] [--repeat 1]

A manifest with one experiment per 10 derived keys and ``[derived]`` holding N entries (the
shape `rb init` writes for a big repository) is rendered three ways:
:func:`reprobridge.manifest.io.render_new_manifest` as shipped (**new**: the text written by
``manifest/emit.py``, issue 14 session 12); the tomlkit document it replaced
(**tomlkit**: :func:`~reprobridge.manifest.io.render_with_tomlkit`, tables filled through
``fill_table``); and that document with ``fill_table`` replaced by the ``table.add`` loop
it replaced (**old**: tomlkit rescans the table body on every ``add``, quadratic in keys).
Printed per size: CPU seconds of each (``time.process_time``, best of ``--repeat``; CPU,
not wall, because the dev machine is shared), the ratios to new, and whether the texts are
byte-identical (they must be). The old way is skipped above ``--old-limit`` keys, where it
takes minutes. No timed assertions: this is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from reprobridge.manifest import io as manifest_io
from reprobridge.manifest.schema import Manifest


def make_manifest(keys: int) -> Manifest:
    """A valid manifest with ``keys`` derived entries (experiments sized to match)."""
    experiments = {
        f"e{i:05d}": {"command": f"python train_{i}.py --seed {{seed}}", "seeds": [0, 1, 2]}
        for i in range(max(1, keys // 10))
    }
    derived = {
        f"experiments.e{i // 10:05d}.k{i % 10}": {
            "sources": [f"train_{i // 10}.py:{i % 97 + 1}", "rule: argparse default"],
            "digest": f"{i:016x}",
            "confidence": "high",
        }
        for i in range(keys)
    }
    return Manifest.model_validate(
        {
            "schema": 1,
            "project": {"name": "bench"},
            "experiments": experiments,
            "derived": derived,
        }
    )


def _fill_with_add(table: Any, entries: list[tuple[str, Any]]) -> None:
    for key, value in entries:
        table.add(key, value)


def timed(render: Callable[[], str], repeat: int) -> tuple[float, str]:
    best, text = float("inf"), ""
    for _ in range(repeat):
        t = time.process_time()
        text = render()
        best = min(best, time.process_time() - t)
    return best, text


def render_tomlkit(manifest: Manifest) -> str:
    """The tomlkit document the emitter replaced (linear ``fill_table``)."""
    return manifest_io.render_with_tomlkit(manifest_io.manifest_data(manifest), version="bench")


def render_old(manifest: Manifest) -> str:
    """That document with every table filled by ``Table.add`` (the old way)."""
    linear = manifest_io.fill_table
    manifest_io.fill_table = _fill_with_add  # type: ignore[assignment]
    try:
        return render_tomlkit(manifest)
    finally:
        manifest_io.fill_table = linear  # type: ignore[assignment]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", default="1000,5000,20000", help="comma-separated [derived] sizes")
    ap.add_argument("--old-limit", type=int, default=5000, help="skip the old way above this")
    ap.add_argument("--repeat", type=int, default=1, help="best of N timings per way")
    args = ap.parse_args()

    print(
        f"{'derived keys':>12} {'lines':>7} {'new s':>8} {'tomlkit s':>10} "
        f"{'tomlkit/new':>12} {'old (Table.add) s':>18} {'ratio old/new':>14} {'same bytes':>10}"
    )
    for keys in (int(k) for k in args.keys.split(",")):
        manifest = make_manifest(keys)
        new_s, new_text = timed(
            lambda m=manifest: manifest_io.render_new_manifest(m, version="bench"), args.repeat
        )
        tk_s, tk_text = timed(lambda m=manifest: render_tomlkit(m), args.repeat)
        same = tk_text == new_text
        if keys <= args.old_limit:
            old_s, old_text = timed(lambda m=manifest: render_old(m), args.repeat)
            old_col, ratio_col = f"{old_s:.3f}", f"{old_s / new_s:.1f}x"
            same = same and old_text == new_text
        else:
            old_col, ratio_col = "skipped", "—"
        print(
            f"{keys:>12} {new_text.count(chr(10)):>7} {new_s:>8.3f} {tk_s:>10.3f} "
            f"{tk_s / new_s:>11.1f}x {old_col:>18} {ratio_col:>14} {'yes' if same else 'NO':>10}"
        )


if __name__ == "__main__":
    main()
