"""setup.cfg: ``[options] install_requires`` and ``python_requires`` (setuptools' declarative form).

Read with :mod:`configparser` (no interpolation: ``%`` is common in markers and URLs). A
value's line is found by a cheap scan of the text, since configparser does not keep lines.
``install_requires = file: requirements.txt`` defers to that file.
"""

from __future__ import annotations

import re

from reprobridge.detect.base import Confidence, DeclaredFileDetector, DetectContext, Finding
from reprobridge.detect.declared.requirements import DeclaredFile
from reprobridge.errors import DetectionError

_SECTION_RE = re.compile(r"^\s*\[([^\]]+)\]")
_KEY_RE = re.compile(r"^([A-Za-z0-9_.-]+)\s*[=:]")


def _option_lines(text: str, section: str) -> dict[str, int]:
    """Line number of each ``key =`` in ``[section]`` (first occurrence)."""
    lines: dict[str, int] = {}
    current = None
    for number, raw in enumerate(text.splitlines(), start=1):
        head = _SECTION_RE.match(raw)
        if head:
            current = head.group(1).strip()
            continue
        key = _KEY_RE.match(raw)
        if current == section and key:
            lines.setdefault(key.group(1).lower().replace("-", "_"), number)
    return lines


class SetupCfgDetector(DeclaredFileDetector):
    """Declared dependencies and Python bound of every ``setup.cfg``.

    A root setup.cfg that configparser cannot read raises DetectionError with its line; a
    nested one is skipped with a warning. Findings carry ``setup.cfg:line`` of the value's
    own line inside the multi-line ``install_requires``.
    """

    name = "setupcfg"
    filename = "setup.cfg"

    def _one(self, ctx: DetectContext, path: str, confidence: Confidence) -> list[Finding]:
        import configparser  # loaded only when there is a setup.cfg

        text = ctx.index.read_text(path)
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(text, source=path)
        except configparser.ParsingError as exc:
            line = exc.errors[0][0] if exc.errors else None
            raise DetectionError(
                "is not a valid INI file", path=path, field=f"line {line}" if line else None
            ) from exc
        except configparser.Error as exc:
            line = getattr(exc, "lineno", None)
            raise DetectionError(
                f"is not a valid INI file: {exc.message}",
                path=path,
                field=f"line {line}" if line else None,
            ) from exc
        if not parser.has_section("options"):
            return []
        lines = _option_lines(text, "options")
        out = DeclaredFile(ctx, self.name, path, confidence)
        python = parser.get("options", "python_requires", fallback="").strip()
        if python:
            line = lines.get("python_requires", 1)
            out.python(python, line, "setup.cfg python_requires", "python_requires")
        raw = parser.get("options", "install_requires", fallback="")
        start = lines.get("install_requires", 1)
        if raw.strip().startswith("file:"):
            for target in raw.strip()[len("file:") :].replace(",", " ").split():
                out.deferred(start, target, "install_requires")
            return out.findings
        text_lines = text.splitlines()
        for value in raw.splitlines():
            value = re.split(r"(?:^|\s)[#;]", value, maxsplit=1)[0].strip()
            if value:
                out.requirement(value, _find_line(text_lines, value, start))
        return out.findings


def _find_line(lines: list[str], value: str, start: int) -> int:
    """The first line at or after ``start`` containing ``value`` (else ``start``)."""
    for number in range(start, len(lines) + 1):
        if value in lines[number - 1]:
            return number
    return start
