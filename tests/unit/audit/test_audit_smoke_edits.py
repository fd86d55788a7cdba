"""A smoke audit of an experiment bounded in its code, not on its command line (issue 9,
item 3): a notebook's config cell (`train_config.max_iters = 2000`), a notebook's training
loop (`for k in range(2000):`), a script's module constant (`EPOCHS = 500`), a literal
argument of the script's own function (`search(bowl, 400, box)`), a JSON or YAML
config file the command passes (`python train.py config.json`, `"epochs": 60`).

`rb init` lists the literals as the smoke tier's `edits`; the launcher has
`repro/derive.py` write a lowered copy next to the original and runs that. Each fixture
sleeps in its loop, so the full length (25-40 s) cannot fit the 15 s smoke limit these tests
set: before the smoke tier could lower a literal, each of these audits ended as a timeout.

Jupyter is not a dependency of rb's tests (see test_audit_notebook.py): a stand-in
``jupyter`` on the runs' PATH executes the notebook's code cells for real, one namespace,
from the notebook's folder as a kernel does, and writes the executed copy with each cell's
printed output where nbconvert would.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import tomlkit

from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.audit.verify import verify_audit
from reprobridge.initializer import init_repository

REPOS = Path(__file__).resolve().parents[2] / "fixtures/repos"

EXECUTING_JUPYTER = r"""#!/usr/bin/env python3
# `jupyter nbconvert --to notebook --execute ... --output-dir DIR --output NAME NB`, executing
# NB's code cells for real (magics and shell escapes skipped) in NB's folder.
import contextlib, io, json, os, sys
args = sys.argv[1:]
assert args[:1] == ["nbconvert"] and "--execute" in args, args
name = args[args.index("--output") + 1]
folder = args[args.index("--output-dir") + 1]
nb_path = [a for a in args if a.endswith(".ipynb") and a != name][-1]
with open(nb_path, encoding="utf-8") as fh:
    nb = json.load(fh)
out_path = os.path.abspath(os.path.join(folder, name))
os.chdir(os.path.dirname(os.path.abspath(nb_path)))
sys.path.insert(0, "")  # a kernel imports the notebook's own modules from its folder
ns = {"__name__": "__main__"}
for cell in nb["cells"]:
    if cell["cell_type"] != "code":
        continue
    lines = "".join(cell["source"]).splitlines()
    code = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in lines)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(code, nb_path, "exec"), ns)
    cell["outputs"] = [
        {"output_type": "stream", "name": "stdout", "text": buf.getvalue().splitlines(True)}
    ]
with open(out_path, "w", encoding="utf-8") as fh:
    json.dump(nb, fh)
print(f"[NbConvertApp] Writing to {out_path}", file=sys.stderr)
"""


@pytest.fixture
def executing_jupyter(tool_on_run_path: Callable[[str, str], Path]) -> Path:
    """The stand-in ``jupyter`` first on the runs' PATH."""
    return tool_on_run_path("jupyter", EXECUTING_JUPYTER)


def _code(path: Path) -> str:
    """A script's text, or a notebook's cells' sources one after the other."""
    if path.suffix != ".ipynb":
        return path.read_text()
    cells = json.loads(path.read_text())["cells"]
    return "".join("".join(c["source"]) + "\n" for c in cells)


def _repo(tmp_path: Path, case: str, smoke_timeout: str = "15s") -> Path:
    """The fixture as a committed repository after `rb init`, with no packages to install
    (the code is the standard library's) and the given smoke time limit."""
    root = tmp_path / case
    shutil.copytree(REPOS / case, root, ignore=shutil.ignore_patterns("expected.toml"))
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    init_repository(root, lock="never")
    path = root / "reprobridge.toml"
    doc = tomlkit.parse(path.read_text())
    doc["environment"]["python_requirements"] = []  # type: ignore[index]
    for exp in doc["experiments"].values():  # type: ignore[union-attr]
        exp["tiers"]["smoke"]["timeout"] = smoke_timeout
    path.write_text(tomlkit.dumps(doc))
    init_repository(root, lock="never")  # the launchers say the edited limit (edits are kept)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "rb init"], check=True)
    return root


@pytest.mark.parametrize(
    ("case", "exp", "copy", "ran", "lowered"),
    [
        (
            "zero-notebook-config-bound",
            "demo",
            "demo_rb_smoke.ipynb",
            "iterations run: 20",
            "train_config.max_iters = 20\n",
        ),
        ("zero-notebook-range-loop", "demo", "demo_rb_smoke.ipynb", "steps run: 20", "range(20)"),
        # 12 epochs of 2 s, then every other snapshot of the per-epoch history drawn in a
        # panel each (augmented-neural-odes' shape): a smoke run of one epoch shows one
        # snapshot, gets a bare panel and fails; two epochs show two.
        (
            "zero-smoke-history-plotted",
            "demo",
            "demo_rb_smoke.ipynb",
            "snapshots shown: 2",
            "num_epochs = 2\n",
        ),
        (
            "zero-script-module-constant",
            "train",
            "train_rb_smoke.py",
            "epochs run: 2",
            "EPOCHS = 2\n",
        ),
        # The same, the script run as the command's program (`./scripts/train.py`): the
        # copy takes the first word's place and keeps the script's mode.
        (
            "zero-executable-script",
            "train",
            "scripts/train_rb_smoke.py",
            "epochs run: 2",
            "EPOCHS = 2\n",
        ),
        # The bound is a literal argument of the script's own function (3 x 400 evaluations,
        # 24 s of sleeping) or of one it imports (300 epochs, 30 s).
        (
            "zero-literal-argument-bound",
            "search",
            "search_rb_smoke.py",
            "evaluations run: 20",
            "search(bowl, 20, box, batch)",
        ),
        (
            "zero-literal-argument-bound",
            "fit",
            "fit_rb_smoke.py",
            "epochs run: 2",
            "descend(starts[0], 2, 0.05)",
        ),
        # The bound is in the config file the command passes (60 epochs x 10 repetitions,
        # 30 s of sleeping; 400 epochs, 20 s): the command runs a lowered copy of the file.
        (
            "zero-config-file-bound",
            "train",
            "config_rb_smoke.json",
            "epochs run: 2",
            '"epochs": 2,',
        ),
        (
            "zero-config-file-bound",
            "train-2",
            "configs/small_rb_smoke.yaml",
            "epochs run: 2",
            "epochs: 2  #",
        ),
    ],
)
def test_smoke_audit_runs_a_lowered_copy_within_minutes(
    tmp_path: Path,
    executing_jupyter: Path,
    case: str,
    exp: str,
    copy: str,
    ran: str,
    lowered: str,
) -> None:
    root = _repo(tmp_path, case)
    original = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and ".git" not in p.parts}

    started = time.monotonic()
    options = AuditOptions(tier="smoke", runs=1, backend="host", experiments=[exp])
    result = run_audit(root, options)
    wall = time.monotonic() - started

    v = result.summary["experiments"][exp]
    assert v["procedure"]["status"] == "pass", json.dumps(v, indent=1)
    assert v["per_metric"]["final_loss"]["values"][0] is not None  # a metric was read
    run = result.path / "runs" / exp / "0"
    log = (run / "output.log").read_text()
    assert f"rb derive: wrote {copy}" in log  # the run's log says what ran
    assert lowered in _code(run / "files" / copy)  # the copy is evidence
    shown = (run / "files/demo.executed.ipynb").read_text() if copy.endswith(".ipynb") else log
    assert ran in shown
    assert wall < 120  # the full length alone is 25-40 s of sleeping, past the 15 s limit
    # The repository's files are as they were: the copy was made in the run's workspace.
    assert {p: p.read_bytes() for p in original} == original
    assert not (root / copy).exists()
    assert verify_audit(result.path).ok


def test_without_a_bound_the_smoke_timeout_says_the_tier_was_unbounded(tmp_path: Path) -> None:
    """The negative: a loop with no training step is no bound, so the smoke tier is the full
    command, and its timeout is reported as that, not as a bounded check that ran long."""
    root = tmp_path / "plain"
    root.mkdir()
    (root / "README.md").write_text("Render with:\n\n```bash\npython render.py\n```\n")
    (root / "render.py").write_text(
        "import time\n\nfor i in range(100000):\n    time.sleep(0.05)\nprint('frames: 1')\n"
    )
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    init_repository(root, lock="never")
    path = root / "reprobridge.toml"
    doc = tomlkit.parse(path.read_text())
    doc["environment"]["python_requirements"] = []  # type: ignore[index]
    assert dict(doc["experiments"]["render"]["tiers"]["smoke"]) == {"timeout": "10m"}  # type: ignore[index]
    doc["experiments"]["render"]["tiers"]["smoke"]["timeout"] = "2s"  # type: ignore[index]
    path.write_text(tomlkit.dumps(doc))
    init_repository(root, lock="never")
    assert "**The smoke tier is not bounded**" in (root / "REPRODUCE.md").read_text()
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "rb init"], check=True)

    result = run_audit(root, AuditOptions(tier="smoke", runs=1, backend="host"))

    reason = result.summary["experiments"]["render"]["procedure"]["reason"]
    assert "exit(124)" in reason
    assert "the smoke tier is unbounded: the full command, stopped after 2s" in reason


def test_code_older_than_its_packages_runs_with_the_removed_names_renamed(
    tmp_path: Path, executing_jupyter: Path
) -> None:
    """Issue 9, API drift: the notebook calls `jax.tree_multimap`, which jax removed in
    0.3.16; the run's environment has jax 0.4.13 (the fixture's stand-in package and its
    dist-info, on the runs' PYTHONPATH). Before the renaming edits the run stopped on
    `AttributeError: module 'jax' has no attribute 'tree_multimap'`. Now both tiers run a
    copy with `jax.tree_util.tree_map`, and `jax.tree_map` (removed only in 0.6.0, which
    0.4.13 still has) is left as written: repro/derive.py read the installed version."""
    root = _repo(tmp_path, "zero-notebook-removed-api", smoke_timeout="60s")
    path = root / "reprobridge.toml"
    doc = tomlkit.parse(path.read_text())
    doc["environment"]["pythonpath"] = ["."]  # type: ignore[index]
    path.write_text(tomlkit.dumps(doc))
    init_repository(root, lock="never")
    subprocess.run(["git", "-C", str(root), "commit", "-qam", "pythonpath"], check=True)
    manifest = tomlkit.parse(path.read_text())
    full = manifest["experiments"]["demo"]["tiers"]["full"]["edits"]  # type: ignore[index]
    assert [(e["was"], e["value"], e["when"]) for e in full] == [  # type: ignore[index]
        ("jax.tree_multimap", "jax.tree_util.tree_map", "jax>=0.3.16"),
        ("tu.tree_multimap", "tu.tree_map", "jax>=0.3.16"),
        ("jax.tree_map", "jax.tree_util.tree_map", "jax>=0.6.0"),
    ]
    assert "**Code older than its packages**" in (root / "REPRODUCE.md").read_text()

    for tier in ("smoke", "full"):
        options = AuditOptions(tier=tier, runs=1, backend="host", experiments=["demo"])
        result = run_audit(root, options)
        v = result.summary["experiments"]["demo"]
        assert v["procedure"]["status"] == "pass", json.dumps(v, indent=1)
        run = result.path / "runs" / "demo" / "0"
        log = (run / "output.log").read_text()
        assert f"rb derive: wrote demo_rb_{tier}.ipynb" in log
        assert "`jax.tree_multimap` -> `jax.tree_util.tree_map`" in log
        assert "`jax.tree_map` kept (jax 0.4.13 is older than 0.6.0" in log
        assert "loss: " in (run / "files/demo.executed.ipynb").read_text()
        copy = _code(run / "files" / f"demo_rb_{tier}.ipynb")
        assert "jax.tree_util.tree_map(lambda p, g" in copy and "jax.tree_map(" in copy
        assert verify_audit(result.path).ok
