"""PEP 723 inline script metadata: a ``# /// script`` block declaring one script's needs.

A script may carry its own ``dependencies`` and ``requires-python`` in a comment block (what
``uv run script.py`` and ``pipx run`` read)::

    # /// script
    # requires-python = ">=3.10"
    # dependencies = ["torch", "tqdm"]
    # ///

Each dependency becomes a ``python_requirement`` of that script: declared (never flagged as
an undeclared import), marked ``optional`` with the script as its importer, so the merge
keeps it when the chosen experiments run that script or import the package (a repository of
twenty train scripts, each with its own block, needs the chosen one's). A dependency naming
the repository's own project (``x-transformers`` in x-transformers' train scripts) is the
local code, installed from the tree, and is skipped. ``requires-python`` is a
``python_version`` finding. A block that is not valid TOML is warned about and skipped: one
script's comment must not stop recovery.
"""

from __future__ import annotations

import re
import tomllib

from packaging.utils import canonicalize_name

from reprobridge.detect._text import skip_path
from reprobridge.detect.base import DetectContext, Detector, Finding
from reprobridge.detect.declared.requirements import declared_python, declared_requirement
from reprobridge.detect.findings import ProjectValue
from reprobridge.errors import DetectionError

#: The specification's reference regular expression.
_BLOCK = re.compile(r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$")


class InlineDetector(Detector):
    """``python_requirement`` and ``python_version`` findings from ``# /// script`` blocks."""

    name = "inline"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        own = {
            canonicalize_name(f.value.value)
            for f in ctx.of(ProjectValue)
            if f.key == "name" and f.value.value
        }
        findings: list[Finding] = []
        for path in ctx.index.python_files_with("# /// script"):
            if skip_path(path):
                continue
            text = ctx.index.try_read_text(path)
            match = _BLOCK.search(text or "")
            if text is None or match is None or match.group("type") != "script":
                continue
            first = text.count("\n", 0, match.start("content")) + 1
            lines = match.group("content").splitlines()
            body = "\n".join(line[2:] if line.startswith("# ") else line[1:] for line in lines)
            try:
                meta = tomllib.loads(body)
            except tomllib.TOMLDecodeError as exc:
                ctx.warn(f"skipped its inline script metadata (# /// script): {exc}", path)
                continue

            def line_of(needle: str, lines: list[str] = lines, first: int = first) -> int:
                return first + next((i for i, ln in enumerate(lines) if needle in ln), 0)

            note = f"inline script metadata (PEP 723) of {path}"
            deps = meta.get("dependencies", [])
            for dep in deps if isinstance(deps, list) else []:
                if not isinstance(dep, str):
                    continue
                try:
                    f = declared_requirement(
                        dep,
                        path,
                        line_of(dep),
                        self.name,
                        confidence="medium",
                        note=note,
                        optional=True,
                        importers=(path,),
                    )
                except DetectionError as exc:
                    ctx.warn(f"skipped an inline dependency: {exc}", path)
                    continue
                if canonicalize_name(f.key) not in own:  # own project: the local code
                    findings.append(f)
            spec = meta.get("requires-python")
            if isinstance(spec, str):
                try:
                    findings.append(
                        declared_python(
                            spec,
                            path,
                            line_of("requires-python"),
                            self.name,
                            note,
                            key="requires-python",
                        )
                    )
                except DetectionError as exc:
                    ctx.warn(f"skipped its requires-python: {exc}", path)
        return findings
