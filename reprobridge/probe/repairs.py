"""The probe's repairs: small named rules, in one ordered list that one loop applies.

Each :class:`Repair` reads one :class:`~reprobridge.probe.observe.Failure` of one run (and
the draft manifest and the repository's file list, never its contents beyond READMEs) and
returns the :class:`~reprobridge.probe.record.Decision` records that would fix it, or none.
Repairs apply in :data:`REPAIRS` order, an earlier one's decision standing where two set
the same key (pip's split: the list is the policy, :mod:`reprobridge.probe.loop` the loop). A rule needs two repositories from
different authors that show its pattern: ``seen_in`` names them, and the guide can cite them.

Environment repairs of the lock (pins no index can satisfy, names no index serves) read uv's
message instead of a run: :func:`lock_repairs`.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from reprobridge.detect._pkgmap import IMPORT_TO_DIST
from reprobridge.manifest.schema import Experiment, Manifest, requirement_name
from reprobridge.probe.observe import Failure, Observation
from reprobridge.probe.printed import printed_metrics
from reprobridge.probe.record import Decision


@dataclass(frozen=True)
class Context:
    """What a repair may read: the draft, the repository's tracked files (POSIX paths
    relative to its root), its README texts (path -> text), and whether this machine
    showed the run a GPU."""

    manifest: Manifest
    files: frozenset[str]
    readmes: dict[str, str]
    gpu_visible: bool


Propose = Callable[[Failure, Observation, Context], list[Decision]]


@dataclass(frozen=True)
class Repair:
    name: str
    seen_in: tuple[str, ...]
    propose: Propose


def _exp(ctx: Context, obs: Observation) -> Experiment | None:
    return ctx.manifest.experiments.get(obs.experiment)


def _key(obs: Observation, *rest: str) -> str:
    return ".".join(("experiments", obs.experiment, *rest))


# -- hardware --------------------------------------------------------------------------


def _decided(
    repair: str,
    why: str,
    evidence: str,
    *sets: tuple[str, Any],
    add: tuple[str, Any] | None = None,
) -> list[Decision]:
    """The decisions of one repair, for one reason and log line: each ``(target, value)``
    of ``sets`` sets the target; ``add`` appends its value to the list at its target."""
    made = [Decision(repair=repair, target=t, value=v, why=why, evidence=evidence) for t, v in sets]
    if add is not None:
        made.append(
            Decision(
                repair=repair, target=add[0], op="add", value=add[1], why=why, evidence=evidence
            )
        )
    return made


def _gpu_not_needed(f: Failure, obs: Observation, ctx: Context) -> list[Decision]:
    exp = _exp(ctx, obs)
    trial_ran = f.kind in ("ok", "no-metric")
    if exp is None or exp.hardware.gpus == 0 or ctx.gpu_visible or not trial_ran:
        return []
    why = (
        f"the smoke run exited 0 with no GPU visible (CUDA_VISIBLE_DEVICES empty), so "
        f"`{obs.experiment}` runs on a CPU; the code's GPU use is optional"
    )
    return _decided("gpu-not-needed", why, obs.reason[:300], (_key(obs, "hardware", "gpus"), 0))


def _gpu_needed(f: Failure, obs: Observation, ctx: Context) -> list[Decision]:
    exp = _exp(ctx, obs)
    if exp is None or f.kind != "gpu-needed" or exp.hardware.gpus > 0:
        return []
    why = f"the run stopped for want of a GPU, so `{obs.experiment}` needs one"
    return _decided("gpu-needed", why, f.line, (_key(obs, "hardware", "gpus"), 1))


# -- commands and paths ------------------------------------------------------------------


def _entry(exp: Experiment) -> str | None:
    """The repository file a command runs (its first ``.py`` word), relative to the root."""
    for word in exp.command.split():
        if word.endswith(".py") and not word.startswith("-"):
            return posixpath.normpath(posixpath.join(exp.workdir, word))
    return None


def _relative(subject: str) -> str | None:
    """A path the run opened, relative to its working directory when it can be told:
    absolute paths inside a run's workspace (``.../repo/<rel>``) lose the workspace."""
    if subject.startswith("/"):
        marker = subject.find("/repo/")
        return subject[marker + len("/repo/") :] if marker >= 0 else None
    return subject


def _exists(ctx: Context, rel: str) -> bool:
    """Whether ``rel`` is a tracked file, or a directory holding tracked files."""
    rel = posixpath.normpath(rel)
    if rel.startswith("../") or rel == "..":
        return False
    prefix = rel.rstrip("/") + "/"
    return rel in ctx.files or any(f.startswith(prefix) for f in ctx.files)


def _entry_by_name(f: Failure, obs: Observation, ctx: Context) -> list[Decision]:
    exp = _exp(ctx, obs)
    if exp is None or f.kind != "entry-missing":
        return []
    name = PurePosixPath(f.subject).name
    hits = sorted(p for p in ctx.files if PurePosixPath(p).name == name and "test" not in p)
    if len(hits) != 1:
        return []
    folder = posixpath.dirname(hits[0]) or "."
    if folder == exp.workdir:
        return []
    return [
        Decision(
            repair="entry-by-name",
            target=_key(obs, "workdir"),
            value=folder,
            why=(
                f"the command names `{name}`, which is not at `{exp.workdir}` but only at "
                f"`{hits[0]}`: the run starts in `{folder}`, as the script expects"
            ),
            evidence=f.line,
        )
    ]


def _workdir_from_subfolder(f: Failure, obs: Observation, ctx: Context) -> list[Decision]:
    exp = _exp(ctx, obs)
    rel = _relative(f.subject) if f.kind == "file-missing" else None
    if exp is None or rel is None or rel.startswith("/"):
        return []
    entry = _entry(exp)
    if entry is None or _exists(ctx, posixpath.join(exp.workdir, rel)):
        return []
    folder = posixpath.dirname(entry)
    while folder and folder != exp.workdir:
        if _exists(ctx, posixpath.join(folder, rel)):
            script = posixpath.relpath(entry, folder)
            words = exp.command.split()
            old = posixpath.relpath(entry, exp.workdir)
            if old not in words:
                return []
            command = " ".join(script if w == old else w for w in words)
            why = (
                f"the run opened `{rel}`, which exists relative to `{folder}`, the folder of "
                f"`{entry}`, not to `{exp.workdir}`: the run starts there"
            )
            return _decided(
                "workdir-from-subfolder",
                why,
                f.line,
                (_key(obs, "workdir"), folder),
                (_key(obs, "command"), command),
            )
        folder = posixpath.dirname(folder)
    return []


_DATASET_ID = re.compile(r"[^a-z0-9]+")


def _readme_mentions(ctx: Context, rel: str) -> str:
    """The first README line naming ``rel``'s file or folder (``README.md:12: unzip ...``)."""
    names = {PurePosixPath(rel).name, *PurePosixPath(rel).parts[:1]}
    names.discard("")
    for path, text in sorted(ctx.readmes.items()):
        for n, line in enumerate(text.splitlines(), 1):
            if any(name in line for name in names if len(name) > 3):
                return f"{path}:{n}: {line.strip()[:160]}"
    return ""


def _missing_data(f: Failure, obs: Observation, ctx: Context) -> list[Decision]:
    exp = _exp(ctx, obs)
    rel = _relative(f.subject) if f.kind == "file-missing" else None
    if exp is None or rel is None or rel.startswith("/"):
        return []
    path = posixpath.normpath(posixpath.join(exp.workdir, rel))
    if path.startswith("..") or _exists(ctx, path):
        return []
    declared = [ctx.manifest.datasets[d].path for d in exp.datasets if d in ctx.manifest.datasets]
    if any(p and _same_path(rel, p, exp.workdir) for p in declared):
        return []  # a dataset of the experiment names it already: the audit says it is missing
    # A file the run writes itself (an output folder it did not create) is not data.
    if any(
        part in ("out", "output", "outputs", "results", "checkpoints", "logs")
        for part in PurePosixPath(path).parts[:1]
    ):
        return []
    ds = _DATASET_ID.sub("-", PurePosixPath(path).name.lower()).strip("-")[:40] or "data"
    ds = ds if ds[0].isalpha() else f"data-{ds}"
    said = _readme_mentions(ctx, path)
    description = f"missing: the run opened `{path}`, which the repository does not contain"
    if said:
        description += f"; {said}"
    why = f"`{obs.experiment}` needs `{path}`, which is not in the repository: named as a dataset, so the audit checks for it and says what is missing"
    return _decided(
        "missing-data",
        why,
        f.line,
        (f"datasets.{ds}", {"path": path, "description": description[:400]}),
        add=(_key(obs, "datasets"), ds),
    )


def _dataset_not_needed(f: Failure, obs: Observation, ctx: Context) -> list[Decision]:
    """A dataset declared missing that the run did without: it exited 0 with the check
    failing, or failed opening another path. The declaration was a guess (an argparse
    ``--dataset`` default read as a path, data the code generates): it goes, so the audit
    no longer refuses a run whose files are all there."""
    exp = _exp(ctx, obs)
    if exp is None or not obs.missing_datasets:
        return []
    opened = _relative(f.subject) if f.kind == "file-missing" else None
    # A run stopped at its time limit after printing results got past its data.
    trained = f.kind == "timeout" and bool(obs.metrics or printed_metrics(obs.log, limit=1))
    if f.kind not in ("ok", "no-metric") and opened is None and not trained:
        return []
    unused = [
        ds
        for ds, path in sorted(obs.missing_datasets.items())
        if ds in exp.datasets and not (opened and path and _same_path(opened, path, exp.workdir))
    ]
    if not unused:
        return []
    keep = [d for d in exp.datasets if d not in unused]
    shown = ", ".join(f"`{d}` ({obs.missing_datasets[d] or 'no path'})" for d in unused)
    how = (
        "exited 0"
        if f.kind in ("ok", "no-metric")
        else "printed results before its time limit"
        if trained
        else f"opened `{opened}` instead"
    )
    return [
        Decision(
            repair="dataset-not-needed",
            target=_key(obs, "datasets"),
            value=keep,
            why=f"the trial ran with {shown} absent and {how}: not data this run needs",
            evidence=(f.line or obs.reason)[:300],
        )
    ]


def _same_path(opened: str, declared: str, workdir: str) -> bool:
    a = posixpath.normpath(posixpath.join(workdir, opened))
    b = posixpath.normpath(declared)
    return a == b or a.startswith(b.rstrip("/") + "/")


def _flag_withdrawn(f: Failure, obs: Observation, ctx: Context) -> list[Decision]:
    exp = _exp(ctx, obs)
    if exp is None or f.kind != "flag-rejected":
        return []
    rejected = [w for w in f.subject.split() if w.startswith("-")]
    words = exp.command.split()
    keep: list[str] = []
    skip = False
    dropped: list[str] = []
    for i, w in enumerate(words):
        if skip:
            skip = False
            continue
        flag = w.split("=", 1)[0]
        if flag in rejected:
            dropped.append(w)
            nxt = words[i + 1] if i + 1 < len(words) else ""
            skip = "=" not in w and bool(nxt) and not nxt.startswith("-")
            if skip:
                dropped.append(nxt)
            continue
        keep.append(w)
    if not dropped:
        return []
    return [
        Decision(
            repair="flag-withdrawn",
            target=_key(obs, "command"),
            value=" ".join(keep),
            why=f"the program rejected `{' '.join(dropped)}`: withdrawn from the command",
            evidence=f.line,
        )
    ]


# -- environment -------------------------------------------------------------------------


def _module_folder(path: str, top: str) -> str | None:
    """The folder to put on PYTHONPATH for ``import top`` to find ``path``, or None."""
    for tail in (f"{top}/__init__.py", f"{top}.py"):
        if path == tail:
            return "."
        if path.endswith("/" + tail):
            return path[: -len(tail) - 1]
    return None


def _module_missing(f: Failure, obs: Observation, ctx: Context) -> list[Decision]:
    if f.kind != "module-missing" or not f.subject:
        return []
    top = f.subject.split(".")[0]
    env = ctx.manifest.environment
    local = sorted(
        (folder for p in ctx.files if (folder := _module_folder(p, top)) is not None),
        key=lambda folder: (folder.count("/"), folder),
    )
    if local:
        folder = local[0]
        if folder in env.pythonpath:
            return []
        return [
            Decision(
                repair="module-missing",
                target="environment.pythonpath",
                op="add",
                value=folder,
                why=f"the run could not import `{top}`, the repository's own module in `{folder}`: it goes on PYTHONPATH",
                evidence=f.line,
            )
        ]
    dist = IMPORT_TO_DIST.get(top, top)
    if any(requirement_name(r) == requirement_name(dist) for r in env.python_requirements):
        return []
    return [
        Decision(
            repair="module-missing",
            target="environment.python_requirements",
            op="add",
            value=dist,
            why=f"the run could not import `{top}`, which no requirement provides: `{dist}` is added",
            evidence=f.line,
        )
    ]


def _environment_pins(f: Failure, obs: Observation, ctx: Context) -> list[Decision]:
    """The lock's rules on the trial's install log: a pin the run's install could not have
    (the lock may have failed for another reason first, an index out of reach)."""
    if f.kind != "environment":
        return []
    return lock_repairs(f"{obs.setup_log}\n{obs.reason}", ctx.manifest)


# -- metrics -----------------------------------------------------------------------------


def _metrics_from_output(f: Failure, obs: Observation, ctx: Context) -> list[Decision]:
    exp = _exp(ctx, obs)
    if exp is None or f.kind != "no-metric" or exp.metrics:
        return []
    out: list[Decision] = []
    for pm in printed_metrics(obs.log, limit=3):
        out.append(
            Decision(
                repair="metric-from-output",
                target=_key(obs, "metrics", pm.name),
                value={"source": {"regex": pm.regex}},
                why=f"the run printed `{pm.name}` ({pm.value:g} in the smoke run): read from every run's log, its last value",
                evidence=pm.line,
            )
        )
    return out


REPAIRS: tuple[Repair, ...] = (
    # pin-relaxed; or python-lowered where uv names the ABI tags a pin has wheels for
    # (jsyoon0823/TimeGAN's tensorflow==1.15.0 up to cp37; dennybritz's
    # cnn-text-classification-tf and cbfinn/maml: TF 1 pins).
    Repair(
        "pin-relaxed",
        ("zfjsail/gae-pytorch (torch==0.4.1)", "cure-lab/LTSF-Linear"),
        _environment_pins,
    ),
    Repair("gpu-not-needed", ("tkipf/pygcn", "ethanfetaya/NRI"), _gpu_not_needed),
    Repair(
        "gpu-needed",
        (
            "gpleiss/temperature_scaling",
            "y0ast/deterministic-uncertainty-quantification",
            "harvardnlp/annotated-transformer",
        ),
        _gpu_needed,
    ),
    Repair("entry-by-name", ("tkipf/pygcn", "locuslab/TCN"), _entry_by_name),
    Repair("workdir-from-subfolder", ("tkipf/pygcn", "locuslab/TCN"), _workdir_from_subfolder),
    Repair("module-missing", ("rtqichen/ffjord", "benedekrozemberczki/SimGNN"), _module_missing),
    # One repository showed it (an injected --data-seed a second parser rejected); kept
    # because the program's own error names the flag, so withdrawing it cannot guess wrong.
    Repair("flag-withdrawn", ("an unnamed repository of the earlier unseen set",), _flag_withdrawn),
    Repair(
        "dataset-not-needed",
        ("YuliaRubanova/latent_ode", "weihua916/powerful-gnns"),
        _dataset_not_needed,
    ),
    Repair(
        "missing-data", ("karpathy/nn-zero-to-hero", "lucidrains/x-transformers"), _missing_data
    ),
    Repair(
        "metric-from-output",
        ("karpathy/makemore", "greydanus/hamiltonian-nn"),
        _metrics_from_output,
    ),
)


def repairs_for(f: Failure, obs: Observation, ctx: Context) -> list[Decision]:
    """Every repair's decisions for ``f``, in :data:`REPAIRS` order; where two repairs
    would set the same key, the earlier one's stand (``[]`` when none answers). Repairs of
    different keys are independent (a GPU found optional and a metric the run printed), so
    one round applies them together instead of spending a run on each."""
    out: list[Decision] = []
    taken: set[str] = set()
    for repair in REPAIRS:
        got = repair.propose(f, obs, ctx)
        if got and not any(d.target in taken for d in got):
            out += got
            taken.update(d.target for d in got)
    return out


# -- the lock ----------------------------------------------------------------------------

#: uv's sentences that say an exact pin cannot be had for this Python: no such version,
#: only other versions, or no wheel with this Python's tag.
_PIN_BLOCKED = (
    r"there is no version of {name}(?:\[[^\]]*\])?==",
    r"(?<![\w-])only {name}(?:\[[^\]]*\])?[<>=!~]",
    r"(?<![\w-]){name}==\S* has no (?:usable )?wheels",
    r"(?<![\w-]){name}==\S* (?:cannot be used|is not available)",
)
_NOT_FOUND = re.compile(r"because ([A-Za-z0-9_.-]+) was not found in the package registry", re.I)


def _same_major(req: str, name: str) -> str:
    """``name`` bounded below its pin's next major version (``tensorflow==1.15.0`` ->
    ``tensorflow<2``): jsyoon0823/TimeGAN's and amiratag/DataShapley's TF 1 code stops on
    TF 2. A 0.x pin may move to 1.x (``torch==0.4.1`` -> ``torch<2``): 0.x promises nothing
    and the 1.0 releases kept most of 0.4's API."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        spec = next(iter(Requirement(req).specifier))
        major = int(spec.version.split(".")[0])
    except (InvalidRequirement, StopIteration, ValueError):
        return name
    return f"{name}<{max(major + 1, 2)}"


#: uv's hint naming the ABI tags a pinned release has wheels for.
_ABI_HINT = re.compile(
    r"only found wheels for `?([A-Za-z0-9_.-]+)`? \(v[^)]*\) with the following Python ABI "
    r"tags: ((?:`?cp\d+\w*`?,?\s*)+)"
)


def _lowered_python(message: str, manifest: Manifest) -> tuple[str, str] | None:
    """The newest older Python (``3.N``) that a pinned release has wheels for, where uv's
    hint names its ABI tags and a known nixpkgs release carries that Python; with the
    package it is for. None when the pin's wheels stop below every Python rb can pin."""
    from reprobridge.recovery import pins

    current = manifest.environment.python
    minor = int(current.split(".")[1])
    known = {int(v.split(".")[1]) for v in pins.available_pythons() if v.startswith("3.")}
    for m in _ABI_HINT.finditer(" ".join(message.split())):
        tags = {int(t) for t in re.findall(r"cp3(\d+)", m.group(2))}
        fits = sorted(n for n in tags if n < minor and n in known)
        if fits:
            return f"3.{fits[-1]}", m.group(1)
    return None


def lock_repairs(message: str, manifest: Manifest) -> list[Decision]:
    """Decisions for a lock uv could not make, from its message: an exact pin no release
    satisfies for this Python loses its version (the date bound then picks the newest
    release with wheels); a name no index serves is dropped."""
    reqs = {requirement_name(r): r for r in manifest.environment.python_requirements}
    line = " ".join(message.split())[:300]
    text = " ".join(message.split()).lower()
    lowered = _lowered_python(message, manifest)
    if lowered is not None:
        # An older Python keeps every pin, where relaxing would move code to another API.
        python, package = lowered
        return [
            Decision(
                repair="python-lowered",
                target="environment.python",
                value=python,
                why=f"`{package}`'s pinned release has wheels only up to Python {python} (uv's "
                f"hint lists its ABI tags): the environment uses Python {python} and keeps the pin",
                evidence=line,
            )
        ]
    out: list[Decision] = []
    for name, req in sorted((n, r) for n, r in reqs.items() if n is not None):
        if "==" not in req:
            continue
        # uv writes names as required, any case, `_` or `-`: match the canonical spelling.
        spelled = re.escape(name).replace("\\-", "[-_.]")
        if any(re.search(p.format(name=spelled), text) for p in _PIN_BLOCKED):
            within = _same_major(req, name)
            out.append(
                Decision(
                    repair="pin-relaxed",
                    target="environment.python_requirements",
                    op="replace-requirement",
                    value={"name": name, "with": within},
                    why=f"`{req}` cannot be installed for this Python (no such release, or no "
                    f"wheel for it): `{within}`, the newest release at the date bound that "
                    "keeps its major version (code for one major version seldom runs on the "
                    "next)",
                    evidence=line,
                )
            )
    for m in _NOT_FOUND.finditer(message):
        missing = requirement_name(m.group(1))
        if missing in reqs and missing is not None:
            out.append(
                Decision(
                    repair="name-dropped",
                    target="environment.python_requirements",
                    op="drop-requirement",
                    value=missing,
                    why=f"no package index serves `{missing}` (a conda-only or misspelt name): "
                    "dropped",
                    evidence=line,
                )
            )
    seen: set[tuple[str, str]] = set()
    unique = []
    for d in out:
        k = (d.op, str(d.value))
        if k not in seen:
            seen.add(k)
            unique.append(d)
    return unique
