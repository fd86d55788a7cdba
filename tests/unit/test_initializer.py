"""`rb init` end to end on real git repositories: artifacts, determinism, re-init, bad input."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from reprobridge import _fs, _log, errors
from reprobridge.initializer import init_repository
from reprobridge.manifest.io import load_manifest

TRAIN = """\
import argparse

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    print(f"accuracy={0.9:.3f}")

if __name__ == "__main__":
    main()
"""
README = """# Demo

## Train

```bash
python train.py --lr 0.1 --seed 3
```
"""
PAPER = """# A paper

Table 1: Accuracy

| Method | Accuracy |
|---|---|
| Train | 0.91 ± 0.01 |
"""


def _repo(make_repo, **extra: str) -> Path:
    files = {"train.py": TRAIN, "README.md": README, ".python-version": "3.10\n", **extra}
    return make_repo(files)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def test_writes_every_artifact(make_repo) -> None:
    root = _repo(make_repo, **{"paper.md": PAPER})
    result = init_repository(root, paper=root / "paper.md", lock="never")
    for rel in [
        "reprobridge.toml",
        "flake.nix",
        "flake.lock",
        "REPRODUCE.md",
        "repro/check.py",
        "repro/launchers/train.sh",
        "repro/python/pyproject.toml",
        "repro/python/requirements.txt",
    ]:
        assert (root / rel).is_file(), rel
        assert rel in result.changes.created
    manifest, _ = load_manifest(root / "reprobridge.toml")
    exp = manifest.experiments["train"]
    assert exp.command == "python train.py --lr {lr} --seed {seed} --epochs {epochs}"
    assert exp.params == {"lr": 0.1, "epochs": 50}
    assert exp.seeds == [3]
    assert exp.tiers["smoke"].params == {"epochs": 2}
    assert manifest.environment.python == "3.10"
    assert manifest.environment.nixpkgs is not None
    metric = exp.metrics["accuracy"]
    assert metric.target == pytest.approx(0.91)
    assert manifest.derived["experiments.train.command"].sources == ["README.md:6"]
    # Every generated file names the command that regenerates it.
    for rel in ["reprobridge.toml", "flake.nix", "REPRODUCE.md", "repro/launchers/train.sh"]:
        assert "rb init" in (root / rel).read_text()[:600], rel
    # New files are known to git (intent to add), so the flake can see them.
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files"], capture_output=True, text=True
    ).stdout
    assert "reprobridge.toml" in listed and "flake.nix" in listed


def test_same_input_same_bytes(tmp_path: Path, repo_at) -> None:
    snaps = []
    for parent in ("a", "b"):
        # Same directory name: the project name comes from it.
        root = repo_at(
            tmp_path / parent / "paper-repo",
            {"train.py": TRAIN, "README.md": README, "paper.md": PAPER},
        )
        init_repository(root, paper=root / "paper.md", lock="never", git_add=False)
        snaps.append(_snapshot(root))
    assert snaps[0] == snaps[1]


def test_reinit_is_idempotent_and_keeps_edits(make_repo) -> None:
    root = _repo(make_repo)
    init_repository(root, lock="never")
    first = _snapshot(root)
    again = init_repository(root, lock="never")
    assert _snapshot(root) == first
    assert not again.changes.created and not again.changes.changed
    # A person edits a derived value and adds a comment; rb refreshes around them.
    text = (root / "reprobridge.toml").read_text()
    text = text.replace('timeout = "1h"', 'timeout = "3h"  # measured on an A100')
    (root / "reprobridge.toml").write_text(text)
    result = init_repository(root, lock="never")
    kept = (root / "reprobridge.toml").read_text()
    assert 'timeout = "3h"  # measured on an A100' in kept
    assert "experiments.train.timeout" in result.refresh.kept_edits
    assert "timeout_s=10800" in (root / "repro/launchers/train.sh").read_text()


def test_dry_run_writes_nothing(make_repo) -> None:
    root = _repo(make_repo)
    before = _snapshot(root)
    result = init_repository(root, lock="never", dry_run=True)
    assert _snapshot(root) == before
    assert "reprobridge.toml" in result.changes.created


def test_a_dry_run_plans_what_the_run_then_does(make_repo) -> None:
    """One rule (_fs.planned_changes) says what is created, changed, unchanged, removed."""
    root = _repo(make_repo)
    first = init_repository(root, lock="never", dry_run=True).changes
    assert first == init_repository(root, lock="never").changes and first.created
    (root / "README.md").write_text(README.replace("--lr 0.1", "--lr 0.2"))
    again = init_repository(root, lock="never", dry_run=True).changes
    assert again == init_repository(root, lock="never").changes
    assert again.changed and again.unchanged and not again.created


def test_not_a_git_repository(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    with pytest.raises(errors.NotAGitRepositoryError, match="is not a git repository"):
        init_repository(tmp_path, lock="never")


def test_empty_repository(make_repo) -> None:
    root = make_repo({})
    with pytest.raises(errors.EmptyRepositoryError, match="has no files"):
        init_repository(root, lock="never")
    assert sorted(p.name for p in root.iterdir()) == [".git"]


def test_broken_manifest_is_not_overwritten(make_repo) -> None:
    root = _repo(make_repo)
    init_repository(root, lock="never")
    (root / "reprobridge.toml").write_text("schema = 1\n[project\n")
    before = _snapshot(root)
    with pytest.raises(errors.ManifestError, match=r"reprobridge.toml: not valid TOML"):
        init_repository(root, lock="never")
    assert _snapshot(root) == before


def test_malformed_requirements_leaves_repo_untouched(make_repo) -> None:
    root = _repo(make_repo, **{"requirements.txt": "numpy==1.2.3\ntorch>>=2\n"})
    before = _snapshot(root)
    with pytest.raises(errors.DetectionError, match=r"requirements\.txt"):
        init_repository(root, lock="never")
    assert _snapshot(root) == before


def test_binary_requirements_file(make_repo) -> None:
    root = _repo(make_repo, **{"requirements.txt": b"\x00\x01\x02binary"})  # type: ignore[dict-item]
    with pytest.raises(errors.DetectionError, match=r"requirements\.txt: is a binary file"):
        init_repository(root, lock="never")


def test_huge_requirements_file(make_repo) -> None:
    root = _repo(make_repo)
    with open(root / "requirements.txt", "wb") as fh:
        fh.truncate(50 * 1024 * 1024)  # sparse: 50 MB without the disk cost
    with pytest.raises(
        errors.DetectionError, match=r"requirements.txt: is 52.4 MB, above the 5 MB limit"
    ):
        init_repository(root, lock="never")


def test_symlink_out_of_repo(make_repo, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("numpy\n")
    root = _repo(make_repo)
    (root / "requirements.txt").symlink_to(outside)
    with pytest.raises(
        errors.UnsafePathError, match=r"requirements\.txt: is a symlink that points outside"
    ):
        init_repository(root, lock="never")


def test_refuses_to_write_through_symlinked_repro_dir(make_repo, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = _repo(make_repo)
    (root / "repro").symlink_to(elsewhere)
    with pytest.raises(errors.UnsafePathError, match="repro is a symlink"):
        init_repository(root, lock="never")
    assert not any(elsewhere.iterdir())
    assert not (root / "reprobridge.toml").exists()


def test_full_disk_restores_everything(make_repo, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _repo(make_repo)
    init_repository(root, lock="never")
    (root / "README.md").write_text(README.replace("--lr 0.1", "--lr 0.2"))
    before = _snapshot(root)
    real = _fs.write_atomic
    calls = {"n": 0}

    def failing(path: Path, data: bytes, *, mode: int = 0o644) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, data, mode=mode)

    monkeypatch.setattr(_fs, "write_atomic", failing)
    with pytest.raises(errors.WriteError, match="No space left on device"):
        init_repository(root, lock="never")
    monkeypatch.setattr(_fs, "write_atomic", real)
    assert _snapshot(root) == before
    assert not list(root.rglob(".*.tmp"))


def test_hostile_git_config_runs_nothing(make_repo, tmp_path: Path) -> None:
    root = _repo(make_repo)
    marker = tmp_path / "pwned"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    subprocess.run(["git", "-C", str(root), "config", "core.fsmonitor", str(hook)], check=True)
    subprocess.run(["git", "-C", str(root), "config", "core.hooksPath", str(tmp_path)], check=True)
    (tmp_path / "post-index-change").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (tmp_path / "post-index-change").chmod(0o755)
    init_repository(root, lock="never")
    assert not marker.exists()


def test_init_locks_without_building_and_says_so(
    make_repo, hostile_package, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Static recovery runs no repository code (issue 8, item 5): a direct-URL requirement
    whose metadata only its build backend can give is not built (that backend would read
    the environment's secrets and write on the host); the summary and the guide say why
    the packages are not locked."""
    escape = tmp_path / "escaped-from-lock"
    for rel, text in hostile_package("evilpkg", escape).items():
        (tmp_path / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / rel).write_text(text)
    src = tmp_path / "src/evilpkg"
    root = make_repo(
        {
            "requirements.txt": f"evilpkg @ {src.as_uri()}\n",
            "train.py": "import evilpkg\nprint('acc=0.9')\n",
        }
    )
    monkeypatch.setenv("RB_TEST_SECRET", "s3cr3t-lock-token-0123456789")
    result = init_repository(root, lock="auto")
    assert not escape.exists(), f"rb init ran the build backend: {escape.read_text()!r}"
    assert result.lock_warning is not None
    assert "evilpkg cannot be resolved without building it" in result.lock_warning
    guide = (root / "REPRODUCE.md").read_text()
    assert "`evilpkg` point(s) at source code, not a wheel" in guide
    assert not (root / "repro/python/uv.lock").exists()


def test_rerun_and_check_use_the_recorded_paper(make_repo) -> None:
    """`rb init --paper p.md`, then `rb init` / `rb check` without --paper: the paper's
    targets stay (they used to vanish, and rb check reported the manifest stale)."""
    from reprobridge.initializer import check_artifacts

    root = make_repo({"train.py": TRAIN, "README.md": README, "paper.md": PAPER})
    first = init_repository(root, paper=root / "paper.md", lock="never")
    targets = {
        (e, n): m.target
        for e, x in first.manifest.experiments.items()
        for n, m in x.metrics.items()
        if m.target is not None
    }
    assert targets
    assert check_artifacts(root).stale == []
    again = init_repository(root, lock="never")
    assert again.changes.changed == ()


def test_recorded_paper_never_leaves_the_repository(tmp_path: Path) -> None:
    from reprobridge.recovery.paperfile import recorded_paper

    def _recorded_paper(root: Path, rel: str | None) -> str | None:
        return recorded_paper(root, rel, None).read

    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "paper.md").write_text("# p\n")
    (tmp_path / "secret.md").write_text("secret\n")
    (root / "link.md").symlink_to(tmp_path / "secret.md")
    (root / "linkdir").symlink_to(tmp_path)
    assert _recorded_paper(root, "docs/paper.md") == "docs/paper.md"
    for hostile in (
        "../secret.md",
        str(tmp_path / "secret.md"),
        "link.md",
        "linkdir/secret.md",
        "docs/../../secret.md",
        "missing.md",
        None,
    ):
        assert _recorded_paper(root, hostile) is None, hostile


def test_init_moves_the_date_bound_only_where_it_leaves_nothing_and_records_why(
    make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 9 (get-started-with-JAX): the 2022-01 bound left no jaxlib for the chosen
    Python, and the lock failed. Now the bound moves for jaxlib and, released in lock-step,
    jax only; the manifest, the pyproject, the lock and the guide say so and why; a re-run
    and `rb check` agree with what was written."""
    import shutil
    import sys
    import tomllib

    from pyindex import serve_index

    from reprobridge.initializer import check_artifacts

    if shutil.which("uv") is None and not (Path(sys.executable).parent / "uv").exists():
        pytest.skip("uv is not installed")
    releases = [
        ("jax", "0.1", "2021-06-01T00:00:00Z"),
        ("jax", "0.3", "2023-05-01T00:00:00Z"),
        ("jaxlib", "0.3", "2023-05-02T00:00:00Z"),
        ("numpy", "1.0", "2021-01-01T00:00:00Z"),
        ("numpy", "2.0", "2025-01-01T00:00:00Z"),
    ]
    with serve_index(tmp_path / "index", releases) as url:
        monkeypatch.setenv("UV_DEFAULT_INDEX", url)
        monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
        # committed 2022-02-05: the bound is 14 days before (the release lag), 2022-01-22
        monkeypatch.setenv("GIT_COMMITTER_DATE", "2022-02-05T12:00:00Z")
        monkeypatch.setenv("GIT_AUTHOR_DATE", "2022-02-05T12:00:00Z")
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        root = make_repo(
            {
                ".python-version": f"{version}\n",
                "requirements.txt": "jax\njaxlib\nnumpy\n",
                "train.py": TRAIN,
            }
        )
        result = init_repository(root, lock="always")
        env = result.manifest.environment
        assert env.exclude_newer == "2022-01-23T00:00:00Z"
        moved = "2023-07-24T00:00:00Z"  # the first step past jaxlib's only release
        assert env.exclude_newer_package == {"jax": moved, "jaxlib": moved}
        why = result.manifest.derived["environment.exclude_newer_package.jaxlib"].sources
        assert why == [
            "uv lock: date bound 2022-01-23 relaxed for jaxlib to 2023-07-24: no release "
            f"usable on Python {version} uploaded before 2022-01-23"
        ]
        assert "released in lock-step with jaxlib" in str(
            result.manifest.derived["environment.exclude_newer_package.jax"].sources
        )
        pyproject = tomllib.loads((root / "repro/python/pyproject.toml").read_text())
        assert pyproject["tool"]["uv"]["exclude-newer-package"] == env.exclude_newer_package
        lock = tomllib.loads((root / "repro/python/uv.lock").read_text())
        assert {p["name"]: p["version"] for p in lock["package"]}["jax"] == "0.3"
        assert lock["options"]["exclude-newer-package"] == env.exclude_newer_package
        guide = (root / "REPRODUCE.md").read_text()
        assert f"| jaxlib as of | {moved} (bound moved for it only) |" in guide
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(root), "commit", "-qm", "rb init"], check=True)
        assert check_artifacts(root).stale == []
        again = init_repository(root, lock="auto")
        assert again.lock_warning is None  # relocked (from the kept lock), the same bounds
        assert again.changes.changed == (), again.changes


def test_init_locks_torch_from_the_default_index_when_pytorchs_is_out_of_reach(
    make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine that reaches PyPI (or its mirror) but not download.pytorch.org: the CPU
    index rb routes torch to made every lock fail and left torch unpinned. The lock is
    retried with the torch family on the default index; the manifest records it
    (environment.torch_index, with why), the pyproject names no PyTorch index, the guide
    says what that costs, and `rb check` and a re-run agree with what was written."""
    import shutil
    import sys
    import tomllib

    from pyindex import serve_index

    from reprobridge.artifacts import pyenv
    from reprobridge.initializer import check_artifacts

    if shutil.which("uv") is None and not (Path(sys.executable).parent / "uv").exists():
        pytest.skip("uv is not installed")
    # Nothing listens on port 9 of the loopback: the connection is refused at once.
    monkeypatch.setattr(pyenv, "PYTORCH_INDEX", "http://127.0.0.1:9/whl/")
    releases = [("torch", "1.0", "2021-01-01T00:00:00Z"), ("numpy", "1.0", "2021-01-01T00:00:00Z")]
    with serve_index(tmp_path / "index", releases) as url:
        monkeypatch.setenv("UV_DEFAULT_INDEX", url)
        monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        root = make_repo(
            {
                ".python-version": f"{version}\n",
                "requirements.txt": "torch\nnumpy\n",
                "train.py": TRAIN,
            }
        )
        events: list[tuple[str, dict[str, object]]] = []
        with _log.sink(lambda event, fields: events.append((event, fields))):
            result = init_repository(root, lock="always")
        assert [e for e, _ in events].count("lock-retry") == 1, events
        assert result.lock_warning is None
        env = result.manifest.environment
        assert env.torch_index == "pypi"
        why = result.manifest.derived["environment.torch_index"].sources
        assert len(why) == 1 and "could not be reached" in why[0], why
        pyproject = (root / "repro/python/pyproject.toml").read_text()
        assert "127.0.0.1:9" not in pyproject and "tool.uv.sources" not in pyproject
        lock = tomllib.loads((root / "repro/python/uv.lock").read_text())
        torch = next(p for p in lock["package"] if p["name"] == "torch")
        assert torch["source"]["registry"] == url
        assert (
            "the torch family is locked from the default index"
            in (root / "REPRODUCE.md").read_text()
        )
        subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(root), "commit", "-qm", "rb init"], check=True)
        assert check_artifacts(root).stale == []
        again = init_repository(root, lock="never")
        assert again.changes.changed == (), again.changes
        again = init_repository(root, lock="auto")
        assert again.lock_warning is None and again.changes.changed == (), again.changes


def test_init_keeps_pytorchs_index_when_the_lock_fails_for_another_reason(
    make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The retry on the default index is kept only when it locks: with every index out of
    reach nothing changes but the warning (and `--lock` still fails)."""
    import shutil
    import sys

    from reprobridge.artifacts import pyenv

    if shutil.which("uv") is None and not (Path(sys.executable).parent / "uv").exists():
        pytest.skip("uv is not installed")
    monkeypatch.setattr(pyenv, "PYTORCH_INDEX", "http://127.0.0.1:9/whl/")
    monkeypatch.setenv("UV_DEFAULT_INDEX", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    files = {".python-version": f"{version}\n", "requirements.txt": "torch\n", "train.py": TRAIN}
    result = init_repository(make_repo(files), lock="auto")
    assert result.lock_warning is not None and "could not be reached" in result.lock_warning
    assert result.manifest.environment.torch_index is None
    assert "environment.torch_index" not in result.manifest.derived
    with pytest.raises(errors.CommandFailed, match="uv lock failed: the package index"):
        init_repository(make_repo(files), lock="always")
