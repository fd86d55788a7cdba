"""The environment of a monorepo of examples is the chosen sub-project's own.

A repository of many sub-projects, each folder with its own requirements, got one
environment for all of them (68 requirements, 382 locked packages, and a lock that failed on
one sub-project's placeholder package). Rule, applied before the environment is merged:

* a *sub-project* is a folder below the root that declares an environment and holds code
  (a Python file or notebook); a declaring folder without code (``tools/requirements.txt``,
  ``docker/``) configures the root's project, like the root itself;
* the *primary* experiment is the first the merge rules choose (README commands first);
  its sub-project is the deepest folder at or above it (below the root) that declares an
  environment (a requirements file, environment.yml, Pipfile, pyproject.toml, setup.py,
  setup.cfg or a lock);
* experiments inside *another* declaring folder are left out of the manifest (each
  sub-project is its own reproduction: run ``rb init`` there), and listed in the guide;
* only the declarations of the sub-project, its parents and the root count, and only
  imports seen there or at the root;
* an import declared nowhere counts only when a file the chosen experiments run makes it
  (:func:`drop_unreached_imports`): their scripts or notebooks and the repository modules
  those import, transitively;
* a package that only another folder declares, but that a Python file of the sub-project
  imports, stays, as an import of that file: a sub-project's requirements file that omits
  ``torch`` (every file there imports it) must not lose it.

When no folder between the primary experiment and the root declares anything (an
experiment at the root, or ``algos/ppo.py`` under a root ``pyproject.toml``), its sub-project
is the root's: every folder that no other declaring folder contains. The declaring folders
are then the other sub-projects (``algos/isaac/pyproject.toml`` beside the root project's
scripts) and are left out the same way, also when the root declares nothing (a monorepo of
tutorials whose main experiment is a plain script of ``basics/``): the root project's
environment is then what its code imports, a requirement another folder declares coming
back as an import of each root-project file that makes it.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from collections.abc import Set as AbstractSet

from packaging.utils import canonicalize_name

from reprobridge.detect._pkgmap import IMPORT_TO_DIST, PROVIDERS
from reprobridge.detect._select import import_closure
from reprobridge.detect.base import DetectContext, Evidence, Finding
from reprobridge.detect.findings import ExperimentValue, RequirementValue, of_type
from reprobridge.detect.index import RepoIndex, scan_imports
from reprobridge.detect.procedure.readme import entry_path
from reprobridge.detect.procedure.shell import runs_in, script_lines

#: Detectors whose findings come from declaration files (scoped by the file's folder).
_DECLARED = frozenset(
    {"requirements", "setuppy", "setupcfg", "pyproject", "pipfile", "conda", "lockfiles"}
)
#: Finding kinds that make up the Python environment.
SCOPED_KINDS = ("python_requirement", "python_index", "python_version", "python_pin", "cuda")


def experiment_folder(finding: Finding[ExperimentValue]) -> str:
    """The folder an experiment finding runs in: its entry's directory, else its workdir
    (``""`` for the root)."""
    entry = finding.value.entry
    folder = posixpath.dirname(entry) if entry else finding.value.workdir
    folder = posixpath.normpath(folder) if folder else ""
    return "" if folder == "." else folder


def _folder(path: str) -> str:
    parent = path.rpartition("/")[0]
    # requirements/base.txt belongs to the folder that holds requirements/
    if parent.rpartition("/")[2] == "requirements":
        parent = parent.rpartition("/")[0]
    return parent


def _inside(folder: str, parent: str) -> bool:
    return folder == parent or folder.startswith(parent + "/")


def declaring_folders(
    by_kind: dict[str, list[Finding]], config_dir: str, index: RepoIndex | None = None
) -> tuple[set[str], frozenset[str]]:
    """(sub-projects, configuration folders).

    A folder below the root (and not the configuration directory) that declares an
    environment belongs to the nearest folder at or above it that holds code (a Python file
    or notebook at any depth; with ``index``): that folder is a sub-project
    (``algo/isaac/pyproject.toml`` declares for ``algo/`` when ``isaac/`` has no code), or,
    when it is the root, the declaring folder configures the root's project, like the root
    and the configuration directory (``tools/requirements.txt``, ``docker/``)."""
    declaring = {
        _folder(e.path)
        for kind in SCOPED_KINDS
        for f in by_kind.get(kind, [])
        if f.detector in _DECLARED
        for e in f.evidence
    } - {"", config_dir}
    if index is None:
        return declaring, frozenset({"", config_dir})
    holding: set[str] = set()  # every folder with code at any depth below it
    for e in index:
        if e.suffix in (".py", ".ipynb"):
            folder = e.path.rpartition("/")[0]
            while folder and folder not in holding:
                holding.add(folder)
                folder = folder.rpartition("/")[0]
    owners: dict[str, str] = {}
    for d in declaring:
        owner = d
        while owner and owner not in holding:
            owner = owner.rpartition("/")[0]
        owners[d] = owner
    configs = {"", config_dir} | {d for d, owner in owners.items() if owner == ""}
    return set(owners.values()) - configs, frozenset(configs)


def _in_subproject(folder: str, primary: str, declaring: AbstractSet[str]) -> bool:
    """Whether ``folder`` belongs to sub-project ``primary``: inside it, or, for the root's
    sub-project (``""``), inside no other declaring folder."""
    if primary:
        return _inside(folder, primary)
    return subproject(folder, set(declaring)) is None


def subproject(folder: str, declaring: set[str]) -> str | None:
    """The deepest declaring folder at or above ``folder`` (None: it has none)."""
    above = [d for d in declaring if _inside(folder, d)]
    return max(above, key=len) if above else None


def drop_support_only(by_kind: dict[str, list[Finding]], folders: list[str]) -> list[str]:
    """Drop, in place, imports seen only in tests, docs or benchmarks (``support_only``)
    unless an experiment runs from their folder; return one line per dropped import."""
    inside = [f for f in folders if f]
    return _drop_requirements(
        by_kind,
        lambda f: (
            f.value.support_only
            and not any(
                _inside(p.rpartition("/")[0], d) for p in f.value.importers or () for d in inside
            )
        ),
    )


def _drop_requirements(
    by_kind: dict[str, list[Finding]], drop: Callable[[Finding[RequirementValue]], bool]
) -> list[str]:
    """Drop, in place, the ``python_requirement`` findings ``drop`` selects; return one
    line per dropped one (its first importer, else its evidence)."""
    dropped: list[str] = []
    kept: list[Finding] = []
    for f in of_type(by_kind, RequirementValue):
        if drop(f):
            importers = f.value.importers or ()
            dropped.append(f"{f.key} ({importers[0] if importers else f.sources()[0]})")
            continue
        kept.append(f)
    if "python_requirement" in by_kind:
        by_kind["python_requirement"] = kept
    return dropped


def _import_names(dist: str) -> set[str]:
    """The top-level import names that distribution ``dist`` (canonical) provides."""
    names = {dist.replace("-", "_")}
    names |= {i for i, d in IMPORT_TO_DIST.items() if canonicalize_name(d) == dist}
    names |= {i for i, ds in PROVIDERS.items() if dist in ds}
    return names


def _imported_in(
    index: RepoIndex, folder: str, dist: str, declaring: AbstractSet[str] = frozenset()
) -> tuple[str, ...]:
    """The Python files of sub-project ``folder`` that import ``dist``, in index order
    (empty: none does). The root's sub-project (``folder == ""``) is every file outside
    the other ``declaring`` folders. All of them, not the first: the chosen experiments'
    filter keeps a requirement only when one of its importers is code they run."""
    names = _import_names(dist)
    found: list[str] = []
    for entry in index:
        parent = entry.path.rpartition("/")[0]
        if entry.suffix != ".py" or not _in_subproject(parent, folder, declaring):
            continue
        text = index.try_read_text(entry.path)
        if text is not None and names & scan_imports(text.encode()):
            found.append(entry.path)
    return tuple(found)


def scope_findings(
    by_kind: dict[str, list[Finding]],
    primary: str,
    declaring: set[str],
    configs: AbstractSet[str],
    index: RepoIndex | None = None,
) -> list[str]:
    """Keep, in place, only the experiments and environment findings of sub-project
    ``primary`` (plus the root's); return one line per left-out experiment, declaration file
    or import, for the guide. With ``index``, a requirement only another folder declares
    stays when a file of ``primary`` imports it (see the module docstring)."""
    dropped: dict[str, None] = {}
    readded: dict[str, Finding] = {}

    def related(folder: str) -> bool:
        # the root's configuration, the sub-project itself, or a folder above it
        return (
            folder in configs
            or _in_subproject(folder, primary, declaring)
            or (bool(primary) and _inside(primary, folder))
        )

    experiments: list[Finding] = []
    for f in of_type(by_kind, ExperimentValue):
        other = subproject(experiment_folder(f), declaring)
        if other is not None and other != primary and not _inside(other, primary):
            dropped[f"experiment {f.key} ({other}/ is another sub-project)"] = None
            continue
        experiments.append(f)
    by_kind["experiment"] = experiments

    def keep(f: Finding) -> bool:
        if f.detector in _DECLARED:
            if any(related(_folder(e.path)) for e in f.evidence):
                return True
            dropped.update(dict.fromkeys(sorted({e.path for e in f.evidence})))
            key = canonicalize_name(f.key)
            importers = (
                _imported_in(index, primary, key, declaring)
                if index is not None and f.kind == "python_requirement"
                else ()
            )
            if importers:
                readded.setdefault(
                    key,
                    Finding(
                        kind="python_requirement",
                        key=key,
                        value=RequirementValue(key, declared=False, importers=importers),
                        evidence=(Evidence(importers[0]),),
                        detector="imports",
                        confidence="medium",
                        note=f"imported in {primary + '/' if primary else 'the root project'}, "
                        "declared only in another folder",
                    ),
                )
            return False
        if f.detector == "imports":
            seen = f.value.importers if isinstance(f.value, RequirementValue) else None
            paths = list(seen or ()) or [e.path for e in f.evidence]
            if not any(related(p.rpartition("/")[0]) for p in paths):
                dropped[f"import of {f.key} ({paths[0]})"] = None
                return False
        return True

    for kind in SCOPED_KINDS:
        if kind in by_kind:
            by_kind[kind] = [f for f in by_kind[kind] if keep(f)]
    kept = {canonicalize_name(f.key) for f in by_kind.get("python_requirement", [])}
    by_kind["python_requirement"] = [
        *by_kind.get("python_requirement", []),
        *(f for k, f in sorted(readded.items()) if k not in kept),
    ]
    return list(dropped)


#: Code that loads modules by name: what it reaches cannot be read from its imports.
_DYNAMIC_IMPORT = re.compile(r"\bimport_module\s*\(|\b__import__\s*\(|\bimportlib\b")
#: Files the closure of one experiment reads at most (a package's modules included).
_CLOSURE_LIMIT = 400


def run_closure(
    ctx: DetectContext, chosen: list[Finding[ExperimentValue]]
) -> dict[str, str] | None:
    """Path -> code of each file the ``chosen`` experiments run: each script or notebook
    (a notebook's code cells) and the repository modules it imports, transitively, in the
    order :func:`~reprobridge.detect._select.import_closure` reaches them, at most
    ``_CLOSURE_LIMIT`` per experiment; a shell script runs the Python files its commands
    name (:func:`_shell_runs`), and is in the closure itself with no code (it imports
    nothing; its edits date the environment like the code's). None when no experiment was
    chosen, or one is neither a Python script, a notebook nor a shell script whose every
    Python command names a file of the repository (a Makefile target, ``python $SCRIPT``).
    Computed once per merge: the import reach and the environment's date both read it."""
    if not chosen:
        return None
    entries: list[str] = []
    closure: dict[str, str] = {}
    for f in chosen:
        entry = f.value.entry
        if entry.endswith(".sh"):
            runs = _shell_runs(ctx, entry)
            if runs is None:
                return None
            closure[entry] = ""
            entries += runs
        elif entry.endswith((".py", ".ipynb")):
            entries.append(entry)
        else:
            return None
    py_paths = set(ctx.index.python_paths())
    for entry in entries:
        for path, code in import_closure(ctx, entry, py_paths, _CLOSURE_LIMIT):
            closure.setdefault(path, code)
    return closure


#: A word that runs Python in a shell script (``python``, ``python3.9``), to count them.
_PYTHON_WORD = re.compile(r"(?:^|[\s;&|(])python[\d.]*(?=\s)")


def _shell_runs(ctx: DetectContext, script: str) -> list[str] | None:
    """The repository's Python files and notebooks the shell script ``script`` runs (``python
    x.py``, ``python -m pkg.mod``, a notebook), each looked for as a README command's is
    (:func:`~reprobridge.detect.procedure.readme.entry_path`) from the script's folder, then
    from the root, where a leading ``../`` cannot climb above it (a loop that ``cd``s into
    each chapter and runs ``python ../tool.py``); None when the script cannot be read or a
    command names a file that is not found that way (``python $SCRIPT``), since what it
    runs is then unknown."""
    text = ctx.index.try_read_text(script)
    if text is None:
        return None
    folder = posixpath.dirname(script)
    found: list[str] = []
    runs = runs_in(text)
    words = sum(len(_PYTHON_WORD.findall(line)) for _n, line in script_lines(text))
    if len(runs) < words:
        return None  # a Python command rb cannot read (`python "$SCRIPT"`): unknown
    for _line, run in runs:
        # From the script's folder, then from the root; a `..` above the root is dropped
        # (a loop that `cd`s into each chapter and runs `python ../tool.py`).
        hits = [p for p, ok in (entry_path(ctx.index, run, b) for b in (folder or ".", ".")) if ok]
        if not hits:
            return None
        found.append(hits[0])
    return found


def drop_unreached_imports(
    ctx: DetectContext, by_kind: dict[str, list[Finding]], closure: dict[str, str] | None
) -> list[str]:
    """Drop, in place, requirements known only from imports (declared in no file) that no
    file the ``chosen`` experiments run imports, and those declared only in an optional
    requirements file (development/test/docs sets, variants beside the base file such as
    ``requirements-atari.txt``) that none of those files imports; return one line per
    dropped requirement.

    What an experiment runs is its script or notebook and the repository modules it
    imports, transitively; a file that loads modules by name (``importlib``) adds its
    folder's files. A repository of single-file algorithms (sixty scripts, one per method)
    needs for its few chosen experiments what those import, not what every other script
    does (envpool, isaacgym, a JAX stack). ``closure`` is :func:`run_closure`'s; nothing
    is dropped when it is None (a chosen experiment is not a Python script or notebook, or
    no experiment was chosen)."""
    if closure is None:
        return []
    py_paths = set(ctx.index.python_paths())
    reached: set[str] = set()
    names: set[str] = set()  # the top-level names the reached files import
    for path, code in closure.items():
        reached.add(path)
        names |= scan_imports(code.encode("utf-8", "surrogateescape"))
        if _DYNAMIC_IMPORT.search(code):
            folder = path.rpartition("/")[0]
            for sibling in sorted(py_paths - reached):
                if sibling.rpartition("/")[0] == folder:
                    reached.add(sibling)
                    text = ctx.index.try_read_text(sibling) or ""
                    names |= scan_imports(text.encode("utf-8", "surrogateescape"))

    required = {
        canonicalize_name(f.key) for f in of_type(by_kind, RequirementValue) if not f.value.optional
    }

    def unreached(f: Finding[RequirementValue]) -> bool:
        if f.value.optional:  # an optional requirements file: only for what is imported,
            key = canonicalize_name(f.key)  # and never over a required declaration's pin
            if key in required:
                return True
            # a script's own declaration (PEP 723) counts when that script runs
            return not reached.intersection(f.value.importers or ()) and not (
                names & _import_names(key)
            )
        return (
            f.detector == "imports"
            and not f.value.declared
            and bool(f.value.importers)
            and not reached.intersection(f.value.importers or ())
        )

    return _drop_requirements(by_kind, unreached)
