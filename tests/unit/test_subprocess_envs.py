"""Every place rb starts a process names the process's whole environment.

A process that touches repository-controlled content (a flake, a lock, a workspace, an
archive) must get an explicit, allowlisted environment: passing nothing inherits the
operator's secrets (``subprocess`` with ``env=None``), as the nixConfig gate once did. This
test reads the package's source and lists every direct start of a process; each passes
``env=`` with something other than ``None`` or ``os.environ``, or is one of the documented
exceptions below.
"""

from __future__ import annotations

import ast
from pathlib import Path

import reprobridge

#: The calls that start a process.
_STARTERS = {
    "subprocess.run",
    "subprocess.Popen",
    "subprocess.call",
    "subprocess.check_call",
    "subprocess.check_output",
    "os.system",
    "os.execv",
    "os.execve",
    "os.execvp",
    "os.execvpe",
    "os.spawnv",
    "os.spawnve",
    "_proc.run",
    "run_monitored",
}
#: (module, function) -> why it may pass no environment of its own.
EXCEPTIONS = {
    # The primitives: they forward the environment their callers name.
    ("_proc/__init__.py", "run"): "forwards its caller's env",
    ("_machine.py", "default_run"): "forwards its caller's env (the Runner protocol)",
    # Touch no repository content.
    ("audit/slurm.py", "_run"): "the operator's Slurm client commands (squeue, sacct, ...)",
    ("sandbox.py", "find_gpu_binds"): "`ldconfig -p`: the host's library cache",
}


def _starts() -> list[tuple[str, str, str]]:
    """(module, enclosing function, env expression or '') of every process start."""
    root = Path(reprobridge.__file__).parent
    found: list[tuple[str, str, str]] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        enclosing: dict[int, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for sub in ast.walk(node):
                    enclosing[id(sub)] = node.name  # innermost wins: walked later
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in _STARTERS:
                env = next((k.value for k in node.keywords if k.arg == "env"), None)
                found.append(
                    (
                        path.relative_to(root).as_posix(),
                        enclosing.get(id(node), "<module>"),
                        ast.unparse(env) if env is not None else "",
                    )
                )
    return found


def test_every_process_start_names_an_allowlisted_environment() -> None:
    starts = _starts()
    assert len(starts) > 10  # the scan sees the package
    bad = [
        f"{module}:{func} env={env or '<inherited>'}"
        for module, func, env in starts
        if (module, func) not in EXCEPTIONS and (not env or env == "None" or "os.environ" in env)
    ]
    assert bad == [], "processes started with the operator's whole environment"


def test_the_exceptions_still_exist() -> None:
    """An exception whose call site is gone is removed from the list, not kept."""
    places = {(module, func) for module, func, _ in _starts()}
    assert set(EXCEPTIONS) <= places, set(EXCEPTIONS) - places
