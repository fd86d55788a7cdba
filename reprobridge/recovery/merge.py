"""Findings become one manifest, by stated rules; conflicts are reported, not hidden.

Rules (each decision is recorded with its sources in ``Manifest.derived``):

* **Dependencies**: one requirement per distribution. When sources disagree, the more
  specific declaration wins: requirements files > pyproject > setup.cfg > setup.py >
  Pipfile > environment.yml > imports; the loser is reported as a conflict. Imports no file
  declares are added unpinned and flagged.
* **Python**: an exact version (``.python-version`` > ``runtime.txt`` > conda > Pipfile)
  wins; otherwise the newest version that every specifier (``requires-python``, syntax
  used, framework pins) admits, capped at 3.12 for wheel availability; default 3.11. An
  exact version that violates a specifier is kept and reported.
* **CUDA**: the highest-confidence finding; disagreeing findings are reported.
* **nixpkgs**: chosen from the shipped pin data (:mod:`reprobridge.recovery.pins`).
* **Experiments**: README > Makefile > shell scripts > notebooks > ``__main__`` scripts;
  the same command found twice is one experiment; guessed entry points are dropped when a
  declared experiment exists (and listed in the guide). Literal ``--flag value`` arguments
  become ``{param}`` placeholders; the seed flag becomes ``{seed}``; an epochs/steps flag
  gives the ``smoke`` tier.
* **Targets and claims**: paper table rows are matched to experiments and columns to
  metrics by shared words; an unmatched cell is reported, never guessed into a threshold.
"""

from __future__ import annotations

import re
import shlex
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from reprobridge.detect.base import DetectContext, Finding
from reprobridge.errors import RenderError
from reprobridge.manifest.io import digest, flatten, manifest_data
from reprobridge.manifest.schema import (
    ID_PATTERN,
    NIX_ATTR_PATTERN,
    PARAM_PATTERN,
    Derivation,
    Manifest,
)
from reprobridge.recovery import pins

_REQ_PRIORITY = {
    "requirements": 0,
    "pyproject": 1,
    "setupcfg": 2,
    "setuppy": 3,
    "pipfile": 4,
    "conda": 5,
    "imports": 6,
}
_EXACT_PY_PRIORITY = {"pyversion": 0, "conda": 1, "pipfile": 2, "pyproject": 3}
_EXP_PRIORITY = {"readme": 0, "makefile": 1, "shell": 2, "notebooks": 3, "entrypoints": 4}
_CONF_RANK = {"high": 0, "medium": 1, "low": 2}
_BOUND_PARAMS = {
    "epochs": 1, "num_epochs": 1, "n_epochs": 1, "max_epochs": 1, "epoch": 1,
    "max_steps": 20, "steps": 20, "num_steps": 20, "train_steps": 20, "total_steps": 20,
    "iters": 20, "iterations": 20, "max_iters": 20, "n_iter": 20, "num_iters": 20,
}  # fmt: skip
_SEED_NAMES = {"seed", "random_seed", "rng_seed", "manual_seed"}
#: Newest Python a framework release has wheels for (older frameworks cap the interpreter).
_FRAMEWORK_MAX_PY = {
    "torch": [("1.11", "3.10"), ("1.13", "3.10"), ("2.1", "3.11"), ("2.4", "3.12"), ("9", "3.13")],
    "tensorflow": [("2.11", "3.10"), ("2.15", "3.11"), ("9", "3.12")],
}
DEFAULT_PYTHON = "3.11"
PYTHON_CAP = "3.12"


@dataclass(frozen=True)
class Conflict:
    """Sources that disagree about one value, and which one won and why."""

    path: str
    chosen: str
    others: list[str]
    rule: str

    def __str__(self) -> str:
        return f"{self.path}: chose {self.chosen} over {'; '.join(self.others)} ({self.rule})"


@dataclass
class MergeResult:
    """A validated manifest plus what a person should know about how it was made."""

    manifest: Manifest
    conflicts: list[Conflict] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    flagged_imports: list[str] = field(default_factory=list)
    unmatched_targets: list[str] = field(default_factory=list)
    dropped_experiments: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    pin: pins.PinChoice | None = None


class _Builder:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.prov: dict[str, tuple[list[str], str]] = {}

    def put(self, path: str, value: Any, sources: list[str], confidence: str = "high") -> None:
        cur = self.data
        parts = path.split(".")
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = value
        self.prov[path] = (sorted(set(sources)) or ["rb default"], confidence)

    def has(self, path: str) -> bool:
        cur: Any = self.data
        for p in path.split("."):
            if not isinstance(cur, dict) or p not in cur:
                return False
            cur = cur[p]
        return True


def _best(findings: list[Finding], priority: dict[str, int]) -> list[Finding]:
    return sorted(
        findings,
        key=lambda f: (_CONF_RANK[f.confidence], priority.get(f.detector, 99), f.sources()),
    )


def merge_findings(
    ctx: DetectContext,
    *,
    repo_name: str,
    paper_path: str | None = None,
    python_lock: str | None = None,
) -> MergeResult:
    """Apply the module's rules to ``ctx.findings``; return a validated manifest.

    Raises RenderError when no known nixpkgs release can carry the environment even after
    the documented fallbacks.
    """
    b = _Builder()
    res = MergeResult(manifest=None)  # type: ignore[arg-type]
    by_kind: dict[str, list[Finding]] = defaultdict(list)
    for f in ctx.findings:
        by_kind[f.kind].append(f)

    _project(b, by_kind, repo_name, paper_path)
    requirements = _requirements(b, by_kind, res)
    python = _python(b, by_kind, requirements, res)
    cuda = _cuda(b, by_kind, res)
    _environment_rest(b, by_kind, python, cuda, python_lock, res)
    datasets = _datasets(b, by_kind)
    _experiments(b, by_kind, datasets, cuda, res)
    _targets_and_claims(b, by_kind, res)
    res.warnings += [w.message if not w.path else f"{w.path}: {w.message}" for w in ctx.warnings]
    res.manifest = _finalize(b)
    return res


# -- project ------------------------------------------------------------------------------


def _project(
    b: _Builder, by_kind: dict[str, list[Finding]], repo_name: str, paper: str | None
) -> None:
    found = {f.key: f for f in _best(by_kind["project"], {"project": 0, "paper": 1})[::-1]}
    name = found.get("name")
    b.put(
        "project.name",
        str(name.value.get("value")) if name else repo_name,
        name.sources() if name else ["repository directory name"],
    )
    for key in ("title", "url", "doi"):
        if key in found:
            b.put(f"project.paper.{key}", str(found[key].value["value"]), found[key].sources())
    if "authors" in found:
        authors = found["authors"].value.get("values") or [
            a.strip() for a in str(found["authors"].value.get("value", "")).split(";") if a.strip()
        ]
        b.put("project.paper.authors", [str(a) for a in authors], found["authors"].sources())
    if "license" in found:
        b.put("project.license", str(found["license"].value["value"]), found["license"].sources())
    if paper:
        b.put("project.paper.path", paper, ["rb init --paper"])


# -- environment --------------------------------------------------------------------------


def _requirements(
    b: _Builder, by_kind: dict[str, list[Finding]], res: MergeResult
) -> dict[str, Requirement]:
    groups: dict[str, list[Finding]] = defaultdict(list)
    for f in by_kind["python_requirement"]:
        groups[canonicalize_name(f.key)].append(f)
    chosen: dict[str, Requirement] = {}
    for name in sorted(groups):
        ranked = _best(groups[name], _REQ_PRIORITY)
        ranked.sort(key=lambda f: (_REQ_PRIORITY.get(f.detector, 99), f.sources()))
        top = ranked[0]
        try:
            req = Requirement(str(top.value["requirement"]))
        except InvalidRequirement:
            res.warnings.append(
                f"{top.sources()[0]}: ignored invalid requirement {top.value['requirement']!r}"
            )
            continue
        chosen[name] = req
        specs = {str(f.value["requirement"]) for f in ranked}
        if len(specs) > 1:
            others = [
                f"{f.value['requirement']} ({', '.join(f.sources())})"
                for f in ranked[1:]
                if str(f.value["requirement"]) != str(top.value["requirement"])
            ]
            res.conflicts.append(
                Conflict(
                    f"environment.python_requirements[{name}]",
                    f"{top.value['requirement']} ({', '.join(top.sources())})",
                    others,
                    "the more specific dependency file wins",
                )
            )
        if not top.value.get("declared", True):
            res.flagged_imports.append(f"{name} (imported at {top.sources()[0]}, declared nowhere)")
    if chosen:
        sources = sorted({s for g in groups.values() for f in g for s in f.sources()})
        conf = "medium" if res.flagged_imports else "high"
        b.put(
            "environment.python_requirements",
            [str(chosen[n]) for n in sorted(chosen)],
            sources,
            conf,
        )
    indexes = sorted({str(f.value["url"]) for f in by_kind["python_index"]})
    if indexes:
        b.put(
            "environment.python_indexes",
            indexes,
            [s for f in by_kind["python_index"] for s in f.sources()],
        )
    return chosen


def _py_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


def _python(
    b: _Builder, by_kind: dict[str, list[Finding]], reqs: dict[str, Requirement], res: MergeResult
) -> str:
    exact = [f for f in by_kind["python_version"] if "exact" in f.value]
    specs: list[tuple[SpecifierSet, Finding | str]] = []
    for f in by_kind["python_version"]:
        if "specifier" in f.value:
            try:
                specs.append((SpecifierSet(str(f.value["specifier"])), f))
            except InvalidSpecifier:
                res.warnings.append(
                    f"{f.sources()[0]}: ignored invalid Python specifier {f.value['specifier']!r}"
                )
    for fw, table in _FRAMEWORK_MAX_PY.items():
        req = reqs.get(fw)
        pinned = _pinned_version(req) if req else None
        if pinned:
            for upto, maxpy in table:
                if _py_key(f"{pinned.major}.{pinned.minor}") <= _py_key(upto):
                    specs.append(
                        (
                            SpecifierSet(f"<={maxpy}.99"),
                            f"{fw}=={pinned} has wheels up to Python {maxpy}",
                        )
                    )
                    break
    sources: list[str] = []
    if exact:
        ranked = sorted(exact, key=lambda f: (_EXACT_PY_PRIORITY.get(f.detector, 9), f.sources()))
        choice = _major_minor(str(ranked[0].value["exact"]))
        sources = ranked[0].sources()
        others = sorted({_major_minor(str(f.value["exact"])) for f in ranked[1:]} - {choice})
        if others:
            res.conflicts.append(
                Conflict(
                    "environment.python",
                    f"{choice} ({', '.join(sources)})",
                    others,
                    "an exact version file wins",
                )
            )
        for spec, why in specs:
            if not spec.contains(f"{choice}.0", prereleases=True):
                src = ", ".join(why.sources()) if isinstance(why, Finding) else why
                res.conflicts.append(
                    Conflict(
                        "environment.python",
                        choice,
                        [f"{spec} ({src})"],
                        "kept the exact version; check it",
                    )
                )
        confidence = "high"
    else:
        candidates = [v for v in pins.available_pythons() if _py_key(v) <= _py_key(PYTHON_CAP)]
        admitted = [
            v for v in candidates if all(s.contains(f"{v}.0", prereleases=True) for s, _ in specs)
        ]
        if specs and admitted:
            choice = admitted[-1]
            sources = sorted(
                {s for _, w in specs for s in (w.sources() if isinstance(w, Finding) else [w])}
            )
            if _py_key(choice) > _py_key(DEFAULT_PYTHON) and all(
                s.contains(f"{DEFAULT_PYTHON}.0") for s, _ in specs
            ):
                choice = DEFAULT_PYTHON
            confidence = "medium"
        else:
            if specs:
                res.warnings.append(
                    "no Python version satisfies every constraint found; using the default"
                )
            choice, sources, confidence = (
                DEFAULT_PYTHON,
                ["rb default (no Python version declared)"],
                "low",
            )
    b.put("environment.python", choice, sources, confidence)
    return choice


def _major_minor(version: str) -> str:
    parts = re.findall(r"\d+", version)
    return ".".join(parts[:2]) if len(parts) >= 2 else f"{parts[0]}.0" if parts else DEFAULT_PYTHON


def _pinned_version(req: Requirement) -> Version | None:
    for spec in req.specifier:
        if spec.operator in {"==", "==="} and "*" not in spec.version:
            try:
                return Version(spec.version)
            except ValueError:
                return None
    return None


def _cuda_version(raw: str) -> tuple[str, str | None]:
    """``"12.1.105"`` -> ``"12.1"``; a bare major (``"12"``, from ``nvidia-*-cu12`` wheels)
    becomes the CUDA that the newest closed release defaults to for that major, with a note."""
    parts = re.findall(r"\d+", raw)
    if len(parts) >= 2:
        return f"{parts[0]}.{parts[1]}", None
    major = parts[0] if parts else "12"
    known = [v for v in pins.available_cudas() if v.split(".")[0] == major]
    default = pins.default_cuda(major)
    chosen = default or (known[-1] if known else f"{major}.0")
    return (
        chosen,
        f"only CUDA {major} is known (wheel names); chose {chosen}, the newest release's default",
    )


def _cuda(b: _Builder, by_kind: dict[str, list[Finding]], res: MergeResult) -> str | None:
    found = _best(by_kind["cuda"], {})
    if not found:
        return None
    top = found[0]
    version, note = _cuda_version(str(top.value["version"]))
    if note:
        res.decisions.append(note)
    others = sorted(
        {
            _cuda_version(str(f.value["version"]))[0]
            for f in found[1:]
            if "." in str(f.value["version"])
        }
        - {version}
    )
    if others:
        res.conflicts.append(
            Conflict(
                "environment.cuda",
                f"{version} ({', '.join(top.sources())})",
                others,
                "the highest-confidence source wins",
            )
        )
    b.put("environment.cuda", version, top.sources(), "low" if note else top.confidence)
    return version


def _environment_rest(
    b: _Builder,
    by_kind: dict[str, list[Finding]],
    python: str,
    cuda: str | None,
    python_lock: str | None,
    res: MergeResult,
) -> None:
    nvcc = by_kind["nvcc"]
    if nvcc:
        b.put("environment.nvcc", True, [s for f in nvcc for s in f.sources()])
        if cuda is None:
            res.warnings.append(
                "CUDA sources are compiled but no CUDA version was found: set environment.cuda"
            )
    gcc_f = _best(by_kind["compiler"], {})
    gcc = _major_minor(str(gcc_f[0].value["version"])).split(".")[0] if gcc_f else None
    system = sorted(
        {
            f.key
            for f in by_kind["system_library"]
            if f.confidence != "low" and re.fullmatch(NIX_ATTR_PATTERN, f.key)
        }
    )
    skipped = sorted({f.key for f in by_kind["system_library"]} - set(system))
    for name in skipped:
        res.warnings.append(
            f"system library {name!r} has no known nixpkgs attribute; add it by hand if needed"
        )
    if system:
        b.put(
            "environment.system",
            system,
            [s for f in by_kind["system_library"] if f.key in system for s in f.sources()],
        )
    choice = _choose_pin(python, cuda, gcc, bool(nvcc), res)
    if choice.python_attr != pins.python_attr(python):
        b.put(
            "environment.python",
            choice.python_attr.removeprefix("python").replace("3", "3.", 1),
            ["no known nixpkgs release carries the recovered Python; nearest newer one"],
            "low",
        )
    if choice.cuda_attr and cuda and choice.cuda_attr != pins.cuda_attr(cuda):
        b.put(
            "environment.cuda",
            choice.cuda_attr.removeprefix("cudaPackages_").replace("_", "."),
            ["no known nixpkgs release carries the recovered CUDA; nearest newer one"],
            "low",
        )
    gcc_final = gcc or choice.gcc
    if gcc_final:
        src = gcc_f[0].sources() if gcc_f else [f"nvcc {cuda} host-compiler limit (pin data)"]
        b.put("environment.compilers.gcc", gcc_final, src, "high" if gcc_f else "medium")
    b.put(
        "environment.nixpkgs",
        {
            "release": choice.release,
            "rev": choice.rev,
            "narHash": choice.narHash,
            "lastModified": choice.lastModified,
        },
        [f"pin data: {choice.release}"],
        "medium" if choice.attrs_inferred else "high",
    )
    res.decisions += choice.reasons
    res.pin = choice
    if python_lock:
        b.put("environment.python_lock", python_lock, ["uv lock"])


def _choose_pin(
    python: str, cuda: str | None, gcc: str | None, nvcc: bool, res: MergeResult
) -> pins.PinChoice:
    try:
        return pins.choose_pin(python, cuda, gcc, nvcc=nvcc)
    except RenderError:
        pass
    pythons = [v for v in pins.available_pythons() if _py_key(v) >= _py_key(python)] or [python]
    cudas = (
        [None]
        if cuda is None
        else [
            v
            for v in pins.available_cudas()
            if v.split(".")[0] == cuda.split(".")[0] and _py_key(v) >= _py_key(cuda)
        ]
    )
    for py in pythons:
        for cu in cudas or [cuda]:
            try:
                choice = pins.choose_pin(py, cu, None, nvcc=nvcc)
            except RenderError:
                continue
            res.conflicts.append(
                Conflict(
                    "environment",
                    f"python {py}" + (f", CUDA {cu}" if cu else ""),
                    [
                        f"python {python}"
                        + (f", CUDA {cuda}" if cuda else "")
                        + (f", gcc {gcc}" if gcc else "")
                    ],
                    "no known nixpkgs release carries the recovered versions; nearest newer ones",
                )
            )
            return choice
    return pins.choose_pin(python, cuda, gcc, nvcc=nvcc)  # raises the clear error


# -- datasets -----------------------------------------------------------------------------


def _datasets(b: _Builder, by_kind: dict[str, list[Finding]]) -> dict[str, Finding]:
    out: dict[str, Finding] = {}
    for f in sorted(by_kind["dataset"], key=lambda f: (f.key, _CONF_RANK[f.confidence])):
        ds_id = _slug(f.key)
        if not ds_id or ds_id in out:
            continue
        out[ds_id] = f
        for key in ("path", "url", "name", "description"):
            if f.value.get(key):
                b.put(f"datasets.{ds_id}.{key}", str(f.value[key]), f.sources(), f.confidence)
        if f.value.get("generated"):
            b.put(f"datasets.{ds_id}.generated", True, f.sources(), f.confidence)
        if not any(f.value.get(k) for k in ("path", "url", "name", "description", "generated")):
            b.put(f"datasets.{ds_id}.description", f"referenced as {f.key!r}", f.sources(), "low")
    return out


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


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_HYDRA_OVERRIDE = re.compile(r"^\+{0,2}([A-Za-z_][\w.]*)=(.+)$")


def _join_words(words: list[str]) -> str:
    """shlex.join, but ``{name}`` placeholders stay bare so the launcher can fill them."""
    out = []
    for w in words:
        parts = _PLACEHOLDER.split(w)  # literal, name, literal, name, ..., literal
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
        if is_flag and (eq or (i + 1 < len(words) and not words[i + 1].startswith("-"))):
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


def _experiments(
    b: _Builder,
    by_kind: dict[str, list[Finding]],
    datasets: dict[str, Finding],
    cuda: str | None,
    res: MergeResult,
) -> None:
    cands = sorted(
        by_kind["experiment"],
        key=lambda f: (
            _CONF_RANK[f.confidence],
            _EXP_PRIORITY.get(f.detector, 9),
            f.sources(),
            f.key,
        ),
    )
    has_declared = any(f.confidence != "low" for f in cands)
    seen_cmds: set[str] = set()
    covered_entries: set[str] = set()
    kept: list[tuple[Finding, str, str, dict[str, Any]]] = []
    smoke: dict[str, tuple[str, Any, list[str]]] = {}
    for f in cands:
        cmd = " ".join(str(f.value["command"]).split())
        entry = str(f.value.get("entry") or "")
        if cmd in seen_cmds:
            continue
        if f.confidence == "low" and has_declared:
            res.dropped_experiments.append(f"{cmd} ({', '.join(f.sources())})")
            continue
        if f.detector == "entrypoints" and entry in covered_entries:
            continue
        seen_cmds.add(cmd)
        params = _parameterize(cmd, set())[1]
        defaults = {
            str(x.value["name"]): x.value.get("default")
            for x in _for_entry(by_kind["param"], entry)
        }
        folded = _reduced_variant(params, [(k[3], defaults) for k in kept if k[2] == entry])
        if folded is not None:
            # "python train.py ... --epochs 2" beside the full command: the README's quick
            # check, which is what the smoke tier is for.
            smoke[entry] = (folded, params[folded], f.sources())
            res.decisions.append(
                f"{cmd} ({', '.join(f.sources())}) is a reduced run of another experiment: "
                f"it became the smoke tier ({folded} = {params[folded]})"
            )
            continue
        covered_entries.add(entry)
        kept.append((f, cmd, entry, params))
    used_ids: set[str] = set()
    for f, cmd, entry, _ in kept:
        exp_id = _slug(f.key) or _slug(entry.rsplit("/", 1)[-1].rsplit(".", 1)[0]) or "experiment"
        exp_id = re.sub(r"-(ours|proposed|our-method)$", "", exp_id) or exp_id
        base, n = exp_id, 2
        while exp_id in used_ids:
            exp_id, n = f"{base[:60]}-{n}", n + 1
        used_ids.add(exp_id)
        _one_experiment(b, by_kind, exp_id, f, cmd, entry, datasets, cuda, res, smoke.get(entry))


def _reduced_variant(
    params: dict[str, Any], others: list[tuple[dict[str, Any], dict[str, Any]]]
) -> str | None:
    """The bound parameter (epochs, steps) by which ``params`` is a smaller copy of one of
    ``others`` — (explicit arguments, the script's defaults) pairs — with every other
    argument equal, or None."""
    for explicit, defaults in others:
        full = {**defaults, **explicit}
        rest = {k: v for k, v in params.items() if k not in _BOUND_PARAMS}
        same_rest = all(full.get(k) == v for k, v in rest.items()) and all(
            params.get(k, defaults.get(k)) == v
            for k, v in explicit.items()
            if k not in _BOUND_PARAMS
        )
        if not same_rest:
            continue
        for k in (k for k in params if k in _BOUND_PARAMS):
            a, b = params[k], full.get(k)
            if isinstance(a, int | float) and isinstance(b, int | float) and a < b:
                return k
    return None


def _for_entry(findings: list[Finding], entry: str) -> list[Finding]:
    return [f for f in findings if f.value.get("entry") == entry]


def _one_experiment(
    b: _Builder,
    by_kind: dict[str, list[Finding]],
    exp_id: str,
    f: Finding,
    cmd: str,
    entry: str,
    datasets: dict[str, Finding],
    cuda: str | None,
    res: MergeResult,
    smoke: tuple[str, Any, list[str]] | None = None,
) -> None:
    p = f"experiments.{exp_id}"
    src = f.sources()
    kind = str(f.value.get("kind", "script"))
    seed_f = _for_entry(by_kind["seed"], entry)
    seed_flags = {str(s.value["flag"]) for s in seed_f if s.value.get("flag")}
    command, params, seeds, _ = _parameterize(cmd, seed_flags)
    param_f = {str(x.value["name"]): x for x in _for_entry(by_kind["param"], entry)}
    if seeds is None and seed_f:
        flagged = [s for s in seed_f if s.value.get("flag")]
        if flagged:
            s0 = flagged[0]
            command += f" {s0.value['flag']} {{seed}}"
            default = s0.value.get("default")
            seeds = [int(default)] if isinstance(default, int) else [0]
            b.put(f"{p}.seeds", seeds, s0.sources(), "medium")
        else:
            lit = [s for s in seed_f if isinstance(s.value.get("default"), int)]
            if lit:
                b.put(f"{p}.seeds", [int(lit[0].value["default"])], lit[0].sources(), "medium")
                res.decisions.append(
                    f"{exp_id}: the seed is fixed in code at {lit[0].sources()[0]}"
                )
    elif seeds is not None:
        b.put(f"{p}.seeds", seeds, src)
    # A flag that bounds training gives the smoke tier (and keeps unbounded loops finite).
    bound = next((n for n in params if n in _BOUND_PARAMS), None)
    if bound is None:
        for name, pf in sorted(param_f.items()):
            if (
                name in _BOUND_PARAMS
                and pf.value.get("flag")
                and isinstance(pf.value.get("default"), int)
            ):
                command += f" {pf.value['flag']} {{{name}}}"
                params[name] = int(pf.value["default"])
                bound = name
                res.decisions.append(
                    f"{exp_id}: {pf.value['flag']} made explicit (default {pf.value['default']}, "
                    f"{pf.sources()[0]}) so the smoke tier can lower it"
                )
                break
    for name in _PLACEHOLDER.findall(command):
        if name != "seed" and name not in params:
            required = param_f.get(name)
            default = required.value.get("default") if required else None
            params[name] = default if isinstance(default, str | int | float | bool) else ""
            if not isinstance(default, str | int | float | bool):
                res.warnings.append(
                    f"{exp_id}: required argument {{{name}}} has no default; set "
                    f"experiments.{exp_id}.params.{name}"
                )
    b.put(f"{p}.command", command, src, f.confidence)
    if f.value.get("description"):
        b.put(f"{p}.description", str(f.value["description"]), src, f.confidence)
    if kind in {"script", "module", "notebook", "make", "shell"}:
        b.put(f"{p}.kind", kind, src, f.confidence)
    if f.value.get("workdir") and f.value["workdir"] != ".":
        b.put(f"{p}.workdir", str(f.value["workdir"]), src, f.confidence)
    for name, value in params.items():
        psrc = param_f[name].sources() if name in param_f else src
        b.put(f"{p}.params.{name}", value, [*src, *psrc] if name in param_f else src)
    b.put(f"{p}.timeout", "1h", ["rb default: edit to the paper's runtime"], "low")
    if smoke is not None and smoke[0] in params:
        name, value, sources = smoke
        b.put(f"{p}.tiers.smoke.params.{name}", value, sources)
        b.put(f"{p}.tiers.smoke.timeout", "10m", ["rb default for smoke tiers"], "medium")
    elif bound is not None:
        small = _BOUND_PARAMS[bound]
        if isinstance(params[bound], int) and params[bound] > small:
            b.put(
                f"{p}.tiers.smoke.params.{bound}",
                small,
                [f"rb rule: smoke tier lowers {bound}"],
                "medium",
            )
            b.put(f"{p}.tiers.smoke.timeout", "10m", ["rb default for smoke tiers"], "medium")
    unb = _for_entry(by_kind["unbounded"], entry)
    if unb:
        u = unb[0]
        flag = u.value.get("flag")
        text = str(u.value.get("reason", "loop without an end"))
        if flag:
            text += f"; bounded by {flag}"
            if str(flag).lstrip("-").replace("-", "_") not in params:
                res.warnings.append(
                    f"{exp_id}: {u.sources()[0]} loops until {flag} is given; add it to the command"
                )
        b.put(f"{p}.unbounded", text, u.sources(), u.confidence)
    hw = [
        h
        for h in by_kind["hardware"]
        if entry and (h.key == entry or h.value.get("entry") == entry)
    ]
    if hw:
        b.put(
            f"{p}.hardware.gpus", int(hw[0].value.get("gpus", 1)), hw[0].sources(), hw[0].confidence
        )
    elif cuda:
        b.put(f"{p}.hardware.gpus", 1, ["environment.cuda is set: assumed one GPU"], "low")
    ds_ids = sorted(
        i for i, d in datasets.items() if entry and any(e.path == entry for e in d.evidence)
    )
    if ds_ids:
        b.put(f"{p}.datasets", ds_ids, [s for i in ds_ids for s in datasets[i].sources()], "medium")
    outs = sorted(
        {
            str(o.value["path"])
            for o in _for_entry(by_kind["output"], entry)
            if "{" not in str(o.value["path"])
        }
    )
    if outs:
        b.put(
            f"{p}.outputs",
            [{"path": o} for o in outs],
            [s for o in _for_entry(by_kind["output"], entry) for s in o.sources()],
            "medium",
        )
    metrics: dict[str, Finding] = {}
    for m in sorted(
        _for_entry(by_kind["metric"], entry),
        key=lambda m: ("regex" not in m.value["source"], m.sources()),
    ):
        metrics.setdefault(m.key, m)
    for name, m in sorted(metrics.items()):
        source = {k: str(v) for k, v in m.value["source"].items() if k in {"regex", "file", "key"}}
        b.put(f"{p}.metrics.{name}.source", source, m.sources(), m.confidence)


# -- paper targets and claims -------------------------------------------------------------

_SYNONYMS = {"acc": "accuracy", "err": "error", "ppl": "perplexity", "top1": "top1", "f1": "f1"}
_STOP = {
    "ours",
    "the",
    "of",
    "a",
    "an",
    "with",
    "w",
    "test",
    "val",
    "mean",
    "std",
    "our",
    "method",
    "model",
}


def _tokens(text: str, *, keep_test: bool = False) -> set[str]:
    words = re.findall(r"[a-z0-9]+", text.lower().replace("_", " "))
    out = {_SYNONYMS.get(w, w) for w in words}
    return out if keep_test else out - _STOP


def _match(label: str, options: dict[str, set[str]]) -> str | None:
    want = _tokens(label)
    if not want:
        return None
    scored = sorted(
        ((len(want & toks) / len(want), k) for k, toks in options.items()), reverse=True
    )
    if not scored or scored[0][0] < 0.5 or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None
    return scored[0][1]


def _seeds_in(caption: str) -> list[int] | None:
    """Seeds a table caption names: "seeds 0-2", "seeds 0, 1 and 2", "over 3 seeds" (0..2)."""
    m = re.search(r"seeds?\s+(\d+)\s*(?:-|–|to|\.\.)\s*(\d+)", caption, re.I)
    if m and int(m.group(1)) <= int(m.group(2)) <= int(m.group(1)) + 99:
        return list(range(int(m.group(1)), int(m.group(2)) + 1))
    m = re.search(r"seeds?\s+((?:\d+\s*(?:,|and|,\s*and)\s*)+\d+)", caption, re.I)
    if m:
        return [int(x) for x in re.findall(r"\d+", m.group(1))]
    m = re.search(r"(\d+)\s+(?:random\s+)?seeds", caption, re.I)
    if m and 1 <= int(m.group(1)) <= 100:
        return list(range(int(m.group(1))))
    return None


def _targets_and_claims(b: _Builder, by_kind: dict[str, list[Finding]], res: MergeResult) -> None:
    exps: dict[str, Any] = b.data.get("experiments", {})
    exp_tokens = {
        e: _tokens(e)
        | _tokens(str(d.get("description", "")))
        | {t for v in d.get("params", {}).values() if isinstance(v, str) for t in _tokens(v)}
        for e, d in exps.items()
    }
    row_to_exp: dict[str, str | None] = {}
    seeded: set[str] = set()
    for f in sorted(by_kind["target"], key=lambda f: f.sources()):
        row, col = str(f.value["row"]), str(f.value["column"])
        exp = row_to_exp.setdefault(row, _match(row, exp_tokens))
        metrics = exps.get(exp, {}).get("metrics", {}) if exp else {}
        metric = _match(col, {m: _tokens(m) for m in metrics}) if metrics else None
        where = f"{', '.join(f.sources())} ({f.value.get('table', 'table')}, row {row!r}, column {col!r})"
        if exp is None or metric is None:
            res.unmatched_targets.append(
                f"{f.value['value']} at {where}: no "
                + ("experiment" if exp is None else f"metric of {exp}")
                + " matches"
            )
            continue
        value = float(f.value["value"])
        spread = f.value.get("spread")
        note = ""
        if f.value.get("percent") and 1.0 < value <= 100.0:
            value, note = (
                value / 100.0,
                f"; the paper's {f.value['value']}% read as the fraction {value / 100.0:g}",
            )
            spread = float(spread) / 100.0 if isinstance(spread, int | float) else spread
        mp = f"experiments.{exp}.metrics.{metric}"
        if b.has(f"{mp}.target"):
            continue
        seeds = _seeds_in(str(f.value.get("caption", "")))
        if seeds and exp not in seeded:
            seeded.add(exp)
            b.put(
                f"experiments.{exp}.seeds",
                seeds,
                [*f.sources(), "the table caption names the seeds"],
            )
        b.put(f"{mp}.target", round(value, 10), f.sources(), "medium")
        if isinstance(spread, int | float) and spread > 0:
            b.put(
                f"{mp}.tolerance",
                round(max(3 * float(spread), 0.01 * abs(value)), 10),
                [*f.sources(), "rb rule: 3 x the paper's ± spread (at least 1% of the target)"],
                "medium",
            )
        else:
            b.put(
                f"{mp}.relative_tolerance",
                0.05,
                ["rb default: the paper gives no spread; edit it"],
                "low",
            )
        if f.value.get("higher_is_better") is not None:
            b.put(
                f"{mp}.higher_is_better", bool(f.value["higher_is_better"]), f.sources(), "medium"
            )
        b.put(f"{mp}.provenance", f"{where}{note}", f.sources(), "medium")
    claims: list[dict[str, str]] = []
    sources: list[str] = []
    for f in sorted(by_kind["claim"], key=lambda f: f.sources()):
        better = row_to_exp.get(str(f.value["better"])) or _match(
            str(f.value["better"]), exp_tokens
        )
        worse = row_to_exp.get(str(f.value["worse"])) or _match(str(f.value["worse"]), exp_tokens)
        if not better or not worse or better == worse:
            res.unmatched_targets.append(
                f"claim at {', '.join(f.sources())}: experiments not matched"
            )
            continue
        common = sorted(set(exps[better].get("metrics", {})) & set(exps[worse].get("metrics", {})))
        metric = None
        if f.value.get("metric"):
            metric = _match(str(f.value["metric"]), {m: _tokens(m) for m in common})
        targeted = [m for m in common if "target" in exps[better]["metrics"][m]]
        metric = metric or (
            targeted[0] if len(targeted) == 1 else common[0] if len(common) == 1 else None
        )
        if metric is None:
            res.unmatched_targets.append(
                f"claim at {', '.join(f.sources())}: no common metric of {better} and {worse}"
            )
            continue
        hib = exps[better]["metrics"][metric].get("higher_is_better", True)
        op = ">" if hib is not False else "<"
        claims.append(
            {
                "expr": f"{better}.{metric} {op} {worse}.{metric}",
                "provenance": ", ".join(f.sources()),
            }
        )
        sources += f.sources()
    if claims:
        b.put("claims", claims, sources, "medium")


# -- finishing ----------------------------------------------------------------------------


def _finalize(b: _Builder) -> Manifest:
    data = dict(b.data)
    data["schema"] = 1
    manifest = Manifest.model_validate(data)
    leaves = flatten(
        {k: v for k, v in manifest_data(manifest).items() if k not in {"derived", "schema"}}
    )
    derived: dict[str, Derivation] = {}
    for path, value in leaves.items():
        prov_key = next(
            (
                k
                for k in sorted(b.prov, key=len, reverse=True)
                if path == k or path.startswith(k + ".")
            ),
            None,
        )
        # Values nobody derived are the schema's defaults: known, not guessed.
        sources, conf = b.prov[prov_key] if prov_key else (["schema default"], "medium")
        derived[path] = Derivation(sources=sources, digest=digest(value), confidence=conf)
    return manifest.model_copy(update={"derived": derived})
