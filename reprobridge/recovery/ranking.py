"""Which experiment candidates a reader would call *the* experiments.

A repository of tutorials yields one candidate per notebook; a package with a few scripts
yields a ``train.py`` beside plotting helpers. Every candidate gets a score from what it
is and where it was found, and the merge keeps:

* every candidate the repository *declares* — a README command, a Makefile target, a shell
  script (not a data-preparation one) — and every candidate scoring at least
  :data:`KEEP_SCORE` (an entry point named ``train``/``main``/``run``..., a notebook the
  README names), at most :data:`MAX_KEPT` in all;
* when none qualifies, the best-scoring ones (ties included, at most :data:`FALLBACK_KEPT`),
  so that a repository with only undistinguished candidates still gets an experiment.

The rest are "other candidates": the guide lists them with their score's reasons, so a
person can promote one by copying its command into the manifest.

The score (see :func:`score`): where it was found (README > Makefile > shell > entry point >
notebook), confidence, an experiment-like name, a mention in the README's prose, a paper
table row that names it, a result it prints that rb can read (a recovered metric), minus a
tutorial/example/docs folder, a helper-like name (plot, download, ...) and depth in the
tree. The weights are data (:data:`WEIGHTS`). The order is by score less a handicap
(:data:`HANDICAPS`) for data the repository lacks (a download at run time, or a file
nothing run before it writes: the audit is offline), for a GPU, and for a run no
parameter bounds (a smoke audit can only stop it at its time limit); a handicap never
drops a candidate that qualifies by declaration or score. Ties go to the candidate the
README mentions first (a README introduces its main example before the others).

The *main* experiment, the one a smoke audit runs, is chosen in three steps, each only
among the candidates the step before left (:func:`main_key`): one that can run here
(offline, on a CPU: no :data:`BLOCKING` handicap), then one that prints a result rb can
read (a smoke audit without a metric cannot be judged), then the best ordered. It is
chosen among *all* candidates: one that is not kept otherwise (a synthetic-data script
beside README commands that all download COCO) is kept as the main one, and
:func:`main_reason` says which better-scored candidates it passed over and why, so the
guide shows the README's command and why another experiment is main.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from reprobridge.detect.base import Finding
from reprobridge.detect.findings import ExperimentValue, MentionValue, TargetValue
from reprobridge.detect.procedure.entrypoints import looks_like_experiment_name

#: Weights of :func:`score`, by signal.
WEIGHTS: dict[str, int] = {
    "source:readme": 50,
    "source:makefile": 40,
    "source:shell": 35,
    "source:entrypoints": 20,
    "source:notebooks": 12,
    "confidence:high": 10,
    "confidence:medium": 5,
    "confidence:low": 0,
    "experiment-like name": 15,
    "named in the README": 25,
    "named by a paper table row": 15,
    "prints a result rb can read": 15,
    "under a tutorial/example/docs folder": -15,
    "helper-like name": -20,
    "per folder level": -3,
}
#: What running a candidate here costs, by signal: it orders candidates (a CPU run from the
#: repository's own data first) but never drops one that qualifies.
HANDICAPS: dict[str, int] = {
    "reads data the repository lacks": 20,
    "needs a service the offline sandbox lacks": 20,
    "needs a GPU": 10,
    # Small: it tips candidates that are otherwise about equal (a script with a --max-iters
    # against a notebook of the same project), not a README command against a helper.
    "no parameter bounds a smoke run": 5,
}
#: Handicaps that mean a smoke audit (offline, on a CPU) cannot run the candidate at all.
BLOCKING = frozenset(
    {"reads data the repository lacks", "needs a service the offline sandbox lacks", "needs a GPU"}
)
#: A candidate scoring at least this is kept even when it is not declared.
KEEP_SCORE = 35
#: Most experiments one manifest gets from ranking.
MAX_KEPT = 10
#: Most experiments kept when no candidate qualifies by declaration or score.
FALLBACK_KEPT = 3

_DECLARED = frozenset({"readme", "makefile", "shell"})
_ASIDE_DIRS = re.compile(
    r"^(?:tutorials?|examples?|demos?|docs?|notebooks?|nbs|scratch|playground|sandbox|misc|old|"
    r"archive|legacy|deprecated|extras?|contrib|tools|scripts/utils?)$",
    re.I,
)
_HELPER_NAME = re.compile(
    r"(?:^|[_\-.])(?:plot\w*|visuali[sz]\w*|viz|vis|draw|download\w*|prepare\w*|preprocess\w*|"
    r"convert\w*|export\w*|setup|utils?|helpers?|install\w*|clean\w*|make_data|build_data|"
    r"get_data|fetch\w*|inspect\w*|debug\w*|profile\w*|check\w*)(?:$|[_\-.])",
    re.I,
)
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset({"py", "ipynb", "sh", "the", "of", "a", "and", "with", "ours", "model", "main"})


@dataclass(frozen=True)
class Ranked:
    """One candidate, its score and the signals that made it."""

    finding: Finding[ExperimentValue]
    score: int
    reasons: tuple[str, ...]
    #: What running it here costs (:data:`HANDICAPS`); the order is by ``score - handicap``.
    handicap: int = 0
    #: Whether it prints a result rb can read (a recovered metric).
    reports: bool = False
    #: The README line that first mentions it (its own command's, or a mention), if any.
    mentioned_at: int | None = None

    @property
    def blocked(self) -> bool:
        """Whether a smoke audit here (offline, on a CPU) cannot run it (:data:`BLOCKING`)."""
        return any(c in BLOCKING for c in self.reasons)

    @property
    def order(self) -> int:
        """The ordering value: ``score - handicap`` (higher first)."""
        return self.score - self.handicap

    @property
    def declared(self) -> bool:
        """A README command, Makefile target or shell script that is not data preparation."""
        return self.finding.detector in _DECLARED and self.finding.confidence != "low"

    def why(self) -> str:
        """The score and its signals, for the guide."""
        cost = f", ordered as {self.score - self.handicap}" if self.handicap else ""
        return f"score {self.score}{cost}: " + ", ".join(self.reasons)


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower().replace("_", " "))) - _STOP


def score(
    f: Finding[ExperimentValue],
    mentioned: set[str],
    row_labels: list[set[str]],
    fetching: frozenset[str] = frozenset(),
    needs_gpu: Callable[[Finding[ExperimentValue]], bool] = lambda _f: False,
    reporting: frozenset[str] = frozenset(),
    bounded: frozenset[str] | None = None,
    mention_lines: dict[str, int] | None = None,
    needs_service: Callable[[Finding[ExperimentValue]], bool] = lambda _f: False,
) -> Ranked:
    """The :class:`Ranked` of one candidate (see the module docstring); ``fetching`` are the
    entries whose data is fetched at run time, ``needs_gpu`` says whether a run needs a GPU
    (a command, not an entry: ``torchrun`` and ``python`` may run the same script),
    ``reporting`` the entries with a recovered metric (an experiment reports a result; a
    data generator or an apriori demo beside it does not), ``bounded`` the entries a smoke
    tier can bound (None: not known, no handicap), ``mention_lines`` the README line that
    first mentions each entry, ``needs_service`` whether a run needs a tool that needs a daemon,
    a cluster or the network (docker, kubectl, wget)."""
    entry = f.value.entry
    pure = PurePosixPath(entry)
    signals = [f"source:{f.detector}", f"confidence:{f.confidence}"]
    if looks_like_experiment_name(entry) or looks_like_experiment_name(f"{f.key}.py"):
        signals.append("experiment-like name")
    if f.detector != "readme" and entry in mentioned:
        signals.append("named in the README")
    names = _words(pure.stem) | _words(f.key)
    if names and any(names & label for label in row_labels):
        signals.append("named by a paper table row")
    if entry in reporting:
        signals.append("prints a result rb can read")
    folders = list(pure.parts[:-1])
    if any(_ASIDE_DIRS.match(p) for p in folders):
        signals.append("under a tutorial/example/docs folder")
    if _HELPER_NAME.search(pure.stem):
        signals.append("helper-like name")
    costs = [
        c
        for c, hit in (
            ("reads data the repository lacks", entry in fetching),
            ("needs a service the offline sandbox lacks", needs_service(f)),
            ("needs a GPU", needs_gpu(f)),
            ("no parameter bounds a smoke run", bounded is not None and entry not in bounded),
        )
        if hit
    ]
    total = sum(WEIGHTS.get(s, 0) for s in signals)
    depth = len(folders)
    total += WEIGHTS["per folder level"] * depth
    reasons = [
        s.replace("source:", "found in ").replace("confidence:", "confidence ") for s in signals
    ]
    if depth:
        reasons.append(f"{depth} folder(s) deep")
    return Ranked(
        f,
        total,
        (*reasons, *costs),
        sum(HANDICAPS[c] for c in costs),
        reports=entry in reporting,
        mentioned_at=_readme_line(f, (mention_lines or {}).get(entry)),
    )


def _readme_line(f: Finding, mention: int | None) -> int | None:
    """The first line of the top-level README that names ``f``: its own command's or a
    mention's (mentions come from that README only, so lines compare)."""
    own = [
        e.line
        for e in f.evidence
        if f.detector == "readme" and e.line is not None and "/" not in e.path
    ]
    lines = [n for n in (*own, mention) if n is not None]
    return min(lines) if lines else None


def order_key(r: Ranked) -> tuple[int, bool, int, list[str], str]:
    """The ranking's order: best ``order`` first, then the README's first mention."""
    return (
        -r.order,
        r.mentioned_at is None,
        r.mentioned_at or 0,
        r.finding.sources(),
        r.finding.key,
    )


def main_key(r: Ranked) -> tuple[bool, bool, int]:
    """How the main experiment is chosen (see the module docstring): runnable here first,
    then one with a readable result, then the best ordered."""
    return (r.blocked, not r.reports, -r.order)


def main_reason(main: Ranked, passed: list[Ranked], lacking: dict[str, str] | None = None) -> str:
    """Why ``main`` is the main experiment: its score, and each better-ordered candidate
    it was chosen over with the reason (``passed``: those ordered above it; ``lacking``:
    entry -> what data it lacks and where, for the reader to check)."""
    why = f"the best-ranked experiment ({main.why()})"
    if not passed:
        return why
    skipped = []
    for r in passed[:5]:
        cmd = " ".join(r.finding.value.command.split())
        place = ", ".join(r.finding.sources()[:1])
        detail = (lacking or {}).get(r.finding.value.entry)
        because = (
            "it cannot run offline on a CPU ("
            + ", ".join(
                f"{c}: {detail}" if detail and c == "reads data the repository lacks" else c
                for c in r.reasons
                if c in BLOCKING
            )
            + ")"
            if r.blocked
            else "it prints no result rb can read as a metric, so a smoke audit of it could "
            "not be judged"
        )
        skipped.append(f"`{cmd}` ({place}): {because}")
    more = f"; and {len(passed) - 5} more" if len(passed) > 5 else ""
    return (
        "the best-ranked experiment that runs offline on a CPU and prints a result rb can "
        f"read ({main.why()}); ranked above it but not main: " + "; ".join(skipped) + more
    )


def rank(
    candidates: list[Finding[ExperimentValue]],
    mentions: list[Finding[MentionValue]],
    targets: list[Finding[TargetValue]],
    fetching: frozenset[str] = frozenset(),
    needs_gpu: Callable[[Finding[ExperimentValue]], bool] = lambda _f: False,
    reporting: frozenset[str] = frozenset(),
    bounded: frozenset[str] | None = None,
    needs_service: Callable[[Finding[ExperimentValue]], bool] = lambda _f: False,
) -> tuple[list[Ranked], list[Ranked]]:
    """(kept, others) of ``candidates`` (already deduplicated): kept has the main
    experiment first (:func:`main_key`, chosen among all candidates), then the rest best
    first; others best first.

    ``mentions`` are the README's ``mention`` findings (key: a file path); ``targets`` the
    paper's ``target`` findings, whose row labels may name an experiment; ``fetching``,
    ``needs_gpu``, ``reporting``, ``bounded`` and ``needs_service`` as in :func:`score`.
    """
    mention_lines: dict[str, int] = {}
    for m in mentions:
        for e in m.evidence:
            if e.line is not None:
                mention_lines[m.key] = min(e.line, mention_lines.get(m.key, e.line))
    rows = [_words(t.value.row) for t in targets]
    ranked = sorted(
        (
            score(
                f, {m.key for m in mentions}, rows, fetching, needs_gpu, reporting, bounded,
                mention_lines, needs_service,
            )
            for f in candidates
        ),
        key=order_key,
    )  # fmt: skip
    kept = [r for r in ranked if r.declared or r.score >= KEEP_SCORE][:MAX_KEPT]
    if not kept and ranked:
        # Only undistinguished candidates (96 tutorial notebooks): the best, not all.
        top = ranked[0].order
        kept = [r for r in ranked if r.order == top][:FALLBACK_KEPT]
    if ranked:
        main = min(ranked, key=main_key)  # stable: the best ordered among equals
        kept = [main, *(r for r in kept if r is not main)][:MAX_KEPT]
    chosen = {id(r) for r in kept}
    return kept, [r for r in ranked if id(r) not in chosen]
