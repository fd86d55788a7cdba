"""One package listing per environment of an audit (audit/pkglisting.py).

Each run has its own directory with its own venv, as on the host backend; a fake lister
stands in for the interpreter and reports where it looked. A listing is reused only while
nothing it reads has changed, and a reused listing names the run's own paths.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from reprobridge.audit import fingerprint as fp
from reprobridge.audit.pkglisting import PackageListings

PY = f"python{sys.version_info.major}.{sys.version_info.minor}"


def make_run(base: Path, name: str, packages: dict[str, str]) -> Path:
    """A run directory with a workspace, a home and a venv holding ``packages``."""
    run_dir = base / name
    venv = run_dir / "repo/repro/python/.venv"
    site = venv / "lib" / PY / "site-packages"
    site.mkdir(parents=True)
    (run_dir / "home").mkdir()
    (venv / "bin").mkdir()
    (venv / "bin/python3").symlink_to(sys.executable)
    (venv / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    for dist, version in packages.items():
        meta = site / f"{dist}-{version}.dist-info"
        meta.mkdir()
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        (site / f"{dist}.py").write_text("VALUE = 1\n")
    return run_dir


def site_of(run_dir: Path) -> Path:
    return run_dir / "repo/repro/python/.venv/lib" / PY / "site-packages"


class FakeLister:
    """Lists what the run's site-packages holds, as python_packages(search=True) would."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, python: str, env: dict[str, str], *, run: Any, search: bool) -> dict:
        self.calls += 1
        run_dir = Path(env["HOME"]).parent
        site = site_of(run_dir)
        packages = []
        for meta in sorted(site.glob("*.dist-info")):
            fields = dict(
                line.split(": ", 1)
                for line in (meta / "METADATA").read_text().splitlines()
                if ": " in line
            )
            packages.append({"name": fields["Name"], "version": fields["Version"]})
        venv = run_dir / "repo/repro/python/.venv"
        out: dict[str, Any] = {
            "python": "3.x",
            "executable": str(venv / "bin/python3"),
            "prefix": str(venv),
            "packages": packages,
        }
        if search:
            out["search"] = {
                "path": [str(run_dir / "repo"), str(site)],
                "cwd": str(run_dir / "repo"),
                "user_site": str(run_dir / "home/.local/lib" / PY / "site-packages"),
            }
        return out


def env_of(run_dir: Path, **extra: str) -> dict[str, str]:
    venv = run_dir / "repo/repro/python/.venv"
    return {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "VIRTUAL_ENV": str(venv),
        "HOME": str(run_dir / "home"),
        "RB_RUN_ID": f"main/{run_dir.name}",
        "RB_RUN_MARKER": f"audit:main/{run_dir.name}",
        **extra,
    }


def listing(listings: PackageListings, run_dir: Path, **extra: str) -> dict[str, Any]:
    return listings.listing(
        "python3",
        env_of(run_dir, **extra),
        run=None,  # type: ignore[arg-type]  # the fake lister runs nothing
        run_dir=run_dir,
        workspace=run_dir / "repo",
        ro_binds=(Path("/usr"),),
    )


def fresh(run_dir: Path, **extra: str) -> dict[str, Any]:
    return listing(PackageListings(reuse=True, lister=FakeLister()), run_dir, **extra)


def test_the_same_environment_is_listed_once_with_each_runs_own_paths(tmp_path: Path) -> None:
    lister = FakeLister()
    listings = PackageListings(reuse=True, lister=lister)
    runs = [make_run(tmp_path, str(k), {"numpy": "2.0", "tqdm": "4.0"}) for k in range(3)]
    got = [listing(listings, r) for r in runs]
    assert lister.calls == 1 and listings.reused == 2
    for run_dir, out in zip(runs, got, strict=True):
        assert out == fresh(run_dir)  # what listing this run itself would have given
        assert out["executable"].startswith(str(run_dir) + "/")
        assert "search" not in out


@pytest.mark.parametrize(
    "change",
    [
        "install",
        "uninstall",
        "edit-metadata",
        "pth",
        "sitecustomize",
        "user-site",
        "replace-python",
        "env",
        "workspace-dist-info",
    ],
)
def test_a_run_that_changes_what_the_listing_reads_is_listed_again(
    tmp_path: Path, change: str
) -> None:
    lister = FakeLister()
    listings = PackageListings(reuse=True, lister=lister)
    first = make_run(tmp_path, "0", {"numpy": "2.0", "tqdm": "4.0"})
    listing(listings, first)
    second = make_run(tmp_path, "1", {"numpy": "2.0", "tqdm": "4.0"})
    site = site_of(second)
    extra: dict[str, str] = {}
    if change == "install":
        (site / "extra-1.0.dist-info").mkdir()
        (site / "extra-1.0.dist-info/METADATA").write_text("Name: extra\nVersion: 1.0\n")
    elif change == "uninstall":
        for p in sorted((site / "tqdm-4.0.dist-info").iterdir()):
            p.unlink()
        (site / "tqdm-4.0.dist-info").rmdir()
    elif change == "edit-metadata":  # same size, same names: only the bytes differ
        meta = site / "numpy-2.0.dist-info/METADATA"
        meta.write_text(meta.read_text().replace("2.0", "2.1"))
    elif change == "pth":
        (site / "more.pth").write_text("/opt/elsewhere\n")
    elif change == "sitecustomize":
        (site / "sitecustomize.py").write_text("import sys\n")
    elif change == "user-site":
        (second / "home/.local/lib" / PY / "site-packages").mkdir(parents=True)
    elif change == "replace-python":
        python = second / "repo/repro/python/.venv/bin/python3"
        python.unlink()
        python.write_text("#!/bin/sh\necho '{}'\n")
    elif change == "env":
        extra = {"PYTHONPATH": "/opt/lib"}
    elif change == "workspace-dist-info":
        (second / "repo/planted-9.dist-info").mkdir()
    out = listing(listings, second, **extra)
    assert lister.calls == 2 and listings.reused == 0
    assert out == fresh(second, **extra)


def test_a_pth_naming_a_directory_that_appears_later_is_seen(tmp_path: Path) -> None:
    """site adds a .pth line's directory only when it exists: one created by a later run
    (outside every searched directory) changes sys.path though the .pth is the same."""
    lister = FakeLister()
    listings = PackageListings(reuse=True, lister=lister)
    line = "../../../../../../../outside\n"  # from site-packages up to the run directory
    first = make_run(tmp_path, "0", {"numpy": "2.0"})
    (site_of(first) / "more.pth").write_text(line)
    listing(listings, first)
    second = make_run(tmp_path, "1", {"numpy": "2.0"})
    (site_of(second) / "more.pth").write_text(line)
    listing(listings, second)
    assert lister.calls == 1
    third = make_run(tmp_path, "2", {"numpy": "2.0"})
    (site_of(third) / "more.pth").write_text(line)
    (third / "outside").mkdir()
    listing(listings, third)
    assert lister.calls == 2


def test_per_run_variables_and_workspace_outputs_do_not_stop_reuse(tmp_path: Path) -> None:
    lister = FakeLister()
    listings = PackageListings(reuse=True, lister=lister)
    first = make_run(tmp_path, "0", {"numpy": "2.0"})
    listing(listings, first)
    second = make_run(tmp_path, "1", {"numpy": "2.0"})
    (second / "repo/outputs").mkdir()  # what the run wrote: not a distribution
    (second / "repo/result.txt").write_text("acc=0.9\n")
    listing(listings, second)
    assert lister.calls == 1 and listings.reused == 1


def test_without_reuse_or_after_a_failure_every_run_is_listed(tmp_path: Path) -> None:
    lister = FakeLister()
    listings = PackageListings(reuse=False, lister=lister)
    for k in range(3):
        listing(listings, make_run(tmp_path, f"a{k}", {"numpy": "2.0"}))
    assert lister.calls == 3

    calls: list[int] = []

    def failing(python: str, env: dict[str, str], *, run: Any, search: bool) -> dict:
        calls.append(1)
        return {"python": None, "executable": None, "packages": [], "error": "boom"}

    listings = PackageListings(reuse=True, lister=failing)
    for k in range(2):
        assert listing(listings, make_run(tmp_path, f"b{k}", {}))["error"] == "boom"
    assert len(calls) == 2


def test_an_interpreter_chosen_by_a_shim_keys_on_the_workspace_dotfiles(tmp_path: Path) -> None:
    """A pyenv-style shim picks the interpreter from ``.python-version`` above the current
    directory: with a shim on PATH, a run that writes one is listed again."""
    shims = tmp_path / "shims"
    shims.mkdir()
    (shims / "python3").write_text('#!/bin/sh\nexec python3 "$@"\n')
    (shims / "python3").chmod(0o755)
    lister = FakeLister()
    listings = PackageListings(reuse=True, lister=lister)
    first = make_run(tmp_path, "0", {"numpy": "2.0"})
    (first / "repo/repro/python/.venv/bin/python3").unlink()
    listing(listings, first, PATH=f"{shims}:/usr/bin")
    second = make_run(tmp_path, "1", {"numpy": "2.0"})
    (second / "repo/repro/python/.venv/bin/python3").unlink()
    listing(listings, second, PATH=f"{shims}:/usr/bin")
    assert lister.calls == 1
    third = make_run(tmp_path, "2", {"numpy": "2.0"})
    (third / "repo/repro/python/.venv/bin/python3").unlink()
    (third / "repo/.python-version").write_text("3.8\n")
    listing(listings, third, PATH=f"{shims}:/usr/bin")
    assert lister.calls == 2


def test_the_listing_does_not_import_modules_from_the_workspace(tmp_path: Path) -> None:
    """The listing runs from the run's workspace: a ``json.py`` there must not stand in
    for the module the listing prints with; a dist-info there is still listed."""
    (tmp_path / "json.py").write_text("raise SystemExit('shadowed')\n")
    planted = tmp_path / "planted-9.dist-info"
    planted.mkdir()
    (planted / "METADATA").write_text("Metadata-Version: 2.1\nName: planted\nVersion: 9\n")

    def from_workspace(argv: Any, *, timeout: float, cwd: Any = None, env: Any = None) -> Any:
        from reprobridge import _proc

        return _proc.run(list(argv), cwd=tmp_path, env=env, timeout=timeout, check=False)

    out = fp.python_packages(
        sys.executable, {"PATH": "/usr/bin:/bin"}, run=from_workspace, search=True
    )
    assert "error" not in out, out
    assert {"name": "planted", "version": "9"} in out["packages"]
    assert out["search"]["cwd"] == str(tmp_path) and str(tmp_path) in out["search"]["path"]
    plain = fp.python_packages(sys.executable, {"PATH": "/usr/bin:/bin"}, run=from_workspace)
    assert "search" not in plain and plain["packages"] == out["packages"]
    json.dumps(plain)


def test_listing_keys_a_real_interpreter_quickly(tmp_path: Path) -> None:
    """The key of a real interpreter's search path is computed (stat and hash, no
    process) and is stable while nothing changes."""
    from reprobridge.audit.pkglisting import environment_key

    out = fp.python_packages(sys.executable, {"PATH": "/usr/bin:/bin"}, search=True)
    assert "error" not in out, out
    keys = {
        environment_key(
            sys.executable,
            {"PATH": "/usr/bin:/bin"},
            out["search"],
            run_dir=tmp_path,
            workspace=tmp_path,
            ro_binds=(),
        )
        for _ in range(2)
    }
    assert len(keys) == 1
