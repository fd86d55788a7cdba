"""merge._finalize helpers."""

from __future__ import annotations


def test_longest_prefix_key_matches_sorting_every_key() -> None:
    # Issue 14: _finalize sorted every provenance key for every leaf; the prefix walk must
    # pick the same key (the longest that is the path or a dotted prefix of it).
    import random

    from reprobridge.recovery.merge import _longest_prefix_key

    rng = random.Random(7)
    parts = ["a", "b", "ab", "experiments", "x", "x.y", "metrics"]
    keys = {".".join(rng.choice(parts) for _ in range(rng.randint(1, 4))) for _ in range(60)}
    for _ in range(500):
        path = ".".join(rng.choice(parts) for _ in range(rng.randint(1, 6)))
        old = next(
            (
                k
                for k in sorted(keys, key=len, reverse=True)
                if path == k or path.startswith(k + ".")
            ),
            None,
        )
        assert _longest_prefix_key(dict.fromkeys(keys), path) == old, path
