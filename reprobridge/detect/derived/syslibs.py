"""System libraries and tools, as nixpkgs attribute names.

Sources, in order of confidence:

* ``apt.txt`` (the Binder convention; root, ``binder/`` or ``.binder/``) — high;
* ``apt-get install`` / ``apt install`` in Dockerfiles (``RUN`` lines, continuations
  joined) — high; in README*/INSTALL* and ``docs/`` Markdown/reST — medium;
* Python packages known to load a system library (soundfile -> libsndfile, opencv-python ->
  libGL + glib, pydub -> ffmpeg, ...), read from earlier ``python_requirement`` findings —
  medium or low (see :data:`~reprobridge.detect._pkgmap.PYTHON_SYSTEM_NEEDS`).

Debian names are mapped with :data:`~reprobridge.detect._pkgmap.DEBIAN_TO_NIX`; compilers,
the apt machinery, Python itself and CUDA packages are skipped (stdenv, the interpreter and
the ``cuda`` finding cover them). A Debian name with no known attribute is reported under its
own name with confidence low. One finding per attribute, with every piece of evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from reprobridge.detect._pkgmap import (
    DEBIAN_SKIP,
    DEBIAN_SKIP_PREFIXES,
    DEBIAN_TO_NIX,
    PYTHON_SYSTEM_NEEDS,
)
from reprobridge.detect._text import continued_lines, skip_path
from reprobridge.detect.base import Confidence, DetectContext, Detector, Evidence, Finding, rank_of
from reprobridge.detect.envscope import env_scope
from reprobridge.detect.findings import RequirementValue, SystemLibraryValue

_APT_INSTALL_RE = re.compile(r"\bapt(?:-get)?\s+(?:-\S+\s+)*install\b(.*)")
_STOP_RE = re.compile(r"&&|\|\||[;|#`)]")
_PACKAGE_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
_DOC_SUFFIXES = (".md", ".rst", ".txt", "")


@dataclass
class _Entry:
    name: str
    confidence: Confidence
    note: str
    evidence: list[Evidence] = field(default_factory=list)


def _joined(text: str) -> list[tuple[int, str]]:
    """Lines with shell ``\\`` continuations joined, each with its first line number."""
    lines = enumerate((raw.rstrip() for raw in text.splitlines()), start=1)
    return [(start, " ".join(parts)) for start, parts in continued_lines(lines)]


def apt_packages(line: str) -> list[str]:
    """Debian package names installed by the ``apt(-get) install`` commands in ``line``."""
    names: list[str] = []
    for match in _APT_INSTALL_RE.finditer(line):
        args = _STOP_RE.split(match.group(1), maxsplit=1)[0]
        for token in args.split():
            token = token.strip("\"'")
            if token.startswith("-") or "$" in token:
                continue
            token = token.split("=", 1)[0].split(":", 1)[0]  # pkg=1.2, pkg:amd64
            if _PACKAGE_RE.match(token):
                names.append(token)
    return names


def _skipped(name: str) -> bool:
    return name in DEBIAN_SKIP or name.startswith(DEBIAN_SKIP_PREFIXES)


class SystemLibsDetector(Detector):
    """``system_library`` findings keyed by nixpkgs attribute (see the module docstring)."""

    name = "syslibs"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        found: dict[str, _Entry] = {}

        def add(attr: str, name: str, conf: Confidence, note: str, ev: Evidence) -> None:
            entry = found.setdefault(attr, _Entry(name, conf, note))
            if rank_of(conf) < rank_of(entry.confidence):
                entry.confidence, entry.note, entry.name = conf, note, name
            if ev not in entry.evidence:
                entry.evidence.append(ev)

        def debian(name: str, conf: Confidence, ev: Evidence) -> None:
            if _skipped(name):
                return
            attr = DEBIAN_TO_NIX.get(name)
            if attr is None:
                add(name, name, "low", f"no known nixpkgs attribute for Debian package {name}", ev)
            else:
                add(attr, name, conf, f"Debian package {name}", ev)

        scope = env_scope(ctx.index)
        for path in ("apt.txt", "binder/apt.txt", ".binder/apt.txt"):
            if scope.ignores(path):
                continue
            text = ctx.index.try_read_text(path) if path in ctx.index else None
            for number, raw in enumerate((text or "").splitlines(), start=1):
                for token in raw.split("#", 1)[0].split():
                    if _PACKAGE_RE.match(token):
                        debian(token, "high", Evidence(path, number))

        for path, conf in self._apt_sources(ctx):
            text = ctx.index.try_read_text(path)
            if text is None:
                continue
            for number, line in _joined(text):
                if "install" not in line:
                    continue
                for name in apt_packages(line):
                    debian(name, conf, Evidence(path, number))

        for f in ctx.of(RequirementValue):
            need = PYTHON_SYSTEM_NEEDS.get(f.key)
            if need is None:
                continue
            attrs, conf, why = need
            for attr in attrs:
                for ev in f.evidence:
                    add(attr, attr, conf, f"needed by Python package {f.key}: {why}", ev)

        return [
            Finding(
                kind="system_library",
                key=attr,
                value=SystemLibraryValue(entry.name),
                evidence=tuple(entry.evidence),
                detector=self.name,
                confidence=entry.confidence,
                note=entry.note,
            )
            for attr, entry in sorted(found.items())
        ]

    @staticmethod
    def _apt_sources(ctx: DetectContext) -> list[tuple[str, Confidence]]:
        """Dockerfiles (high) and installation docs (medium) that may run apt."""
        sources: list[tuple[str, Confidence]] = []
        for entry in ctx.index:
            path, name = entry.path, entry.name
            if skip_path(path):
                continue
            if (
                name == "Dockerfile"
                or name.startswith("Dockerfile.")
                or name.endswith(".Dockerfile")
            ):
                sources.append((path, "high"))
            elif ("/" not in path and name.upper().startswith(("README", "INSTALL"))) or (
                path.startswith("docs/") and entry.suffix in _DOC_SUFFIXES
            ):
                sources.append((path, "medium"))
        return sources
