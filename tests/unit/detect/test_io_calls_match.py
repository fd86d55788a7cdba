"""_io_calls._matches: one compiled regex per pattern set, the same answers as fnmatch."""

from __future__ import annotations

import random
from fnmatch import fnmatchcase

from reprobridge.detect.procedure import _io_calls


def _reference(name: str, patterns: tuple[str, ...], imported: bool) -> bool:
    """The definition: a bare word is a builtin (never an imported name), the rest globs."""
    for pattern in patterns:
        if "." not in pattern and "*" not in pattern:
            if name == pattern and not imported:
                return True
        elif fnmatchcase(name, pattern):
            return True
    return False


def test_matches_agrees_with_fnmatch_on_the_shipped_rules_and_random_names() -> None:
    rules = _io_calls.rules()
    pattern_sets = [rule.calls for rule in rules.downloads]
    pattern_sets += [(p,) for p, _ in rules.writes] + [rules.reads]
    pattern_sets += [("open", "np.load", "sklearn.datasets.fetch_*", "torch.[sl]*", "a?c")]
    names = {p.replace("*", "x") for ps in pattern_sets for p in ps}
    names |= {"open", "io.open", "numpy.load", "sklearn.datasets.fetch_openml", "torch.save"}
    names |= {"torch.load", "abc", "ac", "x.open", "openx", "sklearn.datasets.load_iris"}
    rng = random.Random(14)
    pool = sorted(names)
    for _ in range(3000):
        patterns = rng.choice(pattern_sets)
        name = rng.choice(pool)
        imported = rng.random() < 0.5
        assert _io_calls._matches(name, patterns, imported) == _reference(
            name, patterns, imported
        ), (name, patterns, imported)


def test_matched_lists_the_rules_classify_would_try_in_order() -> None:
    """_matched (cached per name) picks the same download rules, first write rule and
    read rule as matching every rule per call did, in the rules' order."""
    rules = _io_calls.rules()
    names = {p.replace("*", "x") for rule in rules.downloads for p in rule.calls}
    names |= {p.replace("*", "x") for p, _ in rules.writes} | set(rules.reads)
    names |= {"open", "io.open", "torch.save", "numpy.save", "x.open", "print", "json.dump"}
    for name in sorted(names):
        for imported in (False, True):
            got = _io_calls._matched(name, imported)
            assert got.downloads == tuple(
                r for r in rules.downloads if _reference(name, r.calls, imported)
            )
            assert got.write == next(
                (pos for p, pos in rules.writes if _reference(name, (p,), imported)), None
            )
            assert got.read == _reference(name, rules.reads, imported)
    assert _io_calls._matched("torch.save", True).write is not None  # the test sees a hit
