"""Output copies into a bundle have an operator's size cap and never copy a sparse file
densely: a run's ``truncate -s 2G`` file was written into the bundle as 2 GB of zeros.

Real files throughout: ``truncate`` for the sparse one, real bytes for the large one, and
real audits for the record, the outputs entry and the verdict."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from rbcli import rb

from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.collect import collect_files

_MB = 1 << 20


def _sparse(path: Path, size: str = "2G") -> None:
    subprocess.run(["truncate", "-s", size, str(path)], check=True)
    st = path.stat()
    if st.st_blocks * 512 >= st.st_size // 2:
        pytest.skip("this filesystem does not keep truncated files sparse")


def test_a_sparse_file_is_refused_never_copied_densely(tmp_path: Path) -> None:
    ws, dest = tmp_path / "ws", tmp_path / "dest"
    ws.mkdir()
    dest.mkdir()
    _sparse(ws / "big.bin")
    (ws / "small.txt").write_text("kept\n")
    refused = collect_files(ws, ".", ["big.bin", "small.txt"], dest)
    assert refused["big.bin"].startswith("refused: big.bin is a sparse file (2048.0 MB long")
    assert not (dest / "big.bin").exists()
    assert (dest / "small.txt").read_text() == "kept\n"


def test_copies_past_the_cap_are_refused_and_what_fits_is_kept(tmp_path: Path) -> None:
    ws, dest = tmp_path / "ws", tmp_path / "dest"
    (ws / "plots").mkdir(parents=True)
    (ws / "a.bin").write_bytes(os.urandom(3 * _MB // 2))  # 1.5 MB: fits in 2 MB
    (ws / "b.bin").write_bytes(os.urandom(1 * _MB))  # fits no more: 0.5 MB left
    (ws / "c.txt").write_text("small\n")  # still fits
    (ws / "plots" / "p.png").write_bytes(os.urandom(_MB))  # a directory over the cap
    dest.mkdir()
    refused = collect_files(ws, ".", ["a.bin", "b.bin", "c.txt", "plots"], dest, max_bytes=2 * _MB)
    assert set(refused) == {"b.bin", "plots"}, refused
    assert refused["b.bin"] == (
        "refused: b.bin is too large (1.0 MB; a run's copied outputs may total 2 MB: max_output_mb)"
    )
    # A directory with a file left out for its size is refused as a whole, not "partly".
    assert refused["plots"].startswith("refused: plots/p.png is too large"), refused
    assert not (dest / "b.bin").exists() and not (dest / "plots" / "p.png").exists()
    assert (dest / "a.bin").stat().st_size == 3 * _MB // 2
    assert (dest / "c.txt").read_text() == "small\n"


def _repo(tiny_repo: Callable[..., Path], script: str, outputs: str) -> Path:
    root: Path = tiny_repo(script, name="cap")
    manifest = root / "reprobridge.toml"
    text = manifest.read_text().replace(
        "[experiments.main.metrics.acc]", f"outputs = [{outputs}]\n[experiments.main.metrics.acc]"
    )
    manifest.write_text(text)
    subprocess.run(["git", "-C", str(root), "commit", "-qam", "outputs"], check=True)
    return root


def test_an_audit_records_a_sparse_or_too_large_output_and_never_passes(
    tiny_repo: Callable[..., Path], tmp_path: Path
) -> None:
    _sparse(tmp_path / "probe")  # run workspaces are made under TMPDIR too
    script = (
        "truncate -s 2G sparse.bin\n"
        "head -c 3145728 /dev/urandom > large.bin\n"  # 3 MB, over a 2 MB cap
        "echo acc=0.9\n"
    )
    root = _repo(tiny_repo, script, '{path = "sparse.bin"}, {path = "large.bin"}')
    result = run_audit(root, AuditOptions(runs=1, backend="host", max_output_mb=2))
    run_dir = result.path / "runs" / "main" / "0"
    assert not (run_dir / "files" / "sparse.bin").exists()
    assert not (run_dir / "files" / "large.bin").exists()
    refused = json.loads((run_dir / "status.json").read_text())["record"]["files_refused"]
    assert "sparse.bin is a sparse file (2048.0 MB long" in refused["sparse.bin"], refused
    assert "large.bin is too large (3.0 MB" in refused["large.bin"]
    outputs = json.loads((run_dir / "metrics.json").read_text())["outputs"]
    assert outputs["sparse.bin"]["ok"] is False
    assert outputs["sparse.bin"]["reason"] == refused["sparse.bin"]
    assert outputs["large.bin"]["ok"] is False and "too large" in outputs["large.bin"]["reason"]
    assert result.verdict != "PASS"
    procedure = result.summary["experiments"]["main"]["procedure"]
    assert procedure["status"] == "fail" and "too large" in procedure["reason"], procedure


def test_the_cap_is_the_operators_flag_variable_or_config(
    tiny_repo: Callable[..., Path], tmp_path: Path
) -> None:
    """``--max-output-mb`` > ``RB_MAX_OUTPUT_MB`` > ``max_output_mb`` in the user config."""
    root = _repo(
        tiny_repo, "head -c 2097152 /dev/urandom > out.bin\necho acc=0.9\n", '{path = "out.bin"}'
    )
    config = tmp_path / "xdg"
    (config / "rb").mkdir(parents=True)
    (config / "rb" / "config.toml").write_text("max_output_mb = 1\n")
    env = {"XDG_CONFIG_HOME": str(config)}

    def refused(*flags: str, **more: str) -> dict[str, str]:
        out = rb(
            "audit",
            "--runs",
            "1",
            "--backend",
            "host",
            "--json",
            *flags,
            "-C",
            str(root),
            env={**env, **more},
        )
        path = Path(json.loads(out.stdout)["path"])
        status = json.loads((path / "runs" / "main" / "0" / "status.json").read_text())
        return status["record"].get("files_refused") or {}

    assert "out.bin" in refused()  # the config's 1 MB
    assert refused(RB_MAX_OUTPUT_MB="3") == {}  # the variable over the config
    assert "out.bin" in refused("--max-output-mb", "1", RB_MAX_OUTPUT_MB="3")  # the flag wins


@pytest.mark.parametrize(
    ("flags", "env", "named"),
    [
        (("--max-output-mb", "0"), {}, "--max-output-mb"),
        (("--max-output-mb", "lots"), {}, "--max-output-mb"),
        ((), {"RB_MAX_OUTPUT_MB": "1.5"}, "RB_MAX_OUTPUT_MB"),
    ],
)
def test_a_bad_cap_is_one_line_naming_its_source(
    tmp_path: Path, flags: tuple[str, ...], env: dict[str, str], named: str
) -> None:
    out = rb("audit", "--runs", "1", *flags, "-C", str(tmp_path), env=env)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith(f"error: {named}: expected a whole number of MB"), out.stderr
