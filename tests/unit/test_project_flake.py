"""The repository's own flake.nix (packages rb, exposes the template) parses, and the
template it exposes is the one rb renders from."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(
    shutil.which("nix-instantiate") is None, reason="nix-instantiate is not installed"
)
def test_top_level_flake_parses() -> None:
    out = subprocess.run(
        ["nix-instantiate", "--parse", str(ROOT / "flake.nix")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr


def test_template_path_is_the_package_template_dir() -> None:
    text = (ROOT / "flake.nix").read_text()
    m = re.search(r"templates\.default = \{\s*path = (\S+);", text)
    assert m is not None
    template_dir = (ROOT / m.group(1)).resolve()
    assert (template_dir / "flake.nix").is_file()
    assert (template_dir / "reprobridge.toml").is_file()
    assert "nixConfig" not in text


def test_flake_lists_the_runtime_dependencies() -> None:
    """The Nix package must carry every dependency pyproject declares (names as nixpkgs has them)."""
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0].lower() for d in deps}
    text = (ROOT / "flake.nix").read_text()
    for name in names:
        assert f"py.{name}" in text, f"flake.nix does not package {name}"


@pytest.mark.nix
@pytest.mark.skipif(shutil.which("nix-trixie") is None, reason="nix-trixie is not installed")
def test_nix_flake_init_template_writes_a_starter(tmp_path: Path) -> None:
    """`nix flake init -t <rb>` (as the user guide says) writes the starter manifest and the
    flake rb renders. nixpkgs is replaced by a stub flake (offline): `templates` needs only
    its `lib.genAttrs`."""
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "unit" / "artifacts"))
    from artifacts_helpers import nix_env

    stub = tmp_path / "nixpkgs"
    stub.mkdir()
    (stub / "flake.nix").write_text(
        "{ outputs = _: { lib.genAttrs = names: f: builtins.listToAttrs"
        " (map (n: { name = n; value = f n; }) names); }; }\n"
    )
    rb = tmp_path / "rb"
    shutil.copytree(ROOT / "reprobridge" / "templates", rb / "reprobridge" / "templates")
    text = (ROOT / "flake.nix").read_text()
    text, n = re.subn(
        r'inputs\.nixpkgs\.url = "[^"]*";', f'inputs.nixpkgs.url = "path:{stub}";', text
    )
    assert n == 1
    (rb / "flake.nix").write_text(text)
    target = tmp_path / "paper"
    target.mkdir()
    out = subprocess.run(
        [
            "nix-trixie",
            "--extra-experimental-features",
            "nix-command flakes",
            "flake",
            "init",
            "-t",
            f"path:{rb}",
        ],
        cwd=target,
        env=nix_env(binary="nix-trixie"),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in target.iterdir()) == ["flake.nix", "reprobridge.toml"]
    template = ROOT / "reprobridge" / "templates"
    assert (target / "reprobridge.toml").read_text() == (template / "reprobridge.toml").read_text()
    assert "rb init" in out.stderr + out.stdout  # the welcome text


def _project_flake_stub(root: Path, lib: str) -> None:
    """A nixpkgs stand-in for the project's own flake: the real nixpkgs ``lib`` (``lib``),
    and ``legacyPackages`` whose packages are instantiable derivations (never built)."""
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    python = sorted(
        {re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0].lower() for d in deps}
        | {"hatchling", "pytestCheckHook", "hypothesis", "uv"}
    )
    tools = ["git", "uv", "bubblewrap", "ruff", "mypy", "shellcheck"]
    (root / "flake.nix").write_text(
        "{ outputs = _: let\n"
        f"    lib = import {lib};\n"
        '    system = "x86_64-linux";\n'
        '    drv = name: attrs: derivation ({ inherit name system; builder = "/bin/sh"; }'
        " // attrs);\n"
        "    pkg = name: drv name { };\n"
        "    pkgs = lib.genAttrs [ " + " ".join(f'"{t}"' for t in tools) + " ] pkg // {\n"
        "      inherit lib;\n"
        "      python312Packages = lib.genAttrs [ "
        + " ".join(f'"{n}"' for n in python)
        + " ] pkg // {\n"
        '        buildPythonApplication = a: drv "${a.pname}-${a.version}" {\n'
        "          deps = a.dependencies ++ a.build-system ++ a.nativeCheckInputs;\n"
        "          wrap = a.makeWrapperArgs; } // { inherit (a) meta; };\n"
        "      };\n"
        '      mkShell = a: drv "shell" { deps = a.packages ++ a.inputsFrom; };\n'
        "    };\n"
        "  in { inherit lib; legacyPackages.${system} = pkgs; }; }\n"
    )


@pytest.mark.nix
@pytest.mark.parametrize("binary", ["nix", "nix-trixie"])
def test_top_level_flake_evaluates_with_the_real_nixpkgs_lib(tmp_path: Path, binary: str) -> None:
    """The project's own flake.nix evaluates (its package, app, devShell and template) with
    the real nixpkgs lib; only the package set is a stand-in (nothing is built)."""
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "unit" / "artifacts"))
    from artifacts_helpers import nix_env, nix_unusable, unpack_nixpkgs_lib

    reason = nix_unusable(binary)
    if reason:
        pytest.skip(reason)
    stub = tmp_path / "nixpkgs"
    stub.mkdir()
    lib = unpack_nixpkgs_lib(stub).relative_to(stub)  # inside the flake: pure evaluation
    _project_flake_stub(stub, f"./{lib}")
    rb = tmp_path / "rb"
    shutil.copytree(ROOT / "reprobridge" / "templates", rb / "reprobridge" / "templates")
    shutil.copy2(ROOT / "reprobridge" / "__init__.py", rb / "reprobridge" / "__init__.py")
    shutil.copy2(ROOT / "pyproject.toml", rb / "pyproject.toml")
    text, n = re.subn(
        r'inputs\.nixpkgs\.url = "[^"]*";',
        f'inputs.nixpkgs.url = "path:{stub}";',
        (ROOT / "flake.nix").read_text(),
    )
    assert n == 1
    (rb / "flake.nix").write_text(text)
    # builtins.getFlake (impure: an unlocked path) reads the flake's outputs the same way in
    # 2.8 and 2.26 (2.8 has no installable for a flake's whole output set).
    expr = (
        f'let f = builtins.getFlake "path:{rb}"; in'
        " { rb = f.packages.x86_64-linux.rb.drvPath; app = f.apps.x86_64-linux.default.program;"
        " main = f.packages.x86_64-linux.default.meta.mainProgram;"
        " shell = f.devShells.x86_64-linux.default.drvPath;"
        " template = builtins.pathExists f.templates.default.path; }"
    )
    for argv in (["flake", "lock", f"path:{rb}"], ["eval", "--json", "--impure", "--expr", expr]):
        out = subprocess.run(
            [binary, *argv],
            env=nix_env(binary=binary),
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr
    import json

    got = json.loads(out.stdout)
    from reprobridge import __version__

    assert got["rb"].endswith(f"-reprobridge-{__version__}.drv"), got
    assert got["app"].endswith("/bin/rb") and got["main"] == "rb"
    assert got["shell"].endswith("-shell.drv") and got["template"] is True
