"""Merge rules for datasets and experiments: commands become parameterized, seeds and tiers
are derived, duplicates folded (rules stated in :mod:`reprobridge.recovery.merge`)."""

from __future__ import annotations

import posixpath
import re
import shlex
from pathlib import PurePosixPath
from typing import Any, TypeVar

from reprobridge.detect.base import Finding, rank_of
from reprobridge.detect.findings import (
    BoundValue,
    DatasetValue,
    EntryValue,
    ExperimentValue,
    ExtraValue,
    FetchValue,
    HardwareValue,
    InputValue,
    LoggedMetricValue,
    MentionValue,
    MetricValue,
    OutputValue,
    ParamValue,
    RaisesValue,
    RejectedValue,
    SeedValue,
    ServiceValue,
    Syntax,
    TargetValue,
    UnboundedValue,
    extra_key,
    of_type,
)
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.paper._paper_doc import direction
from reprobridge.detect.procedure.services import service_key
from reprobridge.detect.runbounds import STEPS, smoke_of_full, smoke_value
from reprobridge.manifest.notes import RecoveryNotes
from reprobridge.manifest.schema import (
    ID_PATTERN,
    PARAM_PATTERN,
    PLACEHOLDER,
    clean_rel_path,
    edit_place,
    plain_command,
)
from reprobridge.recovery._common import Builder
from reprobridge.recovery.ranking import Ranked, main_reason, order_key, rank
from reprobridge.recovery.smoke import (
    SMOKE_TIME_LIMIT,
    epoch_sizes,
    is_epoch_bound,
    literal_smoke_value,
)

E = TypeVar("E", bound=EntryValue)
#: An experiment kept by the merge: (its finding, command, entry, literal params).
_Kept = tuple[Finding[ExperimentValue], str, str, dict[str, Any]]

#: The words of the decision that names the main experiment (after its id).
MAIN_DECISION = "is the main experiment, the one `rb audit --tier smoke` runs"
_EXP_PRIORITY = {"readme": 0, "makefile": 1, "shell": 2, "notebooks": 3, "entrypoints": 4}
_SEED_NAMES = {"seed", "random_seed", "rng_seed", "manual_seed"}


#: Newest Python a framework release has wheels for (older frameworks cap the interpreter).
def merge_datasets(
    b: Builder, by_kind: dict[str, list[Finding]], index: RepoIndex | None = None
) -> dict[str, Finding[DatasetValue]]:
    """One dataset per slugified id; returns the findings by id for the experiments to
    reference. With ``index``, a relative path the repository lacks at its root but holds
    beside the file that names it is that folder's (:func:`_rooted`)."""
    out: dict[str, Finding[DatasetValue]] = {}
    for f in sorted(of_type(by_kind, DatasetValue), key=lambda f: (f.key, rank_of(f.confidence))):
        ds_id = _slug(f.key)
        if not ds_id or ds_id in out:
            continue
        out[ds_id] = f
        # The schema refuses paths that could leave the repository; never derive one.
        path = clean_rel_path(f.value.path) if f.value.path else None
        if path and index is not None and f.evidence:
            path = _rooted(path, f.evidence[0].path, index)
        for key, value in (("path", path), ("url", f.value.url), ("name", f.value.name)):
            if value:
                b.put(f"datasets.{ds_id}.{key}", value, f.sources(), f.confidence)
        if f.value.generated:
            b.put(f"datasets.{ds_id}.generated", True, f.sources(), f.confidence)
        if not (f.value.path or f.value.url or f.value.name or f.value.generated):
            b.put(f"datasets.{ds_id}.description", f"referenced as {f.key!r}", f.sources(), "low")
    return out


def _rooted(path: str, named_in: str, index: RepoIndex) -> str:
    """``path`` relative to the repository root. Code names a data path relative to the
    folder it runs from (``--data data/penn`` in ``TCN/word_cnn/word_cnn_test.py``, run from
    its folder): when the root lacks ``path`` and the folder of ``named_in`` holds it, that
    folder's path; otherwise ``path`` as it is."""
    folder = named_in.rpartition("/")[0]
    if not folder or _present(index, path):
        return path
    beside = clean_rel_path(posixpath.join(folder, path))
    return beside if beside and _present(index, beside) else path


def _present(index: RepoIndex, path: str) -> bool:
    """Whether the repository holds file or folder ``path``."""
    return path in index or path in index.dirs()


# -- experiments --------------------------------------------------------------------------


def _slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-_")[:64].strip("-_")
    return s if re.fullmatch(ID_PATTERN, s) else ""


def _coerce(value: str) -> Any:
    if value.lower() in {"true", "false"}:
        return value.lower() == "true"
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            continue
    return value


_NEGATIVE = re.compile(r"-(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_HYDRA_OVERRIDE = re.compile(r"^\+{0,2}([A-Za-z_][\w.]*)=(.+)$")


def _join_words(words: list[str]) -> str:
    """shlex.join, but ``{name}`` placeholders stay bare so the launcher can fill them."""
    out = []
    for w in words:
        parts = PLACEHOLDER.split(w)  # literal, name, literal, name, ..., literal
        if len(parts) == 1:
            out.append(shlex.quote(w))
            continue
        out.append(
            "".join(
                ("{" + part + "}") if i % 2 else (shlex.quote(part) if part else "")
                for i, part in enumerate(parts)
            )
        )
    return " ".join(out)


def _parameterize(
    command: str, seed_flags: set[str]
) -> tuple[str, dict[str, Any], list[int] | None, str | None]:
    """Literal arguments of a Python command become placeholders.

    ``python t.py --lr 0.1 --seed 3 model.depth=4`` ->
    (``python t.py --lr {lr} --seed {seed} model.depth={model_depth}``,
    {lr: 0.1, model_depth: 4}, [3], "--seed"). ``--flag value``, ``--flag=value`` and hydra
    ``key=value`` overrides are handled; other commands are returned unchanged.
    """
    try:
        words = shlex.split(command)
    except ValueError:
        return command, {}, None, None
    if not words or not re.match(
        r"^(python[\d.]*|torchrun|accelerate|deepspeed)$", words[0].rsplit("/", 1)[-1]
    ):
        return command, {}, None, None
    params: dict[str, Any] = {}
    seeds: list[int] | None = None
    seed_flag: str | None = None
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        flag, eq, inline = w.partition("=")
        is_flag = flag.startswith("--") and len(flag) > 2
        hydra = None if flag.startswith("-") else _HYDRA_OVERRIDE.match(w)
        if hydra is not None and i > 1:
            key, value = hydra.group(1), hydra.group(2)
            name = key.replace(".", "_")
            prefix = w[: len(w) - len(value)]
            if name in _SEED_NAMES and re.fullmatch(r"-?\d+", value) and seeds is None:
                seeds, seed_flag = [int(value)], key
                out.append(prefix + "{seed}")
                i += 1
                continue
            if re.fullmatch(PARAM_PATTERN, name) and "{" not in value and name not in params:
                params[name] = _coerce(value)
                out.append(prefix + "{" + name + "}")
                i += 1
                continue
        if is_flag and (
            eq
            or (
                i + 1 < len(words)
                and (not words[i + 1].startswith("-") or _NEGATIVE.fullmatch(words[i + 1]))
            )
        ):
            value = inline if eq else words[i + 1]
            name = flag[2:].replace("-", "_").replace(".", "_")
            if (flag in seed_flags or name in _SEED_NAMES) and re.fullmatch(r"-?\d+", value):
                seeds, seed_flag = [int(value)], flag
                out += [f"{flag}={{seed}}"] if eq else [flag, "{seed}"]
                i += 1 if eq else 2
                continue
            if re.fullmatch(PARAM_PATTERN, name) and "{" not in value and name not in params:
                params[name] = _coerce(value)
                out += [f"{flag}={{{name}}}"] if eq else [flag, f"{{{name}}}"]
                i += 1 if eq else 2
                continue
        out.append(w)
        i += 1
    return _join_words(out), params, seeds, seed_flag


def flag_arg(flag: str, syntax: Syntax | None, value: str) -> str:
    """``--flag value``, or ``key=value`` for a parameter whose syntax is ``equals``."""
    return f"{flag}={value}" if syntax == "equals" else f"{flag} {value}"


def merge_experiments(
    b: Builder,
    by_kind: dict[str, list[Finding]],
    datasets: dict[str, Finding[DatasetValue]],
    notes: RecoveryNotes,
) -> None:
    """Experiments from the candidates, deduplicated and folded (see the merge rules)."""
    cands = sorted(
        of_type(by_kind, ExperimentValue),
        key=lambda f: (
            rank_of(f.confidence),
            _EXP_PRIORITY.get(f.detector, 9),
            f.sources(),
            f.key,
        ),
    )
    seen_runs: set[str] = set()
    covered_entries: set[str] = set()
    kept: list[_Kept] = []
    smoke: dict[str, tuple[str, Any, list[str]]] = {}
    entries = _ByEntry(by_kind)
    for f in cands:
        cmd = " ".join(f.value.command.split())
        entry = f.value.entry
        run = _run_key(f, cmd)
        if run in seen_runs:
            continue
        # A file's own candidate (its bare `python x.py`, or the notebook run headless)
        # adds nothing to a command written for that file: that one has the author's flags
        # and workdir.
        if f.detector in {"entrypoints", "notebooks"} and entry in covered_entries:
            continue
        seen_runs.add(run)
        params = _parameterize(cmd, set())[1]
        defaults = {x.value.name: x.value.default for x in entries.of(ParamValue, entry)}
        folded = _reduced_variant(params, [(k[3], defaults) for k in kept if k[2] == entry])
        if folded is not None:
            # "python train.py ... --epochs 2" beside the full command: the README's quick
            # check, which is what the smoke tier is for.
            smoke[entry] = (folded, params[folded], f.sources())
            notes.decisions.append(
                f"{cmd} ({', '.join(f.sources())}) is a reduced run of another experiment: "
                f"it became the smoke tier ({folded} = {params[folded]})"
            )
            continue
        covered_entries.add(entry)
        kept.append((f, cmd, entry, params))
    setups, unprepared = _chain_inputs(by_kind, [k[0] for k in kept])
    fetching = frozenset(f.key for f in of_type(by_kind, FetchValue)) | frozenset(unprepared)
    bounded_in_code = {b.value.entry for b in of_type(by_kind, BoundValue)}
    bounded = frozenset(
        entry
        for f, cmd, entry, params in kept
        if entry in smoke
        or entry in bounded_in_code
        # A config file the command names, whose bounds the smoke tier lowers in a copy.
        or bool(set(named_files(cmd, f.value.workdir) or ()) & bounded_in_code)
        or any(smoke_value(n) is not None for n in params)
        or any(
            smoke_value(flag) is not None
            for x in entries.of(ParamValue, entry)
            if (flag := x.value.flag)
        )
    )
    services = {f.key for f in of_type(by_kind, ServiceValue)}
    extras = {f.key for f in of_type(by_kind, ExtraValue)}
    chosen, others = rank(
        [k[0] for k in kept],
        of_type(by_kind, MentionValue),
        of_type(by_kind, TargetValue),
        fetching,
        lambda f: any(h.value.gpus > 0 for h in _hardware(by_kind, f)),
        frozenset(m.value.entry for m in of_type(by_kind, MetricValue)),
        bounded,
        lambda f: service_key(f.value, f.key) in services,
        lambda f: f.detector == "readme" and extra_key(f.value) in extras,
        # A loop with no exit at all; one whose exit tests a budget (`max_steps`) ends
        # at the budget's value, or the smoke tier sets it.
        frozenset(u.value.entry for u in of_type(by_kind, UnboundedValue) if not u.value.budget),
    )
    for r in others:
        cmd = " ".join(r.finding.value.command.split())
        entry = r.finding.value.entry or r.finding.key
        notes.dropped_experiments.append(
            f"{entry}: `{cmd}` ({r.why()}; from {', '.join(r.finding.sources())})"
        )
    picked = {id(r.finding) for r in chosen}
    kept = [k for k in kept if id(k[0]) in picked]  # in the merge rules' order
    lacking = {
        f.key: f"{', '.join(f.value.datasets[:2])}; {f.sources()[0]}"
        for f in of_type(by_kind, FetchValue)
    }
    for inp in of_type(by_kind, InputValue):
        if inp.value.entry in unprepared:
            lacking.setdefault(inp.value.entry, f"{inp.value.path}, read at {inp.sources()[0]}")
    kept, main_why = _main_first(kept, chosen, others, by_kind, notes, lacking)
    for entry, why in sorted(unprepared.items()):
        if any(k[2] == entry for k in kept):
            notes.warnings.append(why)
    for rej in sorted(of_type(by_kind, RejectedValue), key=lambda f: f.key):
        notes.dropped_experiments.append(f"{rej.key}: {rej.value.reason} ({rej.sources()[0]})")
    if not kept:
        notes.warnings.append(
            "no experiment found: add one under [experiments.<id>] in reprobridge.toml"
            + (
                f" (candidates rejected: {len(notes.dropped_experiments)}, listed in REPRODUCE.md)"
                if notes.dropped_experiments
                else " (no README command, script, notebook or entry point looked like one)"
            )
        )
    used_ids: set[str] = set()
    for f, cmd, entry, _ in kept:
        exp_id = _slug(f.key) or _slug(entry.rsplit("/", 1)[-1].rsplit(".", 1)[0]) or "experiment"
        exp_id = re.sub(r"-(ours|proposed|our-method)$", "", exp_id) or exp_id
        base, n = exp_id, 2
        while exp_id in used_ids:
            exp_id, n = f"{base[:60]}-{n}", n + 1
        used_ids.add(exp_id)
        if main_why:
            b.put(f"experiments.{exp_id}.main", True, [f"rb rule: {main_why}"], "medium")
            notes.decisions.append(f"{exp_id} {MAIN_DECISION}: {main_why}")
            main_why = ""
        setup = setups.get(id(f))
        if setup is not None:
            command, sources = setup
            b.put(f"experiments.{exp_id}.setup", [command], sources, "medium")
            notes.decisions.append(
                f"{exp_id}: `{command}` runs first (experiments.{exp_id}.setup): it writes "
                f"what the experiment reads, and {sources[0]} runs it before"
            )
        _one_experiment(
            b, by_kind, entries, exp_id, f, cmd, entry, datasets, notes, smoke.get(entry)
        )


def _chain_inputs(
    by_kind: dict[str, list[Finding]], candidates: list[Finding[ExperimentValue]]
) -> tuple[dict[int, tuple[str, list[str]]], dict[str, str]]:
    """(setup, unprepared) from the ``input`` findings (a file an experiment reads that a
    script beside it writes).

    ``setup``: candidate (by ``id``) -> (the producer's command, its provenance) when a
    README, shell script or Makefile runs the producer before the candidate's own command,
    in the same file and the same workdir: the producer becomes the experiment's setup
    step. ``unprepared``: entry -> the warning for each entry whose input nothing orders
    before it; such an entry ranks as reading data the repository lacks.
    """
    setups: dict[int, tuple[str, list[str]]] = {}
    unprepared: dict[str, str] = {}
    declared = {"readme", "shell", "makefile"}
    for inp in of_type(by_kind, InputValue):
        entry, producer = inp.value.entry, inp.value.producer
        chained = False
        for c in (c for c in candidates if c.value.entry == entry):
            for p in of_type(by_kind, ExperimentValue):
                if p.value.entry != producer or p.detector not in declared:
                    continue
                if c.detector != p.detector or p.value.workdir != c.value.workdir:
                    continue
                before = [
                    pe
                    for pe in p.evidence
                    for ce in c.evidence
                    if pe.path == ce.path and (pe.line or 0) < (ce.line or 0)
                ]
                if before and id(c) not in setups:
                    setups[id(c)] = (
                        " ".join(p.value.command.split()),
                        [str(before[0]), *inp.sources()],
                    )
                    chained = True
        if not chained:
            unprepared.setdefault(
                entry,
                f"{entry}: reads {inp.value.path} ({inp.sources()[0]}), which the "
                f"repository lacks; {producer} writes it ({inp.sources()[-1]}) but no README "
                "or shell script runs it first: run it before, or add its command to "
                "experiments.<id>.setup",
            )
    return setups, unprepared


def _main_first(
    kept: list[_Kept],
    chosen: list[Ranked],
    others: list[Ranked],
    by_kind: dict[str, list[Finding]],
    notes: RecoveryNotes,
    lacking: dict[str, str],
) -> tuple[list[_Kept], str]:
    """``kept`` with the main experiment first — the first of ``chosen`` (the ranking's
    choice: one that runs offline on a CPU and prints a result rb can read, where there is
    one) — and why it is the main one, naming the better-scored candidates (of ``chosen``
    and ``others``) it was chosen over, with what data each lacks and where (``lacking``)
    ("" when nothing was kept). Each kept entry that
    needs data the repository lacks is reported, so the guide says so (the audit is
    offline)."""
    if not kept:
        return kept, ""
    fetches = {f.key: f for f in of_type(by_kind, FetchValue)}
    for _f, _cmd, entry, _params in kept:
        if entry in fetches:
            fetch = fetches.pop(entry)  # one line per entry, however many commands run it
            notes.warnings.append(
                f"{entry}: reads data the repository does not contain "
                f"({', '.join(fetch.value.datasets)}; {fetch.sources()[0]}): the audit "
                "runs offline, so provide it first (see [datasets]); the main experiment is "
                "one that needs no download where there is one"
            )
    services = {f.key: f for f in of_type(by_kind, ServiceValue)}
    for f, _cmd, _entry, _params in kept:
        if (key := service_key(f.value, f.key)) in services:
            service = services.pop(key)
            label = f"`{key}`" if key == " ".join(f.value.command.split()) else key
            notes.warnings.append(
                f"{label}: runs {', '.join(service.value.tools)} ({service.sources()[0]}), "
                "which the audit's offline sandbox does not have: run it by hand; the main "
                "experiment is one that needs none where there is one"
            )
    extras = {f.key: f for f in of_type(by_kind, ExtraValue)}
    for f, cmd, _entry, _params in kept:
        if f.detector == "readme" and (extra := extras.get(extra_key(f.value))) is not None:
            notes.warnings.append(
                f"`{cmd}`: {extra.sources()[0]} installs the optional requirement set "
                f"{', '.join(extra.value.sets)} before it, which the environment rb builds "
                "leaves out: add what it needs to environment.python_requirements to run it; "
                "the main experiment is one that needs no optional set where there is one"
            )
    best = chosen[0]
    main = next(k for k in kept if k[0] is best.finding)
    ranked = sorted([*chosen, *others], key=order_key)
    passed = ranked[: next(i for i, r in enumerate(ranked) if r is best)]
    return [main, *(k for k in kept if k is not main)], main_reason(best, passed, lacking)


def _hardware(
    by_kind: dict[str, list[Finding]], f: Finding[ExperimentValue]
) -> list[Finding[HardwareValue]]:
    """The ``hardware`` findings (GPU evidence) of experiment ``f``: those of its entry's
    code (keyed by the entry), and a launcher's process count only for the command it was
    found in (the README's ``torchrun --nproc_per_node 8 train.py`` says nothing about its
    ``python train.py``)."""
    entry = f.value.entry
    launcher = {"readme", "makefile"}
    return [
        h
        for h in of_type(by_kind, HardwareValue)
        if entry
        and h.key == entry
        and (h.detector not in launcher or set(h.sources()) & set(f.sources()))
    ]


def named_files(command: str, workdir: str) -> list[str] | None:
    """The repository paths the words of ``command`` name, in order, resolved against
    ``workdir`` (``python main.py config.json`` names ``main.py`` and ``config.json``; an
    executable script run as the program, ``./scripts/train.py --lr 1``, names itself; a
    word that names no file of the repository is the caller's to drop); None when
    ``command`` is not shell words."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    return [posixpath.normpath(posixpath.join(workdir, w)) for w in words]


def _run_key(f: Finding[ExperimentValue], cmd: str) -> str:
    """What a command runs, wherever it is run from: its words with the entry (script or
    notebook) resolved against the workdir, so ``python x.py --viz`` from ``examples/`` and
    ``python examples/x.py --viz`` from the root are one run, and ``python train.py`` in two
    folders are two. A command whose entry is not among its words keeps its workdir."""
    workdir = f.value.workdir
    entry = f.value.entry
    try:
        words = shlex.split(cmd)
    except ValueError:
        words = []
    for i, word in enumerate(words):
        if entry and posixpath.normpath(posixpath.join(workdir, word)) == entry:
            return shlex.join([*words[:i], entry, *words[i + 1 :]])
    return f"{workdir}: {cmd}"


def _reduced_variant(
    params: dict[str, Any], others: list[tuple[dict[str, Any], dict[str, Any]]]
) -> str | None:
    """The bound parameter (epochs, steps) by which ``params`` is a smaller copy of one of
    ``others`` — (explicit arguments, the script's defaults) pairs — with every other
    argument equal, or None."""
    for explicit, defaults in others:
        full = {**defaults, **explicit}
        rest = {k: v for k, v in params.items() if smoke_value(k) is None}
        same_rest = all(full.get(k) == v for k, v in rest.items()) and all(
            params.get(k, defaults.get(k)) == v
            for k, v in explicit.items()
            if smoke_value(k) is None
        )
        if not same_rest:
            continue
        for k in (k for k in params if smoke_value(k) is not None):
            a, b = params[k], full.get(k)
            if isinstance(a, int | float) and isinstance(b, int | float) and a < b:
                return k
    return None


def _entry_description(
    by_kind: dict[str, list[Finding]], entry: str
) -> Finding[ExperimentValue] | None:
    """The entry point's own finding when it has a description (its docstring or its
    argparse ``description``): a README command often has no heading of its own."""
    return next(
        (
            x
            for x in of_type(by_kind, ExperimentValue)
            if x.detector == "entrypoints" and x.value.entry == entry and x.value.description
        ),
        None,
    )


_HELD_OUT_RE = re.compile(r"(?:^|_)(?:test|eval|evaluation|val|valid|validation|final|best)(?:_|$)")
_TRAIN_RE = re.compile(r"(?:^|_)(?:train|training|running|batch)(?:_|$)")


def metric_rank(name: str) -> int:
    """Where a metric goes among an experiment's: held-out results (``test_acc``,
    ``val_loss``, ``final_score``) first, then plain names (``loss``), then training-set
    and running values (``train_loss``, ``running_avg_loss``)."""
    if _HELD_OUT_RE.search(name):
        return 0
    return 2 if _TRAIN_RE.search(name) else 1


class _ByEntry:
    """The findings of each kind grouped by the entry they are about, each kind grouped once
    on first use. The merge asks per experiment; scanning every finding of the kind each
    time made it quadratic in the repository's size (5% of ``rb init`` at 5k files, 17% at
    20k). ``by_kind`` must not change while this is used (the experiments' merge only
    reads it)."""

    def __init__(self, by_kind: dict[str, list[Finding]]) -> None:
        self._by_kind = by_kind
        self._groups: dict[str, dict[str, list[Finding[Any]]]] = {}

    def of(self, cls: type[E], entry: str) -> list[Finding[E]]:
        """The findings of ``cls``'s kind about ``entry``, in their order in ``by_kind``."""
        groups = self._groups.get(cls.KIND)
        if groups is None:
            groups = {}
            for f in of_type(self._by_kind, cls):
                groups.setdefault(f.value.entry, []).append(f)
            self._groups[cls.KIND] = groups
        return list(groups.get(entry, ()))


def _one_experiment(
    b: Builder,
    by_kind: dict[str, list[Finding]],
    entries: _ByEntry,
    exp_id: str,
    f: Finding[ExperimentValue],
    cmd: str,
    entry: str,
    datasets: dict[str, Finding[DatasetValue]],
    notes: RecoveryNotes,
    smoke: tuple[str, Any, list[str]] | None = None,
) -> None:
    p = f"experiments.{exp_id}"
    src = f.sources()
    kind = f.value.kind
    seed_f = entries.of(SeedValue, entry)
    flagged = [(s, flag) for s in seed_f if (flag := s.value.flag)]
    command, params, seeds, _ = _parameterize(cmd, {flag for _, flag in flagged})
    param_f = {x.value.name: x for x in entries.of(ParamValue, entry)}
    if seeds is None and seed_f:
        if flagged:
            s0, flag = flagged[0]
            command += " " + flag_arg(flag, s0.value.syntax, "{seed}")
            if s0.value.default is not None:
                seeds = [s0.value.default]
                b.put(f"{p}.seeds", seeds, s0.sources(), "medium")
            else:
                seeds = [0]
                b.put(
                    f"{p}.seeds",
                    seeds,
                    [*s0.sources(), "rb default: the seed flag has no literal default"],
                    "low",
                )
        else:
            lit = [(s, seed) for s in seed_f if (seed := s.value.default) is not None]
            if lit:
                b.put(f"{p}.seeds", [lit[0][1]], lit[0][0].sources(), "medium")
                notes.decisions.append(
                    f"{exp_id}: the seed is fixed in code at {lit[0][0].sources()[0]}"
                )
    elif seeds is not None:
        b.put(f"{p}.seeds", seeds, src)
    if seeds is None and not b.has(f"{p}.seeds"):
        # Nothing in the code sets a seed: [0] is only a label for the run, a guess.
        b.put(f"{p}.seeds", [0], ["rb default: no seed found in the code"], "low")
        notes.warnings.append(
            f"{exp_id}: no seed found in the code; runs may differ (seeds = [0] is a label)"
        )
    # A flag that bounds training gives the smoke tier (and keeps unbounded loops finite).
    bound = next((n for n in params if smoke_value(n) is not None), None)
    tier_args: list[str] = []
    unb = entries.of(UnboundedValue, entry)
    if bound is None and kind in {"script", "module"}:
        bound, tier_args, command = _bound_flag(exp_id, command, params, param_f, unb, notes)
    sized: list[tuple[str, int, list[str]]] = []
    if bound is not None and is_epoch_bound(bound) and kind in {"script", "module"}:
        # An epoch is as long as the data: its size is lowered too, made explicit in the
        # command like a bound's default (the full run keeps it).
        for pf, size in epoch_sizes(param_f, params):
            name, flag = pf.value.name, pf.value.flag or ""
            params[name] = pf.value.default
            command += " " + flag_arg(flag, pf.value.syntax, f"{{{name}}}")
            sized.append((name, size, pf.sources()))
            notes.decisions.append(
                f"{exp_id}: {flag} made explicit (default {pf.value.default}, "
                f"{pf.sources()[0]}) so the smoke tier can lower it to {size}: an epoch "
                "is as long as the data"
            )
    for name in PLACEHOLDER.findall(command):
        if name != "seed" and name not in params:
            required = param_f.get(name)
            default = required.value.default if required else None
            params[name] = default if default is not None else ""
            if default is None:
                notes.warnings.append(
                    f"{exp_id}: required argument {{{name}}} has no default; set "
                    f"experiments.{exp_id}.params.{name}"
                )
    b.put(f"{p}.command", command, src, f.confidence)
    described = f if f.value.description else _entry_description(by_kind, entry)
    if described is not None:
        b.put(
            f"{p}.description",
            described.value.description,
            described.sources(),
            described.confidence,
        )
    b.put(f"{p}.kind", kind, src, f.confidence)
    workdir = clean_rel_path(f.value.workdir)
    if workdir is None:
        notes.warnings.append(
            f"{exp_id}: the command runs in {f.value.workdir!r}, outside the repository; "
            f"set experiments.{exp_id}.workdir to a directory inside it"
        )
    elif workdir != ".":
        b.put(f"{p}.workdir", workdir, src, f.confidence)
    for name, value in params.items():
        psrc = param_f[name].sources() if name in param_f else src
        b.put(f"{p}.params.{name}", value, [*src, *psrc] if name in param_f else src)
    b.put(f"{p}.timeout", "1h", ["rb default: edit to the paper's runtime"], "low")
    if smoke is not None and smoke[0] in params:
        name, value, sources = smoke
        b.put(f"{p}.tiers.smoke.params.{name}", value, sources)
        b.put(
            f"{p}.tiers.smoke.timeout", SMOKE_TIME_LIMIT, ["rb default for smoke tiers"], "medium"
        )
    elif tier_args:
        b.put(f"{p}.tiers.smoke.args", tier_args, [f"rb rule: smoke tier sets {bound}"], "medium")
        b.put(
            f"{p}.tiers.smoke.timeout", SMOKE_TIME_LIMIT, ["rb default for smoke tiers"], "medium"
        )
    elif bound is not None and bound in params:
        small = smoke_value(bound)
        value = params[bound]
        if small is not None and isinstance(value, int) and value > 0:
            # At most a tenth of the run, not below its print interval (see _bound_flag).
            gate = param_f[bound].value.every if bound in param_f else 0
            small = max(smoke_of_full(small, value), gate)
        # -1 / 0 mean "no limit" to most trainers: the smoke tier sets one.
        if small is not None and isinstance(value, int) and (value > small or value <= 0):
            b.put(
                f"{p}.tiers.smoke.params.{bound}",
                small,
                [f"rb rule: smoke tier lowers {bound}"],
                "medium",
            )
            b.put(
                f"{p}.tiers.smoke.timeout",
                SMOKE_TIME_LIMIT,
                ["rb default for smoke tiers"],
                "medium",
            )
    for name, size, sources in sized:
        b.put(
            f"{p}.tiers.smoke.params.{name}",
            size,
            [*sources, f"rb rule: a smoke epoch is about {STEPS} batches: it lowers {name}"],
            "medium",
        )
        b.put(
            f"{p}.tiers.smoke.timeout", SMOKE_TIME_LIMIT, ["rb default for smoke tiers"], "medium"
        )
    if not b.has(f"{p}.tiers.smoke") and workdir is not None:
        _literal_edits(b, p, exp_id, command, workdir, entry, of_type(by_kind, BoundValue), notes)
    if not b.has(f"{p}.tiers.smoke"):
        # Nothing to shorten: the smoke tier is the run itself, stopped at the smoke limit.
        # Many such runs (notebooks, small scripts) finish in minutes; one that does not
        # ends as a timeout, which says what it is, instead of a smoke audit that refuses
        # to run anything.
        why = (
            "no parameter that bounds the run (epochs, steps, iterations) could be set from "
            "the command line"
            + ("" if kind in {"script", "module"} else f" of a {kind} experiment")
            + (
                ", and no literal bound (a training loop's range, a setting such as "
                "max_iters = N) was found in its code"
                if kind in {"script", "notebook"}
                else ""
            )
        )
        b.put(
            f"{p}.tiers.smoke.timeout",
            SMOKE_TIME_LIMIT,
            [
                f"rb rule: {why}; the smoke tier is the full command, stopped after "
                f"{SMOKE_TIME_LIMIT}"
            ],
            "low",
        )
        notes.decisions.append(
            f"{exp_id}: smoke tier = the full command, time-limited to {SMOKE_TIME_LIMIT}: {why}"
        )
    if unb:
        u = unb[0]
        flag = u.value.flag
        text = u.value.reason
        if flag:
            text += f"; bounded by {flag}"
            name = u.value.name or flag.lstrip("-").replace("-", "_")
            if name not in params:
                notes.warnings.append(
                    f"{exp_id}: {u.sources()[0]} loops until {flag} is given; the full run "
                    f"needs it in the command (the smoke tier sets it)"
                    if tier_args
                    else f"{exp_id}: {u.sources()[0]} loops until {flag} is given; add it to "
                    "the command"
                )
        b.put(f"{p}.unbounded", text, u.sources(), u.confidence)
    hw = _hardware(by_kind, f)
    if hw:
        # A GPU only on evidence (a launcher's process count, CUDA use in the code), never
        # because environment.cuda is set: a pinned torch wheel says nothing about the run.
        top = max(hw, key=lambda h: (h.value.gpus, -rank_of(h.confidence)))
        b.put(f"{p}.hardware.gpus", top.value.gpus, top.sources(), top.confidence)
    ds_ids = sorted(
        i for i, d in datasets.items() if entry and any(e.path == entry for e in d.evidence)
    )
    if ds_ids:
        b.put(f"{p}.datasets", ds_ids, [s for i in ds_ids for s in datasets[i].sources()], "medium")
    written = entries.of(OutputValue, entry)
    outs = sorted(
        {
            clean
            for o in written
            if "{" not in o.value.path and (clean := clean_rel_path(o.value.path)) is not None
        }
    )
    out_sources = [s for o in written for s in o.sources()]
    executed = _executed_notebook(command) if kind == "notebook" else None
    executed = clean_rel_path(executed) if executed else None
    if executed and executed not in outs:
        # The executed notebook is the run's result (its cell outputs hold the printed
        # metrics): declaring it makes the auditor keep it as evidence and read it.
        outs = sorted([*outs, executed])
        out_sources = [*out_sources, *src]
    declared: list[dict[str, Any]] = [{"path": o} for o in outs]
    raised = entries.of(RaisesValue, entry) if executed else []
    if raised:
        # The cells the authors' saved outputs show raising are expected to raise the same
        # error in the executed copy (check.py); any other cell that raises is named.
        for out in declared:
            if out["path"] == executed:
                out["raises"] = [c.to_json() for c in raised[0].value.cells]
        out_sources = [*out_sources, *raised[0].sources()]
    if outs:
        b.put(f"{p}.outputs", declared, out_sources, "medium")
    metrics: dict[str, Finding[MetricValue]] = {}
    for m in sorted(
        entries.of(MetricValue, entry),
        key=lambda m: (m.value.source.regex is None, m.sources()),
    ):
        metrics.setdefault(m.key, m)
    for name, m in sorted(metrics.items(), key=lambda kv: (metric_rank(kv[0]), kv[0])):
        source = m.value.source.to_json()
        if "file" in source:
            clean = clean_rel_path(source["file"])
            if clean is None:
                continue  # a file outside the workdir is not evidence the auditor may read
            source["file"] = clean
        b.put(f"{p}.metrics.{name}.source", source, m.sources(), m.confidence)
        if name.endswith("_count") and "count out of" in m.note:
            # A count read without its total (detect/procedure/_printed.py): the guide's
            # table says what it counts out of, since no paper target can match it.
            b.put(f"{p}.metrics.{name}.provenance", m.note, m.sources(), m.confidence)
        better = direction(name.replace("_", " "))
        if better is not None:
            # Claims compare experiments by it ("a.loss < b.loss"); a paper column's own
            # direction, merged later, replaces this guess.
            b.put(
                f"{p}.metrics.{name}.higher_is_better",
                better,
                [f"rb rule: the name `{name}` says {'higher' if better else 'lower'} is better"],
                "low",
            )
    tracked = [x for x in entries.of(LoggedMetricValue, entry) if x.key not in metrics]
    if tracked:
        names = ", ".join(f"{x.key} ({x.value.sink}, {x.sources()[0]})" for x in tracked[:5])
        if not metrics:
            notes.warnings.append(
                f"{exp_id}: no metric could be read: the results are logged only to an "
                f"experiment tracker ({names}), which the auditor does not read; print them, "
                f"or add a [experiments.{exp_id}.metrics.<name>] source pointing at a file"
            )
        else:
            notes.warnings.append(
                f"{exp_id}: not read: {names}, logged only to an experiment tracker the "
                f"auditor does not read (the other metrics are)"
            )


def _literal_edits(
    b: Builder,
    p: str,
    exp_id: str,
    command: str,
    workdir: str,
    entry: str,
    bounds: list[Finding[BoundValue]],
    notes: RecoveryNotes,
) -> None:
    """The smoke tier as ``edits``: the literal bounds the ``bounds`` detector found in the
    entry file (a notebook's cells, a script without a flag for its length), each lowered to
    its smoke value (:func:`~reprobridge.recovery.smoke.literal_smoke_value`) in a copy of
    the file the command then runs. Only for a command of plain words that names the file
    (the launcher swaps that word for the copy's); nothing when no literal is above its
    smoke value."""
    named = named_files(command, workdir)
    if named is None:
        return
    found = [x for x in bounds if x.value.entry == entry]
    if not found:
        # A config file the command names (`python main.py config.json`): its bounds, in a
        # copy the command then names. One edited file per tier: the first such file.
        configs = [c for c in named if c != entry and any(x.value.entry == c for x in bounds)]
        if not configs:
            return
        entry = configs[0]
        found = [x for x in bounds if x.value.entry == entry]
    names_entry = entry in named
    if names_entry and not plain_command(command):
        notes.decisions.append(
            f"{exp_id}: {entry} has literal run bounds, but the command is shell syntax "
            "(variables, quotes with $, pipes...); the smoke tier cannot run a lowered copy"
        )
        return
    if not names_entry:
        notes.decisions.append(
            f"{exp_id}: {entry} has literal run bounds, but the command does not run it by "
            "path; the smoke tier cannot run a lowered copy"
        )
        return
    edits: list[dict[str, Any]] = []
    sources: list[str] = []
    shown: list[str] = []
    for x in sorted(found, key=lambda x: (x.value.cell or 0, x.value.line, x.value.column)):
        v = x.value
        # At most a tenth of the full run, but not below the loop's print interval: a smoke
        # run that prints nothing has no metric. A call's argument, by keyword or by
        # position, is known only by its parameter's name, which may count something other
        # than the run (`trajectory_plt(..., timesteps=10)` draws 10 points): lowered to the
        # usual value when above it, never cut to a tenth.
        usual = literal_smoke_value(v.name, v.site)
        if v.site not in ("keyword", "argument"):
            usual = smoke_of_full(usual, v.value - v.start)
        small = v.start + max(usual, v.every)
        if small >= v.value:
            continue  # already small: nothing to lower
        edit: dict[str, Any] = {"file": entry}
        if v.cell is not None:
            edit["cell"] = v.cell
        edit.update(line=v.line, column=v.column, was=v.was, value=small)
        if v.code:
            edit["code"] = v.code
        edits.append(edit)
        sources += x.sources()
        shown.append(f"{entry} {edit_place(v.cell, v.line)} `{v.code}` -> {small}")
    if not edits:
        return
    sources.append("rb rule: smoke tier lowers the literal bounds of the code, in a copy")
    b.put(f"{p}.tiers.smoke.edits", edits, sorted(set(sources)), "medium")
    b.put(f"{p}.tiers.smoke.timeout", SMOKE_TIME_LIMIT, ["rb default for smoke tiers"], "medium")
    notes.decisions.append(
        f"{exp_id}: smoke tier runs a copy of {entry} with its literal bounds lowered: "
        + "; ".join(shown)
    )


def _counts(default: object) -> bool:
    """Whether a bound's default is a count of the run (a whole number above 0)."""
    return isinstance(default, int) and not isinstance(default, bool) and default > 0


def _bound_flag(
    exp_id: str,
    command: str,
    params: dict[str, Any],
    param_f: dict[str, Finding[ParamValue]],
    unbounded: list[Finding[UnboundedValue]],
    notes: RecoveryNotes,
) -> tuple[str | None, list[str], str]:
    """(bounding parameter, smoke tier arguments, command) for a command without a literal
    bound: the parameter that ends an unbounded loop first, then any parameter named like a
    bound (:mod:`~reprobridge.detect.runbounds`) that has a flag.

    A bound with a literal default above 1 becomes a placeholder in the command (the full
    run keeps the default, the smoke tier lowers it to its smoke value, at most a tenth of
    the default: :func:`~reprobridge.detect.runbounds.smoke_of_full`). A bound without a
    usable default (None, or ``-1``/``0`` for "no limit") stays out of the full command and
    the smoke tier passes it as an argument (``--trainer.max_iters=20``).
    """
    order: list[Finding[ParamValue]] = []
    for u in unbounded:
        name = u.value.name
        if name and name in param_f:
            order.append(param_f[name])
    # A bound whose default counts the run (`--max_steps 100000`) before one whose default
    # sets no limit (`--max_epochs None`): the code is known to count with the first,
    # while a None may be read nowhere (a trainer given `max_epochs=int(1e8)` whatever the
    # flag says), and a smoke argument for it would bound nothing.
    order += sorted(
        (pf for pf in param_f.values() if pf.value.flag and smoke_value(pf.value.flag) is not None),
        key=lambda pf: (not _counts(pf.value.default), pf.value.name),
    )
    for pf in order:
        flag, name = pf.value.flag or "", pf.value.name
        small = smoke_value(flag) or smoke_value(name)
        if not flag or small is None or name in params:
            continue
        default = pf.value.default
        syntax = pf.value.syntax
        if isinstance(default, int) and not isinstance(default, bool) and default > 0:
            # At most a tenth of the run, but not below the interval of a loop over it that
            # prints only every K iterations: a smoke run that prints nothing has no metric.
            small = max(smoke_of_full(small, default), pf.value.every)
        if isinstance(default, int) and not isinstance(default, bool) and default > small:
            params[name] = default
            notes.decisions.append(
                f"{exp_id}: {flag} made explicit (default {default}, {pf.sources()[0]}) so the "
                "smoke tier can lower it"
            )
            return name, [], command + " " + flag_arg(flag, syntax, f"{{{name}}}")
        if isinstance(default, int) and not isinstance(default, bool) and default > 0:
            continue  # already small: nothing to lower
        notes.decisions.append(
            f"{exp_id}: the smoke tier passes {flag_arg(flag, syntax, str(small))}: the code's "
            f"default ({default!r}, {pf.sources()[0]}) sets no limit"
        )
        return name, flag_arg(flag, syntax, str(small)).split(" "), command
    return None, [], command


def _executed_notebook(command: str) -> str | None:
    """Where a headless notebook command writes the executed notebook (workdir-relative).

    ``jupyter nbconvert --execute --to notebook [--output NAME] [--output-dir DIR] NB``
    writes ``NAME`` (``.ipynb`` added when missing; default ``NB``'s stem plus
    ``.nbconvert.ipynb``) next to ``NB`` unless ``--output-dir`` says otherwise, or ``NB``
    itself with ``--inplace``; ``papermill IN OUT`` writes ``OUT``. None when the command
    is neither, has placeholders, or its output cannot be told statically.
    """
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if "{" in command or not words:
        return None
    if words[0] == "papermill":
        args = [w for w in words[1:] if not w.startswith("-")]
        return args[1] if len(args) >= 2 and args[1].endswith(".ipynb") else None
    if words[:2] != ["jupyter", "nbconvert"] or "--execute" not in words:
        return None
    opts: dict[str, str] = {}
    inputs: list[str] = []
    i = 2
    while i < len(words):
        w = words[i]
        name, eq, value = w.partition("=")
        if name in {"--to", "--output", "--output-dir"}:
            if not eq:
                i += 1
                value = words[i] if i < len(words) else ""
            opts[name] = value
        elif w.endswith(".ipynb") and not w.startswith("-"):
            inputs.append(w)
        i += 1
    if len(inputs) != 1:
        return None
    nb = PurePosixPath(inputs[0])
    if "--inplace" in words:
        return str(nb)
    if opts.get("--to") != "notebook":
        return None  # another format (nbconvert's default is html): no executed notebook
    name = opts.get("--output") or f"{nb.stem}.nbconvert"
    if not name.endswith(".ipynb"):
        name += ".ipynb"
    folder = PurePosixPath(opts["--output-dir"]) if "--output-dir" in opts else nb.parent
    out = folder / PurePosixPath(name).name
    return None if out.is_absolute() or ".." in out.parts else str(out)


# -- paper targets and claims -------------------------------------------------------------
