"""REPRODUCE.md: the guide for people, rendered from the final manifest and the merge notes.

Contract: pure (no I/O), deterministic (same inputs, same bytes), and every statement the
guide makes about a value names where the value came from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from reprobridge.artifacts.pyenv import torch_routing
from reprobridge.constants import REGENERATE_COMMAND
from reprobridge.manifest.notes import RecoveryNotes
from reprobridge.manifest.schema import Experiment, Manifest, Metric, edit_place


@dataclass(frozen=True)
class GuideNotes:
    """What `rb init` learned beyond the manifest: the merge's notes, and what the refresh,
    the lock and the agent add to them."""

    recovery: RecoveryNotes = field(default_factory=RecoveryNotes)
    kept_edits: list[str] = field(default_factory=list)
    lock_note: str = ""
    #: What the recovery agent (`rb init --agent claude`) did and what it cost, as Markdown
    #: text made by rb (never model output verbatim without rb's framing); empty: no agent ran.
    agent_summary: str = ""


_AGENT_HEADING = "## What the recovery agent did"
_GAPS_HEADING = "## Known gaps and exceptions"
_AUDIT_HEADING = "## How to audit"


def agent_summary_of(guide: str) -> str:
    """The agent section's body in a guide :func:`render_guide` wrote (its
    :attr:`GuideNotes.agent_summary`), or "" when it has none.

    A static re-run keeps the agent's proposals in the manifest, so it keeps their account
    in the guide too (and `rb check` compares the guide as init would write it)."""
    start = guide.find(f"\n{_AGENT_HEADING}\n\n")
    if start < 0:
        return ""
    body = guide[start + len(_AGENT_HEADING) + 3 :]
    ends = [i for i in (body.rfind(f"\n{h}\n") for h in (_GAPS_HEADING, _AUDIT_HEADING)) if i >= 0]
    return body[: min(ends)] if ends else ""


#: Prose from the repository or the paper (descriptions, titles, provenance, notes) is text,
#: never markup: HTML (`<img onerror=...>`, `<!-- -->`, `&...;`) is escaped, `|` cannot end a
#: table cell and a newline cannot start a new block.
_PROSE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "\r": " ", "\n": " "})


def _esc(text: object) -> str:
    """``text`` as one line of inline Markdown that renders as the text itself (no HTML)."""
    return str(text).translate(_PROSE)


def _code(text: object) -> str:
    """``text`` as an inline code span: nothing inside is markup (HTML included), a fence
    longer than any backtick run inside cannot be closed early, and ``|`` stays in its cell."""
    body = str(text).replace("\r", " ").replace("\n", " ").replace("|", "\\|")
    longest = max((len(r) for r in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or longest else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def _fenced(lines: Iterable[str]) -> list[str]:
    """A fenced code block that no line inside can close."""
    lines = [line.replace("\r", " ") for line in lines]
    longest = max((len(r) for line in lines for r in re.findall(r"`{3,}", line)), default=2)
    fence = "`" * (longest + 1)
    return [fence, *lines, fence]


def _bullets(items: Iterable[str]) -> list[str]:
    return [f"- {_esc(i)}" for i in items]


def _band(m: Metric) -> str:
    parts: list[str] = []
    if m.target is not None:
        if m.tolerance is not None:
            parts.append(f"{m.target:g} ± {m.tolerance:g}")
        elif m.relative_tolerance is not None:
            parts.append(f"{m.target:g} ± {m.relative_tolerance:.0%}")
        else:
            parts.append(f"{m.target:g} (exact)")
    if m.min is not None:
        parts.append(f">= {m.min:g}")
    if m.max is not None:
        parts.append(f"<= {m.max:g}")
    return ", ".join(parts) or "no threshold: not judged (add `target`, `min` or `max`)"


def _source(m: Metric) -> str:
    if m.source.regex is not None:
        return f"regex {_code(m.source.regex)} over the log"
    return f"{_code(m.source.key)} in {_code(m.source.file)}"


def _renames(exp: Experiment) -> list[str]:
    """The paragraph on the names the code calls that its packages removed (the renaming
    edits of its tiers; see :mod:`reprobridge.recovery.drift`), or nothing."""
    tiers = [(t, exp.tier(t)) for t in ("full", "smoke") if t == "full" or t in exp.tiers]
    renamed = [(t, tier) for t, tier in tiers if any(e.renames for e in tier.edits)]
    if not renamed:
        return []
    first = renamed[0][1]
    source = first.edits[0].file
    copies = ", ".join(_code((tier.derived(t) or ("", ""))[1]) for t, tier in renamed)
    out = [
        f"**Code older than its packages**: {_code(source)} calls names that the pinned "
        f"packages removed. The {' and '.join(t for t, _ in renamed)} "
        + ("tiers run copies" if len(renamed) > 1 else "tier runs a copy")
        + f" ({copies}) in which `repro/derive.py` renames each, only when the run's "
        "environment has the package at the release that removed it (the original is left "
        "as it is):",
        "",
    ]
    for e in first.edits:
        if e.renames:
            out.append(
                f"- {edit_place(e.cell, e.line)}: {_code(e.was)} -> {_code(e.value)} (when {_code(e.when)})"
            )
    return [*out, ""]


def _past_errors(exp: Experiment) -> bool:
    """Whether ``exp`` is a notebook run past its errors (``--allow-errors``)."""
    return exp.kind == "notebook" and "--allow-errors" in exp.command.split()


#: Said once, above the experiments, when some notebook runs past its errors.
_CELLS_THAT_RAISE = [
    "**Notebook cells that raise**: notebooks run with `--allow-errors`, so a cell that",
    "raises (a lesson that shows an error on purpose) does not end the run. The audit names",
    "every cell that raised unmarked and is then `INCOMPLETE`, never `PASS`: rb cannot tell",
    "a cell that raises on purpose from a broken one. A cell that raised shows no metric.",
    "Mark a cell meant to raise with the `raises-exception` cell tag, or list it as",
    '`raises = [{cell = N, error = "ValueError"}]` on the executed notebook\'s entry of',
    "the experiment's `outputs` in `reprobridge.toml`.",
    "",
]


def _cells_that_raise(exp: Experiment) -> list[str]:
    """The cells a notebook run past its errors expects to raise (its outputs' ``raises``,
    from the authors' saved outputs), or nothing."""
    expected = [(o.path, r) for o in exp.outputs for r in o.raises]
    if not _past_errors(exp) or not expected:
        return []
    return [
        "The authors' saved outputs show these cells raising; the run expects the same error",
        "there, and no other (see **Notebook cells that raise** above):",
        "",
        *(f"- {_code(path)} cell {r.cell}: {_code(r.error)}" for path, r in expected),
        "",
    ]


def _experiment(exp_id: str, exp: Experiment, manifest: Manifest) -> list[str]:
    out = [f"### `{exp_id}`", ""]
    if exp.description:
        out += [_esc(exp.description), ""]
    out += [
        "```bash",
        f"nix run .#reproduce-{exp_id}                 # full setting, seed {exp.seeds[0]}",
    ]
    if "smoke" in exp.tiers:
        out.append(f"nix run .#reproduce-{exp_id} -- --tier smoke   # minutes on a CPU")
    out += [
        f"bash repro/launchers/{exp_id}.sh             # inside `nix develop`, or after `uv sync`",
        "```",
        "",
    ]
    smoke = exp.tiers.get("smoke")
    if exp.main:
        out += [
            "The main experiment: `rb audit --tier smoke` runs this one (name others on its",
            "command line: `rb audit <id> --tier smoke`).",
            "",
        ]
    if smoke is None:
        out += [
            "No smoke tier: `rb audit --tier smoke` skips this experiment. Add",
            f"`[experiments.{exp_id}.tiers.smoke]` with `params` or `args` that shorten the run",
            "to a few CPU minutes.",
            "",
        ]
    elif not smoke.bounded:
        out += [
            "**The smoke tier is not bounded**: it is the full command, stopped after "
            f"{smoke.timeout or exp.timeout}. rb",
            "found no parameter that bounds this run (epochs, steps, iterations) and can be",
            "set from its command line, and no literal bound in its code (a training loop's",
            "`range(N)`, a setting such as `max_iters = N`). A smoke run that does not finish",
            "in time ends as a timeout; then add `params`, `args` or `edits` to",
            f"`[experiments.{exp_id}.tiers.smoke]` that shorten it.",
            "",
        ]
    elif any(not e.renames for e in smoke.edits):
        source, copy = smoke.derived("smoke") or ("", "")
        out += [
            f"The smoke tier runs a copy of {_code(source)}, {_code(copy)}, with these literals",
            "lowered (`repro/derive.py` writes it next to the original when the tier runs;",
            "the full tier keeps the original's values):",
            "",
        ]
        for e in smoke.edits:
            if not e.renames:
                out.append(
                    f"- {edit_place(e.cell, e.line)}: {_code(e.code or e.was)} -> {_code(e.value)}"
                )
        out.append("")
    elif smoke.args:
        out += [
            "The smoke tier appends "
            + " ".join(f"`{_esc(a)}`" for a in smoke.args)
            + " to the command.",
            "",
        ]
    out += _renames(exp)
    out += _cells_that_raise(exp)
    rows = [
        *(("setup (runs first)", _code(c)) for c in exp.setup),
        ("command", _code(exp.command)),
        ("seeds", ", ".join(map(str, exp.seeds))),
        ("timeout", exp.timeout),
        ("working directory", _code(exp.workdir)),
        ("network", "allowed" if exp.network else "none (offline switches set)"),
    ]
    if exp.hardware.gpus:
        rows.append(("hardware", f"{exp.hardware.gpus} GPU(s)"))
    if exp.datasets:
        rows.append(("datasets", ", ".join(_code(d) for d in exp.datasets)))
    if exp.outputs:
        rows.append(("outputs", ", ".join(_code(o.path) for o in exp.outputs)))
    if exp.unbounded:
        rows.append(("termination", _esc(exp.unbounded)))
    # Cells are rendered already (_code, _esc or rb's own words).
    out += ["| | |", "|---|---|", *[f"| {k} | {v} |" for k, v in rows], ""]
    if exp.params:
        out += ["| parameter | full | smoke | from |", "|---|---|---|---|"]
        smoke = exp.tiers.get("smoke")
        for name, value in exp.params.items():
            sv = smoke.params.get(name, value) if smoke else "—"
            where = manifest.derived.get(f"experiments.{exp_id}.params.{name}")
            out.append(
                f"| `{name}` | {_code(value)} | {_code(sv)} | {_esc(', '.join(where.sources)) if where else 'edited by hand'} |"
            )
        out.append("")
    if exp.metrics:
        out += ["| metric | expected | read from | provenance |", "|---|---|---|---|"]
        for name, m in exp.metrics.items():
            out.append(
                f"| `{name}` | {_esc(_band(m))} | {_source(m)} | {_esc(m.provenance or '—')} |"
            )
        out.append("")
    else:
        out += [
            "No metric was recovered for this experiment: add one under "
            f"`[experiments.{exp_id}.metrics.<name>]` so the auditor can judge it.",
            "",
        ]
    return out


_CPU_ONLY = "A CPU is enough: no experiment declares a GPU."
#: The host driver's user-space libraries a CUDA program loads (they must match the running
#: kernel module, so no Nix package can provide them).
_DRIVER_LIBS = "lib(cuda|nvidia-ml|nvidia-ptxjitcompiler|nvidia-nvvm)[.]so"


def _gpu_driver(gpus: int, cuda: str | None) -> list[str]:
    """How a ``nix run`` user gives a GPU experiment the host's NVIDIA driver."""
    support = (
        f"the host driver must support CUDA {cuda} or newer (`nvidia-smi` shows the newest "
        "it supports)"
        if cuda
        else "any recent NVIDIA driver (no CUDA toolkit is pinned: the Python packages bring "
        "their own CUDA runtime)"
    )
    return [
        f"Up to {gpus} NVIDIA GPU(s) per experiment; {support}.",
        "",
        "### The GPU driver under Nix",
        "",
        "Programs built by Nix do not read the host's library cache (`/etc/ld.so.cache`): they",
        "find the driver's `libcuda.so.1` only in `/run/opengl-driver/lib` (which the flake puts",
        "on `LD_LIBRARY_PATH` for GPU experiments) or through `LD_LIBRARY_PATH` itself.",
        "",
        "- **NixOS**: nothing to do; the NVIDIA driver (`hardware.nvidia`, `hardware.graphics`)",
        "  fills `/run/opengl-driver`.",
        "- **Other Linux (Debian, Ubuntu, ...)**: run the app through",
        "  [nix-gl-host](https://github.com/numtide/nix-gl-host), which finds the host driver",
        "  and puts it on `LD_LIBRARY_PATH`:",
        "  `nix run github:numtide/nix-gl-host -- nix run .#reproduce-<experiment>`.",
        "  Or by hand, a directory holding only the driver's libraries (never all of",
        "  `/usr/lib`, which would mix the host's C library into the Nix programs):",
        "",
        "  ```bash",
        "  mkdir -p ~/.cache/nvidia-driver",
        f"  ldconfig -p | grep -E '{_DRIVER_LIBS}' | grep x86-64 | awk '{{print $NF}}' \\",
        "    | xargs -I{} ln -sf {} ~/.cache/nvidia-driver/",
        "  LD_LIBRARY_PATH=~/.cache/nvidia-driver nix run .#reproduce-<experiment>",
        "  ```",
        "",
        "- **`rb audit`** does this itself: each GPU run gets such a directory, first on its",
        "  `LD_LIBRARY_PATH`, under both backends.",
    ]


def render_guide(manifest: Manifest, notes: GuideNotes, *, version: str) -> str:
    """REPRODUCE.md for ``manifest``."""
    env = manifest.environment
    recovery = notes.recovery
    title = manifest.project.paper.title or manifest.project.name
    out = [
        f"<!-- Generated by rb {version} from reprobridge.toml; regenerate with `{REGENERATE_COMMAND}`. "
        "Edit reprobridge.toml, not this file. -->",
        "",
        f"# Reproducing {_esc(title)}",
        "",
        "This guide says how to rerun the experiments of this repository in a pinned environment,",
        "what results to expect, and how each of those facts was recovered. The machine-readable",
        "version of everything here is `reprobridge.toml`; the environment is `flake.nix` +",
        "`flake.lock` (which read the manifest), the launchers are `repro/launchers/*.sh`.",
        "",
    ]
    if manifest.project.paper.title or manifest.project.paper.url or manifest.project.paper.doi:
        paper = manifest.project.paper
        bits = [
            f"*{_esc(paper.title)}*" if paper.title else "",
            _esc(paper.url) if paper.url else "",
            f"doi:{_esc(paper.doi)}" if paper.doi else "",
        ]
        out += ["Paper: " + " · ".join(b for b in bits if b), ""]
    out += [
        "## Quick start",
        "",
        "```bash",
        "nix develop                          # the pinned shell (Python, CUDA, compilers, libraries)",
    ]
    for exp_id in manifest.experiments:
        out.append(f"nix run .#reproduce-{exp_id}")
    out += [
        "rb audit --runs 3                    # independent audit: runs, evidence, verdicts",
        "```",
        "",
        "Without Nix, create the Python environment from the lock, then run a launcher: it",
        "uses `repro/python/.venv` (or the virtual environment you activated). Such a run is",
        "not hermetic.",
        "",
        "```bash",
        "uv sync --project repro/python       # creates repro/python/.venv",
        f"bash repro/launchers/{next(iter(manifest.experiments), '<exp>')}.sh",
        "```",
        "",
        "## Environment",
        "",
        "| | | from |",
        "|---|---|---|",
    ]

    def src(path: str) -> str:
        d = manifest.derived.get(path)
        if d is not None:
            return _esc(", ".join(d.sources))
        # Not derived: either a default rb never wrote, or a person's own value.
        return (
            "—"
            if path == "environment.python_requirements" and not env.python_requirements
            else "edited by hand"
        )

    out.append(f"| Python | {env.python} | {src('environment.python')} |")
    out.append(
        f"| CUDA | {env.cuda or 'none (CPU only)'} | {src('environment.cuda') if env.cuda else '—'} |"
    )
    if env.nvcc:
        out.append(f"| nvcc | CUDA sources are compiled | {src('environment.nvcc')} |")
    if env.compilers:
        out.append(
            f"| compiler | gcc {env.compilers.get('gcc', '')} | {src('environment.compilers.gcc')} |"
        )
    if env.system:
        out.append(f"| system libraries | {', '.join(env.system)} | {src('environment.system')} |")
    if env.nixpkgs:
        out.append(
            f"| nixpkgs | {env.nixpkgs.release} `{env.nixpkgs.rev[:12]}` | {src('environment.nixpkgs.rev')} |"
        )
    mode = {
        # Only a written lock is named: with none, the venv is built from the requirements.
        "uv": "uv venv from `repro/python/uv.lock`"
        if env.python_lock
        else "uv venv from `repro/python/requirements.txt` (not locked)",
        "nixpkgs": "nixpkgs `python.withPackages`",
    }
    out.append(
        f"| Python packages | {mode[env.python_env]} ({len(env.python_requirements)}) | "
        f"{src('environment.python_requirements')} |"
    )
    routing = torch_routing(manifest)
    if routing is not None:
        out.append(f"| torch wheels | `{routing.url}` | {_esc(routing.why)} |")
    if env.exclude_newer:
        out.append(
            f"| packages as of | {env.exclude_newer} (uv `exclude-newer`) | "
            f"{src('environment.exclude_newer')} |"
        )
    for name, bound in sorted(env.exclude_newer_package.items()):
        out.append(
            f"| {_esc(name)} as of | {bound} (bound moved for it only) | "
            f"{src(f'environment.exclude_newer_package.{name}')} |"
        )
    if env.python_constraints:
        out.append(
            f"| constraints | {len(env.python_constraints)} locked package(s) | "
            f"{src('environment.python_constraints')} |"
        )
    if env.pythonpath:
        out.append(
            f"| PYTHONPATH (own package) | {':'.join(env.pythonpath)} | "
            f"{src('environment.pythonpath')} |"
        )
    out.append("")
    if env.python_requirements:
        out += ["Python requirements:", "", *_fenced(env.python_requirements), ""]
    if env.optional_requirements:
        out += [
            "Optional, not installed (imported only inside a `try` that falls back when "
            f"the import fails: {src('environment.optional_requirements')}); add one to "
            "`environment.python_requirements` to use what needs it:",
            "",
            *_fenced(env.optional_requirements),
            "",
        ]
    if notes.lock_note:
        out += [_esc(notes.lock_note), ""]
    if recovery.decisions:
        out += ["### Decisions and why", "", *_bullets(recovery.decisions), ""]
    if recovery.flagged_imports:
        out += [
            "### Imported but not declared",
            "",
            "These distributions are imported by the code but listed in no dependency file; they",
            "were added unpinned. Pin them in `reprobridge.toml` to the versions the paper used.",
            "",
            *_bullets(recovery.flagged_imports),
            "",
        ]
    gpus = max((e.hardware.gpus for e in manifest.experiments.values()), default=0)
    out += ["## Hardware", "", *(_gpu_driver(gpus, env.cuda) if gpus else [_CPU_ONLY]), ""]
    out += [
        "## Experiments",
        "",
    ]
    if any(_past_errors(exp) for exp in manifest.experiments.values()):
        out += _CELLS_THAT_RAISE
    if not manifest.experiments:
        out += [
            "No experiment was recovered. Add one under `[experiments.<id>]` in reprobridge.toml.",
            "",
        ]
    for exp_id, exp in manifest.experiments.items():
        out += _experiment(exp_id, exp, manifest)
    if manifest.claims:
        out += [
            "## Claims",
            "",
            "Comparisons the paper makes; the auditor evaluates them on measured values only.",
            "",
        ]
        out += [
            f"- {_code(c.expr)} ({_esc(c.provenance or 'edited by hand')})" for c in manifest.claims
        ]
        out.append("")
    if recovery.dropped_experiments:
        out += [
            "## Other candidates",
            "",
            "Commands, scripts and notebooks that looked like experiments but were not made",
            "ones (ranked below the experiments above, or rejected, with why). To run one, copy",
            "its command into a new `[experiments.<id>]` table in reprobridge.toml.",
            "",
            *_bullets(recovery.dropped_experiments),
            "",
        ]
    review = sorted(p for p, d in manifest.derived.items() if d.confidence == "low")
    if notes.agent_summary:
        out += [_AGENT_HEADING, "", notes.agent_summary.rstrip("\n"), ""]
    leftovers = [
        *(f"conflict: {c}" for c in recovery.conflicts),
        *(f"paper value not matched: {u}" for u in recovery.unmatched_targets),
        *recovery.warnings,
    ]
    if leftovers or review or notes.kept_edits:
        out += [_GAPS_HEADING, ""]
        out += _bullets(leftovers)
        if notes.kept_edits:
            out += [f"- kept your edit of {_code(p)}" for p in notes.kept_edits]
        if review:
            out += [
                "",
                "Values rb guessed (low confidence) — review them in reprobridge.toml:",
                "",
                *(f"- {_code(p)}" for p in review),
            ]
        out.append("")
    out += [
        _AUDIT_HEADING,
        "",
        "```bash",
        "rb audit --runs 3            # each experiment three times, each run from a clean copy",
        "rb audit --tier smoke        # the main experiment, reduced settings, minutes on a CPU",
        "rb verify repro/evidence/<audit-id>",
        "```",
        "",
        "The auditor extracts every metric itself from the stored logs and output files and",
        "judges it against the thresholds above; claimed values never decide a verdict.",
        "The verdict is PASS (exit 0) only when every experiment had metrics with thresholds",
        "and all held; INCOMPLETE (exit 20) when nothing failed but something was not judged.",
        "The paper's targets and claims describe full runs: a smoke audit shows that every",
        "experiment runs and its metrics can be read, and stays INCOMPLETE unless",
        "`[experiments.<id>.tiers.smoke.metrics.<name>]` declares thresholds for it.",
        "",
    ]
    return "\n".join(out)
