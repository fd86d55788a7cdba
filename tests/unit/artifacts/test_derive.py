"""repro/derive.py: a tier's copy of a notebook or script with literals replaced, and the
launcher that runs the copy in the tier that has `edits` and the original in the others."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from reprobridge.artifacts import derive
from reprobridge.artifacts.guide import GuideNotes, render_guide
from reprobridge.artifacts.launchers import render_launcher
from reprobridge.errors import RenderError
from reprobridge.manifest.schema import Manifest, derived_copy

SCRIPT = Path(derive.__file__)
NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# max_iters = 2000 (prose)\n"]},
        {
            "cell_type": "code",
            "execution_count": 1,
            "metadata": {},
            "outputs": [],
            "source": ["cfg.lr = 5e-4\n", "cfg.max_iters = 2000\n", "cfg.workers = 0"],
        },
        {
            "cell_type": "code",
            "execution_count": 2,
            "metadata": {},
            "outputs": [],
            "source": "for k in range(100): loss.backward(); total = range(100)",
        },
    ],
    "metadata": {"kernelspec": {"name": "python3"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["python3", str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, check=False
    )


def test_a_notebook_copy_has_the_cells_lowered_and_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "demo.ipynb").write_text(json.dumps(NOTEBOOK))
    done = _run(tmp_path, "demo.ipynb", "demo_rb_smoke.ipynb", "2:2:16:20:2000", "3:1:15:20:100")

    assert done.returncode == 0, done.stderr
    assert "rb derive: demo.ipynb cell 2 line 2: `cfg.max_iters = 2000` -> 20" in done.stdout
    copy = json.loads((tmp_path / "demo_rb_smoke.ipynb").read_text())
    want = json.loads(json.dumps(NOTEBOOK))
    want["cells"][1]["source"][1] = "cfg.max_iters = 20\n"
    # Only the literal at the column named: the second range(100) on the line stays.
    want["cells"][2]["source"] = "for k in range(20): loss.backward(); total = range(100)"
    assert copy == want
    assert json.loads((tmp_path / "demo.ipynb").read_text()) == NOTEBOOK  # untouched
    first = (tmp_path / "demo_rb_smoke.ipynb").read_bytes()
    _run(tmp_path, "demo.ipynb", "demo_rb_smoke.ipynb", "2:2:16:20:2000", "3:1:15:20:100")
    assert (tmp_path / "demo_rb_smoke.ipynb").read_bytes() == first  # deterministic bytes


def test_a_script_copy_keeps_every_other_byte(tmp_path: Path) -> None:
    text = "EPOCHS = 500\r\nLR = 0.1  # é\r\nfor e in range(EPOCHS):\r\n    step()\r\n"
    (tmp_path / "train.py").write_bytes(text.encode())
    done = _run(tmp_path, "train.py", "train_rb_smoke.py", ":1:9:1:500")

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "train_rb_smoke.py").read_bytes() == text.replace("500", "1").encode()


@pytest.mark.parametrize(
    "edit",
    [":1:9:1:400", ":7:9:1:500", "1:1:9:1:500", "nonsense"],
    ids=["changed-literal", "no-such-line", "cell-of-a-script", "malformed"],
)
def test_an_edit_that_does_not_apply_stops_and_writes_nothing(tmp_path: Path, edit: str) -> None:
    (tmp_path / "train.py").write_text("EPOCHS = 500\n")
    done = _run(tmp_path, "train.py", "train_rb_smoke.py", edit)

    assert done.returncode == 2
    assert done.stderr.startswith("rb derive: ")
    assert not (tmp_path / "train_rb_smoke.py").exists()


def test_a_link_where_the_copy_goes_is_replaced_not_followed(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("EPOCHS = 500\n")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "train_rb_smoke.py").symlink_to(victim)  # committed by a hostile repository
    done = _run(tmp_path, "train.py", "train_rb_smoke.py", ":1:9:1:500")

    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "keep me"
    assert not (tmp_path / "train_rb_smoke.py").is_symlink()
    assert (tmp_path / "train_rb_smoke.py").read_text() == "EPOCHS = 1\n"


def test_copy_names_stay_next_to_the_original() -> None:
    assert derived_copy("demo.ipynb") == "demo_rb_smoke.ipynb"
    assert derived_copy("examples/train.py") == "examples/train_rb_smoke.py"
    assert derived_copy("run") == "run_rb_smoke"


def _manifest(command: str, workdir: str = ".", file: str = "nb/demo.ipynb") -> Manifest:
    return Manifest.model_validate(
        {
            "project": {"name": "p"},
            "experiments": {
                "demo": {
                    "command": command,
                    "workdir": workdir,
                    "kind": "notebook",
                    "tiers": {
                        "smoke": {
                            "timeout": "10m",
                            "edits": [
                                {
                                    "file": file,
                                    "cell": 6,
                                    "line": 5,
                                    "column": 24,
                                    "was": "2000",
                                    "value": 20,
                                    "code": "train_config.max_iters = 2000",
                                }
                            ],
                        }
                    },
                }
            },
        }
    )


def test_the_launcher_runs_the_copy_in_the_smoke_tier_and_the_original_in_full() -> None:
    cmd = "jupyter nbconvert --to notebook --execute --output-dir . --output d.executed.ipynb demo.ipynb"
    text = render_launcher(_manifest(cmd, workdir="nb"), "demo", version="t")

    full, smoke = text.split("  full)")[1].split("  smoke)")
    assert "rb_entry=demo.ipynb\n    derive=()" in full
    assert "rb_entry=demo_rb_smoke.ipynb" in smoke
    assert "derive=(nb/demo.ipynb nb/demo_rb_smoke.ipynb 6:5:24:20:2000)" in smoke
    assert '--output d.executed.ipynb "${rb_entry}")' in text
    assert '(cd "$rb_root" && "$rb_py" repro/derive.py "${derive[@]}") || exit 2' in text
    done = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "command",
    [
        "jupyter nbconvert --execute other.ipynb",
        "jupyter nbconvert --execute nb/demo.ipynb | tee log",
    ],
    ids=["not-named", "shell-syntax"],
)
def test_edits_of_a_file_the_command_does_not_run_are_refused(command: str) -> None:
    with pytest.raises(RenderError, match=r"edits change nb/demo\.ipynb"):
        render_launcher(_manifest(command), "demo", version="t")


def test_edits_of_two_files_are_refused() -> None:
    data = _manifest("python train.py", file="train.py").model_dump(by_alias=True)
    edits = data["experiments"]["demo"]["tiers"]["smoke"]["edits"]
    edits.append({**edits[0], "file": "other.py"})
    with pytest.raises(ValueError, match="change one file"):
        Manifest.model_validate(data)


def test_the_guide_lists_each_lowered_literal() -> None:
    cmd = "jupyter nbconvert --execute --to notebook nb/demo.ipynb"
    text = render_guide(_manifest(cmd), GuideNotes(), version="t")

    assert "The smoke tier runs a copy of `nb/demo.ipynb`, `nb/demo_rb_smoke.ipynb`" in text
    assert "- cell 6 line 5: `train_config.max_iters = 2000` -> `20`" in text
    assert "not bounded" not in text


# -- renaming edits: names the pinned packages removed (issue 9, API drift) ---------------

SCRIPT_OLD_API = "import jax\nfrom jax import tree_util as tu\np = jax.tree_multimap(f, a, b)\n"


def test_a_name_edit_renames_in_the_copy_and_the_log_says_what(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SCRIPT_OLD_API)
    # `packaging` is installed for the Python the tests run derive.py with (rb needs it).
    done = _run(
        tmp_path,
        "train.py",
        "train_rb_full.py",
        "--if=packaging>=1",
        ":3:4:jax.tree_util.tree_map:jax.tree_multimap",
    )

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "train_rb_full.py").read_text() == SCRIPT_OLD_API.replace(
        "jax.tree_multimap", "jax.tree_util.tree_map"
    )
    assert (
        "rb derive: train.py line 3: `jax.tree_multimap` -> `jax.tree_util.tree_map` "
        "(`p = jax.tree_multimap(f, a, b)`)" in done.stdout
    )


def test_a_name_edit_is_skipped_where_the_installed_version_still_has_the_name(
    tmp_path: Path,
) -> None:
    (tmp_path / "train.py").write_text(SCRIPT_OLD_API)
    done = _run(
        tmp_path,
        "train.py",
        "train_rb_full.py",
        "--if=packaging>=99999",
        ":3:4:jax.tree_util.tree_map:jax.tree_multimap",
        "--if=no-such-distribution-rb>=1",
        ":3:4:jax.tree_util.tree_map:jax.tree_multimap",
    )

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "train_rb_full.py").read_text() == SCRIPT_OLD_API  # kept as it was
    assert "is older than 99999: it still has `jax.tree_multimap`" in done.stdout
    assert "no-such-distribution-rb is not installed" in done.stdout


@pytest.mark.parametrize(
    ("have", "least", "applies"),
    [
        ("0.4.13", "0.3.16", True),
        ("0.3.4", "0.3.16", False),
        ("2.0.0rc1", "2.0", True),
        ("1.23.5", "1.24", False),
        ("1.24.0", "1.24", True),
    ],
)
def test_when_compares_release_numbers(have: str, least: str, applies: bool) -> None:
    edit = derive.Edit(None, 1, 0, "float", "np.float", ("numpy", least))
    assert (derive.applies(edit, lambda dist: have) is None) == applies


@pytest.mark.parametrize(
    "args",
    [
        [":1:0:os.system('x'):np.float"],  # code, not a name
        [":1:0:a b:np.float"],
        ["--if=jax>=soon", ":1:0:jax.y:jax.x"],
        ["--if=jax; rm -rf /", ":1:0:jax.y:jax.x"],
        [":1:0:jax.y:jax.x", "--if=jax>=1"],  # a condition with no edit after it
    ],
)
def test_derive_refuses_values_that_are_no_number_or_name(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "train.py").write_text(SCRIPT_OLD_API)
    done = _run(tmp_path, "train.py", "copy.py", *args)
    assert done.returncode == 2
    assert done.stderr.startswith("rb derive: ")
    assert not (tmp_path / "copy.py").exists()


def _renamed(smoke: bool = True) -> Manifest:
    rename = {
        "file": "train.py",
        "line": 3,
        "column": 4,
        "was": "jax.tree_multimap",
        "value": "jax.tree_util.tree_map",
        "when": "jax>=0.3.16",
    }
    tiers: dict[str, object] = {"full": {"edits": [rename]}}
    if smoke:
        tiers["smoke"] = {"timeout": "10m", "edits": [rename]}
    return Manifest.model_validate(
        {
            "project": {"name": "p"},
            "experiments": {"demo": {"command": "python train.py --lr 0.1", "tiers": tiers}},
        }
    )


def test_every_tier_with_renames_runs_its_own_copy() -> None:
    text = render_launcher(_renamed(), "demo", version="t")

    full, smoke = text.split("  full)")[1].split("  smoke)")
    spec = "'--if=jax>=0.3.16' :3:4:jax.tree_util.tree_map:jax.tree_multimap"
    assert "rb_entry=train_rb_full.py" in full
    assert f"derive=(train.py train_rb_full.py {spec})" in full
    assert f"derive=(train.py train_rb_smoke.py {spec})" in smoke
    assert 'cmd=(python "${rb_entry}" --lr 0.1)' in text
    done = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr


def test_tiers_that_edit_different_files_are_refused() -> None:
    data = _renamed().model_dump(by_alias=True, exclude_none=True)
    data["experiments"]["demo"]["tiers"]["smoke"]["edits"][0]["file"] = "config.json"
    with pytest.raises(RenderError, match="edits change different files"):
        render_launcher(Manifest.model_validate(data), "demo", version="t")


def test_the_guide_lists_the_renames_and_keeps_the_smoke_tier_unbounded() -> None:
    text = render_guide(_renamed(), GuideNotes(), version="t")

    assert "**Code older than its packages**: `train.py` calls names" in text
    assert "(`train_rb_full.py`, `train_rb_smoke.py`)" in text
    assert "- line 3: `jax.tree_multimap` -> `jax.tree_util.tree_map` (when `jax>=0.3.16`)" in text
    # A rename shortens nothing: the smoke tier is still the full command stopped at 10m.
    assert "**The smoke tier is not bounded**" in text


def test_a_tiers_copy_is_named_for_its_tier() -> None:
    assert derived_copy("nb/demo.ipynb", "full") == "nb/demo_rb_full.ipynb"
    assert derived_copy("nb/demo.ipynb") == "nb/demo_rb_smoke.ipynb"


def test_derive_renames_on_python38_with_its_own_installed_versions(tmp_path: Path) -> None:
    """repro/derive.py runs with whatever Python the run has: 3.8 syntax, stdlib only, and
    the `--if` check reads that interpreter's installed distributions (pip is in every
    venv pyenv makes)."""
    import ast
    import shutil
    import sys

    tree = ast.parse(SCRIPT.read_text(), feature_version=(3, 8))
    imported = {
        (n.module or "") if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    assert {name.split(".")[0] for name in imported} <= set(sys.stdlib_module_names)
    candidates = [shutil.which("python3.8") or ""]
    candidates += sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))
    python38 = next(
        (
            c
            for c in filter(None, candidates)
            if subprocess.run([c, "-c", "import pip"]).returncode == 0
        ),
        None,
    )
    if python38 is None:
        pytest.skip("no working python3.8 with pip on this machine")
    (tmp_path / "t.py").write_text("import numpy as np\nx = np.float(1)\n")
    done = subprocess.run(
        [python38, str(SCRIPT), "t.py", "c.py", "--if=pip>=1", ":2:4:float:np.float"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "c.py").read_text() == "import numpy as np\nx = float(1)\n"


def test_the_python_condition_reads_the_running_interpreter() -> None:
    import platform

    edit = derive.Edit(None, 1, 0, "time.perf_counter", "time.clock", ("python", "3.8"))
    assert derive.installed("python") == platform.python_version()
    assert derive.applies(edit) is None  # rb's tests run on Python 3.11 or later
    old = derive.Edit(None, 1, 0, "time.perf_counter", "time.clock", ("python", "99"))
    assert "still has `time.clock`" in (derive.applies(old) or "")
