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
tutorial/example/docs folder, a helper-like name (plot, download, ...), a README-detector
command found only in docs/ pages (the top-level README is the front page) and depth in
the tree. The weights are data (:data:`WEIGHTS`). The order is by score less a handicap
(:data:`HANDICAPS`) for data the repository lacks (a download at run time, or a file
nothing run before it writes: the audit is offline), for a GPU, for an optional
requirement set the README installs before the command (the environment rb builds holds
the base requirements only), for a loop without end, and for a run no parameter bounds
(a smoke audit can only stop it at its time limit); a handicap never drops a candidate
that qualifies by declaration or score. Ties go to the candidate the README mentions
first (a README introduces its main example before the others).

The *main* experiment, the one a smoke audit runs, is chosen in four steps, each only
among the candidates the step before left (:func:`main_key`): one that can run here
(offline, on a CPU, in the environment rb builds: no :data:`BLOCKING` handicap), then one
that does not loop without end (:data:`ENDLESS`: its smoke run could only fail at the
time limit), then one that prints a result rb can read (a smoke audit without a metric
cannot be judged), then the best ordered. No bound found (:data:`UNBOUNDED`) is only a
handicap, not a step: most such runs (a notebook, a script fitting a model once) end on
their own in seconds, so it tips candidates that are about equal and does not pass over
a README's own example for a lesser one that happens to have a loop bound. It is
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
    # A README command is the front page's; one written only in docs/ pages is documentation
    # of a variant (an Atari or multi-GPU run), below the README's own, all else equal.
    "found only in docs/ pages": -10,
    "helper-like name": -20,
    "per folder level": -3,
}
#: What running a candidate here costs, by signal: it orders candidates (a CPU run from the
#: repository's own data first) but never drops one that qualifies.
HANDICAPS: dict[str, int] = {
    "reads data the repository lacks": 20,
    "needs a service the offline sandbox lacks": 20,
    "needs a GPU": 10,
    # The README installs an optional set (`pip install ".[atari]"`, an optional
    # requirements file) before the command; the environment rb builds leaves those out.
    "needs an optional requirement set": 20,
    # A loop with no exit (`while True:` without a break) and no bound a tier can set: a
    # smoke run of it ends only at its time limit, as a failed run.
    "loops without end": 20,
    # Small: it tips candidates that are otherwise about equal (a script with a --max-iters
    # against a notebook of the same project), not a README command against a helper.
    "no parameter bounds a smoke run": 5,
}
#: Handicaps that mean a smoke audit (offline, on a CPU) cannot run the candidate at all.
BLOCKING = frozenset(
    {
        "reads data the repository lacks",
        "needs a service the offline sandbox lacks",
        "needs a GPU",
        "needs an optional requirement set",
    }
)
#: The handicap of a candidate a smoke run can only stop at its time limit.
UNBOUNDED = "no parameter bounds a smoke run"
#: The handicap of a candidate that never ends on its own.
ENDLESS = "loops without end"
#: A candidate scoring at least this is kept even when it is not declared.
KEEP_SCORE = 35
#: Most experiments one manifest gets from ranking.
MAX_KEPT = 10
#: Most experiments kept when no candidate qualifies by declaration or score.
FALLBACK_KEPT = 3

_DECLARED = frozenset({"readme", "makefile", "shell"})
#: Documentation folders the README detector reads besides READMEs.
_DOC_FOLDERS = frozenset({"docs", "doc"})
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
    def endless(self) -> bool:
        """Whether it loops without end: a smoke run of it can only fail at its time limit."""
        return ENDLESS in self.reasons

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
    needs_extra: Callable[[Finding[ExperimentValue]], bool] = lambda _f: False,
    endless: frozenset[str] = frozenset(),
) -> Ranked:
    """The :class:`Ranked` of one candidate (see the module docstring); ``fetching`` are the
    entries whose data is fetched at run time, ``needs_gpu`` says whether a run needs a GPU
    (a command, not an entry: ``torchrun`` and ``python`` may run the same script),
    ``reporting`` the entries with a recovered metric (an experiment reports a result; a
    data generator or an apriori demo beside it does not), ``bounded`` the entries a smoke
    tier can bound (None: not known, no handicap), ``mention_lines`` the README line that
    first mentions each entry, ``needs_service`` whether a run needs a tool that needs a daemon,
    a cluster or the network (docker, kubectl, wget), ``needs_extra`` whether the README
    installs an optional requirement set for the command, ``endless`` the entries with a
    loop that has no exit (unless ``bounded`` holds them: their bound ends it)."""
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
    if f.detector == "readme" and _only_in_docs(f):
        signals.append("found only in docs/ pages")
    if _HELPER_NAME.search(pure.stem):
        signals.append("helper-like name")
    costs = [
        c
        for c, hit in (
            ("reads data the repository lacks", entry in fetching),
            ("needs a service the offline sandbox lacks", needs_service(f)),
            ("needs a GPU", needs_gpu(f)),
            ("needs an optional requirement set", needs_extra(f)),
            (ENDLESS, entry in endless and (bounded is None or entry not in bounded)),
            (UNBOUNDED, bounded is not None and entry not in bounded),
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


def _only_in_docs(f: Finding) -> bool:
    """Whether every place a README-detector command was found is a docs/ page."""
    return bool(f.evidence) and all(
        PurePosixPath(e.path).parts[0] in _DOC_FOLDERS for e in f.evidence
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


def main_key(r: Ranked) -> tuple[bool, bool, bool, int]:
    """How the main experiment is chosen (see the module docstring): runnable here first,
    then one that does not loop without end, then one with a readable result, then the
    best ordered (a run no bound keeps short is handicapped there, not excluded)."""
    return (r.blocked, r.endless, not r.reports, -r.order)


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
        skipped.append(
            f"`{cmd}` ({place}): {_passed_because(r, (lacking or {}).get(r.finding.value.entry))}"
        )
    more = f"; and {len(passed) - 5} more" if len(passed) > 5 else ""
    has = [
        text
        for text, holds in (
            ("runs offline on a CPU", not main.blocked),
            ("ends on its own", not main.endless),
            ("prints a result rb can read", main.reports),
        )
        if holds
    ]
    that = ", ".join(has[:-1]) + (" and " if len(has) > 1 else "") + has[-1] if has else ""
    return (
        f"the best-ranked experiment{' that ' + that if that else ''} ({main.why()}); ranked "
        "above it but not main: " + "; ".join(skipped) + more
    )


def _passed_because(r: Ranked, detail: str | None) -> str:
    """Why ``r``, ordered above the main experiment, is not it: the first step of
    :func:`main_key` it loses on (``detail``: what data it lacks and where)."""
    if r.blocked:
        costs = [
            f"{c}: {detail}" if detail and c == "reads data the repository lacks" else c
            for c in r.reasons
            if c in BLOCKING
        ]
        where = (
            "in the environment rb builds"
            if costs == ["needs an optional requirement set"]
            else "offline on a CPU"
        )
        return f"it cannot run {where} (" + ", ".join(costs) + ")"
    if r.endless:
        return (
            "it loops without end and no bound a smoke tier can set stops it, so a smoke "
            "run of it could only fail at its time limit"
        )
    return "it prints no result rb can read as a metric, so a smoke audit of it could not be judged"


def rank(
    candidates: list[Finding[ExperimentValue]],
    mentions: list[Finding[MentionValue]],
    targets: list[Finding[TargetValue]],
    fetching: frozenset[str] = frozenset(),
    needs_gpu: Callable[[Finding[ExperimentValue]], bool] = lambda _f: False,
    reporting: frozenset[str] = frozenset(),
    bounded: frozenset[str] | None = None,
    needs_service: Callable[[Finding[ExperimentValue]], bool] = lambda _f: False,
    needs_extra: Callable[[Finding[ExperimentValue]], bool] = lambda _f: False,
    endless: frozenset[str] = frozenset(),
) -> tuple[list[Ranked], list[Ranked]]:
    """(kept, others) of ``candidates`` (already deduplicated): kept has the main
    experiment first (:func:`main_key`, chosen among all candidates), then the rest best
    first; others best first.

    ``mentions`` are the README's ``mention`` findings (key: a file path); ``targets`` the
    paper's ``target`` findings, whose row labels may name an experiment; ``fetching``,
    ``needs_gpu``, ``reporting``, ``bounded``, ``needs_service``, ``needs_extra`` and
    ``endless`` as in :func:`score`.
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
                mention_lines, needs_service, needs_extra, endless,
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
