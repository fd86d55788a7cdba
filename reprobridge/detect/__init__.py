"""Static recovery: a repository (and optionally its paper) becomes a list of findings."""

from __future__ import annotations

from reprobridge._log import emit
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.index import RepoIndex

__all__ = ["DetectContext", "Detector", "Evidence", "Finding", "RepoIndex", "detect_repo"]


def detect_repo(
    index: RepoIndex,
    *,
    paper_path: str | None = None,
    only: list[Detector] | None = None,
) -> DetectContext:
    """Run every detector (or ``only`` these) over ``index``; return the filled context.

    Raises the first DetectionError a detector raises (a declared source that is broken).
    """
    from reprobridge.detect.envscope import env_scope
    from reprobridge.detect.registry import detectors

    ctx = DetectContext(index=index, paper_path=paper_path)
    for path, why in sorted(env_scope(index).ignored.items()):
        ctx.warn(f"environment file ignored: {why}", path)
    for det in only if only is not None else detectors():
        emit("detect", detector=det.name)
        found = det.detect(ctx)
        ctx.findings.extend(found)
    return ctx
