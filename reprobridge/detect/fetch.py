"""Whether an experiment reads data the repository does not contain (fetched at run time).

The audit runs offline, so an experiment whose data comes from a download (a library
dataset with ``download=True``, ``load_dataset``, a URL the code fetches) or from a path
the repository lacks (COCO under ``data/``) cannot run as cloned; the merge ranks it below
one that needs nothing and the guide says why.

Per earlier ``experiment`` finding, the entry and the repository modules it imports
(transitively, :func:`~reprobridge.detect._select.import_closure`, at most
:data:`MAX_FILES`) are the experiment's code; a ``dataset`` finding with evidence in one of
those files counts unless it is generated (``make_moons``, random arrays), bundled with its
library (scikit-learn's ``load_iris``), or a path present in the repository relative to the
entry's folder or the root (the entry's own folders are code, not data). A download call
in the entry itself counts too, where no dataset finding names one (:data:`_DOWNLOAD_RE`:
``download=True``, ``pretrained=True``, ``urlretrieve``, ``requests.get("http...``, ``from_pretrained``,
``hf_hub_download``, ``torch.hub.load``...; in the modules it imports such a call is often
a library function the run never calls). One ``fetch`` finding per such entry, keyed on
the entry, medium confidence, ``value["datasets"]`` what is fetched (dataset ids with what
they are, or the download call), evidence the first one's line in that code.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import PurePosixPath

from reprobridge.detect._select import import_closure
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.notebooks import json_line_of

#: Files read per experiment at most (the entry and what it imports).
MAX_FILES = 60
#: A call that downloads at run time (data or weights).
_DOWNLOAD_RE = re.compile(
    r"""download\s*=\s*True|pretrained\s*=\s*True|urlretrieve\(|urlopen\(\s*["']https?://"""
    r"""|requests\.get\(\s*f?["']https?://|wget\.download\(|hf_hub_download\("""
    r"""|snapshot_download\(|\.from_pretrained\(|torch\.hub\.load\(|gdown\.download\("""
)


class FetchDetector(Detector):
    """``fetch`` findings for experiments whose data is not in the repository."""

    name = "fetch"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        datasets = ctx.of_kind("dataset")
        files = {f.path for f in ctx.index}
        dirs = {str(p) for path in files for p in PurePosixPath(path).parents}
        py_paths = set(ctx.index.py_scan())
        entries = sorted(
            {
                str(f.value.get("entry", ""))
                for f in ctx.of_kind("experiment")
                if str(f.value.get("entry", "")).endswith((".py", ".ipynb"))
            }
        )
        findings: list[Finding] = []
        for entry in entries:
            closure = dict(import_closure(ctx, entry, py_paths, MAX_FILES))
            own = {str(p) for p in PurePosixPath(entry).parents}
            hits: list[tuple[str, Evidence]] = []
            for d in datasets:
                ev = next((e for e in d.evidence if e.path in closure), None)
                if ev is None or not _fetched(d, entry, files | dirs, own):
                    continue
                what = d.value.get("name") or d.value.get("url") or d.value.get("path")
                hits.append((f"{d.key} ({what})", ev))
            match = _DOWNLOAD_RE.search(closure.get(entry, ""))
            if not hits and match:
                hits = [
                    (
                        f"a download: {match.group(0)}",
                        _line(ctx, entry, closure[entry], match.start()),
                    )
                ]
            if hits:
                findings.append(
                    Finding(
                        kind="fetch",
                        key=entry,
                        value={"entry": entry, "datasets": [h[0] for h in hits]},
                        evidence=(hits[0][1],),
                        detector=self.name,
                        confidence="medium",
                        note="its data is not in the repository: the offline audit lacks it",
                    )
                )
        return findings


def _fetched(d: Finding, entry: str, present: set[str], own: set[str]) -> bool:
    """Whether dataset ``d`` is obtained at run time rather than read from the repository."""
    if d.value.get("generated") or "bundled" in d.note:
        return False
    path = str(d.value.get("path") or "")
    if path:
        here = posixpath.normpath(posixpath.join(str(PurePosixPath(entry).parent), path))
        root = posixpath.normpath(path)
        if here in present or (root in present and root not in own):
            return False
    return bool(d.value.get("name") or d.value.get("url") or path)


def _line(ctx: DetectContext, path: str, code: str, pos: int) -> Evidence:
    """The evidence of offset ``pos`` of ``code`` (a notebook's: the line of its JSON)."""
    if not path.endswith(".ipynb"):
        return Evidence(path, code.count("\n", 0, pos) + 1)
    start = code.rfind("\n", 0, pos) + 1
    end = code.find("\n", pos)
    text = code[start : end if end >= 0 else len(code)].strip()
    return Evidence(path, json_line_of((ctx.index.try_read_text(path) or "").splitlines(), text))
