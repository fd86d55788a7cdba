"""Manifest paths are untrusted (issue 8, critical items 1 and 2).

The auditor runs outside the sandbox; a path the repository declares (``workdir``,
``outputs.path``, a metric's ``source.file``, a dataset path) and the files a run leaves in
its workspace must never make it read or write a host file. Both attacks of the issue are
reproduced here with real runs: on the old code the first wrote a host file chosen by the
run, the second sealed ``/etc/passwd`` into the evidence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from rbcli import rb

from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.collect import collect_files
from reprobridge.errors import ManifestError
from reprobridge.manifest.io import validate_document
from reprobridge.manifest.schema import REL_PATH_PATTERN, check_rel_path

BASE = {
    "schema": 1,
    "project": {"name": "p"},
    "datasets": {"d": {"path": "data/x"}},
    "experiments": {"e": {"command": "true", "datasets": ["d"]}},
}


def _with(**exp: object) -> dict[str, object]:
    doc = json.loads(json.dumps(BASE))
    doc["experiments"]["e"].update(exp)
    return doc


BAD_PATHS = ["../x", "a/../../b", "/etc/passwd", "a\\b", "./a", "a//b", "a/", "", "~/x", "C:x"]


@pytest.mark.parametrize("bad", BAD_PATHS)
@pytest.mark.parametrize(
    "where, field",
    [
        ("workdir", "experiments.e.workdir"),
        ("output", "experiments.e.outputs.0.path"),
        ("metric", "experiments.e.metrics.m.source.file"),
        ("dataset", "datasets.d.path"),
    ],
)
def test_schema_refuses_paths_that_leave_the_base(bad: str, where: str, field: str) -> None:
    if where == "workdir":
        doc = _with(workdir=bad)
    elif where == "output":
        doc = _with(outputs=[{"path": bad}])
    elif where == "metric":
        doc = _with(metrics={"m": {"source": {"file": bad, "key": "k"}, "min": 0}})
    else:
        doc = json.loads(json.dumps(BASE))
        doc["datasets"]["d"]["path"] = bad
    with pytest.raises(ManifestError) as info:
        validate_document(doc, path="reprobridge.toml")
    text = str(info.value)
    assert text.startswith(f"reprobridge.toml: {field}: "), text
    assert "\n" not in text


@pytest.mark.parametrize("good", [".", "a", "a/b.json", "outputs/exp3/model.pt", "..a", "a..b"])
def test_schema_accepts_normalised_relative_paths(good: str) -> None:
    assert check_rel_path(good) == good
    validate_document(_with(workdir=good, outputs=[{"path": good}]), path="m")


def _tiny_with_manifest(
    tiny_repo: Callable[..., Path], script: str, extra: str, *, workdir: str | None = None
) -> Path:
    root: Path = tiny_repo(script, name="paths")
    manifest = root / "reprobridge.toml"
    text = manifest.read_text()
    if workdir is not None:
        text = text.replace(
            'command = "bash run.sh"', f'command = "bash run.sh"\nworkdir = "{workdir}"'
        )
    text = text.replace("[experiments.main.metrics.acc]", extra + "[experiments.main.metrics.acc]")
    manifest.write_text(text)
    return root


def _audit_error(root: Path) -> str:
    """The ManifestError's text of auditing ``root`` ("" when the audit ran)."""
    try:
        run_audit(root, AuditOptions(runs=1, backend="host"))
    except ManifestError as exc:
        return str(exc)
    return ""


def test_output_copy_cannot_escape_through_a_symlink(
    tiny_repo: Callable[..., Path], tmp_path: Path
) -> None:
    """Issue 8, item 1: `a -> deep dir` and `outputs = [{path = "a/../../…/<host file>"}]`."""
    victim = tmp_path / "victim" / "planted.txt"
    victim.parent.mkdir()
    depth = 64
    deep = "/".join(f"d{i}" for i in range(depth))
    inside = str(victim).lstrip("/")
    rel = "a/" + "../" * depth + inside
    script = (
        f"mkdir -p {deep} && ln -s {deep} a\n"
        f"mkdir -p $(dirname {inside}) && echo chosen-by-the-run > {inside}\n"
        "echo acc=0.9\n"
    )
    root = _tiny_with_manifest(tiny_repo, script, f'outputs = [{{path = "{rel}"}}]\n')
    error = _audit_error(root)
    assert not victim.exists(), "the auditor wrote a host file the run chose"
    assert re.search(r"experiments\.main\.outputs\.0\.path: .*`\.\.`", error), error
    assert not (root / "repro" / "evidence").exists() or not any(
        (root / "repro" / "evidence").iterdir()
    )


def test_workdir_traversal_cannot_read_host_files(tiny_repo: Callable[..., Path]) -> None:
    """Issue 8, item 2: `workdir = "../../../../../.."` with `outputs = [{path = "etc/passwd"}]`."""
    root = _tiny_with_manifest(
        tiny_repo,
        "echo acc=0.9\n",
        'outputs = [{path = "etc/passwd"}]\n',
        workdir="../../../../../../../../../../..",
    )
    error = _audit_error(root)
    evidence = root / "repro" / "evidence"
    copied = list(evidence.rglob("passwd")) if evidence.exists() else []
    assert copied == [], "a host file was sealed into the evidence"
    assert re.search(r"experiments\.main\.workdir: .*`\.\.`", error), error


def test_workdir_traversal_cli_is_one_line_exit_3(tiny_repo: Callable[..., Path]) -> None:
    root = _tiny_with_manifest(
        tiny_repo, "echo acc=0.9\n", 'outputs = [{path = "etc/passwd"}]\n', workdir="../../.."
    )
    out = rb("audit", "--runs", "1", "--backend", "host", "-C", str(root))
    assert out.returncode == 3, out.stderr
    first = out.stderr.splitlines()[0]
    assert first.startswith("error: reprobridge.toml: experiments.main.workdir: "), out.stderr


def test_runtime_symlinks_in_the_workspace_are_never_followed(
    tiny_repo: Callable[..., Path], tmp_path: Path
) -> None:
    """Schema-valid paths whose components the run turned into links: refused, recorded,
    never copied; the output check fails with the reason and the metric is missing."""
    secret = tmp_path / "host"
    secret.mkdir()
    (secret / "passwd").write_text("root:secret\n")
    (secret / "m.json").write_text('{"acc": 0.99}\n')
    (secret / "nb.ipynb").write_text(
        json.dumps({"cells": [{"outputs": [{"text": "nbacc=0.99\n"}]}]})
    )
    script = (
        f"ln -s {secret} hostdir\n"
        f"ln -s {secret}/passwd out.txt\n"
        f"ln -s {secret}/nb.ipynb run.ipynb\n"
        "mkdir real && ln -s ../hostdir real/up\n"
        "mkfifo fifo\n"
        "echo acc=0.9\n"
    )
    extra = (
        'outputs = [{path = "hostdir/passwd"}, {path = "out.txt"}, {path = "real/up/passwd"},'
        ' {path = "run.ipynb"}, {path = "fifo"}]\n'
        "[experiments.main.metrics.fileacc]\n"
        'source = {file = "hostdir/m.json", key = "acc"}\nmin = 0.5\n'
        "[experiments.main.metrics.nbacc]\n"
        'source = {regex = "nbacc=([0-9.]+)"}\nmin = 0.5\n'
    )
    root = _tiny_with_manifest(tiny_repo, script, extra)
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    assert not result.passed
    run_dir = result.path / "runs" / "main" / "0"
    files = run_dir / "files"
    copied = list(files.rglob("*")) if files.exists() else []
    assert all(not p.is_symlink() for p in copied)
    assert not [p for p in copied if p.is_file()], copied
    record = json.loads((run_dir / "status.json").read_text())["record"]
    refused = record["files_refused"]
    assert set(refused) == {
        "hostdir/m.json",
        "hostdir/passwd",
        "out.txt",
        "real/up/passwd",
        "run.ipynb",
        "fifo",
    }, refused
    assert "hostdir is a symlink" in refused["hostdir/passwd"]
    assert "real/up is a symlink" in refused["real/up/passwd"]
    assert "not a regular file" in refused["fifo"]
    verdict = result.summary["experiments"]["main"]
    assert verdict["procedure"]["status"] == "fail"
    assert "symlink" in verdict["procedure"]["reason"]
    per = verdict["per_metric"]
    assert per["fileacc"]["statuses"] == ["missing"]
    assert per["nbacc"]["statuses"] == ["missing"]
    for p in result.path.rglob("*"):
        if p.is_file():
            assert b"root:secret" not in p.read_bytes(), p


def test_collect_files_checks_paths_itself(tmp_path: Path) -> None:
    """Even a caller that skipped the schema cannot make the copy leave its base."""
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "f").write_text("x")
    (tmp_path / "outside").write_text("secret")
    dest = tmp_path / "dest"
    dest.mkdir()
    refused = collect_files(ws, ".", ["../outside", "d/../../outside", "d/f", "nothere"], dest)
    assert (dest / "d" / "f").read_text() == "x"
    assert refused["nothere"] == "missing"
    assert "`..`" in refused["../outside"] and "`..`" in refused["d/../../outside"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dest", "outside", "ws"]
    assert collect_files(ws, "../..", ["d/f"], dest)["d/f"].startswith("refused")
    # A workspace root that is itself a link is not entered.
    (tmp_path / "ws-link").symlink_to(ws)
    assert collect_files(tmp_path / "ws-link", ".", ["d/f"], dest)["d/f"].startswith("refused")


@pytest.mark.parametrize("text", [*BAD_PATHS, ".", "a/b", "..a", ".hidden", "a/.b", "..", "a/.."])
def test_json_schema_pattern_agrees_with_the_validator(text: str) -> None:
    try:
        check_rel_path(text)
        accepted = True
    except ValueError:
        accepted = False
    assert bool(re.fullmatch(REL_PATH_PATTERN, text)) == accepted


def test_collect_files_copies_a_directory_without_following_links(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "plots" / "sub").mkdir(parents=True)
    (ws / "plots" / "a.png").write_text("a")
    (ws / "plots" / "sub" / "b.png").write_text("b")
    (tmp_path / "secret").write_text("secret")
    (ws / "plots" / "leak").symlink_to(tmp_path / "secret")
    dest = tmp_path / "dest"
    dest.mkdir()
    refused = collect_files(ws, ".", ["plots"], dest)
    assert (dest / "plots" / "a.png").read_text() == "a"
    assert (dest / "plots" / "sub" / "b.png").read_text() == "b"
    assert not (dest / "plots" / "leak").exists()
    assert refused["plots"].startswith("partly copied: plots/leak is a link")
