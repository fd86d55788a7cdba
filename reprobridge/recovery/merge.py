"""Findings become one manifest, by stated rules; conflicts are reported, not hidden.

Rules (each decision is recorded with its sources in ``Manifest.derived``):

* **Dependencies**: one requirement per distribution. When sources disagree, the more
  specific declaration wins: requirements files > pyproject > setup.cfg > setup.py >
  Pipfile > environment.yml > imports; the loser is reported as a conflict. Imports no file
  declares are added unpinned and flagged. An import found only inside a ``try`` whose
  handler catches a failed import (``except ImportError``, bare, ``Exception``) is optional:
  listed in ``environment.optional_requirements`` with its guards, never installed; the
  same import unguarded anywhere in the code keeps it required.
* **Which files**: repo2docker's precedence (:mod:`reprobridge.detect.envscope`) decides
  before anything is read: a ``binder/`` directory replaces the root's files;
  ``environment.yml`` > ``Pipfile(.lock)`` > ``requirements.txt``; a Pipfile's Python wins
  over ``runtime.txt``.
* **Locks**: a committed ``uv.lock``/``poetry.lock``/``Pipfile.lock`` pins the requirements
  it locks (unless a requirement excludes the version: a conflict, kept); its other packages
  become ``environment.python_constraints``.
* **Python**: an exact version (``.python-version`` > ``runtime.txt`` > conda > Pipfile)
  wins; otherwise the newest version that every specifier (``requires-python``, syntax
  used, framework pins) admits, capped at 3.12 for wheel availability; default 3.11. An
  exact version that violates a specifier is kept and reported.
* **CUDA**: the highest-confidence finding names the version; disagreeing findings are
  reported. A CUDA version says which wheels were built for it, not that a run needs a GPU:
  an experiment needs one only on evidence in its code (``hardware`` findings: a launcher's
  process count, CUDA use without a CPU fallback, compiled CUDA sources). The version becomes
  ``environment.cuda`` (the toolkit, and a nixpkgs release that carries it) only when CUDA
  sources are compiled or an experiment needs a GPU (:mod:`reprobridge.recovery.gpuneed`);
  either way a decision says so, with the evidence.
* **Date bound**: ``environment.exclude_newer`` is the end of the day of the last commit
  that changed what the chosen experiments run or declare their environment in (HEAD's
  committer date when that cannot be known; :mod:`reprobridge.recovery.dating`), so the
  lock resolves what existed then; the Python is chosen for the same date.
* **Run tooling**: a notebook experiment adds ``nbconvert`` and ``ipykernel`` to the
  requirements (rb runs notebooks with ``jupyter nbconvert --execute``).
* **nixpkgs**: chosen from the shipped pin data (:mod:`reprobridge.recovery.pins`).
* **Experiments**: README > Makefile > shell scripts > notebooks > ``__main__`` scripts;
  the same run found twice is one experiment (commands compared with their script resolved
  against their workdir, not as text); a script's or notebook's own candidate yields to a
  command written for it; the candidates are then ranked
  (:mod:`reprobridge.recovery.ranking`): declared ones and strong ones are kept, the rest
  are listed in the guide as other candidates, with why. ``main`` comes first, what a smoke
  audit runs: among all candidates, one that runs on a CPU from the repository's own data,
  then one that prints a metric rb can read, then the best ranked (an experiment whose data
  is downloaded at run time, or read from a file the repository lacks, is reported). A file
  a script beside the experiment writes, run before it by a README or shell script, makes
  that script's command the experiment's ``setup``. Literal ``--flag value`` arguments
  become ``{param}`` placeholders; the seed flag becomes ``{seed}``; an epochs/steps flag
  gives the ``smoke`` tier.
* **Targets and claims**: paper table rows are matched to experiments and columns to
  metrics by shared words; an unmatched cell is reported, never guessed into a threshold.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace

from reprobridge.detect.base import DetectContext, Finding
from reprobridge.detect.envscope import env_scope
from reprobridge.detect.findings import ExperimentValue, NvccValue, ProjectValue, of_type
from reprobridge.manifest.io import digest, flatten, manifest_data
from reprobridge.manifest.notes import Conflict, RecoveryNotes
from reprobridge.manifest.schema import Derivation, Manifest
from reprobridge.recovery import pins
from reprobridge.recovery._common import Builder, MergeResult, best
from reprobridge.recovery.dating import CodeDate, code_date, environment_date
from reprobridge.recovery.environment import (
    add_run_tooling,
    decide_cuda,
    merge_cuda,
    merge_environment,
    merge_exclude_newer,
    merge_metadata_floors,
    merge_optional_imports,
    merge_python,
    merge_pythonpath,
    merge_requirements,
)
from reprobridge.recovery.experiments import MAIN_DECISION, merge_datasets, merge_experiments
from reprobridge.recovery.gpuneed import GpuNeed, gpu_need
from reprobridge.recovery.paper import merge_paper
from reprobridge.recovery.paperfile import PAPER_SOURCE, hash_sources
from reprobridge.recovery.scope import (
    declaring_folders,
    drop_support_only,
    drop_unreached_imports,
    experiment_folder,
    run_closure,
    scope_findings,
    subproject,
)

__all__ = ["Conflict", "MergeResult", "merge_findings"]


def merge_findings(
    ctx: DetectContext,
    *,
    repo_name: str,
    paper_path: str | None = None,
    python_lock: str | None = None,
    paper_sha256: str | None = None,
    paper_label: str | None = None,
    repo_name_sources: tuple[str, ...] = ("repository directory name",),
    gpu_need: GpuNeed | None = None,
    python: tuple[str, list[str]] | None = None,
) -> MergeResult:
    """Apply the module's rules to ``ctx.findings``; return a validated manifest.

    ``gpu_need`` replaces the need the draft's own values show (the final manifest's, after
    the agent's proposals and the probe's decisions: :mod:`reprobridge.recovery.gpuneed`).
    Raises RenderError when no known nixpkgs release can carry the environment even after
    the documented fallbacks.
    """
    b = Builder()
    notes = RecoveryNotes()
    by_kind: dict[str, list[Finding]] = defaultdict(list)
    for f in ctx.findings:
        by_kind[f.kind].append(f)

    _project(b, by_kind, repo_name, paper_path, list(repo_name_sources))
    if paper_sha256:
        b.put("project.paper.sha256", paper_sha256, hash_sources(paper_label or "paper"))
    code = _scope_environment(ctx, by_kind, notes)
    dated = environment_date(ctx.index.head, code, pins.available_pythons())
    requirements = merge_requirements(b, by_kind, notes, dated)
    merge_optional_imports(b, by_kind, requirements, notes)
    if python is None:
        chosen_python = merge_python(b, by_kind, requirements, notes, dated)
    else:
        # A run decided it (the probe: a pin has wheels only for an older Python): the
        # nixpkgs release below must carry that one.
        chosen_python, sources = python
        b.put("environment.python", chosen_python, sources)
    named = merge_cuda(by_kind, notes)
    # The experiments first: whether one needs a GPU decides the CUDA toolkit, and with it
    # the nixpkgs release (one that carries that toolkit).
    datasets = merge_datasets(b, by_kind, ctx.index)
    merge_experiments(b, by_kind, datasets, notes)
    need = gpu_need if gpu_need is not None else _draft_gpu_need(b, by_kind)
    cuda = decide_cuda(b, named, need, notes)
    merge_environment(b, by_kind, chosen_python, cuda, python_lock, notes)
    merge_exclude_newer(b, dated, notes)
    merge_metadata_floors(b, notes)
    merge_pythonpath(b, ctx.index, notes)
    add_run_tooling(b, notes)
    merge_paper(b, by_kind, notes)
    notes.warnings.extend(
        w.message if not w.path else f"{w.path}: {w.message}" for w in ctx.warnings
    )
    return MergeResult(_finalize(b), notes, need)


def _draft_gpu_need(b: Builder, by_kind: dict[str, list[Finding]]) -> GpuNeed:
    """The need the builder's experiments and the nvcc findings show."""
    experiments = b.data.get("experiments", {})
    gpus = {i: int(e.get("hardware", {}).get("gpus", 0)) for i, e in experiments.items()}
    nvcc = of_type(by_kind, NvccValue)
    return gpu_need(
        gpus,
        sorted({s for f in nvcc for s in f.sources()}) if nvcc else None,
        lambda key: b.prov.get(key, ([], ""))[0],
    )


def _scope_environment(
    ctx: DetectContext, by_kind: dict[str, list[Finding]], notes: RecoveryNotes
) -> CodeDate | None:
    """Scope the environment to what the chosen experiments run: a monorepo's to the primary
    experiment's sub-project (see :mod:`reprobridge.recovery.scope`), the imports to those
    the chosen experiments' code makes, and its date to the last change of that code (see
    :mod:`reprobridge.recovery.dating`; None: HEAD's date stands). The chosen experiments
    are those the merge rules keep (the main one first), found on a scratch builder."""
    chosen, main_why = _chosen_experiments(by_kind)
    left_out = drop_support_only(by_kind, [experiment_folder(f) for f in chosen])
    if left_out:
        notes.decisions.append(
            "imported only by tests, docs or benchmarks, so not run requirements: "
            + ", ".join(left_out)
        )
    if _scope_subproject(ctx, by_kind, chosen, notes):
        if main_why:
            # The main experiment was chosen among every sub-project's: say over which,
            # since the experiments left out are not in the final merge's decision.
            notes.decisions.append(f"chosen before the scoping, among all sub-projects: {main_why}")
        chosen, _ = _chosen_experiments(by_kind)  # other experiments take the places left
    closure = run_closure(ctx, chosen)
    unreached = drop_unreached_imports(ctx, by_kind, closure)
    if unreached:
        notes.decisions.append(
            "imported only by code no chosen experiment runs, so not run requirements "
            "(listed for the experiments left in the guide): " + ", ".join(unreached)
        )
    return code_date(ctx, by_kind, closure)


def _chosen_experiments(
    by_kind: dict[str, list[Finding]],
) -> tuple[list[Finding[ExperimentValue]], str]:
    """The experiment findings the merge rules keep, the main one first, and the merge's
    decision that says why the main one is main ("" when none)."""
    scratch, scratch_notes = Builder(), RecoveryNotes()
    merge_experiments(scratch, by_kind, merge_datasets(scratch, by_kind), scratch_notes)
    # An experiment's command carries its finding's evidence as provenance.
    experiments = of_type(by_kind, ExperimentValue)
    chosen: list[Finding[ExperimentValue]] = []
    for exp_id in scratch.data.get("experiments", {}):
        sources = scratch.prov.get(f"experiments.{exp_id}.command", ([], ""))[0]
        chosen += [f for f in experiments if sorted(set(f.sources())) == sources][:1]
    why = next((d for d in scratch_notes.decisions if MAIN_DECISION in d), "")
    return chosen, why


def _scope_subproject(
    ctx: DetectContext,
    by_kind: dict[str, list[Finding]],
    chosen: list[Finding[ExperimentValue]],
    notes: RecoveryNotes,
) -> bool:
    """Scope a monorepo's environment to the main experiment's sub-project; whether
    experiments of other sub-projects were left out."""
    config_dir = env_scope(ctx.index).config_dir
    declaring, configs = declaring_folders(by_kind, config_dir, ctx.index)
    if not declaring or not chosen:
        return False
    primary = subproject(experiment_folder(chosen[0]), declaring)
    if primary is None:
        # The main experiment belongs to the root's project: the folders that declare their
        # own environment are other sub-projects (a pyproject.toml beside one algorithm), so
        # they are left out too, even when the root declares nothing (a monorepo of
        # tutorials whose main one is a plain script: its imports are its environment).
        primary = ""
    dropped = scope_findings(by_kind, primary, declaring, configs, ctx.index)
    experiments = [d for d in dropped if d.startswith("experiment ")]
    notes.dropped_experiments.extend(experiments)
    if dropped:
        notes.decisions.append(
            f"the environment is that of {primary + '/' if primary else 'the root project'}, "
            "the sub-project of the main experiment (other folders declare their own; run "
            f"`rb init` there): left out {'; '.join(dropped)}"
        )
    return bool(experiments)


# -- project ------------------------------------------------------------------------------


def _project(
    b: Builder,
    by_kind: dict[str, list[Finding]],
    repo_name: str,
    paper: str | None,
    name_sources: list[str],
) -> None:
    found = {
        f.key: f for f in best(of_type(by_kind, ProjectValue), {"project": 0, "paper": 1})[::-1]
    }
    name = found.get("name")
    b.put(
        "project.name",
        name.value.value if name else repo_name,
        name.sources() if name else name_sources,
    )
    for key in ("title", "url", "doi"):
        if key in found:
            b.put(f"project.paper.{key}", found[key].value.value, found[key].sources())
    if "authors" in found:
        authors = found["authors"].value.values or [
            a.strip() for a in found["authors"].value.value.split(";") if a.strip()
        ]
        b.put("project.paper.authors", list(authors), found["authors"].sources())
    if "license" in found:
        b.put("project.license", found["license"].value.value, found["license"].sources())
    if paper:
        b.put("project.paper.path", paper, [PAPER_SOURCE])


# -- environment --------------------------------------------------------------------------


def _longest_prefix_key(keys: Mapping[str, object], path: str) -> str | None:
    """The longest of ``keys`` that is ``path`` or a dotted prefix of it (``a.b`` of
    ``a.b.c``). Tries the path's own prefixes, longest first: a dict lookup each, instead of
    sorting every key for every leaf."""
    end = len(path)
    while end > 0:
        if path[:end] in keys:
            return path[:end]
        end = path.rfind(".", 0, end)
    return None


def retarget(merged: MergeResult, findings: list[Finding]) -> MergeResult:
    """``merged`` with the paper's and the README's values matched once more, to metrics a
    later stage added (the probe's, read from what a run printed): values already matched
    stay as they are; the unmatched list is the new match's."""
    b = Builder()
    b.data = {k: v for k, v in manifest_data(merged.manifest).items() if k != "derived"}
    b.prov = {k: (list(d.sources), d.confidence) for k, d in merged.manifest.derived.items()}
    by_kind: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_kind[f.kind].append(f)
    notes = RecoveryNotes()
    merge_paper(b, by_kind, notes)
    return replace(
        merged,
        manifest=_finalize(b),
        notes=replace(merged.notes, unmatched_targets=notes.unmatched_targets),
    )


def _finalize(b: Builder) -> Manifest:
    data = dict(b.data)
    data["schema"] = 1
    manifest = Manifest.model_validate(data)
    leaves = flatten(
        {k: v for k, v in manifest_data(manifest).items() if k not in {"derived", "schema"}}
    )
    derived: dict[str, Derivation] = {}
    for path, value in leaves.items():
        prov_key = _longest_prefix_key(b.prov, path)
        # Values nobody derived are the schema's defaults: known, not guessed.
        sources, conf = b.prov[prov_key] if prov_key else (["schema default"], "medium")
        derived[path] = Derivation(sources=sources, digest=digest(value), confidence=conf)
    return manifest.model_copy(update={"derived": derived})
