"""Failure classification of a probe run (reprobridge.probe.observe.classify)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reprobridge.probe.observe import Observation, _tail, classify


def _failed(log: str, outcome: str = "failed") -> Observation:
    return Observation("train", outcome, "exit(1)", log, {})


@pytest.mark.parametrize(
    ("log", "kind", "subject"),
    [
        ("RuntimeError: Found no NVIDIA driver on your system.", "gpu-needed", ""),
        ("AssertionError: Torch not compiled with CUDA enabled", "gpu-needed", ""),
        (
            "python: can't open file '/tmp/x/repo/train.py': [Errno 2] No such file or directory",
            "entry-missing",
            "/tmp/x/repo/train.py",
        ),
        ("ModuleNotFoundError: No module named 'utils.data'", "module-missing", "utils.data"),
        ("main.py: error: unrecognized arguments: --data-seed 0", "flag-rejected", "--data-seed 0"),
        (
            "FileNotFoundError: [Errno 2] No such file or directory: 'data/cora/cora.content'",
            "file-missing",
            "data/cora/cora.content",
        ),
        ("OSError: data/voronoi.npz not found.", "file-missing", "data/voronoi.npz"),
        ("ValueError: bad shape", "crashed", ""),
    ],
)
def test_classify_names_the_failure_and_its_subject(log: str, kind: str, subject: str) -> None:
    failure = classify(_failed("Traceback (most recent call last):\n  ...\n" + log + "\n"))
    assert (failure.kind, failure.subject) == (kind, subject)
    assert failure.line == log


def test_the_gpu_sign_wins_over_a_file_error_printed_before() -> None:
    log = "FileNotFoundError: [Errno 2] No such file or directory: 'x'\nRuntimeError: Found no NVIDIA driver\n"
    assert classify(_failed(log)).kind == "gpu-needed"


def test_outcomes_without_a_log_sign() -> None:
    assert classify(Observation("e", "ok", "exit(0)", "", {"acc": 0.9})).kind == "ok"
    assert classify(Observation("e", "ok", "exit(0)", "", {})).kind == "no-metric"
    assert classify(Observation("e", "timeout", "timeout after 60s", "", {})).kind == "timeout"
    not_started = classify(
        Observation("e", "not-started", "hw-unavailable: needs 1 GPU(s)", "", {})
    )
    assert not_started.kind == "hardware-missing"
    env = classify(
        Observation(
            "e",
            "not-started",
            "uv sync failed",
            "",
            {},
            setup_log="x\n  Failed to build `pycosat`\n",
        )
    )
    assert (env.kind, env.line) == ("environment", "Failed to build `pycosat`")


def test_a_log_that_is_a_fifo_is_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "output.log"
    os.mkfifo(fifo)
    assert _tail(fifo) == ""  # returns at once: never blocks on a writer that never comes
