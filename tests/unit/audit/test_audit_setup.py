"""Environment setup runs no repository code outside the sandbox (issue 8, items 3 and 4).

The attack: a package without a wheel (a local directory here, so nothing comes from the
network) whose PEP 517 build backend tries to write a file on the host and reads a secret
from the environment. On the host backend, uv installs wheels only on the host, with a
cleared environment; the build happens in the run's sandbox (the default when runs are
sandboxed, issue 9), where the host path is not there and the secret is not set. With
``--no-build``, or without a sandbox, it is refused.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pep517 import backend_source, pyproject, write_sdist, write_wheel
from pyindex import serving

from reprobridge import sandbox
from reprobridge.audit.auditor import AuditOptions, run_audit
from reprobridge.initializer import init_repository

_REASON = sandbox.sandbox_unusable() if sandbox.bwrap_path() else "no bwrap"
needs_sandbox = pytest.mark.skipif(_REASON is not None, reason=f"sandbox unusable: {_REASON}")

SECRET = "s3cr3t-build-token-0123456789"

LOCK = """version = 1
revision = 3
requires-python = "=={python}.*"

[[package]]
name = "evilpkg"
version = "1.0"
source = {{ directory = "../../evilpkg" }}

[[package]]
name = "tiny-repro"
version = "0"
source = {{ virtual = "." }}
dependencies = [
    {{ name = "evilpkg" }},
]

[package.metadata]
requires-dist = [{{ name = "evilpkg", directory = "../../evilpkg" }}]
"""


def _python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _committed(make_repo, requirement: str, files: dict[str, str], edit=None) -> Path:
    """A repository whose experiment ``main`` runs ``bash run.sh``, judged on ``acc``, needs
    ``requirement``; `rb init`, then ``edit(root)``, then everything committed."""
    manifest = f"""schema = 1
[project]
name = "tiny"
[environment]
python = "{_python()}"
python_requirements = [{json.dumps(requirement)}]
[experiments.main]
command = "bash run.sh"
timeout = "5m"
[experiments.main.metrics.acc]
source = {{regex = "acc=([0-9.]+)"}}
min = 0.5
"""
    root = make_repo({"reprobridge.toml": manifest, **files})
    init_repository(root, lock="never")
    if edit is not None:
        edit(root)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", "rb init"], check=True)
    return root


@pytest.fixture
def build_repo(make_repo, hostile_package, tmp_path: Path) -> tuple[Path, Path]:
    """A committed repository whose one experiment imports ``evilpkg``, a local package
    without a wheel, locked in a committed ``repro/python/uv.lock``; and the host path its
    build backend tries to write."""
    escape = tmp_path / "escaped-from-build"

    def lock(root: Path) -> None:
        # The lock alone says where evilpkg comes from (`uv sync --frozen` reads only the
        # lock); the rendered pyproject stays as `rb init` wrote it.
        (root / "repro/python/uv.lock").write_text(LOCK.format(python=_python()))

    root = _committed(
        make_repo,
        "evilpkg",
        {
            "run.sh": "python -c \"import evilpkg; print('seen=' + evilpkg.SEEN)\"\necho acc=0.9\n",
            **hostile_package("evilpkg", escape),
        },
        lock,
    )
    return root, escape


@pytest.mark.parametrize(
    ("opts", "why"),
    [
        (AuditOptions(runs=1, backend="host", no_build=True), "--no-build given"),
        (AuditOptions(runs=1, backend="host", sandbox="off"), "not sandboxed"),
    ],
    ids=["no-build", "no-sandbox"],
)
def test_without_a_sandbox_or_with_no_build_nothing_is_built(
    build_repo: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, opts: AuditOptions, why: str
) -> None:
    root, escape = build_repo
    monkeypatch.setenv("RB_TEST_SECRET", SECRET)
    result = run_audit(root, opts)
    assert not escape.exists(), f"the build backend ran on the host: {escape.read_text()!r}"
    assert not result.passed
    run = json.loads((result.path / "runs/main/0/status.json").read_text())["record"]
    assert run["not_started"]["level"] == "environment"
    assert "evilpkg has no wheel" in run["not_started"]["reason"]
    assert why in run["not_started"]["reason"]


@needs_sandbox
def test_by_default_a_package_without_a_wheel_is_built_in_the_runs_sandbox(
    build_repo: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, escape = build_repo
    monkeypatch.setenv("RB_TEST_SECRET", SECRET)
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    v = result.summary["experiments"]["main"]
    assert result.passed, json.dumps(v, indent=1)
    assert not escape.exists(), f"the build backend wrote on the host: {escape.read_text()!r}"
    run = result.path / "runs/main/0"
    # The build saw no secret, and the run imported what the sandboxed build made.
    assert "seen=absent" in (run / "stdout.log").read_text()
    assert (run / "setup-0.stdout.log").is_file()
    record = json.loads((run / "status.json").read_text())["record"]
    assert record["sandbox"] == "bubblewrap"
    # The evidence names what was built from source.
    assert record["built_from_source"] == {"without_wheel": ["evilpkg"], "built": ["evilpkg"]}


def _wheel(directory: Path) -> Path:
    """A pure-Python wheel of ``goodpkg`` 1.0 (nothing runs when it is installed)."""
    return directory / write_wheel(directory, "goodpkg", "1.0", "VALUE = 1\n")


@needs_sandbox
def test_package_listing_runs_the_runs_python_in_its_sandbox(make_repo, tmp_path: Path) -> None:
    """After the run, the auditor lists the packages of the run's ``python3``, a file in
    the workspace the run may have replaced: that listing must not run on the host."""
    wheel = _wheel(tmp_path)
    escape = tmp_path / "escaped-from-listing"
    script = (
        'rm -f "$VIRTUAL_ENV/bin/python3"\n'
        "cat > \"$VIRTUAL_ENV/bin/python3\" <<'EOF'\n"
        f"#!/bin/sh\necho pwned > {escape}\necho '{{\"packages\": []}}'\n"
        "EOF\n"
        'chmod +x "$VIRTUAL_ENV/bin/python3"\n'
        "echo acc=0.9\n"
    )
    root = _committed(make_repo, f"goodpkg @ {wheel.as_uri()}", {"run.sh": script})
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    assert not escape.exists(), "the run's python3 ran on the host"
    assert result.passed, json.dumps(result.summary, indent=1)


@needs_sandbox
def test_a_link_the_run_plants_for_the_package_listing_is_not_followed(
    tiny_repo, tmp_path: Path
) -> None:
    """The run can write next to its workspace (rb's scratch directory is there): a link
    it plants where the auditor would write the listing's output must not be followed."""
    victim = tmp_path / "victim"
    victim.write_text("original\n")
    root = tiny_repo(
        f"mkdir -p ../rb\nln -sf {victim} ../rb/probe.stdout\n"
        f"ln -sf {victim} ../rb/probe.stderr\necho acc=0.9\n"
    )
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    assert result.passed, json.dumps(result.summary, indent=1)
    assert victim.read_text() == "original\n"


def test_the_shellhook_env_dump_is_never_read_through_a_link(tmp_path: Path) -> None:
    from reprobridge.audit.backends import read_env_dump

    secret = tmp_path / "host-file"
    secret.write_bytes(b"AWS_SECRET_ACCESS_KEY=abc\0")
    scratch = tmp_path / "rb"
    scratch.mkdir()
    (scratch / "shellHook.env").symlink_to(secret)
    assert read_env_dump(scratch / "shellHook.env") == {}
    (scratch / "shellHook.env").unlink()
    (scratch / "shellHook.env").write_bytes(b"A=1\0B=x=y\0junk\0")
    assert read_env_dump(scratch / "shellHook.env") == {"A": "1", "B": "x=y"}


@needs_sandbox
def test_a_run_cannot_write_through_hard_links_into_the_operators_uv_cache(
    make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host installs wheels from the operator's uv cache as hard links (seconds for
    torch); a run that appends to an installed file must not change the cached copy, which
    the operator's own, unsandboxed projects install from later."""
    cache = tmp_path / "operator-uv-cache"
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    wheel = _wheel(tmp_path)
    script = (
        'f=$(ls "$VIRTUAL_ENV"/lib/python*/site-packages/goodpkg.py)\n'
        'echo "PWNED = 1" >> "$f" && echo wrote=yes || echo wrote=no\n'
        "echo acc=0.9\n"
    )
    root = _committed(make_repo, f"goodpkg @ {wheel.as_uri()}", {"run.sh": script})
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    assert result.passed, json.dumps(result.summary, indent=1)
    assert "wrote=no" in (result.path / "runs/main/0/stdout.log").read_text()
    cached = list(cache.rglob("goodpkg.py"))
    assert cached, "the wheel did not go through the operator's cache"
    assert all("PWNED" not in p.read_text() for p in cached)


@needs_sandbox
def test_an_sdist_requirement_is_built_in_the_sandbox_and_the_rest_comes_from_the_host(
    make_repo, hostile_package, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No uv.lock: ``uv pip install`` of the requirements. The wheel is installed on the
    host; the package without a wheel (a source tree here) is built in the sandbox."""
    monkeypatch.setenv("RB_TEST_SECRET", SECRET)
    escape = tmp_path / "escaped-from-build"
    # The packages stand for an index: the sandboxed step reads them through an operator's
    # read-only bind.
    pkgs = tmp_path / "pkgs"
    for name, text in hostile_package("evil", escape).items():
        (pkgs / name).parent.mkdir(parents=True, exist_ok=True)
        (pkgs / name).write_text(text)
    wheel = _wheel(pkgs)
    manifest_reqs = [f"goodpkg @ {wheel.as_uri()}", f"evilpkg @ {(pkgs / 'evil').as_uri()}"]
    script = "python -c \"import goodpkg, evilpkg; print('seen=' + evilpkg.SEEN)\"\necho acc=0.9\n"

    def two_requirements(root: Path) -> None:
        text = (root / "reprobridge.toml").read_text()
        (root / "reprobridge.toml").write_text(
            text.replace(
                f"python_requirements = [{json.dumps(manifest_reqs[0])}]",
                f"python_requirements = {json.dumps(manifest_reqs)}",
            )
        )
        init_repository(root, lock="never")

    root = _committed(make_repo, manifest_reqs[0], {"run.sh": script}, two_requirements)
    result = run_audit(root, AuditOptions(runs=1, backend="host", extra_ro_binds=(pkgs,)))
    assert result.passed, json.dumps(result.summary, indent=1)
    assert not escape.exists()
    run = result.path / "runs/main/0"
    assert "seen=absent" in (run / "stdout.log").read_text()
    record = json.loads((run / "status.json").read_text())["record"]
    assert record["built_from_source"] == {"without_wheel": ["evilpkg"], "built": ["evilpkg"]}


#: A build backend that imports a runtime package at import time, undeclared in its build
#: requirements (signatory's setup.py imports torch): in uv's isolated build environment
#: the import fails; against the venv, where the host installed goodpkg, it succeeds.
_NEEDS_GOODPKG_BACKEND = backend_source(
    "needsgood", "1.0", '"BUILT_WITH = %r\\n" % goodpkg.VALUE', prelude="import goodpkg"
)


@needs_sandbox
def test_a_build_that_imports_a_runtime_package_is_retried_without_isolation(
    make_repo, tmp_path: Path
) -> None:
    """torchcde's optional `signatory`: its setup.py imports torch, which its build
    requirements do not declare. The isolated sandboxed build fails; the retry builds it
    without isolation, against the venv the host filled (still in the sandbox)."""
    pkgs = tmp_path / "pkgs"
    (pkgs / "needsgood").mkdir(parents=True)
    (pkgs / "needsgood/pyproject.toml").write_text(pyproject("needsgood"))
    (pkgs / "needsgood/backend.py").write_text(_NEEDS_GOODPKG_BACKEND)
    wheel = _wheel(pkgs)
    reqs = [f"goodpkg @ {wheel.as_uri()}", f"needsgood @ {(pkgs / 'needsgood').as_uri()}"]
    script = "python -c \"import needsgood; print('built_with=%s' % needsgood.BUILT_WITH)\"\n"

    def two_requirements(root: Path) -> None:
        text = (root / "reprobridge.toml").read_text()
        (root / "reprobridge.toml").write_text(
            text.replace(
                f"python_requirements = [{json.dumps(reqs[0])}]",
                f"python_requirements = {json.dumps(reqs)}",
            )
        )
        init_repository(root, lock="never")

    root = _committed(make_repo, reqs[0], {"run.sh": script + "echo acc=0.9\n"}, two_requirements)
    result = run_audit(root, AuditOptions(runs=1, backend="host", extra_ro_binds=(pkgs,)))
    run = result.path / "runs/main/0"
    assert result.passed, json.dumps(result.summary, indent=1)
    assert "built_with=1" in (run / "stdout.log").read_text()
    first = (run / "setup-0.stderr.log").read_text()
    assert "No module named 'goodpkg'" in first
    assert "retrying: building needsgood without build isolation" in first
    record = json.loads((run / "status.json").read_text())["record"]
    assert record["built_from_source"]["without_wheel"] == ["needsgood"]
    assert "needsgood" in record["built_from_source"]["built"]


@pytest.fixture
def backtracking_index(tmp_path: Path):
    """A PEP 503 index over HTTP on localhost: ``rbbt-dep`` 1.0 as a wheel, 2.0 (the newest)
    as an sdist only, as pandocfilters was in 2019. Yields the index URL."""
    import http.server

    root = tmp_path / "index"
    files = root / "rbbt-dep"
    files.mkdir(parents=True)
    write_wheel(files, "rbbt-dep", "1.0", "VERSION = '1.0'\n")
    write_sdist(
        files, "rbbt-dep", "2.0", backend_source("rbbt-dep", "2.0", repr("VERSION = '2.0'\n"))
    )
    links = "".join(f'<a href="{p.name}">{p.name}</a>\n' for p in sorted(files.iterdir()))
    (files / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")

    def handler(*args, **kw):  # type: ignore[no-untyped-def]
        return http.server.SimpleHTTPRequestHandler(*args, directory=str(root), **kw)

    with serving(handler) as base:
        yield f"{base}/"


@needs_sandbox
def test_without_a_lock_the_requirements_resolve_in_the_sandbox_not_backwards(
    make_repo, backtracking_index: str
) -> None:
    """Without uv.lock, the host's wheels-only resolution took rbbt-dep 1.0 silently (as it
    took a 2019 notebook stack back to ipykernel 4.0, which cannot start a kernel). The
    audit resolves once in a sandbox, sdists allowed, and installs the exact pins: the
    newest release, built in the run's sandbox."""
    script = "python -c \"import rbbt_dep; print('version=' + rbbt_dep.VERSION)\"\necho acc=0.9\n"

    def with_index(root: Path) -> None:
        # No date bound: a simple HTML index has no upload dates, which uv's exclude-newer
        # treats as too new.
        text = (root / "reprobridge.toml").read_text()
        text = re.sub(r"(?m)^exclude_newer = .*\n", "", text)
        index = f"[environment]\npython_indexes = [{json.dumps(backtracking_index)}]\n"
        (root / "reprobridge.toml").write_text(text.replace("[environment]\n", index, 1))
        init_repository(root, lock="never")
        assert "exclude_newer" not in (root / "reprobridge.toml").read_text()

    root = _committed(make_repo, "rbbt-dep", {"run.sh": script}, with_index)
    result = run_audit(root, AuditOptions(runs=1, backend="host"))
    assert result.passed, json.dumps(result.summary, indent=1)
    run = result.path / "runs/main/0"
    assert "version=2.0" in (run / "stdout.log").read_text()
    record = json.loads((run / "status.json").read_text())["record"]
    assert record["built_from_source"]["without_wheel"] == ["rbbt-dep"]
    env = json.loads((result.path / "environment.json").read_text())
    assert env["fingerprint"]["resolution"].startswith("in a sandbox")


@needs_sandbox
def test_runs_in_one_environment_share_a_listing_and_a_run_that_changes_it_gets_its_own(
    make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 14: the package listing ran for every run (a second sandbox and an interpreter
    start, most of an audit's cost per run). Runs in the same environment now share one;
    every run still records its packages.json, naming its own venv, and `rb verify` reads
    them; the run that adds a distribution is listed again."""
    from reprobridge.audit import fingerprint as fp
    from reprobridge.audit.verify import verify_audit

    real = fp.python_packages
    calls: list[str] = []

    def counting(python: str, env: Any, **kw: Any) -> dict[str, Any]:
        calls.append(env.get("RB_RUN_ID", ""))
        return real(python, env, **kw)

    monkeypatch.setattr(fp, "python_packages", counting)
    wheel = _wheel(tmp_path)
    script = (
        'if [ "$RB_RUN_ID" = "main/2" ]; then\n'
        "  mkdir extra-1.0.dist-info\n"
        "  printf 'Metadata-Version: 2.1\\nName: extra\\nVersion: 1.0\\n' > extra-1.0.dist-info/METADATA\n"
        "fi\n"
        "echo acc=0.9\n"
    )
    root = _committed(make_repo, f"goodpkg @ {wheel.as_uri()}", {"run.sh": script})
    result = run_audit(root, AuditOptions(runs=3, backend="host"))
    assert result.passed, json.dumps(result.summary, indent=1)
    listings = [
        json.loads((result.path / f"runs/main/{k}/packages.json").read_text()) for k in range(3)
    ]
    names = [{p["name"] for p in listing["packages"]} for listing in listings]
    assert "goodpkg" in names[0] and names[1] == names[0] and names[2] == names[0] | {"extra"}
    executables = [listing["executable"] for listing in listings]
    assert len(set(executables)) == 3  # each run's own venv
    assert all(e.endswith("/rb/venv/bin/python3") for e in executables)
    assert calls == ["main/0", "main/2"]  # run 1 reused run 0's listing
    assert verify_audit(result.path).ok


def _commit_fake_venv(root: Path, marker: Path, *, locked: bool) -> None:
    """Force-add a ``repro/python/.venv`` whose ``bin/python`` writes ``marker`` wherever it
    runs, then behaves as the real interpreter (so nothing else would notice); with
    ``locked``, lock the project (uv.lock: the host backend runs ``uv sync``)."""
    if locked:
        subprocess.run(
            [sys.executable, "-m", "uv", "lock", "--offline", "--quiet", "--python", _python()],
            cwd=root / "repro/python",
            check=True,
        )
    fake = root / "repro/python/.venv/bin/python"
    fake.parent.mkdir(parents=True)
    fake.write_text(f'#!/bin/sh\necho ran >> {marker}\nexec {sys.executable} "$@"\n')
    fake.chmod(0o755)
    (root / "repro/python/.venv/pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    subprocess.run(["git", "-C", str(root), "add", "-f", "repro/python/.venv"], check=True)


@needs_sandbox
@pytest.mark.parametrize("locked", [False, True], ids=["uv-pip-install", "uv-sync"])
def test_a_committed_venv_interpreter_never_runs_and_is_reported(
    make_repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, locked: bool
) -> None:
    """The workspace is ``git archive HEAD``, so a force-added ``repro/python/.venv``
    arrives with it; uv executes a venv's ``bin/python`` to inspect it, on the host, with
    the operator's index credentials. The host backend makes its venv in the auditor's
    directory of the run, names the interpreter itself, and leaves the committed venv out
    of the workspace, saying so in the run record."""
    marker = tmp_path / "committed-python-ran"
    monkeypatch.setenv("UV_EXTRA_INDEX_URL", "https://operator:token@rb-test.invalid/simple")
    wheel = _wheel(tmp_path)
    script = 'python -c "import goodpkg; print(goodpkg.__file__)"\necho acc=0.9\n'
    root = _committed(
        make_repo,
        f"goodpkg @ {wheel.as_uri()}",
        {"run.sh": script},
        lambda root: _commit_fake_venv(root, marker, locked=locked),
    )

    result = run_audit(root, AuditOptions(runs=1, backend="host"))

    assert not marker.exists(), "the repository's committed interpreter ran"
    assert result.passed, json.dumps(result.summary, indent=1)
    stdout = (result.path / "runs/main/0/stdout.log").read_text()
    assert "/rb/venv/lib/" in stdout and "/repo/repro/python/.venv/" not in stdout
    record = json.loads((result.path / "runs/main/0/status.json").read_text())["record"]
    assert "committed virtual environment" in record["workspace"]["skipped"]["repro/python/.venv"]
