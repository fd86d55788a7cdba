"""A fresh reprobridge.toml is written without tomlkit, byte for byte what tomlkit wrote."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reprobridge.manifest.io import (
    parse_manifest_text,
    render_data,
    render_new_manifest,
    render_with_tomlkit,
)
from reprobridge.manifest.schema import Derivation, Manifest

# Text that exercises escaping (quotes, backslashes, every control character, DEL,
# non-ASCII) and keys that must be quoted (dots, spaces, empty).
_text = st.text(
    alphabet=st.sampled_from(
        ["a", "Z", "0", "_", "-", ".", " ", '"', "\\", "\n", "\t", "\x00", "\x1b", "\x7f", "é", "λ"]
        + [chr(c) for c in range(0x20)]
    ),
    max_size=12,
)
_scalar = st.one_of(
    _text,
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)
_value = st.recursive(
    _scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(_text, inner, min_size=1, max_size=4),
    ),
    max_leaves=12,
)
_plain = st.dictionaries(_text, _value, min_size=1, max_size=5)


def _with(tables: st.SearchStrategy[dict[str, Any]], **subs: Any) -> Any:
    """Plain keys plus the given sub-tables (a table's plain keys and tables mixed)."""
    return st.builds(
        lambda plain, **kw: {**plain, **{k: v for k, v in kw.items() if v}}, tables, **subs
    )


_metric_tables = st.dictionaries(_text, _plain, max_size=2)
_experiment = _with(
    _plain,
    metrics=_metric_tables,
    tiers=st.dictionaries(_text, _with(_plain, metrics=_metric_tables), max_size=2),
)
_data = st.fixed_dictionaries(
    {"project": _plain},
    optional={
        "environment": _plain,
        "datasets": st.dictionaries(_text, _plain, min_size=1, max_size=2),
        "experiments": st.dictionaries(_text, _experiment, min_size=1, max_size=3),
        "claims": st.lists(
            st.fixed_dictionaries(
                {"expr": _text}, optional={"provenance": _text, "tiers": st.lists(_text)}
            ),
            min_size=1,
            max_size=3,
        ),
        "derived": st.dictionaries(
            _text,
            st.fixed_dictionaries(
                {"sources": st.lists(_text, max_size=4), "digest": _text, "confidence": _text}
            ),
            min_size=1,
            max_size=4,
        ),
    },
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_data)
def test_emitted_text_is_tomlkits_byte_for_byte(data: dict[str, Any]) -> None:
    # Breaking any rule of emit.py (an escape, the 60-character multiline rule, the blank
    # line before a sub-table, plain keys before tables, quoting a key) turns this red.
    expected = render_with_tomlkit(data, version="t")
    assert render_data(data, version="t") == expected
    tomllib.loads(expected)  # and it is TOML


def _realistic() -> Manifest:
    m = Manifest.model_validate(
        {
            "schema": 1,
            "project": {"name": 'de"mo\\', "license": "MIT"},
            "environment": {"python": "3.11", "system": ["graphviz"]},
            "datasets": {"mnist": {"description": "digits"}},
            "experiments": {
                "base": {
                    "command": "python train.py --lr {lr} --seed {seed}",
                    "params": {"lr": 0.1, "name": "é\tx"},
                    "seeds": [0, 1, 2],
                    "datasets": ["mnist"],
                    "metrics": {
                        "acc": {
                            "source": {"regex": r"acc=([0-9.]+)\s"},
                            "target": 0.9,
                            "tolerance": 1e-05,
                        }
                    },
                    "tiers": {"smoke": {"timeout": "10m"}},
                },
                "other": {"command": "python other.py"},
            },
            "claims": [
                {"expr": "base.acc > other.acc"},
                {"expr": "base.acc > 0.5", "provenance": "Table 2"},
            ],
        }
    )
    derived = {
        "experiments.base.seeds": Derivation(
            sources=["train.py:10", "a much longer source that makes the array multiline"],
            digest="0123456789abcdef",
        ),
        "project.name": Derivation(sources=["setup.py:3"], digest="fedcba9876543210"),
    }
    return m.model_copy(update={"derived": derived})


def test_a_realistic_manifest_is_tomlkits_and_reads_back() -> None:
    from reprobridge.manifest.io import manifest_data

    m = _realistic()
    text = render_new_manifest(m, version="0.1.0")
    assert text == render_with_tomlkit(manifest_data(m), version="0.1.0")
    assert "[[claims]]" in text and "[experiments.base.metrics.acc]" in text
    assert parse_manifest_text(text, path="x") == m


def test_a_new_manifest_is_written_without_importing_tomlkit() -> None:
    # Issue 14: a first `rb init` needs no tomlkit (a re-run refreshes through it).
    probe = (
        "import sys\n"
        "from reprobridge.manifest.io import render_data\n"
        "text = render_data({'project': {'name': 'x'}}, version='0')\n"
        "print('tomlkit' in sys.modules, 'name = \"x\"' in text)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"], out.stdout + out.stderr
