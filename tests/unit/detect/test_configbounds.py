"""Run bounds in a config file a command passes: exact positions, nesting, what is no bound."""

from __future__ import annotations

import pytest

from reprobridge.artifacts.derive import Edit, derive
from reprobridge.detect.procedure.configbounds import config_bounds

JSON = (
    '{\n  "num_reps": 10,\n  "train": {"epochs": 30, "eval_steps": 5, "lr": 1e-3,\n'
    '    "eval": {"steps": 7}, "note": "epochs: 99"},\n'
    '  "runs": [{"max_iters": 100}], "num_points": 500, "max_steps": 2.0\n}\n'
)
YAML = (
    "num_reps: 10\ntrain:\n  epochs: 30  # the run\n  eval:\n    steps: 100\n"
    '  max_steps: "50"\nruns:\n  - max_iters: 1000\nbase: &b {n_epochs: 7}\nother: *b\n'
)


@pytest.mark.parametrize(
    ("path", "text", "expected"),
    [
        (
            "c.json",
            JSON,
            [(2, 14, "10", "num_reps"), (3, 22, "30", "train.epochs"),
             (5, 25, "100", "runs.max_iters")],
        ),
        (
            "c.yaml",
            YAML,
            [(1, 10, "10", "num_reps"), (3, 10, "30", "train.epochs"),
             (8, 15, "1000", "runs.max_iters"), (9, 20, "7", "base.n_epochs")],
        ),
    ],
)  # fmt: skip
def test_bounds_and_their_positions(path: str, text: str, expected: list[object]) -> None:
    found = config_bounds(path, text)
    assert [(b.line, b.column, b.was, b.name) for b in found] == expected
    # Each position is where repro/derive.py finds the literal in the file.
    lowered, _ = derive(path, text, [Edit(None, b.line, b.column, 1, b.was) for b in found])
    assert lowered.count(": 1") >= len(found)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("c.json", '{"epochs": 30'),  # not JSON
        ("c.yaml", "epochs: [30"),  # not YAML
        ("c.toml", "epochs = 30"),  # another format
        ("c.json", '{"epochs": 0, "steps": -1, "eval": {"steps": 9}}'),
        ("c.yaml", "epochs: !!str 30\nwarmup_steps: 100\n"),
    ],
)
def test_what_is_no_config_bound(path: str, text: str) -> None:
    assert config_bounds(path, text) == []


def test_rb_init_imports_yaml_only_for_yaml() -> None:
    # Issue 14: pyyaml's import was ~20 ms of a small repository's `rb init`, paid through
    # the bounds detector even where no command names a YAML config.
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "import reprobridge.initializer\n"
        "from reprobridge.detect.registry import detectors\n"
        "detectors()\n"
        "print('YAML', 'yaml' in sys.modules)\n"
        "from reprobridge.detect.procedure.configbounds import config_bounds\n"
        "print('BOUNDS', [b.value for b in config_bounds('c.yaml', 'epochs: 30\\n')])\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "YAML False" in out.stdout, out.stdout
    assert "BOUNDS [30]" in out.stdout, out.stdout
