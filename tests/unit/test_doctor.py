"""rb doctor: probes against fake runners and a fake NVML; one structural check of this machine."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pynvml
import pytest
from click.testing import CliRunner
from fakenvml import FakeNvml as BaseFakeNvml

from reprobridge import _proc, doctor
from reprobridge.errors import CommandFailed, MachineError

NIX28_CONFIG = b"experimental-features = nix-command\nsandbox = false\nstore = auto\n"


def result(argv: Sequence[str], rc: int = 0, out: bytes = b"", err: bytes = b"") -> _proc.Result:
    return _proc.Result(tuple(argv), rc, out, err)


class FakeRunner:
    """Answers known argv with canned results; unknown programs are 'not installed'."""

    def __init__(self, answers: dict[tuple[str, ...], tuple[int, bytes, bytes] | Exception]):
        self.answers = answers
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], *, timeout: float) -> _proc.Result:
        key = tuple(argv)
        self.calls.append(key)
        answer = self.answers.get(key)
        if answer is None:
            raise MachineError(f"{argv[0]} is not installed or not on PATH")
        if isinstance(answer, Exception):
            raise answer
        rc, out, err = answer
        return result(argv, rc, out, err)


NC = ("nix", "--extra-experimental-features", "nix-command")
FLAKE_EVAL = ("nix", "--extra-experimental-features", "nix-command flakes", "eval", "--expr")


def debian_machine() -> dict[tuple[str, ...], tuple[int, bytes, bytes] | Exception]:
    """Debian 12 as on our dev machines: nix 2.8, flakes off in nix.conf, bwrap works."""
    return {
        ("nix", "--version"): (0, b"nix (Nix) 2.8.0\n", b""),
        (*NC, "show-config"): (0, NIX28_CONFIG, b""),
        (*FLAKE_EVAL, "builtins ? getFlake"): (0, b"true\n", b""),
        (*NC, "store", "ping"): (0, b"", b"Store URL: local\nVersion: 2.8.0\n"),
        (doctor.BWRAP, "--ro-bind", "/", "/", "true"): (0, b"", b""),
        ("/usr/bin/uv", "--version"): (0, b"uv 0.4.30\n", b""),
        ("git", "--version"): (0, b"git version 2.39.5\n", b""),
    }


class FakeNvml(BaseFakeNvml):
    """Names as bytes, as older nvidia-ml-py returns them."""

    def nvmlDeviceGetName(self, handle):
        return super().nvmlDeviceGetName(handle).encode()


H100 = ("NVIDIA H100 80GB HBM3", 80 * 2**30, (9, 0), "GPU-0000-aaaa")
A10 = ("NVIDIA A10G", 24 * 2**30, (8, 6), "GPU-1111-bbbb")


def probes(
    tmp_path: Path, answers=None, *, which=None, nvml=None, free=50 * 10**9, bwrap=True, uid=0
):
    on_path = {"nix": "/usr/bin/nix", "uv": "/usr/bin/uv", "git": "/usr/bin/git"}
    if which is not None:
        on_path = which
    return doctor.Probes(
        run=FakeRunner(debian_machine() if answers is None else answers),
        which=on_path.get,
        is_executable=lambda path: bwrap and path == doctor.BWRAP,
        nvml=nvml if nvml is not None else FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound()),
        disk_usage=lambda path: SimpleNamespace(total=500 * 10**9, used=0, free=free),
        cwd=tmp_path,
        python_version=(3, 11, 7),
        python_executable="/usr/bin/python3",
        uv_package=lambda: None,
        driver_libraries=lambda: (),
        opengl_driver=tmp_path / "no-opengl-driver",
        uid=uid,
        environ={},
    )


def by_name(checks: list[doctor.Check]) -> dict[str, doctor.Check]:
    return {c.name: c for c in checks}


def test_debian_machine_reports_old_nix_and_no_gpu(tmp_path):
    checks = by_name(doctor.run_checks(probes(tmp_path)))
    assert checks["nix"].status == "warn"
    assert "2.8.0" in checks["nix"].detail and "2.18" in checks["nix"].detail
    assert "nix-trixie-install.sh" in (checks["nix"].fix or "")
    assert checks["flakes"].status == "warn" and checks["flakes"].facts["supported"] is True
    assert checks["nix-store"].detail.startswith("local")
    assert checks["nix-sandbox"].status == "warn"
    assert checks["bubblewrap"].status == "ok"
    assert checks["uv"].facts["version"] == "0.4.30"
    assert checks["git"].detail == "2.39.5"
    assert checks["nvidia"].status == "missing"
    assert checks["nvidia"].detail == "no NVIDIA driver (CPU only)"
    assert checks["disk"].status == "ok"
    assert doctor.missing_required(list(checks.values())) == []


def test_every_row_that_is_not_ok_has_a_fix(tmp_path):
    p = probes(tmp_path, answers={}, which={}, free=10**9, bwrap=False)
    checks = doctor.run_checks(p)
    assert {c.status for c in checks} >= {"missing", "warn"}
    for check in checks:
        if check.status != "ok":
            assert check.fix, check


def test_nothing_installed_strict_names_nix_and_git(tmp_path):
    checks = doctor.run_checks(probes(tmp_path, answers={}, which={}))
    assert [c.name for c in doctor.missing_required(checks)] == ["nix", "git"]
    rows = by_name(checks)
    assert rows["uv"].status == "missing"
    assert rows["flakes"].status == "missing"


def test_current_nix_with_flakes_and_daemon(tmp_path):
    answers = debian_machine()
    answers[("nix", "--version")] = (0, b"nix (Determinate Nix 3.6.2) 2.29.0\n", b"")
    answers[(*NC, "config", "show")] = (
        0,
        b"experimental-features = flakes nix-command\nsandbox = true\n",
        b"",
    )
    answers[(*NC, "store", "info")] = (0, b"Store URL: daemon\nVersion: 2.29.0\n", b"")
    checks = by_name(doctor.run_checks(probes(tmp_path, answers)))
    assert checks["nix"].status == "ok" and checks["nix"].facts["version"] == "2.29.0"
    assert checks["flakes"].status == "ok"
    assert checks["nix-store"].detail == "daemon (reached through the daemon)"
    assert checks["nix-sandbox"].status == "ok"


def test_nix_timeout_and_unreachable_store_do_not_raise(tmp_path):
    answers = debian_machine()
    answers[(*NC, "show-config")] = CommandFailed("`nix show-config` did not finish within 20s")
    answers[(*FLAKE_EVAL, "builtins ? getFlake")] = (1, b"", b"error: unknown feature 'flakes'\n")
    answers[(*NC, "store", "ping")] = (1, b"", b"error: cannot connect to daemon\n")
    checks = by_name(doctor.run_checks(probes(tmp_path, answers)))
    assert checks["flakes"].status == "missing"
    assert "unknown feature" in checks["flakes"].detail
    assert checks["nix-store"].status == "missing"
    assert "cannot connect" in checks["nix-store"].detail
    # The nix backend refuses to build where it cannot tell whether Nix sandboxes builds.
    assert (
        checks["nix-sandbox"].status == "missing"
        and "did not finish" in checks["nix-sandbox"].detail
    )


def test_bwrap_without_user_namespaces_warns(tmp_path):
    answers = debian_machine()
    answers[(doctor.BWRAP, "--ro-bind", "/", "/", "true")] = (
        1,
        b"",
        b"bwrap: No permissions to creating new namespace\n",
    )
    check = by_name(doctor.run_checks(probes(tmp_path, answers)))["bubblewrap"]
    assert check.status == "warn" and "namespace" in check.detail
    assert "userns" in (check.fix or "")


def test_debian_python_3_11_2_runs_rb_and_says_why(tmp_path):
    """Debian 12's own Python: ok (rb extracts tars without tarfile's filters), and the
    row says tarfile has none."""
    p = dataclasses.replace(probes(tmp_path), python_version=(3, 11, 2), tar_filters=False)
    check = by_name(doctor.run_checks(p))["python"]
    assert check.status == "ok" and check.detail.startswith("3.11.2 (/usr/bin/python3)")
    assert "no tarfile filters" in check.detail and check.facts["minimum"] == "3.11"


def test_python_below_the_minimum_is_missing_and_strict_fails(tmp_path):
    p = dataclasses.replace(probes(tmp_path), python_version=(3, 10, 12))
    checks = doctor.run_checks(p)
    check = by_name(checks)["python"]
    assert check.status == "missing" and "needs Python 3.11 or newer" in check.detail
    assert check in doctor.missing_required(checks)


def test_uv_of_the_uv_package_first(tmp_path):
    """The uv rb runs: its `uv` package's binary over an older one on PATH."""
    answers = debian_machine()
    answers[("/venv/bin/uv", "--version")] = (0, b"uv 0.13.9 (abc)\n", b"")
    p = dataclasses.replace(probes(tmp_path, answers), uv_package=lambda: "/venv/bin/uv")
    check = by_name(doctor.run_checks(p))["uv"]
    assert check.status == "ok" and "/venv/bin/uv" in check.detail
    assert check.facts["version"] == "0.13.9"


def test_low_disk_warns(tmp_path):
    check = by_name(doctor.run_checks(probes(tmp_path, free=3 * 10**9)))["disk"]
    assert check.status == "warn" and "under 10 GB" in check.detail


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("nix (Nix) 2.8.0", (2, 8, 0)),
        ("nix (Determinate Nix 3.6.2) 2.29.0", (2, 29, 0)),
        ("nix (Lix, like Nix) 2.91.1", (2, 91, 1)),
        ("git version 2.39.5", (2, 39, 5)),
        ("uv 0.4", (0, 4)),
        ("nothing here", None),
    ],
)
def test_parse_version(text, version):
    assert doctor.parse_version(text) == version


# -- NVML -----------------------------------------------------------------------------------


def test_gpus_present(tmp_path):
    nvml = FakeNvml([H100, A10])
    checks = by_name(doctor.check_gpus(probes(tmp_path, nvml=nvml)))
    driver = checks["nvidia"]
    assert driver.status == "ok"
    assert driver.facts["driver_version"] == "550.54.15"
    assert driver.facts["cuda_driver_version"] == "12.4"
    assert [g["name"] for g in driver.facts["gpus"]] == [H100[0], A10[0]]
    assert checks["gpu0"].detail == "NVIDIA H100 80GB HBM3, 80.0 GiB, sm_90, GPU-0000-aaaa"
    assert checks["gpu1"].facts["compute_capability"] == "8.6"
    assert nvml.shut_down


@pytest.mark.parametrize(
    "error",
    [pynvml.NVMLError_LibraryNotFound(), pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)],
)
def test_no_driver_is_missing_not_a_crash(tmp_path, error):
    [check] = doctor.check_gpus(probes(tmp_path, nvml=FakeNvml(init_error=error)))
    assert check.status == "missing"
    assert check.detail == "no NVIDIA driver (CPU only)"
    assert check.fix


def test_nvml_raising_mid_query_keeps_what_was_read(tmp_path):
    nvml = FakeNvml([H100, A10, A10], fail_on_gpu=1)
    checks = doctor.check_gpus(probes(tmp_path, nvml=nvml))
    assert [c.name for c in checks] == ["nvidia", "gpu0"]
    assert checks[0].status == "warn" and "after 1 GPU(s)" in checks[0].detail
    assert checks[0].fix
    assert nvml.shut_down


def test_driver_without_gpus_warns(tmp_path):
    [check] = doctor.check_gpus(probes(tmp_path, nvml=FakeNvml([])))
    assert check.status == "warn" and "0 GPU(s)" in check.detail


def test_other_nvml_init_error_is_missing(tmp_path):
    nvml = FakeNvml(init_error=pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN))
    [check] = doctor.check_gpus(probes(tmp_path, nvml=nvml))
    assert check.status == "missing" and "NVML failed to start" in check.facts["reason"]


# -- this machine, structure only ----------------------------------------------------------------


def test_real_machine_structure():
    checks = doctor.run_checks()
    names = [c.name for c in checks]
    for required in ("python", "nix", "bubblewrap", "uv", "git", "nvidia", "disk"):
        assert required in names
    for check in checks:
        assert check.status in ("ok", "warn", "missing")
        assert check.detail
        assert check.status == "ok" or check.fix
        json.dumps(check.to_json())


# -- CLI --------------------------------------------------------------------------------------


def _fake_run_checks(monkeypatch, checks):
    monkeypatch.setattr(doctor, "run_checks", lambda probes=None: checks)


ROWS = [
    doctor.Check("nix", "missing", "nix is not on PATH", "install nix"),
    doctor.Check("git", "ok", "2.39.5", None, {"version": "2.39.5"}),
    doctor.Check("nvidia", "missing", "no NVIDIA driver (CPU only)", "install a driver"),
]


def test_cli_json(monkeypatch):
    from reprobridge.cli import cli

    _fake_run_checks(monkeypatch, ROWS)
    out = CliRunner().invoke(cli, ["doctor", "--json"])
    assert out.exit_code == 0, out.output
    payload = json.loads(out.output)
    assert [c["name"] for c in payload["checks"]] == ["nix", "git", "nvidia"]
    assert payload["checks"][1]["facts"] == {"version": "2.39.5"}
    assert payload["missing_required"] == ["nix"]


def test_cli_table_lists_fixes_and_exits_zero(monkeypatch):
    from reprobridge.cli import cli

    _fake_run_checks(monkeypatch, ROWS)
    out = CliRunner().invoke(cli, ["doctor"])
    assert out.exit_code == 0
    assert "To fix:" in out.output and "install nix" in out.output
    assert "--  nvidia  no NVIDIA driver (CPU only)" in out.output


def test_cli_strict_exits_11_when_nix_missing(monkeypatch, capsys):
    from reprobridge.cli import main

    _fake_run_checks(monkeypatch, ROWS)
    with pytest.raises(SystemExit) as exc:
        main(["doctor", "--strict"])
    assert exc.value.code == 11
    assert "this machine cannot audit as it is: nix" in capsys.readouterr().err


def test_cli_strict_exits_zero_when_required_present(monkeypatch):
    from reprobridge.cli import main

    _fake_run_checks(monkeypatch, ROWS[1:])
    with pytest.raises(SystemExit) as exc:
        main(["doctor", "--strict"])
    assert exc.value.code == 0


def _slurm_probes(
    answers: dict[tuple[str, ...], tuple[int, bytes, bytes] | Exception], *, on_path: bool
) -> doctor.Probes:
    return doctor.Probes(
        run=FakeRunner(answers),
        which=lambda name: f"/usr/bin/{name}" if on_path else None,
        uv_package=lambda: None,
    )


def test_slurm_missing_is_a_warning_with_a_fix() -> None:
    check = doctor.check_slurm(_slurm_probes({}, on_path=False))
    assert check.status == "warn" and check.fix and check.facts == {"available": False}


def test_slurm_partitions_and_gpus_from_sinfo() -> None:
    out = b"debug* up 1 (null)\ngpu up 4 gpu:a100:8\n"
    check = doctor.check_slurm(
        _slurm_probes({("sinfo", "-h", "-o", "%P %a %D %G"): (0, out, b"")}, on_path=True)
    )
    assert check.status == "ok"
    assert [p["name"] for p in check.facts["partitions"]] == ["debug*", "gpu"]
    assert "GPUs configured in: gpu" in check.detail


def test_slurm_unreachable_controller_is_a_warning() -> None:
    answers = {
        ("sinfo", "-h", "-o", "%P %a %D %G"): (
            1,
            b"",
            b"slurm_load_partitions: Unable to contact slurm controller\n",
        )
    }
    check = doctor.check_slurm(_slurm_probes(answers, on_path=True))  # type: ignore[arg-type]
    assert check.status == "warn" and "Unable to contact" in check.detail


@pytest.mark.parametrize(
    ("version", "config", "flakes_eval"),
    [
        (b"nix (Nix) 2.8.0\n", (0, NIX28_CONFIG, b""), (0, b"true\n", b"")),
        (b"nix (Nix) 2.26.3\n", (0, NIX28_CONFIG, b""), (0, b"true\n", b"")),
        (b"nix (Nix) 2.26.3\n", (0, NIX28_CONFIG, b""), (1, b"", b"error: no flakes\n")),
        (b"nix (Nix) 2.26.3\n", (0, b"experimental-features = nix-command flakes\n", b""), None),
        (b"garbage\n", (0, NIX28_CONFIG, b""), None),
    ],
)
def test_next_step_probes_only_what_the_suggestion_reads(tmp_path, version, config, flakes_eval):
    """`rb init`'s closing line asks nix only what it uses: the same suggestion as the full
    doctor rows, from one nix start with an old nix (it was four: store and sandbox too)."""
    answers = debian_machine()
    answers[("nix", "--version")] = (0, version, b"")
    answers[(*NC, "show-config")] = config
    answers[(*NC, "config", "show")] = config
    if flakes_eval is None:
        del answers[(*FLAKE_EVAL, "builtins ? getFlake")]
    else:
        answers[(*FLAKE_EVAL, "builtins ? getFlake")] = flakes_eval
    full = probes(tmp_path, answers)
    lean = probes(tmp_path, answers)
    expected = doctor.next_step_after_init("main", doctor.check_nix(full))
    assert doctor.next_step_after_init("main", doctor.nix_for_next_step(lean)) == expected
    calls = lean.run.calls  # type: ignore[attr-defined]
    assert not any("store" in call for call in calls)
    if b"2.8.0" in version or b"garbage" in version:
        assert calls == [("nix", "--version")]


def test_next_step_without_nix_runs_nothing(tmp_path):
    p = probes(tmp_path, answers={}, which={})
    rows = doctor.nix_for_next_step(p)
    assert "no nix here" in doctor.next_step_after_init("main", rows)
    assert p.run.calls == []  # type: ignore[attr-defined]


# -- the driver as a Nix-built program sees it ----------------------------------------------


def test_nix_driver_from_ldconfig_is_reported_with_what_rb_audit_does(tmp_path):
    lib = tmp_path / "driver" / "libcuda.so.1"
    lib.parent.mkdir()
    lib.write_text("fake")
    p = dataclasses.replace(probes(tmp_path), driver_libraries=lambda: (str(lib),))
    check = doctor.check_nix_driver(p)
    assert check.status == "warn" and check.fix and "nix-gl-host" in check.fix
    assert "/run/rb-driver/lib" in check.detail
    assert check.facts["libraries"] == [str(lib)]
    assert check.facts["audit_library_path"] == "/run/rb-driver/lib"


def test_nix_driver_in_the_nixos_directory_is_ok(tmp_path):
    opengl = tmp_path / "opengl-driver"
    (opengl / "lib").mkdir(parents=True)
    (opengl / "lib" / "libcuda.so.1").write_text("fake")
    check = doctor.check_nix_driver(dataclasses.replace(probes(tmp_path), opengl_driver=opengl))
    assert check.status == "ok" and check.facts["opengl_driver"] == str(opengl / "lib")


def test_no_driver_for_nix_is_said_not_an_error(tmp_path):
    checks = doctor.run_checks(probes(tmp_path))
    row = by_name(checks)["nix-gpu-driver"]
    assert row.status == "missing" and "CPU only" in row.detail
    assert row not in doctor.missing_required(checks)


def test_strict_fails_on_what_would_stop_an_audit(tmp_path, monkeypatch, capsys):
    """Debian 12's Nix 2.8 cannot evaluate current pins: `rb doctor --strict` said so and
    exited 0. Now every row that would stop an audit fails it (exit 11), naming the rows."""
    from reprobridge.cli import cli, main

    # As a user the daemon does not trust, `sandbox = false` stops the nix backend too.
    user = by_name(doctor.run_checks(probes(tmp_path, uid=54321)))
    assert user["nix-sandbox"].status == "missing"
    assert "does not let this user turn it on" in user["nix-sandbox"].detail
    # No working bubblewrap: runs would not be isolated.
    no_bwrap = doctor.run_checks(probes(tmp_path, bwrap=False))
    assert "bubblewrap" in [c.name for c in doctor.audit_blockers(no_bwrap)]
    checks = doctor.run_checks(probes(tmp_path))
    assert [c.name for c in doctor.audit_blockers(checks)] == ["nix"]
    _fake_run_checks(monkeypatch, checks)
    with pytest.raises(SystemExit) as exc:
        main(["doctor", "--strict"])
    assert exc.value.code == 11
    assert "cannot audit as it is: nix" in capsys.readouterr().err
    out = CliRunner().invoke(cli, ["doctor", "--json"])
    assert json.loads(out.output)["blocks_audit"] == ["nix"]
