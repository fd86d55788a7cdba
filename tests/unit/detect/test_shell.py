"""ShellScriptsDetector: scripts that run Python become `bash x.sh` experiments."""

from __future__ import annotations

from reprobridge.detect import detect_repo
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.procedure.shell import runs_in
from reprobridge.detect.registry import detectors


def run(make_repo, files: dict[str, str | bytes]):
    root = make_repo(files, git=False)
    return detect_repo(RepoIndex.from_directory(root), only=detectors({"shell"}))


def test_runs_in_joins_continuations_and_skips_comments() -> None:
    text = "#!/bin/bash\n# python commented.py\npython a.py \\\n  --x 1 && \\\n  python -m b.c\n"
    found = [(n, r.kind, r.entry) for n, r in runs_in(text)]
    assert found == [(3, "script", "a.py"), (3, "module", "b.c")]


def test_non_python_install_and_vendored_scripts_are_not_experiments(make_repo) -> None:
    ctx = run(
        make_repo,
        {
            "setup_env.sh": "python -m venv .venv\npython x.py\n",
            "copy.sh": "cp a b\n",
            ".venv/bin/run.sh": "python x.py\n",
            "third_party/lib/run.sh": "python x.py\n",
            "run exp.sh": "python x.py\n",
        },
    )
    assert [(f.key, f.value.command) for f in ctx.findings] == [("run-exp", "bash 'run exp.sh'")]


def test_binary_script_warns(make_repo) -> None:
    ctx = run(make_repo, {"bad.sh": b"\x00\x01python x.py"})
    assert not ctx.findings
    assert ctx.warnings[0].path == "bad.sh"
