"""The bubblewrap sandbox: argv shape, refused binds, and real isolation where bwrap works."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from pathlib import Path

import pytest
from procs import alive_with_arg, unique_sleep

from reprobridge import sandbox
from reprobridge._proc.monitored import MARKER_VAR, Completed, run_monitored
from reprobridge.errors import AuditError
from reprobridge.sandbox import GpuBinds, SandboxSpec, offline_env, sandbox_unusable, wrap

needs_bwrap = pytest.mark.skipif(sandbox.bwrap_path() is None, reason="/usr/bin/bwrap missing")
_REASON = sandbox_unusable() if sandbox.bwrap_path() else "no bwrap"
needs_sandbox = pytest.mark.skipif(_REASON is not None, reason=f"sandbox unusable: {_REASON}")

HOST_PATH = "/usr/bin:/bin"


def pairs(argv: list[str], flag: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == flag]


# -- argv -----------------------------------------------------------------------------------


def test_bwrap_path_is_absolute_and_never_from_path(tmp_path, monkeypatch):
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    assert sandbox.bwrap_path() in (None, "/usr/bin/bwrap")


@needs_bwrap
def test_wrap_shape(tmp_path):
    argv = wrap(["python", "train.py"], SandboxSpec(workdir=tmp_path, env={"A": "1", "B": "x y"}))
    assert argv[0] == "/usr/bin/bwrap"
    assert argv[-3:] == ["--", "python", "train.py"]
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in argv
    assert "--share-net" not in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert argv.index("--clearenv") < argv.index("--setenv")
    assert [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == "--setenv"] == [
        ("A", "1"),
        ("B", "x y"),
    ]
    ro = dict(pairs(argv, "--ro-bind"))
    assert ro["/usr"] == "/usr"
    assert "/etc" not in ro and "/etc/shadow" not in ro and "/etc/resolv.conf" not in ro
    if Path("/etc/passwd").exists():
        assert "/etc/passwd" in ro
    if Path("/nix/store").is_dir():
        assert "/nix/store" in ro and "/nix" not in ro  # never the daemon socket in /nix/var
    assert (str(tmp_path.resolve()), str(tmp_path.resolve())) in pairs(argv, "--bind")
    assert argv[argv.index("--chdir") + 1] == str(tmp_path.resolve())
    assert argv.index("--proc") < argv.index("--chdir")
    assert argv[argv.index("--tmpfs") + 1] == "/tmp"
    home = str(Path.home().resolve())
    for src, _ in pairs(argv, "--ro-bind") + pairs(argv, "--bind"):
        assert not src.startswith(home + "/.ssh") and src != home


@needs_bwrap
def test_network_shares_net_and_resolv_conf(tmp_path):
    argv = wrap(["true"], SandboxSpec(workdir=tmp_path, network=True))
    assert "--share-net" in argv
    if Path("/etc/resolv.conf").exists():
        assert "/etc/resolv.conf" in dict(pairs(argv, "--ro-bind"))


@needs_bwrap
def test_gpu_binds_devices_after_dev_and_libraries(tmp_path):
    lib = tmp_path / "libcuda.so.1"
    lib.write_bytes(b"")
    gpu = GpuBinds(devices=("/dev/nvidia0", "/dev/nvidiactl"), libraries=(str(lib),))
    argv = wrap(["nvidia-smi"], SandboxSpec(workdir=tmp_path, gpu=True), gpu=gpu)
    devs = pairs(argv, "--dev-bind")
    assert devs == [("/dev/nvidia0", "/dev/nvidia0"), ("/dev/nvidiactl", "/dev/nvidiactl")]
    first_dev_bind = argv.index("--dev-bind")
    assert argv.index("--dev") < first_dev_bind  # otherwise the fresh /dev hides them
    assert (str(lib), str(lib)) in pairs(argv, "--ro-bind")
    no_gpu = wrap(["true"], SandboxSpec(workdir=tmp_path), gpu=gpu)
    assert "--dev-bind" not in no_gpu


def test_gpu_binds_finds_the_driver_nodes_and_64_bit_libraries(tmp_path):
    """On a fixture /dev and ldconfig (so the test decides on a machine without a GPU):
    every nvidia node and capability, nothing else; the driver's 64-bit libraries that
    exist, never a 32-bit copy, another library or a listed file that is gone."""
    dev = tmp_path / "dev"
    (dev / "nvidia-caps").mkdir(parents=True)
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-caps/nvidia-cap1", "null", "sda"):
        (dev / name).write_bytes(b"")
    lib = tmp_path / "lib"
    (lib / "32").mkdir(parents=True)
    for name in ("libcuda.so.1", "32/libcuda.so.1", "libnvidia-ml.so.1", "libz.so.1"):
        (lib / name).write_bytes(b"")
    listing = [
        f"\tlibcuda.so.1 (libc6,x86-64) => {lib}/libcuda.so.1",
        f"\tlibcuda.so.1 (libc6) => {lib}/32/libcuda.so.1",
        f"\tlibnvidia-ml.so.1 (libc6,AArch64) => {lib}/libnvidia-ml.so.1",
        f"\tlibz.so.1 (libc6,x86-64) => {lib}/libz.so.1",
        f"\tlibnvidia-gone.so.1 (libc6,x86-64) => {lib}/libnvidia-gone.so.1",
    ]
    ldconfig = tmp_path / "ldconfig"
    ldconfig.write_text("#!/bin/sh\nprintf '%s\\n' " + " ".join(f"'{x}'" for x in listing) + "\n")
    ldconfig.chmod(0o755)
    found = sandbox.find_gpu_binds(dev, [str(tmp_path / "absent"), str(ldconfig)])
    assert found.devices == (
        *(str(dev / n) for n in ("nvidia-caps", "nvidia-uvm", "nvidia0", "nvidiactl")),
        str(dev / "nvidia-caps" / "nvidia-cap1"),
    )
    assert found.libraries == (f"{lib}/libcuda.so.1", f"{lib}/libnvidia-ml.so.1")
    assert sandbox.find_gpu_binds(tmp_path / "none", [str(tmp_path / "absent")]) == GpuBinds((), ())


def test_gpu_binds_on_this_machine_is_what_the_finder_finds():
    assert sandbox.gpu_binds() == sandbox.find_gpu_binds(Path("/dev"), sandbox.LDCONFIG)


@needs_bwrap
# ".config" is the parent of a secret (the signing key under .config/rb): binding it
# would expose the key as surely as binding .config/rb itself.
@pytest.mark.parametrize("rel", ["", ".ssh", ".config/rb", ".ssh/id_ed25519", ".config"])
def test_home_and_secrets_are_never_bound(tmp_path, rel):
    target = Path.home() / rel if rel else Path.home()
    with pytest.raises(AuditError, match="refusing"):
        wrap(["true"], SandboxSpec(workdir=tmp_path, ro_binds=(target,)))


@needs_bwrap
def test_root_and_home_parent_are_refused_as_workdir():
    with pytest.raises(AuditError, match="refusing"):
        wrap(["true"], SandboxSpec(workdir=Path("/")))


@needs_bwrap
def test_cwd_must_be_inside_a_bind(tmp_path):
    (tmp_path / "repo").mkdir()
    argv = wrap(["true"], SandboxSpec(workdir=tmp_path, cwd=tmp_path / "repo"))
    assert argv[argv.index("--chdir") + 1] == str((tmp_path / "repo").resolve())
    with pytest.raises(AuditError, match="not inside a bind"):
        wrap(["true"], SandboxSpec(workdir=tmp_path / "repo", cwd=tmp_path))


def test_offline_env(tmp_path):
    env = offline_env(tmp_path)
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        assert env[key] == "1"
    assert env["WANDB_MODE"] == "offline" and env["WANDB_DISABLED"] == "true"
    assert env["MLFLOW_TRACKING_URI"] == f"file:{tmp_path}/mlruns"
    assert offline_env()["MLFLOW_TRACKING_URI"] == "file:./mlruns"


# -- real runs ------------------------------------------------------------------------------


def sandboxed(tmp_path: Path, script: str, **kw) -> tuple[Completed, str, str]:
    marker = kw.pop("marker", None)
    network = kw.pop("network", False)
    env = {"PATH": HOST_PATH, "HOME": "/tmp"}
    if marker:
        env[MARKER_VAR] = marker
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    argv = wrap(["bash", "-c", script], SandboxSpec(workdir=work, env=env, network=network))
    host_env = {**env, "FAKE_TOKEN": kw.pop("secret", "none")}
    done = run_monitored(
        argv,
        cwd=work,
        env=host_env,
        stdout_path=tmp_path / "out",
        stderr_path=tmp_path / "err",
        timeout=kw.pop("timeout", 10),
        grace=kw.pop("grace", 0.5),
        marker=marker,
        **kw,
    )
    out = (tmp_path / "out").read_text("utf-8", "replace")
    err = (tmp_path / "err").read_text("utf-8", "replace")
    return done, out, err


@pytest.fixture
def listener():
    """A TCP listener on the host's 127.0.0.1 that accepts forever (in a thread)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield srv.getsockname()[1]
    stop.set()
    thread.join()
    srv.close()


@needs_sandbox
def test_no_network_inside(tmp_path, listener):
    probe = f"if echo x > /dev/tcp/127.0.0.1/{listener}; then echo CONNECTED; else echo BLOCKED; fi"
    done, out, _ = sandboxed(tmp_path, probe)
    assert done.termination.kind == "exit"
    assert "BLOCKED" in out and "CONNECTED" not in out
    # Positive control: the same probe reaches the listener with the network shared.
    _, out, _ = sandboxed(tmp_path, probe, network=True)
    assert "CONNECTED" in out


@needs_sandbox
def test_environment_is_cleared_and_system_is_read_only(tmp_path):
    secret = uuid.uuid4().hex
    script = (
        "env; touch /usr/rb-sandbox-probe && echo USR-WRITABLE; "
        "echo data > result.txt && echo WORK-WRITABLE; "
        f"test -e {Path.home()}/.ssh && echo HOME-SSH-VISIBLE; "
        "test -e /etc/shadow && echo SHADOW-VISIBLE; "
        "test -e /nix/var/nix/daemon-socket && echo DAEMON-VISIBLE; "
        "true"
    )
    done, out, err = sandboxed(tmp_path, script, secret=secret)
    assert done.termination.kind == "exit"
    assert secret not in out and "FAKE_TOKEN" not in out
    assert "USR-WRITABLE" not in out and "Read-only file system" in err
    assert not Path("/usr/rb-sandbox-probe").exists()
    assert "WORK-WRITABLE" in out
    assert (tmp_path / "work" / "result.txt").read_text() == "data\n"
    for leak in ("HOME-SSH-VISIBLE", "SHADOW-VISIBLE", "DAEMON-VISIBLE"):
        assert leak not in out


@needs_sandbox
def test_pid_namespace_kills_a_setsid_daemon_without_any_marker(tmp_path):
    arg = unique_sleep()
    done, _, _ = sandboxed(tmp_path, f"(setsid sleep {arg} &); sleep 0.2; exit 0")
    assert done.termination.kind == "exit"
    assert done.survivors_killed == 0  # not the sweep: bwrap's PID namespace took it down
    assert alive_with_arg(arg) == []


@needs_sandbox
def test_timeout_reaches_the_payload_behind_bwrap(tmp_path):
    script = "trap 'echo got TERM; exit 7' TERM; echo start; while :; do sleep 0.05; done"
    marker = uuid.uuid4().hex
    done, out, _ = sandboxed(
        tmp_path, script, marker=marker, timeout=0.5, grace=3, term_group=False
    )
    assert done.termination.kind == "timeout"
    assert done.termination.returncode == 7  # bwrap passes the payload's exit through
    assert "got TERM" in out
    assert done.wall_s < 3


@needs_sandbox
def test_sigkill_inside_is_killed_possible_oom(tmp_path):
    done, _, _ = sandboxed(tmp_path, "kill -9 $$")
    assert done.termination.kind == "killed" and done.termination.returncode == 137


@needs_sandbox
def test_sandbox_probe_is_cached():
    assert sandbox_unusable() is None
    assert sandbox.sandbox_unusable.cache_info().hits >= 1


def test_unusable_reasons(tmp_path, monkeypatch):
    probe = sandbox.sandbox_unusable.__wrapped__  # the uncached probe
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
    assert "not found" in probe()
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: str(fake))
    reason = probe()
    assert reason is not None and "No permissions to create new namespace" in reason
