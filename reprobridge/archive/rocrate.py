"""RO-Crate 1.1 metadata (``ro-crate-metadata.json``) for an archive, so repositories index it.

Contract of :func:`build_crate`: a pure function of its arguments (no clock, no network),
so the same archive gets the same bytes. The graph holds

* the metadata descriptor (``conformsTo`` RO-Crate 1.1, ``about`` the root);
* the root ``Dataset`` ``./``: name, description, ``datePublished`` (the archive's epoch),
  licence (an SPDX URL) when the manifest knows it, authors (``Person``), the paper as
  ``citation`` (a ``ScholarlyArticle``, by DOI when known), ``hasPart`` and ``mentions``;
* ``File`` entities for the top-level files and the artifacts, with ``contentSize`` and
  ``sha256``; ``Dataset`` entities for top-level directories and each evidence bundle;
* ``SoftwareSourceCode`` for the repository at the audited commit;
* one ``Dataset`` per manifest dataset (``url``, ``sha256`` where known);
* one ``CreateAction`` per included audit: ``instrument`` rb, ``object`` the manifest,
  ``result`` the bundle, ``startTime``/``endTime`` from its ``audit.json``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from reprobridge import __version__
from reprobridge.archive.members import Audit
from reprobridge.archive.pack import FileRecord
from reprobridge.constants import EVIDENCE_DIR, MANIFEST_FILE

if TYPE_CHECKING:
    from reprobridge.manifest.schema import Manifest

CRATE_FILE = "ro-crate-metadata.json"
CONTEXT = "https://w3id.org/ro/crate/1.1/context"
CONFORMS_TO = "https://w3id.org/ro/crate/1.1"
RB_ID = "https://github.com/reprobridge/reprobridge"


def _iso(epoch: int) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ref(entity_id: str) -> dict[str, str]:
    return {"@id": entity_id}


def build_crate(
    manifest: Manifest,
    files: Sequence[FileRecord],
    *,
    audits: Sequence[Audit],
    commit: str,
    epoch: int,
    directories: Sequence[str] = (),
) -> dict[str, Any]:
    """The crate as a JSON-able dict (see the module doc). ``files`` are the archived
    files' records; ``directories`` the top-level directories worth naming."""
    project = manifest.project
    paper = project.paper
    graph: list[dict[str, Any]] = [
        {
            "@id": CRATE_FILE,
            "@type": "CreativeWork",
            "conformsTo": _ref(CONFORMS_TO),
            "about": _ref("./"),
        }
    ]
    root: dict[str, Any] = {
        "@id": "./",
        "@type": "Dataset",
        "name": f"{project.name}: reproduction package",
        "description": (
            f"Reproduction package of {paper.title or project.name}: the environment "
            "(Nix flake and lock), the experiments and their checks (reprobridge.toml, "
            "repro/), and the evidence of audits that reran them. Made by ReproBridge."
        ),
        "datePublished": _iso(epoch),
    }
    extra: list[dict[str, Any]] = []
    if project.license:
        lic = f"https://spdx.org/licenses/{project.license}"
        root["license"] = _ref(lic)
        extra.append({"@id": lic, "@type": "CreativeWork", "name": project.license})
    if paper.authors:
        root["author"] = []
        for i, name in enumerate(paper.authors):
            pid = f"#author-{i + 1}"
            root["author"].append(_ref(pid))
            extra.append({"@id": pid, "@type": "Person", "name": name})
    if paper.title or paper.doi or paper.url:
        cid = f"https://doi.org/{paper.doi}" if paper.doi else paper.url or "#paper"
        article: dict[str, Any] = {"@id": cid, "@type": "ScholarlyArticle"}
        if paper.title:
            article["name"] = paper.title
        if paper.doi:
            article["identifier"] = f"https://doi.org/{paper.doi}"
        if paper.url:
            article["url"] = paper.url
        if paper.authors:
            article["author"] = [_ref(f"#author-{i + 1}") for i in range(len(paper.authors))]
        root["citation"] = _ref(cid)
        extra.append(article)

    parts: list[dict[str, Any]] = []
    by_path = {r.path: r for r in files}
    for path in sorted(
        p for p in by_path if "/" not in p or (p.startswith("repro/") and p.count("/") == 1)
    ):
        rec = by_path[path]
        parts.append(
            {
                "@id": path,
                "@type": "File",
                "name": path,
                "contentSize": str(rec.size),
                "sha256": rec.sha256,
                "encodingFormat": _media_type(path),
            }
        )
    for d in sorted(set(directories)):
        parts.append({"@id": d.rstrip("/") + "/", "@type": "Dataset", "name": d.rstrip("/")})
    for a in audits:
        parts.append(
            {
                "@id": f"{EVIDENCE_DIR}/{a.audit_id}/",
                "@type": "Dataset",
                "name": f"Evidence of audit {a.audit_id}",
            }
        )
    root["hasPart"] = [_ref(p["@id"]) for p in parts]

    source: dict[str, Any] = {
        "@id": "#repository",
        "@type": "SoftwareSourceCode",
        "name": project.name,
        "version": commit,
        "programmingLanguage": "Python",
    }
    if project.license:
        source["license"] = _ref(f"https://spdx.org/licenses/{project.license}")
    rb = {
        "@id": RB_ID,
        "@type": "SoftwareApplication",
        "name": "ReproBridge",
        "version": __version__,
    }
    mentions = [_ref("#repository")]
    datasets: list[dict[str, Any]] = []
    for ds_id, ds in sorted(manifest.datasets.items()):
        eid = ds.url or f"#dataset-{ds_id}"
        ent: dict[str, Any] = {"@id": eid, "@type": "Dataset", "name": ds.name or ds_id}
        if ds.url:
            ent["url"] = ds.url
        if ds.sha256:
            ent["sha256"] = ds.sha256
        if ds.description:
            ent["description"] = ds.description
        if ds.path:
            ent["identifier"] = ds.path
        datasets.append(ent)
        mentions.append(_ref(eid))
    actions: list[dict[str, Any]] = []
    for a in audits:
        aid = f"#audit-{a.audit_id}"
        passed = a.summary.passed if a.summary else None
        verdict = a.summary.verdict if a.summary else None
        outcome = (
            "incomplete (nothing failed, but not everything was judged)."
            if verdict == "INCOMPLETE"
            else "passed."
            if passed is True
            else "failed."
            if passed is False
            else "unknown."
        )
        action: dict[str, Any] = {
            "@id": aid,
            "@type": "CreateAction",
            "name": f"rb audit {a.audit_id}",
            "description": (
                "Audit: every experiment rerun in isolation and judged against the manifest; "
                + outcome
            ),
            "instrument": _ref(RB_ID),
            "object": [_ref(MANIFEST_FILE), _ref("#repository")],
            "result": [_ref(f"{EVIDENCE_DIR}/{a.audit_id}/")],
            "actionStatus": _ref("http://schema.org/CompletedActionStatus"),
        }
        if a.summary is not None:
            for value, prop in ((a.summary.started, "startTime"), (a.summary.finished, "endTime")):
                if value:
                    action[prop] = value
        actions.append(action)
        mentions.append(_ref(aid))
    root["mentions"] = mentions
    graph += [root, *parts, *extra, source, rb, *datasets, *actions]
    return {"@context": CONTEXT, "@graph": graph}


def _media_type(path: str) -> str:
    suffix = path.rsplit(".", 1)[-1].lower() if "." in path else ""
    return {
        "toml": "application/toml",
        "json": "application/json",
        "md": "text/markdown",
        "nix": "text/plain",
        "lock": "application/json",
        "py": "text/x-python",
        "sh": "text/x-shellscript",
        "txt": "text/plain",
        "pdf": "application/pdf",
    }.get(suffix, "application/octet-stream")
