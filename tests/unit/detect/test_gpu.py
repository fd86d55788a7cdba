"""GPU evidence: comments and docstrings are not code; a CPU fallback is not a need."""

from __future__ import annotations

from pathlib import Path

import pytest

from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.procedure.gpu import _without_prose


def test_without_prose_blanks_docstrings_and_comments_keeping_lines() -> None:
    code = (
        '"""Use it:\n>>> m.to("cuda")\n"""\n'
        "import torch  # torch.device('cuda') on a GPU\n"
        "def f():\n    '''device=\"cuda\" works too'''\n    return torch.ones(1).cuda()\n"
    )
    out = _without_prose(code)
    assert out.count("\n") == code.count("\n")
    assert "cuda" not in out.replace(".cuda()", "")
    assert out.splitlines()[6].strip() == "return torch.ones(1).cuda()"


def test_without_prose_keeps_strings_that_are_arguments() -> None:
    code = 'x = torch.ones(1, device="cuda")\nf(\n    "cuda:0",\n)\n'
    assert _without_prose(code) == code


def test_without_prose_untokenizable_drops_comment_lines_only() -> None:
    code = "# .cuda()\n!nvidia-smi '\nmodel.cuda()\n"
    assert _without_prose(code) == " " * 9 + "\n!nvidia-smi '\nmodel.cuda()\n"


@pytest.mark.parametrize(
    ("body", "gpus"),
    [
        (
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "x = torch.ones(1).to(device)\n",
            0,
        ),
        ("device = 'cuda' if torch.cuda.is_available() else 'cpu'\n", 0),
        ('device = torch.device("cuda:0") if args.use_gpu else torch.device("cpu")\n', 0),
        ('p.add_argument("--device", default="cpu")\nx = torch.ones(1).to(args.device)\n', 0),
        ('"""Pass device="cuda" on a GPU."""\nx = torch.ones(1)\n', 0),
        # NRI's utils.py: moved to the GPU only when the data already is there
        ("def noise(x, y):\n    if x.is_cuda:\n        y = y.cuda()\n    return y\n", 0),
        ("x = torch.ones(1).cuda()\n", 1),
        ('x = torch.ones(1, device="cuda")\n', 1),
    ],
)
def test_gpu_need_follows_unconditional_use(tmp_path: Path, body: str, gpus: int) -> None:
    (tmp_path / "train.py").write_text(
        "import argparse\nimport torch\np = argparse.ArgumentParser()\n"
        "p.add_argument('--epochs', type=int, default=1)\nargs = p.parse_args()\n"
        + body
        + "if __name__ == '__main__':\n    print(args.epochs)\n"
    )
    ctx = detect_repo(RepoIndex.from_directory(tmp_path))
    hardware = [f for f in ctx.findings if f.kind == "hardware" and f.key == "train.py"]
    assert [f.value.gpus for f in hardware] == ([1] if gpus else [])


def test_every_use_pattern_needs_the_word_cuda() -> None:
    """GpuDetector._use skips tokenizing a file without "cuda": sound only while every
    alternative of _USE_RE contains the word (a new one without it must drop the shortcut)."""
    import re as _re

    from reprobridge.detect.procedure import gpu

    alternatives = _re.split(r"\|(?![^(]*\))", gpu._USE_RE.pattern)
    assert len(alternatives) >= 5
    for alt in alternatives:
        assert "cuda" in alt, alt
    assert gpu.GpuDetector._use(None, "a.py", "x = 1\n") is None  # type: ignore[arg-type]
