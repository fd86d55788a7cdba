"""Images a run declared as outputs, read from its copies in the bundle, for embedding.

Contract:

* Only files under a path the experiment declares in ``outputs`` (a file, or a directory and
  everything below it) and copied into the run's ``files/`` are looked at; a name ending
  ``.png``, ``.jpg``/``.jpeg`` or ``.svg`` whose first bytes are that format (a PNG
  signature, a JPEG start-of-image marker, an XML/SVG opening) is an image. Anything else
  is not shown.
* The bundle is untrusted: the walk never follows a link (``scandir`` entries checked with
  ``follow_symlinks=False``, files opened with :func:`~reprobridge._fs.open_regular`), and
  at most :data:`MAX_LISTED` images per run are named.
* Bounded: an image over :data:`MAX_IMAGE_BYTES`, or one that would take the page past
  :data:`MAX_PAGE_IMAGE_BYTES` (an :class:`ImageBudget` shared by every run of one page),
  is named with its size and a reason, not embedded; its bytes are never read.
* An SVG is embedded only as an ``<img>`` data URI, where a browser runs none of its
  scripts and loads nothing it references; its markup never enters the page.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from reprobridge._fs import open_regular
from reprobridge.report.numbers import fmt_bytes

#: One image's largest size that is embedded (bytes of the file, before base64).
MAX_IMAGE_BYTES = 2 << 20
#: All images of one page together (bytes of the files, before base64).
MAX_PAGE_IMAGE_BYTES = 16 << 20
#: Images named per run (embedded or not); a declared directory may hold thousands.
MAX_LISTED = 100
#: Directory levels walked below ``files/``.
_MAX_DEPTH = 16

_MEDIA = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".svg": "image/svg+xml"}


@dataclass(frozen=True)
class ImageFile:
    """One image output of a run: its workdir-relative ``path``, its ``size`` in bytes, its
    ``media`` type, and either ``data_uri`` (embedded) or ``reason`` (why it is not)."""

    path: str
    size: int
    media: str
    data_uri: str | None = None
    reason: str = ""


class ImageBudget:
    """What is left of one page's :data:`MAX_PAGE_IMAGE_BYTES` (shared by its runs)."""

    def __init__(self, total: int = MAX_PAGE_IMAGE_BYTES, each: int = MAX_IMAGE_BYTES) -> None:
        self.left = total
        self.total = total
        self.each = each


def _looks_like(media: str, head: bytes) -> bool:
    if media == "image/png":
        return head.startswith(b"\x89PNG\r\n\x1a\n")
    if media == "image/jpeg":
        return head.startswith(b"\xff\xd8\xff")
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return (
        text.startswith((b"<?xml", b"<svg", b"<!--", b"<!doctype svg")) and b"<svg" in head.lower()
    )


def _declared(path: str, outputs: Iterable[str]) -> bool:
    return any(path == o or path.startswith(o.rstrip("/") + "/") for o in outputs)


def _walk(root: Path, rel: str = "", depth: int = 0) -> list[str]:
    """Every regular file below ``root`` (never through a link), workdir-relative, sorted."""
    if depth > _MAX_DEPTH:
        return []
    try:
        with os.scandir(root / rel if rel else root) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return []
    out: list[str] = []
    for entry in entries:
        name = f"{rel}/{entry.name}" if rel else entry.name
        if entry.is_dir(follow_symlinks=False):
            out += _walk(root, name, depth + 1)
        elif entry.is_file(follow_symlinks=False):
            out.append(name)
    return out


def run_images(files: Path, outputs: Iterable[str], budget: ImageBudget) -> list[ImageFile]:
    """The image outputs of one run whose copies are under ``files`` (the run's
    ``files/``), in path order, embedded while ``budget`` allows (module docstring)."""
    declared = [o for o in outputs if o]
    if not declared:
        return []
    found: list[ImageFile] = []
    for path in _walk(files):
        media = _MEDIA.get(Path(path).suffix.lower())
        if media is None or not _declared(path, declared):
            continue
        if len(found) == MAX_LISTED:
            break
        image = _read(files / path, path, media, budget)
        if image is not None:
            found.append(image)
    return found


def _read(full: Path, path: str, media: str, budget: ImageBudget) -> ImageFile | None:
    try:
        with os.fdopen(open_regular(full), "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > budget.each:
                reason = f"not embedded: {fmt_bytes(size)}, over the {fmt_bytes(budget.each)} limit per image"
                return ImageFile(path, size, media, reason=reason)
            if size > budget.left:
                reason = (
                    f"not embedded: {fmt_bytes(size)}, over what is left of the "
                    f"{fmt_bytes(budget.total)} limit for the page's images"
                )
                return ImageFile(path, size, media, reason=reason)
            data = fh.read(size + 1)
    except OSError:
        return None  # a link or a special file: the walk skips those; a race lands here
    if len(data) != size:
        return ImageFile(path, size, media, reason="not embedded: it changed while read")
    if not _looks_like(media, data[:512]):
        return ImageFile(path, size, media, reason=f"not embedded: not a {media} file")
    budget.left -= size
    uri = f"data:{media};base64,{base64.b64encode(data).decode('ascii')}"
    return ImageFile(path, size, media, data_uri=uri)
