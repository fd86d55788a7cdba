"""Whether an experiment needs a GPU, from evidence in the code it runs.

A GPU is required only where the code would fail without one, never because a pinned torch
wheel was built for CUDA. Per earlier ``experiment`` finding, the entry (script or notebook
code cells) and the repository modules it imports (transitively, resolved as in
:mod:`~reprobridge.detect._select`, at most :data:`MAX_FILES`) are read; a file counts when it
uses CUDA unconditionally:

* a use: ``.cuda()``, ``device="cuda"``, ``torch.device("cuda")``, ``.to("cuda")``,
  ``"cuda:0"``;
* and no fallback anywhere in the same file: ``torch.cuda.is_available()``,
  ``... else "cpu"`` (also ``else torch.device("cpu")``), ``"cpu" if ...``, a
  ``--cpu``/``--no-cuda``/``use_cuda``/``use_gpu``/``args.cuda``/``args.gpu``/``args.device``
  switch, ``device_count()``, a ``.is_cuda`` test (``if logits.is_cuda: noise = noise.cuda()``
  moves data to where the model already is: ethanfetaya/NRI's utils.py read as "needs a
  GPU" demoted its real experiment; the guard is common in the public code index).

Comments and docstrings are not code: ``device='cuda'`` in a doctest example says nothing
about what the run needs (a library's docstring made every experiment "need" a GPU).

The first such use gives a ``hardware`` finding ``{"gpus": 1}`` keyed on the entry,
medium confidence, with its ``file:line``. CUDA sources that the project compiles (the
``nvcc`` finding: ``.cu`` files, ``CUDAExtension``) make every experiment need one, low
confidence (the kernels may have a CPU path the text does not show).
"""

from __future__ import annotations

import io
import re
import tokenize

from reprobridge.detect._notebook import json_line_of
from reprobridge.detect._select import import_closure
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.findings import HardwareValue, NvccValue

#: Files read per experiment at most (the entry and what it imports).
MAX_FILES = 60

_USE_RE = re.compile(
    r"""\.cuda\(\s*(?:\)|\d)|device\s*=\s*["']cuda|torch\.device\(\s*["']cuda"""
    r"""|\.to\(\s*["']cuda|["']cuda:\d+["']"""
)
_FALLBACK_RE = re.compile(
    r"""cuda\.is_available\(|else\s+(?:torch\.device\(\s*)?["']cpu["']|["']cpu["']\s+if\b"""
    r"""|no[_-]cuda|use[_-](?:cuda|gpu)|args\.(?:cuda|gpu|no_cuda|cpu|device)\b|["']--cpu["']"""
    r"""|device_count\(|\.is_cuda\b"""
)


class GpuDetector(Detector):
    """``hardware`` findings for experiments whose code needs a GPU (see module docstring)."""

    name = "gpu"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        entries = ctx.experiment_entries(".py", ".ipynb")
        nvcc = ctx.of(NvccValue)
        verdicts: dict[str, Evidence | None] = {}  # file -> unconditional CUDA use, if any
        findings: list[Finding] = []
        for entry in entries:
            hit = self._closure_use(ctx, entry, verdicts)
            if hit is not None:
                findings.append(
                    Finding(
                        kind="hardware",
                        key=entry,
                        value=HardwareValue(1),
                        evidence=(hit,),
                        detector=self.name,
                        confidence="medium",
                        note="uses CUDA without a CPU fallback",
                    )
                )
            elif nvcc:
                findings.append(
                    Finding(
                        kind="hardware",
                        key=entry,
                        value=HardwareValue(1),
                        evidence=nvcc[0].evidence[:1],
                        detector=self.name,
                        confidence="low",
                        note="the project compiles CUDA sources",
                    )
                )
        return findings

    def _closure_use(
        self,
        ctx: DetectContext,
        entry: str,
        verdicts: dict[str, Evidence | None],
    ) -> Evidence | None:
        for path, code in import_closure(ctx, entry, None, MAX_FILES):
            if path not in verdicts:
                verdicts[path] = self._use(ctx, path, code)
            if verdicts[path] is not None:
                return verdicts[path]
        return None

    @staticmethod
    def _use(ctx: DetectContext, path: str, code: str) -> Evidence | None:
        # Every _USE_RE alternative contains "cuda", and blanking prose only turns
        # characters into spaces: without the word there is no use, and no need to tokenize
        # (most of this detector's time on a repository of notebooks).
        if "cuda" not in code:
            return None
        code = _without_prose(code)
        match = _USE_RE.search(code)
        if match is None or _FALLBACK_RE.search(code):
            return None
        if path.endswith(".ipynb"):
            start = code.rfind("\n", 0, match.start()) + 1
            end = code.find("\n", match.start())
            line = code[start : end if end >= 0 else len(code)].strip()
            raw = (ctx.index.try_read_text(path) or "").splitlines()
            return Evidence(path, json_line_of(raw, line))
        return Evidence(path, code.count("\n", 0, match.start()) + 1)


def _without_prose(code: str) -> str:
    """``code`` with its comments and docstrings (a string that is a statement of its own)
    blanked out, line numbers and columns kept; lines starting with ``#`` only, when the
    text does not tokenize (a notebook's shell escapes, a syntax error)."""
    lines = code.splitlines(keepends=True)
    spans: list[tuple[tuple[int, int], tuple[int, int]]] = []
    starts = {tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT}
    prev: int | None = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.COMMENT or (
                tok.type == tokenize.STRING and (prev is None or prev in starts)
            ):
                spans.append((tok.start, tok.end))
            if tok.type not in {tokenize.COMMENT, tokenize.NL}:
                prev = tok.type
    except (tokenize.TokenError, SyntaxError):
        return "".join(
            re.sub(r"[^\n]", " ", line) if line.lstrip().startswith("#") else line for line in lines
        )
    for (row, col), (end_row, end_col) in spans:
        for r in range(row, end_row + 1):
            line = lines[r - 1]
            lo = col if r == row else 0
            hi = end_col if r == end_row else len(line.rstrip("\r\n"))
            lines[r - 1] = line[:lo] + " " * (hi - lo) + line[hi:]
    return "".join(lines)
