"""The agent's tools, bound to one workspace, manifest draft and sandbox policy.

Contract (the agent is untrusted; see docs/agent.md):

* paths follow :mod:`reprobridge.agent.workspace`'s rules; manifest proposals
  :mod:`reprobridge.agent.draft`'s;
* commands run only inside bubblewrap (:mod:`reprobridge.sandbox`) with a cleared
  environment (the API key of the rb process is never passed), no network unless allowed,
  the copy writable and the rest of the system read-only, a timeout and an output cap;
  without a usable sandbox the tool refuses rather than running unsandboxed;
* a refused or failed call raises :class:`ToolError`, which :meth:`Tools.call` returns to
  the model as a tool result with ``is_error: true``; it never reaches the user as an
  exception.
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprobridge import _proc
from reprobridge._proc.monitored import run_monitored
from reprobridge.agent.draft import ManifestDraft
from reprobridge.agent.schemas import check_input
from reprobridge.agent.workspace import (
    MAX_WRITE_BYTES,
    ToolError,
    Workspace,
    check_rel,
    patch_paths,
)
from reprobridge.evidence.redact import Redactor
from reprobridge.sandbox import SandboxSpec, offline_env, sandbox_unusable, wrap

#: The largest read the read tool returns, and how many names and matches list and search give.
MAX_READ_CHARS = 40_000
MAX_LIST = 500
MAX_MATCHES = 100
#: What a command's output may put in front of the model (head + tail are kept).
MAX_OUTPUT_CHARS = 12_000


@dataclass
class ToolResult:
    """What goes back to the model for one tool_use."""

    content: str
    is_error: bool = False
    finished: bool = False


@dataclass
class Tools:
    """The implementations, bound to one workspace, draft and sandbox policy."""

    workspace: Workspace
    draft: ManifestDraft
    redactor: Redactor
    allow_network: bool = False
    command_timeout_s: float = 120.0
    sandbox_unusable: Callable[[], str | None] | None = None
    summary: str | None = None

    def call(self, name: str, data: object) -> ToolResult:
        """Run tool ``name``; every refusal or failure is an ``is_error`` result."""
        try:
            args = check_input(name, data)
            text = getattr(self, f"_t_{name}")(**args)
        except ToolError as exc:
            return ToolResult(str(exc), is_error=True)
        return ToolResult(text, finished=name == "finish")

    def _t_list_files(self, path: str = ".") -> str:
        base = self.workspace.resolve_read(path)
        if not base.is_dir():
            raise ToolError(f"{path}: not a directory")
        prefix = "" if path in (".", "./") else check_rel(path, write=False) + "/"
        names = [f for f in self.workspace.file_list() if f.startswith(prefix)]
        more = f"\n... {len(names) - MAX_LIST} more" if len(names) > MAX_LIST else ""
        return "\n".join(names[:MAX_LIST]) + more if names else "(empty)"

    def _t_read_file(self, path: str, start_line: int = 1, end_line: int | None = None) -> str:
        real = self.workspace.resolve_read(path)
        if not real.is_file():
            raise ToolError(f"{path}: not a file")
        raw = real.read_bytes()
        if b"\0" in raw[:8192]:
            raise ToolError(f"{path}: binary file")
        lines = raw.decode("utf-8", "replace").splitlines()
        lo = max(1, start_line)
        hi = len(lines) if end_line is None else min(len(lines), end_line)
        body = "\n".join(f"{i}: {lines[i - 1]}" for i in range(lo, hi + 1))
        if len(body) > MAX_READ_CHARS:
            body = body[:MAX_READ_CHARS] + "\n... (truncated; read a line range)"
        return f"{path} ({len(lines)} lines)\n{body}"

    def _t_search(self, pattern: str, path: str = ".") -> str:
        try:
            rx = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"bad regular expression: {exc}") from None
        self.workspace.resolve_read(path)
        prefix = "" if path in (".", "./") else check_rel(path, write=False)
        hits: list[str] = []
        for rel in self.workspace.file_list():
            if prefix and not (rel == prefix or rel.startswith(prefix + "/")):
                continue
            full = self.workspace.root / rel
            if full.is_symlink() or not full.is_file() or full.stat().st_size > MAX_WRITE_BYTES:
                continue
            raw = full.read_bytes()
            if b"\0" in raw[:8192]:
                continue
            for n, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
                if rx.search(line):
                    hits.append(f"{rel}:{n}: {line[:300]}")
                    if len(hits) >= MAX_MATCHES:
                        return "\n".join(hits) + "\n... (more matches; narrow the search)"
        return "\n".join(hits) or "(no matches)"

    def _t_run_command(self, command: str, timeout_s: int | None = None) -> str:
        why = (self.sandbox_unusable or sandbox_unusable)()
        if why is not None:
            raise ToolError(f"commands cannot run: {why} (rb never runs them unsandboxed)")
        timeout = min(float(timeout_s or self.command_timeout_s), self.command_timeout_s)
        marker = secrets.token_hex(8)
        # The whole environment of the command: nothing of rb's (no API key) is inherited.
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": "/tmp",
            "LANG": "C.UTF-8",
            "RB_RUN_MARKER": marker,
        }
        if not self.allow_network:
            env.update(offline_env(self.workspace.root))
        spec = SandboxSpec(workdir=self.workspace.root, network=self.allow_network, env=env)
        argv = wrap(["/bin/bash", "-c", command], spec, hostname="rb-agent")
        with tempfile.TemporaryDirectory(prefix="rb-agent-run-") as logs:
            done = run_monitored(
                argv,
                cwd=self.workspace.root,
                env={"PATH": "/usr/bin:/bin", "RB_RUN_MARKER": marker},
                stdout_path=Path(logs, "stdout"),
                stderr_path=Path(logs, "stderr"),
                timeout=timeout,
                grace=2.0,
                cap_bytes=2 * MAX_OUTPUT_CHARS,
                redactor_factory=self.redactor.stream,
                marker=marker,
                term_group=False,
            )
            out = Path(logs, "stdout").read_text("utf-8", "replace")
            err = Path(logs, "stderr").read_text("utf-8", "replace")
        return (
            f"{done.termination.description}\n--- stdout ---\n{_cap(out)}\n"
            f"--- stderr ---\n{_cap(err)}"
        )

    def _t_write_file(self, path: str, content: str, reason: str) -> str:
        clean = self.workspace.write(path, content.encode("utf-8"))
        self.workspace.touched.setdefault(clean, []).append(reason.strip() or "no reason given")
        return f"wrote {clean} ({len(content.encode())} bytes); it will be kept as a patch"

    def _t_apply_patch(self, patch: str, reason: str) -> str:
        paths = patch_paths(patch)
        if not paths:
            raise ToolError("no file paths found in the patch (use git-style a/ and b/ paths)")
        cleaned = [self.workspace.check_write(p) for p in paths]
        with tempfile.NamedTemporaryFile("w", suffix=".patch", delete=False) as fh:
            fh.write(patch if patch.endswith("\n") else patch + "\n")
        try:
            res = _proc.git(
                self.workspace.root,
                "apply",
                "--whitespace=nowarn",
                fh.name,
                check=False,
                timeout=60,
                extra_env={"GIT_CEILING_DIRECTORIES": str(self.workspace.root.parent)},
            )
        finally:
            os.unlink(fh.name)
        if res.returncode != 0:
            msg = " | ".join(res.stderr.decode("utf-8", "replace").strip().splitlines()[-3:])
            raise ToolError(f"the patch does not apply: {msg}")
        for clean in cleaned:
            self.workspace.touched.setdefault(clean, []).append(reason.strip() or "no reason")
        return f"applied to {', '.join(cleaned)}; kept as patches"

    def _t_propose_manifest(self, path: str, value: Any, reason: str) -> str:
        return self.draft.propose(path, value, reason)

    def _t_diagnose(self, experiment: str, output: str, exit_code: int) -> str:
        """The probe's classification of a run's output, and the repairs it would decide
        (:mod:`reprobridge.probe.repairs`): the agent applies them with propose_manifest."""
        import json

        from reprobridge.manifest.schema import Manifest
        from reprobridge.probe.observe import Observation, classify
        from reprobridge.probe.repairs import Context, repairs_for

        try:
            manifest = Manifest.model_validate({**self.draft.data, "schema": 1})
        except ValueError as exc:
            raise ToolError(f"the draft manifest does not validate: {exc}") from None
        if experiment not in manifest.experiments:
            raise ToolError(f"no experiment {experiment!r} in the draft")
        files = frozenset(
            p.relative_to(self.workspace.root).as_posix()
            for p in self.workspace.root.rglob("*")
            if p.is_file() and not p.is_symlink()
        )
        readmes = {
            f: (self.workspace.root / f).read_text("utf-8", "replace")
            for f in sorted(files)
            if "/" not in f and f.lower().startswith("readme")
        }
        outcome = "ok" if exit_code == 0 else "failed"
        obs = Observation(experiment, outcome, f"exit({exit_code})", output[-200_000:], {})
        failure = classify(obs)
        decisions = repairs_for(failure, obs, Context(manifest, files, readmes, False))
        return json.dumps(
            {
                "failure": {"kind": failure.kind, "subject": failure.subject, "line": failure.line},
                "repairs": [d.model_dump(mode="json") for d in decisions],
                "apply_with": "propose_manifest (path = target; for op add / *-requirement, "
                "edit the list it names)",
            },
            indent=1,
        )

    def _t_finish(self, summary: str) -> str:
        self.summary = summary
        return "finished"


def _cap(text: str) -> str:
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    half = MAX_OUTPUT_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"
