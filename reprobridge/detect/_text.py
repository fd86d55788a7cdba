"""Text helpers shared by the procedure detectors (experiments, params, datasets, metrics).

Contracts:

* :func:`slugify` returns an id matching the manifest's ``ID_PATTERN``
  (``^[a-z0-9][a-z0-9_-]{0,63}$``) or ``None``; :func:`unique_id` makes it unique among ids
  already taken, deterministically (``train``, ``train-2``, ...).
* :func:`metric_name` / :func:`param_name` return names matching ``METRIC_PATTERN`` /
  ``PARAM_PATTERN`` or ``None``; :func:`result_name` is the metric name of a label that
  names a result, ``None`` for a counter or setting (one rule for printed code and for a
  notebook's stored output).
* :data:`NUMBER` is the one capturing group every metric regex ends with: it matches
  integers, decimals, negatives and exponents (``-1.5e-3``), so a regex written for
  ``acc=0.91`` still works when the run prints ``loss=-2e-05``.
* :func:`count_of_total` reads a count printed out of a total (``967/2000``): the value
  regex then captures the percentage printed after it (``= 48.35%``, ``(98%)``), or
  the count with its total required (the metric is then named ``<label>_count``).
* :func:`skip_path` says which files are never the repository's own procedure (vendored
  environments, build outputs, caches); :func:`is_test_path` which are its tests.
* :func:`normalize_path` and :func:`tidy_path` clean the paths detectors read from text;
  :func:`continued_lines` groups a file's lines at backslash continuations (shell scripts,
  README commands, Makefiles, Dockerfiles, requirements files).
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

from reprobridge.detect.findings import ExperimentKind

#: A printed number as one capturing group (sign, decimals, exponent).
NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

#: Directories whose contents are somebody else's code or generated files.
_SKIP_DIRS = frozenset(
    {
        "site-packages",
        "dist-packages",
        ".venv",
        "venv",
        "env",
        ".env",
        "node_modules",
        ".tox",
        ".nox",
        ".eggs",
        "build",
        "dist",
        "__pycache__",
        ".git",
        ".ipynb_checkpoints",
        "third_party",
        "third-party",
        "thirdparty",
        "vendor",
        "_vendor",
        "wandb",
        "mlruns",
        "lightning_logs",
    }
)
_TEST_DIRS = frozenset({"tests", "test", "testing", "unittests"})


def _parts(path: str) -> list[str]:
    # PurePosixPath(path).parts without building a path object (called per file, per detector).
    return [p for p in path.split("/") if p and p != "."]


def skip_path(path: str) -> bool:
    """True for files under vendored, virtual-environment, build or cache directories."""
    parts = _parts(path)[:-1]
    return any(p in _SKIP_DIRS or p.endswith(".egg-info") for p in parts)


#: What a test module contains: test functions or classes, or a test framework's import.
_TEST_MARKERS = re.compile(
    r"^[ \t]*(?:(?:async[ \t]+)?def[ \t]+test\w*[ \t]*\(|class[ \t]+\w*Test\w*\b"
    r"|(?:import|from)[ \t]+(?:pytest\w*|unittest|nose\w*|hypothesis)\b)",
    re.M,
)


def is_test_path(path: str, read: Callable[[str], str | None] | None = None) -> bool:
    """True for test files: under a tests/ directory, conftest, ``test_*.py``, ``*_test.py``.

    With ``read`` (the index's ``try_read_text``), a file known as a test only by its
    *name* must also look like one — a ``test*`` function, a ``*Test*`` class, or a test framework's
    import (pytest and its plugins, unittest, nose, hypothesis) — because research code names experiment scripts that way too (a
    ``char_cnn_test.py`` that trains with argparse flags). ``read`` is called only then.
    """
    parts = _parts(path)
    name = parts[-1] if parts else ""
    if any(p in _TEST_DIRS for p in parts[:-1]) or name == "conftest.py":
        return True
    if not (name.startswith("test_") or name.endswith("_test.py")):
        return False
    if read is None:
        return True
    text = read(path)
    return text is None or _TEST_MARKERS.search(text) is not None


#: Directories of code that supports the project but is not run by its experiments.
_SUPPORT_DIRS = frozenset({"docs", "doc", "benchmarks", "benchmark", "bench", "asv_bench"})


def is_support_path(path: str, read: Callable[[str], str | None] | None = None) -> bool:
    """True for tests (:func:`is_test_path`, with ``read`` as there), documentation and
    benchmark code: files whose imports are not requirements of the experiments."""
    return is_test_path(path, read) or any(p in _SUPPORT_DIRS for p in _parts(path)[:-1])


def _ascii(text: str) -> str:
    # NFKD splits accented letters into letter + mark, so "Überblick" keeps its "U".
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def slugify(text: str, *, max_len: int = 64) -> str | None:
    """``text`` as an experiment/dataset id (lowercase, ``-`` between words), or None."""
    slug = re.sub(r"[^a-z0-9_]+", "-", _ascii(text).lower())
    slug = re.sub(r"-{2,}", "-", slug).strip("-_")
    slug = slug[:max_len].rstrip("-_")
    return slug if _ID_RE.match(slug) else None


def unique_id(base: str, taken: set[str]) -> str:
    """``base`` or ``base-2``, ``base-3``, ... — the first not in ``taken`` (which it joins).

    ``base`` must already be a valid id; the suffix never pushes it past 64 characters.
    """
    candidate = base
    n = 2
    while candidate in taken:
        suffix = f"-{n}"
        candidate = base[: 64 - len(suffix)].rstrip("-_") + suffix
        n += 1
    taken.add(candidate)
    return candidate


def _identifier(text: str, *, lower: bool) -> str | None:
    name = _ascii(text)
    name = name.lower() if lower else name
    name = re.sub(r"[^A-Za-z0-9_]+", "_", name)
    name = re.sub(r"_{2,}", "_", name).strip("_")
    if not name:
        return None
    if name[0].isdigit():
        name = "m_" + name if lower else "_" + name
    name = name[:64].rstrip("_") or name[:64]
    return name if _NAME_RE.match(name) else None


def metric_name(label: str) -> str | None:
    """A printed label (``"Test Acc@1"``) as a metric name (``test_acc_1``), or None."""
    return _identifier(label, lower=True)


def param_name(text: str) -> str | None:
    """A flag or config key (``--learning-rate``, ``SOLVER.BASE_LR``) as a parameter name."""
    return _identifier(text.lstrip("-"), lower=False)


#: Label words that name a metric (used to rank printed values and JSON keys).
METRIC_WORDS = re.compile(
    r"(?:^|[^a-z])(?:acc|accuracy|top[-_ ]?[15]|loss|nll|f1|auc|auroc|auprc|roc|bleu|rouge\w*|"
    r"meteor|cider|precision|recall|mse|mae|rmse|r2|perplexity|ppl|score|error|err|iou|miou|"
    r"dice|map|ap\d*|ndcg|mrr|hit\w*|fid|inception|psnr|ssim|lpips|wer|cer|reward|return|"
    r"success|elbo|kl|bpd|likelihood|corr|correlation|corrcoef|spearman|pearson|em|"
    r"exact_match|metric\w*|similarity|distance|(?:lower|upper|variational|evidence) bound)"
    r"(?:$|[^a-z])"
)
#: Label words that are progress counters or settings, not results.
NOT_METRIC_WORDS = re.compile(
    r"^(?:epoch|epochs|step|steps|iter|iters|iteration|iterations|it|batch|batches|lr|"
    r"learning[_ ]rate|time|elapsed|eta|seed|gpu|device|mem|memory|n|num|count|size|"
    r"params|parameters|id|idx|index|rank|world[_ ]size|version|total|progress|dim|"
    r"samples|examples|len|length|shape|config|args|path|file|name|model|dataset|split)$"
)


#: Label words that make a name a setting even beside a metric word (``loss_weight``,
#: ``score_threshold``, ``loss_fn``): hyperparameters, not results; and gradients
#: (``grad_loss``, ``loss_grad``), which are intermediate values, not results either.
SETTING_WORDS = re.compile(
    r"(?:^|[^a-z])(?:weight|weights|coef|coeff|coefficient|scale|scaling|threshold|thresh|"
    r"lambda|alpha|beta|gamma|temperature|temp|margin|clip|size|dim|window|eps|epsilon|"
    r"factor|fn|func|function|type|name|mode|kind|config|cfg|path|dir|file|smoothing|"
    r"patience|interval|freq|frequency|every|warmup|schedule|scheduler|decay|momentum|"
    r"layers?|heads?|vocab|block|embd|embed|hidden|grads?|gradients?)(?:$|[^a-z])"
)


def looks_like_metric(label: str) -> bool:
    """True when ``label`` names a result (accuracy, loss, F1, BLEU...) and not a setting
    (``loss_weight``, ``block_size``: :data:`SETTING_WORDS`)."""
    text = " " + label.lower().replace("_", " ") + " "
    return bool(METRIC_WORDS.search(text)) and not SETTING_WORDS.search(text)


def is_counter_label(label: str) -> bool:
    """True when ``label`` is a progress counter or setting (epoch, step, lr, time...)."""
    return bool(NOT_METRIC_WORDS.match(label.strip().lower()))


def result_name(label: str) -> str | None:
    """The metric name (:func:`metric_name`) of a label that names a result
    (:func:`looks_like_metric`); None for a progress counter or setting
    (:func:`is_counter_label`: ``epoch``, ``lr``), whose value is no result."""
    if is_counter_label(label) or not looks_like_metric(label):
        return None
    return metric_name(label)


def label_regex(label: str, sep: str, *, value: str = NUMBER) -> str:
    """A regex matching ``label``, then ``sep`` as printed, then ``value`` (a regex with
    one capturing group: a number, :data:`NUMBER`, by default).

    Runs of whitespace in either match any whitespace, so reformatted logs still match. A
    label starting with a word character must start a word: ``acc=`` does not match inside
    ``top1_acc=0.9``.
    """
    parts = [re.escape(w) for w in label.split()]
    head = r"\s+".join(parts)
    if label[:1].isalnum() or label[:1] == "_":
        head = r"(?<!\w)" + head
    sep_core = sep.strip()
    tail = r"\s*" + re.escape(sep_core) + r"\s*" if sep_core else r"\s+"
    return head + tail + value


#: A count printed before its total, as an object or not (``967``, ``tensor(967)``).
_COUNT = r"(?:[A-Za-z_]\w*\()?[-+]?\d+\)?"
#: ``/2000``: a total, a whole number (``0.51/0.63`` is a pair of values, not a fraction).
_TOTAL = r"[ \t]*/[ \t]*\d+(?![\d.])"
#: Between a total and its percentage: `` = ``, `` (``, ``, ``, `` [``.
_TO_PERCENT = r"[ \t]*(?:[=(\[:,][ \t]*)?"
_COUNT_OF_TOTAL_RE = re.compile(
    _TOTAL + r"(?P<pct>" + _TO_PERCENT + r"[-+]?(?:\d+\.?\d*|\.\d+)[ \t]*%)?"
)


@dataclass(frozen=True)
class CountOfTotal:
    """A value printed as a count out of a total. ``value``: the regex to read it with
    (one capturing group, as :func:`label_regex` takes); ``percent``: it captures the
    percentage printed after the total, else the count (the total required after it)."""

    value: str
    percent: bool

    def metric(self, name: str) -> str:
        """The name of the metric read for ``name``: ``name`` for a percentage, else
        ``<name>_count`` (``name`` cut so that the whole stays within 64 characters)."""
        return name if self.percent else f"{name[:58]}_count"


def count_of_total(after: str, *, wrapped: bool = False) -> CountOfTotal | None:
    """How to read a whole number that ``after`` (the text printed right after it)
    shows to be a count out of a total (``/2000 = 48.35% correct``), or None.

    A count is not comparable across runs that evaluate different numbers of examples
    (a smoke tier evaluates fewer), and a reader reports the fraction: the percentage
    printed on the line is read when there is one. ``wrapped``: the count may print as
    an object (``tensor(967)``)."""
    match = _COUNT_OF_TOTAL_RE.match(after)
    if match is None:
        return None
    if match.group("pct"):
        return CountOfTotal(_COUNT + _TOTAL + _TO_PERCENT + NUMBER + r"[ \t]*%", True)
    head, tail = (r"(?:[A-Za-z_]\w*\()?", r"\)?") if wrapped else ("", "")
    return CountOfTotal(head + NUMBER + tail + _TOTAL, False)


def normalize_path(path: str) -> str:
    """``path`` without ``.`` and empty parts, each ``..`` taking away the part before it
    (and never climbing above the root): ``a/./b/../c`` -> ``a/c``, ``../x`` -> ``x``."""
    parts: list[str] = []
    for part in PurePosixPath(path).parts:
        if part == "..":
            if parts:
                parts.pop()
        elif part not in {".", ""}:
            parts.append(part)
    return "/".join(parts)


def tidy_path(path: str) -> str:
    """A path literal as written, stripped of blanks, leading ``./`` and trailing ``/``
    (``"./data/"`` -> ``data``); the caller decides which are usable."""
    path = path.strip()
    while path.startswith("./"):
        path = path[2:]
    return path.rstrip("/")


def continued_lines(lines: Iterable[tuple[int, str]]) -> list[tuple[int, list[str]]]:
    """Physical lines grouped into logical ones: a line whose text ends with a backslash
    continues on the next. ``lines`` are (line number, text) as the caller cleaned them;
    each result is (first line number, the texts, backslashes removed)."""
    out: list[tuple[int, list[str]]] = []
    parts: list[str] = []
    start = 0
    for number, text in lines:
        if not parts:
            start = number
        if text.endswith("\\"):
            parts.append(text[:-1])
            continue
        parts.append(text)
        out.append((start, parts))
        parts = []
    if parts:
        out.append((start, parts))
    return out


def first_line(text: str, max_len: int = 200) -> str:
    """The first non-empty line of ``text``, stripped and shortened."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:max_len]
    return ""


# -- shell command lines (README code blocks, *.sh, Makefile recipes) ---------------------

#: ``python -m`` modules that install, test or format rather than run an experiment.
_TOOL_MODULES = frozenset(
    {
        "pip",
        "venv",
        "virtualenv",
        "ensurepip",
        "pytest",
        "unittest",
        "doctest",
        "black",
        "flake8",
        "isort",
        "ruff",
        "mypy",
        "pylint",
        "build",
        "twine",
        "ipykernel",
        "notebook",
        "jupyter",
        "http.server",
        "spacy",
        "nltk.downloader",
        "tensorboard",
        "coverage",
        "json.tool",
        "setuptools",
        "wheel",
        "site",
    }
)
_DIST_LAUNCH = frozenset({"torch.distributed.launch", "torch.distributed.run"})
_PY_RE = re.compile(r"^(?:[\w./-]*/)?(?:python|python3|python3\.\d+|python2|py|pypy3?)$")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: Prefix commands that run the rest of the line unchanged.
_PASSTHROUGH = frozenset({"time", "nohup", "exec", "env", "command", "srun", "stdbuf", "nice"})
_GPU_OPTIONS = {
    "--nproc_per_node",
    "--nproc-per-node",
    "--num_processes",
    "--num-processes",
    "--num_gpus",
    "--num-gpus",
    "--gpus",
}
_REDIRECT_RE = re.compile(r"\s+(?:\d?>>?|&>>?|>&)\s*(?:&\d|\S+)")


@dataclass(frozen=True)
class RunCommand:
    """One shell command that runs something an experiment could be.

    ``kind`` is the manifest's experiment kind; ``entry`` the script path (as written,
    relative to where it runs), module name, Makefile target or notebook path; ``command``
    the text to run (redirections, pipes into ``tee`` and ``CUDA_VISIBLE_DEVICES`` dropped);
    ``env`` the other ``NAME=value`` words that prefixed it; ``gpus`` the process count a
    distributed launcher was given as a literal.
    """

    kind: ExperimentKind
    entry: str
    command: str
    words: tuple[str, ...]
    env: tuple[str, ...] = ()
    gpus: int | None = None


def split_shell(line: str) -> list[str]:
    """Split a command line at unquoted ``&&``, ``||``, ``;`` and ``&`` into segments.

    A pipeline keeps only its first command (``| tee log`` only copies the output).
    """
    segments: list[str] = []
    buf: list[str] = []
    quote = ""
    i = 0
    in_pipe = False
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == quote:
                quote = ""
            elif ch == "\\" and quote == '"' and i + 1 < len(line):
                buf.append(ch)
                i += 1
                ch = line[i]
            if not in_pipe:
                buf.append(ch)
            i += 1
            continue
        if ch in "'\"":
            quote = ch
        elif ch == "\\" and i + 1 < len(line):
            if not in_pipe:
                buf.append(line[i : i + 2])
            i += 2
            continue
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            break  # a comment runs to the end of the line
        elif (
            line.startswith(("&&", "||"), i) or ch == ";" or (ch == "&" and _is_background(line, i))
        ):
            segments.append("".join(buf))
            buf, in_pipe = [], False
            i += 2 if line.startswith(("&&", "||"), i) else 1
            continue
        elif ch == "|":
            in_pipe = True
        if not in_pipe:
            buf.append(ch)
        i += 1
    segments.append("".join(buf))
    return [s.strip() for s in segments if s.strip()]


def _is_background(line: str, i: int) -> bool:
    # "&" alone sends a job to the background; "2>&1", "&>" and ">&" are redirections.
    prev = line[i - 1] if i else ""
    nxt = line[i + 1] if i + 1 < len(line) else ""
    return prev not in "<>" and nxt != ">"


def _words(segment: str) -> list[str] | None:
    try:
        return shlex.split(segment)
    except ValueError:  # unbalanced quotes: not a command we can use
        return None


def _script_after(words: list[str], start: int) -> tuple[ExperimentKind, str] | None:
    """(kind, entry) of the first ``x.py`` or ``-m mod`` after a launcher's own options."""
    i = start
    while i < len(words):
        word = words[i]
        if word in {"-m", "--module"} and i + 1 < len(words):
            return "module", words[i + 1]
        if word.endswith(".py"):
            return "script", word
        if _PY_RE.match(word):
            i += 1
            continue
        i += 1
    return None


def _gpus(words: list[str]) -> int | None:
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name in _GPU_OPTIONS:
            text = value if eq else (words[i + 1] if i + 1 < len(words) else "")
            if text.isdigit():
                return int(text)
    return None


def parse_run(segment: str) -> RunCommand | None:
    """The :class:`RunCommand` of one shell segment, or None when it runs no experiment.

    Recognised: ``python x.py``, ``python -m pkg.mod``, ``torchrun``/``accelerate
    launch``/``deepspeed``/``python -m torch.distributed.launch`` wrappers, ``bash x.sh``,
    ``./x.sh``, ``make target``, ``jupyter nbconvert --execute`` and ``papermill``, each
    also behind an environment manager's ``poetry run``/``uv run``/``pipenv run``/``conda run
    -n X`` prefix (dropped from the command; ``uv run x.py`` becomes ``python x.py``).
    Install, test and formatting tools (``pip``, ``python -m pytest``, ``python setup.py``)
    are not.
    """
    text = _REDIRECT_RE.sub("", " " + segment).strip()
    words = _words(text)
    if not words:
        return None
    env: list[str] = []
    while words and (_ENV_RE.match(words[0]) or words[0] in _PASSTHROUGH):
        word = words.pop(0)
        if _ENV_RE.match(word) and not word.startswith("CUDA_VISIBLE_DEVICES="):
            env.append(word)
    if not words:
        return None
    runner = _runner_words(words)
    command = text
    cut = text.find(words[0])
    if runner:
        # "poetry run python x.py": the environment manager's prefix is dropped (rb's own
        # pinned environment replaces it); "uv run x.py" runs the script with Python.
        rest = _after_words(text, cut, words[:runner])
        words = words[runner:]
        if not words:
            return None
        implicit = words[0].endswith(".py") and not words[0].startswith("./")
        text = shlex.join(words) if rest is None else text[:cut] + text[rest:].lstrip()
        if implicit:
            text = text[:cut] + "python " + text[cut:]
            words = ["python", *words]
        command = text
    if cut > 0:
        prefix = [
            w for w in (_words(text[:cut]) or []) if not w.startswith("CUDA_VISIBLE_DEVICES=")
        ]
        command = " ".join([*(shlex.quote(w) for w in prefix), text[cut:]])
    head = words[0]
    base = head.rsplit("/", 1)[-1]
    found: tuple[ExperimentKind, str] | None = None
    if _PY_RE.match(head):
        i = 1
        while i < len(words) and words[i].startswith("-") and words[i] not in {"-m", "-c"}:
            i += 2 if words[i] in {"-W", "-X"} else 1
        if i >= len(words) or words[i] == "-c":
            return None
        if words[i] == "-m":
            if i + 1 >= len(words):
                return None
            module = words[i + 1]
            if module in _DIST_LAUNCH:
                found = _script_after(words, i + 2)
            elif module.split(".")[0] in _TOOL_MODULES or module in _TOOL_MODULES:
                return None
            else:
                found = ("module", module)
        elif words[i].endswith(".py") and words[i].rsplit("/", 1)[-1] != "setup.py":
            found = ("script", words[i])
        else:
            return None
    elif base in {"torchrun", "deepspeed", "horovodrun", "mpirun", "mpiexec"} or (
        base == "accelerate" and len(words) > 1 and words[1] == "launch"
    ):
        found = _script_after(words, 2 if base == "accelerate" else 1)
    elif base in {"bash", "sh", "zsh"} and len(words) > 1:
        script = next((w for w in words[1:] if not w.startswith("-")), "")
        found = ("shell", script) if script.endswith(".sh") else None
    elif head.endswith(".sh") and "/" in head:
        found = ("shell", head)
    elif head.endswith(".py") and head.startswith("./"):
        found = ("script", head)
    elif base == "make":
        target = _make_target(words[1:])
        found = ("make", target) if target else None
    elif base == "jupyter" and "--execute" in words:
        nb = next((w for w in words if w.endswith(".ipynb")), "")
        found = ("notebook", nb) if nb else None
    elif base == "papermill" and len(words) > 1 and words[1].endswith(".ipynb"):
        found = ("notebook", words[1])
    if found is None:
        return None
    kind, entry = found
    return RunCommand(
        kind, entry.removeprefix("./"), command, tuple(words), tuple(env), _gpus(words)
    )


#: Environment managers that run the rest of the line in their environment: the words of
#: their prefix, and their options that take a value.
_RUNNERS: dict[tuple[str, ...], frozenset[str]] = {
    ("poetry", "run"): frozenset(),
    ("pipenv", "run"): frozenset(),
    ("pdm", "run"): frozenset(),
    ("hatch", "run"): frozenset(),
    ("rye", "run"): frozenset(),
    ("uv", "run"): frozenset(
        {"--with", "--python", "-p", "--extra", "--group", "--env-file", "--project",
         "--directory", "--package", "--with-requirements", "--index", "--index-url"}
    ),
    ("conda", "run"): frozenset({"-n", "--name", "-p", "--prefix", "--cwd"}),
    ("mamba", "run"): frozenset({"-n", "--name", "-p", "--prefix", "--cwd"}),
    ("micromamba", "run"): frozenset({"-n", "--name", "-p", "--prefix", "--cwd"}),
}  # fmt: skip


def _runner_words(words: list[str]) -> int:
    """How many leading words are an environment manager's ``run`` prefix (0 for none)."""
    takes = _RUNNERS.get(tuple(w.rsplit("/", 1)[-1] for w in words[:2]))
    if takes is None:
        return 0
    i = 2
    while i < len(words) and words[i].startswith("-"):
        if words[i] == "--":
            return i + 1
        name = words[i].partition("=")[0]
        i += 2 if name in takes and "=" not in words[i] else 1
    return i


def _after_words(text: str, start: int, consumed: list[str]) -> int | None:
    """Offset in ``text`` just after ``consumed`` (found in order from ``start``), or None
    when one of them is quoted in the text and cannot be found as written."""
    pos = start
    for word in consumed:
        found = text.find(word, pos)
        if found < 0:
            return None
        pos = found + len(word)
    return pos


def _make_target(args: list[str]) -> str | None:
    i = 0
    while i < len(args):
        word = args[i]
        if word in {"-C", "-f", "--directory", "--file", "-j"} and i + 1 < len(args):
            i += 2
            continue
        if word.startswith("-") or "=" in word:
            i += 1
            continue
        return word
    return None


_PYTHON_KINDS = frozenset({"script", "module", "notebook"})


def python_runs(lines: Iterable[tuple[int, str]]) -> list[tuple[int, RunCommand]]:
    """Every command of numbered shell lines that runs Python (a script, a module or a
    notebook; not ``bash x.sh`` or ``make t``), with its line number, in order."""
    found: list[tuple[int, RunCommand]] = []
    for number, line in lines:
        for segment in split_shell(line):
            run = parse_run(segment)
            if run is not None and run.kind in _PYTHON_KINDS:
                found.append((number, run))
    return found


def key_line(lines: list[str], dotted_key: str) -> int | None:
    """1-based line of ``dotted_key`` (``train.lr``) in a YAML/JSON/TOML text, or None.

    Each component is searched after the line of the one before it, so ``train.lr`` finds
    the ``lr`` under ``train:`` rather than an earlier ``model.lr``. TOML tables
    (``[train]``) count as the line of their component.
    """
    start = 0
    found: int | None = None
    for part in dotted_key.split("."):
        pattern = re.compile(rf"(?:^|[\s{{,\[.-])[\"']?{re.escape(part)}[\"']?\s*(?:[:=]|\]|\.)")
        hit = next((i for i in range(start, len(lines)) if pattern.search(lines[i])), None)
        if hit is None:
            leaf = dotted_key.rsplit(".", 1)[-1]
            leaf_re = re.compile(rf"(?:^|[\s{{,])[\"']?{re.escape(leaf)}[\"']?\s*[:=]")
            return next((i + 1 for i, line in enumerate(lines) if leaf_re.search(line)), found)
        found = hit + 1
        start = hit
    return found
