"""A GPU run finds the host driver's libraries: a fake driver (a ``libcuda.so.1`` that
``ldconfig -p`` lists, as on a Debian host with the NVIDIA driver) and one fake GPU (NVML),
audited end to end in real bubblewrap."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakenvml import FakeNvml

from reprobridge import sandbox
from reprobridge.audit import auditor
from reprobridge.audit import fingerprint as fp
from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.verify import verify_audit
from reprobridge.errors import VERDICT_EXIT, MachineError

pytestmark = pytest.mark.skipif(
    sandbox.sandbox_unusable() is not None, reason=str(sandbox.sandbox_unusable())
)

GPU = ("Fake A100", 80 * 10**9, (8, 0), "GPU-00000000-0000-0000-0000-000000000000")


@pytest.fixture
def fake_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A driver directory holding ``libcuda.so.1``, listed by a stand-in ``ldconfig`` where
    :func:`sandbox.gpu_binds` looks, and one GPU as NVML reports it."""
    driver = tmp_path / "driver"
    driver.mkdir()
    (driver / "libcuda.so.1").write_text("fake driver 550.54.15\n")
    (driver / "libnvidia-ml.so.1").write_text("fake nvml\n")
    ldconfig = tmp_path / "ldconfig"
    ldconfig.write_text(
        "#!/bin/sh\necho '3 libs found in cache'\n"
        f"printf '\\tlibcuda.so.1 (libc6,x86-64) => {driver}/libcuda.so.1\\n'\n"
        f"printf '\\tlibcuda.so.1 (libc6) => {driver}/libcuda.so.1\\n'\n"
        f"printf '\\tlibnvidia-ml.so.1 (libc6,x86-64) => {driver}/libnvidia-ml.so.1\\n'\n"
    )
    ldconfig.chmod(0o755)
    monkeypatch.setattr(sandbox, "LDCONFIG", (str(ldconfig),))
    sandbox.gpu_binds.cache_clear()

    def prints(root: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        return fp.host_fingerprint(), fp.gpu_fingerprint(FakeNvml([GPU])), fp.git_fingerprint(root)

    monkeypatch.setattr(auditor, "_machine_fingerprints", prints)
    yield driver
    sandbox.gpu_binds.cache_clear()


def _gpu_repo(tiny_repo, script: str, *, gpus: int = 1, cuda: str | None = None) -> Path:
    """A tiny repository whose experiment asks for ``gpus`` GPUs, pinning CUDA ``cuda``."""
    root: Path = tiny_repo(script, timeout="1h")
    manifest = root / "reprobridge.toml"
    text = manifest.read_text()
    text = text.replace('timeout = "1h"', f'timeout = "1h"\nhardware = {{gpus = {gpus}}}', 1)
    if cuda is not None:
        text = text.replace("[environment]\n", f'[environment]\ncuda = "{cuda}"\n', 1)
    manifest.write_text(text)
    subprocess.run(["git", "-C", str(root), "commit", "-qam", "gpu"], check=True)
    return root


def test_gpu_run_finds_the_driver_first_on_ld_library_path(tiny_repo, fake_driver: Path) -> None:
    script = (
        'echo "ldpath=$LD_LIBRARY_PATH"\n'
        'first="${LD_LIBRARY_PATH%%:*}"\n'
        'echo "seen=$(cat "$first/libcuda.so.1")"\n'
        "echo acc=0.9\n"
    )
    root = _gpu_repo(tiny_repo, script)
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    run = result.path / "runs/main/0"
    out = (run / "stdout.log").read_text()
    assert f"ldpath={sandbox.DRIVER_LIB_DIR}" in out, out
    assert "seen=fake driver 550.54.15" in out, out
    env = json.loads((run / "env.json").read_text())
    assert env["LD_LIBRARY_PATH"].split(":")[0] == sandbox.DRIVER_LIB_DIR
    assert result.passed, json.dumps(result.summary["experiments"]["main"], indent=1)


def test_cpu_run_gets_no_driver_directory(tiny_repo, fake_driver: Path) -> None:
    root = tiny_repo('echo "ldpath=${LD_LIBRARY_PATH-unset}"\necho acc=0.9\n')
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    assert "ldpath=unset" in (result.path / "runs/main/0/stdout.log").read_text()


def test_driver_library_path_puts_the_driver_first_once() -> None:
    env = {"LD_LIBRARY_PATH": f"/nix/store/x-zlib/lib:{sandbox.DRIVER_LIB_DIR}"}
    path = sandbox.driver_library_path(env).split(":")
    assert path[0] == sandbox.DRIVER_LIB_DIR
    assert path.count(sandbox.DRIVER_LIB_DIR) == 1 and "/nix/store/x-zlib/lib" in path


def test_a_cuda_pin_newer_than_the_driver_is_a_machine_problem(
    tiny_repo, fake_driver: Path
) -> None:
    """The fake driver supports CUDA 12.4 (NVML): a GPU experiment pinned to 12.8 cannot run
    here, which says nothing about the repository: NOT JUDGED (exit 11), never FAIL."""
    root = _gpu_repo(tiny_repo, "echo acc=0.9\n", cuda="12.8")
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    procedure = result.summary["experiments"]["main"]["procedure"]
    assert result.verdict == "NOT JUDGED", result.summary
    assert procedure["status"] == "not-judged"
    assert re.search(r"supports CUDA up to 12\.4, but .*\.cuda = \"12\.8\"", procedure["reason"])
    assert VERDICT_EXIT[result.verdict] == MachineError.exit_code == 11
    assert verify_audit(result.path).verdict == "NOT JUDGED"


@pytest.mark.parametrize(("cuda", "gpus"), [("12.1", 1), ("12.8", 0)])
def test_an_older_pin_or_a_cpu_experiment_is_not_refused(
    tiny_repo, fake_driver: Path, cuda: str, gpus: int
) -> None:
    root = _gpu_repo(tiny_repo, "echo acc=0.9\n", cuda=cuda, gpus=gpus)
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    assert result.summary["experiments"]["main"]["procedure"]["status"] == "pass"


def test_cuda_driver_problem_reads_the_fingerprint() -> None:
    gpu = {"driver_version": "550.54.15", "cuda_driver_version": "12.4"}
    assert fp.cuda_driver_problem("12.4", gpu) is None
    assert fp.cuda_driver_problem(None, gpu) is None
    assert fp.cuda_driver_problem("12.6", {"cuda_driver_version": None}) is None
    assert "550.54.15 supports CUDA up to 12.4" in str(fp.cuda_driver_problem("12.10", gpu))
