"""Compatibility edits: the names an experiment's code calls that its pinned packages removed.

The ``drift`` detector (:mod:`reprobridge.detect.procedure.drift`) reports each reference of
an entry file to a name some release removed (``jax.tree_multimap``, gone in jax 0.3.16).
Whether the run meets that release is known only once the environment is locked, so this
rule runs after ``rb init``'s lock (:func:`with_drift_edits`), and:

* a reference whose distribution the lock holds only at versions before the removal is
  left as it is (the locked version still has the name);
* every other reference with a replacement becomes a renaming edit
  (:class:`~reprobridge.manifest.schema.SourceEdit` with a dotted-name ``value`` and
  ``when = "jax>=0.3.16"``) on every tier that runs (``full`` and ``smoke``): the full run
  needs the name as much as the smoke run. ``repro/derive.py`` applies it in the run's
  sandbox, and only when the run's own environment has the distribution at that version
  or later, so an environment without a lock (or another one, ``nix develop``) gets the
  edit exactly when it needs it;
* the edits change one file, the one the command runs (the tiers' rule): an experiment
  whose smoke tier already edits another file (a config file's bounds) gets none, and the
  guide says so, as it does for references in the repository modules the entry imports
  and for references no name edit can fix (``from jax import tree_multimap``).

The standard library's removals (``time.clock``, gone in Python 3.8) are decided by the
environment's Python (``environment.python``), with or without a lock.

Each edited tier's ``[derived]`` sources name the removal (``jax 0.4.13 (locked) removed
jax.tree_multimap in 0.3.16: <changelog>``) and the references' places; the guide's
decisions say the same in a sentence.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from reprobridge.detect.base import Finding
from reprobridge.detect.findings import DriftValue, Removal, select
from reprobridge.manifest.io import digest
from reprobridge.manifest.schema import (
    Derivation,
    Experiment,
    Manifest,
    SourceEdit,
    Tier,
    edit_place,
    plain_command,
    requirement_name,
)
from reprobridge.recovery._common import MergeResult
from reprobridge.recovery.experiments import named_files

TierName = Literal["full", "smoke"]


def locked_versions(lock: bytes | None) -> dict[str, list[Version]] | None:
    """The versions a ``uv.lock`` holds, by canonical distribution name (several when it
    resolved several Python markers apart); None without a readable lock."""
    if lock is None:
        return None
    try:
        data = tomllib.loads(lock.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    out: dict[str, list[Version]] = {}
    for pkg in data.get("package", []) or []:
        if not isinstance(pkg, dict) or not isinstance(pkg.get("name"), str):
            continue
        try:
            version = Version(str(pkg.get("version")))
        except InvalidVersion:
            continue
        out.setdefault(canonicalize_name(pkg["name"]), []).append(version)
    return {name: sorted(set(vs)) for name, vs in out.items()}


def _entry(exp: Experiment, entries: set[str]) -> str | None:
    """The file among ``entries`` that ``exp``'s command names as one of its words (its
    launcher can run a copy of it when the command is plain words), or None."""
    named = named_files(exp.command, exp.workdir) or []
    return next((f for f in named if f in entries), None)


def _removal_note(removal: Removal, versions: dict[str, list[Version]]) -> str:
    held = versions.get(removal.distribution)
    have = (
        f"Python {held[0]} (environment.python)"
        if removal.distribution == "python" and held
        else f"{removal.distribution} {', '.join(map(str, held))} (locked)"
        if held
        else f"{removal.distribution} (not locked: the run's version decides)"
    )
    return f"{have} removed {removal.name} in {removal.removed_in}: {removal.source}"


def _with_edits(
    exp: Experiment, name: TierName, edits: list[SourceEdit]
) -> tuple[Tier | None, list[SourceEdit]]:
    """(the tier ``name`` of ``exp`` with ``edits`` added, all its edits in place order), or
    (None, []) where the experiment has no such tier to run (no smoke tier)."""
    if name == "smoke" and "smoke" not in exp.tiers:
        return None, []
    tier = exp.tiers.get(name) or Tier()
    merged = sorted([*tier.edits, *edits], key=lambda e: (e.cell or 0, e.line, e.column))
    return tier.model_copy(update={"edits": merged}), merged


def with_drift_edits(
    merged: MergeResult, findings: Sequence[Finding], lock: bytes | None
) -> MergeResult:
    """``merged`` with the renaming edits of its experiments (see the module docstring);
    ``lock`` is the ``uv.lock`` rb wrote or kept (None: none). Deterministic."""
    refs = select(findings, DriftValue)
    if not refs:
        return merged
    manifest: Manifest = merged.manifest
    locked = locked_versions(lock)
    # The standard library's version is the environment's Python, lock or not.
    versions = {**(locked or {}), "python": [Version(manifest.environment.python)]}
    experiments = dict(manifest.experiments)
    derived = dict(manifest.derived)
    decisions: list[str] = []
    warnings: list[str] = []
    entries = {r.value.entry for r in refs}
    for exp_id, exp in manifest.experiments.items():
        entry = _entry(exp, entries)
        if entry is None:
            continue
        mine = sorted(
            (r for r in refs if r.value.entry == entry),
            key=lambda r: (
                r.value.file != entry,
                r.value.file,
                r.value.cell or 0,
                r.value.line,
            ),
        )
        edits: list[SourceEdit] = []
        sources: list[str] = []
        # (was, value, why) -> where: one sentence per rename, however many places.
        renamed: dict[tuple[str, str, str], list[str]] = {}
        left: list[str] = []
        for r in mine:
            v = r.value
            if v.current:
                continue  # written for the release: nothing to rename
            held = versions.get(v.removal.distribution)
            if held and max(held) < Version(v.removal.removed_in):
                continue  # every locked version still has the name
            if not v.value or v.file != entry:
                # No name edit fixes it, or it is in a module the entry imports: a tier
                # edits one file, the one the command runs.
                instead = f", replaced by {v.removal.replacement}" if v.removal.replacement else ""
                left.append(
                    f"{v.file} {edit_place(v.cell, v.line)} `{v.was}` ({v.removal.what}{instead})"
                )
                continue
            # The value names the edit's fields as SourceEdit does (see DriftValue).
            edits.append(SourceEdit.model_validate(v, from_attributes=True))
            why = _removal_note(v.removal, versions)
            sources += [*r.sources(), f"rb rule: {why}"]
            renamed.setdefault((v.was, v.value, why), []).append(edit_place(v.cell, v.line))
        if left:
            warnings.append(
                f"{exp_id}: calls names its packages removed that rb leaves as they are (an "
                f"import no name edit fixes, or a module the entry imports: a tier edits the "
                f"file the command runs only): {'; '.join(left)}: change them by hand"
            )
        if not edits:
            continue
        shown = [
            f"`{was}` -> `{value}` at {', '.join(places)} ({why})"
            for (was, value, why), places in renamed.items()
        ]
        if not plain_command(exp.command):
            warnings.append(
                f"{exp_id}: {entry} calls names its packages removed ({'; '.join(shown)}), but "
                "the command is shell syntax, which cannot run a renamed copy: rename them by hand"
            )
            continue
        other = next((e.file for t in exp.tiers.values() for e in t.edits if e.file != entry), None)
        if other is not None:
            warnings.append(
                f"{exp_id}: {entry} calls names its packages removed ({'; '.join(shown)}), but "
                f"a tier already edits {other} and a tier edits one file: rename them by hand"
            )
            continue
        tiers = dict(exp.tiers)
        for name in ("full", "smoke"):
            tier, all_edits = _with_edits(exp, name, edits)
            if tier is None:
                continue
            tiers[name] = tier
            key = f"experiments.{exp_id}.tiers.{name}.edits"
            derived[key] = _rederived(
                derived.get(key),
                sources,
                [e.model_dump(mode="json", exclude_none=True) for e in all_edits],
                "high" if locked is not None else "medium",
            )
        experiments[exp_id] = exp.model_copy(update={"tiers": tiers})
        decisions.append(
            f"{exp_id}: every tier runs a copy of {entry} with the names its packages "
            f"removed renamed (applied when the run's version lacks them): {'; '.join(shown)}"
        )
    if not decisions and not warnings:
        return merged
    notes = merged.notes
    return replace(
        merged,
        manifest=manifest.model_copy(update={"experiments": experiments, "derived": derived}),
        notes=replace(
            notes,
            decisions=[*notes.decisions, *decisions],
            warnings=[*notes.warnings, *warnings],
        ),
    )


def _unfixed(
    merged: MergeResult, findings: Sequence[Finding]
) -> tuple[dict[str, list[DriftValue]], dict[str, list[DriftValue]]]:
    """The references no renaming edit will fix, by distribution (the standard library's
    left out): without a replacement (a ``[[keyword]]`` entry, ``from jax import
    tree_multimap``), in a module the entry imports, or run by a shell-syntax command; and
    the *current* ones (code written for the release, :attr:`DriftValue.current`), by
    distribution, over every experiment: a package the code also uses as released cannot
    be held below the release."""
    refs = select(findings, DriftValue)
    entries = {r.value.entry for r in refs}
    out: dict[str, list[DriftValue]] = {}
    current: dict[str, list[DriftValue]] = {}
    for exp in merged.manifest.experiments.values():
        entry = _entry(exp, entries)
        for r in refs:
            v = r.value
            if v.entry != entry or v.removal.distribution == "python":
                continue
            into = current if v.current else out
            renamed = v.value and v.file == entry and plain_command(exp.command)
            if not renamed and v not in into.get(v.removal.distribution, []):
                into.setdefault(v.removal.distribution, []).append(v)
    return out, current


def _holds_below(req: Requirement, bound: Version) -> bool:
    """Whether ``req`` can take a ceiling below ``bound``: not when the repository pins it
    (``==``, ``===``, ``~=``) or asks for ``bound`` or later (its own word wins)."""
    for spec in req.specifier:
        if spec.operator in ("==", "===", "~="):
            return False
        if spec.operator in (">=", ">") and Version(spec.version) >= bound:
            return False
    return True


def with_drift_ceilings(
    merged: MergeResult, findings: Sequence[Finding], lock: bytes | None = None
) -> MergeResult:
    """``merged`` with an upper bound on each package the code calls a name or keyword of
    that no renaming edit fixes (see :func:`_unfixed`): ``seaborn<0.13.0`` where a call
    passes ``cmap`` to ``seaborn.scatterplot``, so the lock resolves a release from before
    the removal. The bound goes on the requirement the manifest already lists (none is
    added); a requirement the repository pins, or bounds at or above it, is left alone.

    ``lock`` is a lock already made (``rb check`` and ``--no-lock`` keep one; ``rb init``
    locks again without the bounds when they leave no resolution, then passes that lock): a
    bound it does not satisfy is left out, and the guide warns that the locked release
    fails the code's calls. Deterministic: the same lock gives the same manifest and notes."""
    unfixed, current = _unfixed(merged, findings)
    held = locked_versions(lock) or {}
    manifest = merged.manifest
    reqs = list(manifest.environment.python_requirements)
    sources: list[str] = []
    decisions: list[str] = []
    warnings: list[str] = []
    for dist, refs in sorted(unfixed.items()):
        removal = min((v.removal for v in refs), key=lambda r: Version(r.removed_in))
        bound = Version(removal.removed_in)
        places = "; ".join(
            f"{v.file} {edit_place(v.cell, v.line)} `{v.was}` ({v.removal.what})" for v in refs
        )
        needed = [v for v in current.get(dist, []) if Version(v.removal.removed_in) >= bound]
        if needed:
            since = "; ".join(f"{v.file} {edit_place(v.cell, v.line)} `{v.was}`" for v in needed)
            warnings.append(
                f"{dist}: some of the code needs it below {removal.removed_in} ({places}) and "
                f"some at {removal.removed_in} or later ({since}): no release runs both, so "
                f"none is held below it; the former fail ({removal.source})"
            )
            continue
        if held.get(dist) and max(held[dist]) >= bound:
            warnings.append(
                f"{dist} {', '.join(map(str, held[dist]))} (locked) is past {removal.removed_in}, "
                f"which the code needs below ({places}), and no lock below it resolved: change "
                f"those calls by hand ({removal.source})"
            )
            continue
        at = next((i for i, r in enumerate(reqs) if requirement_name(r) == dist), None)
        if at is None:
            continue
        req = Requirement(reqs[at])
        if not _holds_below(req, bound):
            continue
        req.specifier &= SpecifierSet(f"<{removal.removed_in}")
        reqs[at] = str(req)
        why = (
            f"{dist} held below {removal.removed_in}, where {removal.what}: the code does so "
            f"where no rename fixes it ({places}): {removal.source}"
        )
        sources.append(f"rb rule: {why}")
        decisions.append(f"environment: {why}")
    if warnings and not decisions:
        return replace(
            merged, notes=replace(merged.notes, warnings=[*merged.notes.warnings, *warnings])
        )
    if not decisions:
        return merged
    key = "environment.python_requirements"
    derived = {
        **manifest.derived,
        key: _rederived(manifest.derived.get(key), sources, reqs, "medium"),
    }
    env = manifest.environment.model_copy(update={"python_requirements": reqs})
    return replace(
        merged,
        manifest=manifest.model_copy(update={"environment": env, "derived": derived}),
        notes=replace(
            merged.notes,
            decisions=[*merged.notes.decisions, *decisions],
            warnings=[*merged.notes.warnings, *warnings],
        ),
    )


def _rederived(
    old: Derivation | None,
    sources: list[str],
    value: object,
    confidence: Literal["high", "medium", "low"],
) -> Derivation:
    """The ``[derived]`` entry of a value a drift rule rewrote: ``old``'s sources with the
    rule's added, the digest of the new ``value``, ``old``'s confidence (``confidence``
    when the merge derived nothing there before)."""
    return Derivation(
        sources=sorted({*(old.sources if old else []), *sources}),
        digest=digest(value),
        confidence=old.confidence if old else confidence,
    )
