"""A GPU run finds the host driver's libraries: a fake driver (a ``libcuda.so.1`` that
``ldconfig -p`` lists, as on a Debian host with the NVIDIA driver) and one fake GPU (NVML),
audited end to end in real bubblewrap."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakenvml import FakeNvml

from reprobridge import sandbox
from reprobridge.audit import auditor
from reprobridge.audit import fingerprint as fp
from reprobridge.audit.auditor import AuditOptions, run_audit

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


def test_gpu_run_finds_the_driver_first_on_ld_library_path(tiny_repo, fake_driver: Path) -> None:
    script = (
        'echo "ldpath=$LD_LIBRARY_PATH"\n'
        'first="${LD_LIBRARY_PATH%%:*}"\n'
        'echo "seen=$(cat "$first/libcuda.so.1")"\n'
        "echo acc=0.9\n"
    )
    root = tiny_repo(script, timeout="1h")
    manifest = root / "reprobridge.toml"
    manifest.write_text(
        manifest.read_text().replace('timeout = "1h"', 'timeout = "1h"\nhardware = {gpus = 1}', 1)
    )
    import subprocess

    subprocess.run(["git", "-C", str(root), "commit", "-qam", "gpu"], check=True)
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
