"""One run of the recovery agent for ``rb init --agent``: the I/O around the pure loop in
:mod:`reprobridge.agent.loop`.

Contract:

* :func:`run_session` works on a temporary copy of the repository; nothing in the
  repository changes there. The API key stays in this process (the sandboxed commands never
  see it) and is redacted, with every secret of the environment, from what the model and
  the transcript see. Patches that do not apply to the original repository are dropped
  with a note.
* :func:`session_files` returns the files to write (patches under :data:`~reprobridge.constants.PATCHES_DIR`, the
  appended ledger and the transcript under ``.reprobridge/``) and the guide's agent section;
  the initializer writes them with everything else, all or nothing.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprobridge import __version__, _proc
from reprobridge.agent.backends import AnthropicBackend, Backend
from reprobridge.agent.draft import ManifestDraft
from reprobridge.agent.ledger import Ledger
from reprobridge.agent.loop import AgentConfig, AgentResult, run_agent, stable_context
from reprobridge.agent.tools import Tools
from reprobridge.agent.transcript import Transcript
from reprobridge.agent.workspace import Workspace, existing
from reprobridge.constants import PATCHES_DIR
from reprobridge.errors import RecoveryError
from reprobridge.evidence.redact import Redactor, secrets_from_env
from reprobridge.manifest.io import manifest_data, render_new_manifest
from reprobridge.manifest.schema import Manifest

#: The agent's local records in the repository (not artifacts: never `git add`ed).
RECORDS_DIR = ".reprobridge"


@dataclass
class AgentOptions:
    """How `rb init --agent claude` runs: its config and injected dependencies.

    ``backend`` None builds the Anthropic backend from ``api_key`` (the key stays in this
    process). ``clock``/``sleep``/``now`` are injectable for tests; ``now`` names the
    transcript file.
    """

    config: AgentConfig
    #: ``rb init --agent auto``: when the Messages API fails before any answer (unreachable,
    #: key refused), recover statically and say so (InitResult.agent_fallback) instead of
    #: failing. ``--agent claude`` leaves it False: the error (exit 8) is the answer.
    fallback_static: bool = False
    backend: Backend | None = None
    api_key: str | None = None
    clock: Any = None
    sleep: Any = None
    now: Any = None
    sandbox_unusable: Any = None


def run_session(
    root: Path,
    manifest: Manifest,
    flagged_imports: list[str],
    paper_rel: str | None,
    opts: AgentOptions,
) -> AgentResult:
    """Run the agent on a temporary copy of ``root``, starting from the static ``manifest``.

    Raises :class:`RecoveryError` without a key, and the backend's ``ApiError`` when the
    Messages API fails before any answer.
    """
    backend = opts.backend
    if backend is None:
        key = opts.api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise RecoveryError(
                "--agent claude needs ANTHROPIC_API_KEY", hint="export it, or use --agent static"
            )
        backend = AnthropicBackend(key, **({"sleep": opts.sleep} if opts.sleep else {}))
    secrets = secrets_from_env(os.environ)
    if opts.api_key:
        secrets["ANTHROPIC_API_KEY"] = opts.api_key
    redactor = Redactor(secrets)
    clock = opts.clock or time.monotonic
    now = (opts.now or time.time)()
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    paper_text = None
    if paper_rel is not None:
        ppath = Path(paper_rel) if Path(paper_rel).is_absolute() else root / paper_rel
        if ppath.suffix.lower() in (".md", ".tex", ".txt"):
            paper_text = ppath.read_text("utf-8", "replace")
    data = {k: v for k, v in manifest_data(manifest).items() if k != "derived"}
    findings = render_new_manifest(manifest, version=__version__).split("[derived]")[0]
    if flagged_imports:
        findings += "\nImported but not declared: " + ", ".join(flagged_imports)
    with tempfile.TemporaryDirectory(prefix="rb-agent-") as tmp:
        ws = Workspace.create(root, Path(tmp))
        tools = Tools(
            ws,
            ManifestDraft(data, existing(ws)),
            redactor,
            allow_network=opts.config.allow_network,
            command_timeout_s=opts.config.command_timeout_s,
            sandbox_unusable=opts.sandbox_unusable,
        )
        context = stable_context(redactor.redact_text(findings), ws.file_list(), paper_text)
        result = run_agent(
            backend,
            tools,
            context,
            opts.config,
            ledger=Ledger(run_id),
            transcript=Transcript(redactor),
            clock=clock,
        )
        result.notes += _check_patches(root, result)
    result.run_id = run_id
    return result


def _check_patches(root: Path, result: AgentResult) -> list[str]:
    """Drop every patch that does not apply to the original repository; say why."""
    notes: list[str] = []
    kept = []
    for patch in result.patches:
        with tempfile.NamedTemporaryFile("w", suffix=".patch", delete=False) as fh:
            fh.write(patch.diff)
        try:
            check = _proc.git(root, "apply", "--check", fh.name, check=False)
        finally:
            Path(fh.name).unlink()
        if check.returncode == 0:
            kept.append(patch)
        else:
            notes.append(f"patch of {patch.path} dropped: it does not apply to the repository")
    result.patches = kept
    return notes


def session_files(
    root: Path, result: AgentResult, opts: AgentOptions
) -> tuple[dict[str, bytes], str]:
    """The agent's files (patches, ledger, transcript) and the guide's agent section."""
    out: dict[str, bytes] = {}
    pdir = root / PATCHES_DIR
    taken = len(list(pdir.glob("[0-9][0-9][0-9][0-9]-*.patch"))) if pdir.is_dir() else 0
    listed: list[str] = []
    for i, patch in enumerate(result.patches, taken + 1):
        slug = re.sub(r"[^a-z0-9]+", "-", patch.path.lower()).strip("-")[:50] or "change"
        rel = f"{PATCHES_DIR}/{i:04d}-{slug}.patch"
        header = "".join(
            "# " + line.replace("\n", " ") + "\n"
            for line in (
                f"Reason: {patch.reason}",
                f"Written by rb init --agent claude (model {opts.config.model}); review it.",
                f"Apply with: git apply {rel}",
            )
        )
        out[rel] = (header + patch.diff).encode()
        listed.append(f"- `{rel}`: {patch.reason}")
    ledger_path = root / RECORDS_DIR / "ledger.jsonl"
    old = (
        ledger_path.read_bytes() if ledger_path.is_file() and not ledger_path.is_symlink() else b""
    )
    out[f"{RECORDS_DIR}/ledger.jsonl"] = old + result.ledger.to_jsonl()
    out[f"{RECORDS_DIR}/transcripts/{result.run_id}.jsonl"] = result.transcript.to_jsonl()
    lines = [
        result.transcript.redactor.redact_text(result.summary).strip(),
        "",
        f"Manifest values proposed by the agent: {len(result.proposals)} "
        "(provenance `agent: <reason>` in `[derived]`; review them).",
    ]
    lines += [f"- `{p.path}`: {p.reason}" for p in result.proposals]
    if listed:
        lines += ["", "Patches (checked with `git apply --check`):", "", *listed]
    lines += [f"- {n}" for n in result.notes]
    lines += [
        "",
        f"Cost: {result.ledger.summary()}; {result.tool_calls} tool call(s). "
        f"Ledger: `{RECORDS_DIR}/ledger.jsonl`; transcript: "
        f"`{RECORDS_DIR}/transcripts/{result.run_id}.jsonl`.",
    ]
    return out, "\n".join(lines)
