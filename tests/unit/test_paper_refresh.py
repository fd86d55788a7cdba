"""The user guide's journey with the paper outside the repository: `rb init --paper ../p.md`,
then the plain `rb init` that refreshes and keeps edits. Nothing from the paper is lost, and
no artifact names a path of the author's machine."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from rbcli import rb

from reprobridge.manifest.io import digest


def _commit_all(root: Path) -> None:
    for args in (["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mixup-paper"


def _example_with_paper_beside(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "work" / "mixup"
    shutil.copytree(EXAMPLE, root)
    paper = tmp_path / "work" / "p.md"
    (root / "paper.md").rename(paper)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    _commit_all(root)
    return root, paper


def _paper_values(manifest: dict[str, Any]) -> dict[str, Any]:
    """Every value a paper gives: targets, tolerances, ranges, provenance, seeds, claims."""
    out: dict[str, Any] = {"claims": manifest.get("claims"), "paper": manifest["project"]["paper"]}
    for exp_id, exp in manifest["experiments"].items():
        out[f"{exp_id}.seeds"] = exp.get("seeds")
        for name, metric in exp.get("metrics", {}).items():
            for key in ("target", "tolerance", "range", "provenance"):
                out[f"{exp_id}.{name}.{key}"] = metric.get(key)
    return out


def _artifacts(root: Path) -> dict[str, str]:
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-co", "--exclude-standard"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {rel: (root / rel).read_text("utf-8", "replace") for rel in listed}


def test_paper_outside_the_repository_survives_a_refresh(tmp_path: Path) -> None:
    root, paper = _example_with_paper_beside(tmp_path)
    first = rb("init", "--paper", "../p.md", "--no-lock", str(root), cwd=root)
    assert first.returncode == 0, first.stderr
    written = tomllib.loads((root / "reprobridge.toml").read_text())
    recorded = written["project"]["paper"]
    assert recorded["path"] == "../p.md"
    assert recorded["sha256"] == hashlib.sha256(paper.read_bytes()).hexdigest()
    before = _paper_values(written)
    assert before["claims"] and before["baseline.seeds"] == [0, 1, 2]
    assert before["baseline.test_accuracy.target"] == pytest.approx(0.79)
    assert before["baseline.test_accuracy.tolerance"] is not None
    assert before["baseline.test_accuracy.range"] == [0.0, 1.0]

    # The guide's "refresh, your edits are kept" step, with the paper where it was.
    again = rb("init", "--no-lock", str(root), cwd=root)
    assert again.returncode == 0, again.stderr
    assert _paper_values(tomllib.loads((root / "reprobridge.toml").read_text())) == before
    check = rb("check", str(root), cwd=root)
    assert check.returncode == 0, check.stdout + check.stderr

    # Where the paper is not available (moved, or a reviewer's machine): kept, and said.
    paper.rename(tmp_path / "elsewhere.md")
    moved = rb("init", "--no-lock", str(root), cwd=root)
    assert moved.returncode == 0, moved.stderr
    assert "the paper (../p.md) was not re-read: ../p.md does not resolve here" in moved.stderr
    assert _paper_values(tomllib.loads((root / "reprobridge.toml").read_text())) == before

    # A different file at the recorded path is not taken for the paper.
    paper.write_text("# Another paper\n\n| Method | Accuracy |\n|---|---|\n| Baseline | 0.1 |\n")
    other = rb("init", "--no-lock", str(root), cwd=root)
    assert "../p.md differs from it (sha256 differs)" in other.stderr
    assert _paper_values(tomllib.loads((root / "reprobridge.toml").read_text())) == before

    for rel, text in _artifacts(root).items():
        assert str(tmp_path) not in text, rel


def test_an_absolute_path_older_rb_recorded_keeps_its_values(tmp_path: Path) -> None:
    """A manifest with ``path = "/home/<user>/p.md"`` (what rb wrote before): the refresh
    neither reads that path nor drops what came from it, and the path goes."""
    root, paper = _example_with_paper_beside(tmp_path)
    assert rb("init", "--paper", str(paper), "--no-lock", str(root)).returncode == 0
    doc = tomlkit.parse((root / "reprobridge.toml").read_text())
    before = _paper_values(doc.unwrap())
    # As older rb wrote it: the absolute path, rb's own value (its digest), no hash.
    doc["project"]["paper"]["path"] = str(paper)
    del doc["project"]["paper"]["sha256"]
    doc["derived"]["project.paper.path"]["digest"] = digest(str(paper))
    del doc["derived"]["project.paper.sha256"]
    (root / "reprobridge.toml").write_text(tomlkit.dumps(doc))
    refreshed = rb("init", "--no-lock", str(root))
    assert refreshed.returncode == 0, refreshed.stderr
    assert "its recorded path is absolute" in refreshed.stderr
    after = tomllib.loads((root / "reprobridge.toml").read_text())
    kept = {k: v for k, v in _paper_values(after).items() if k != "paper"}
    assert kept == {k: v for k, v in before.items() if k != "paper"}
    assert "path" not in after["project"]["paper"]
    assert str(paper) not in (root / "reprobridge.toml").read_text()
