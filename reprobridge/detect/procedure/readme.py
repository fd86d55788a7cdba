"""Experiments the README (and docs/) tells a reader to run.

Reads the shell code blocks of ``README*.md``/``README.rst`` files and ``docs/**.md``:
fenced blocks tagged ``bash``/``sh``/``shell``/``console``/``zsh`` or untagged, indented
(four-space) code blocks, and reST
``code-block``/``::`` literal blocks. ``$ `` prompts are stripped (in a block with prompts,
lines without one are program output), ``\\`` continuations joined, ``cd dir`` tracked as
the working directory (after ``git clone <url> && cd <repo>``, a command whose script is
not in a folder ``<repo>`` runs from where the block cloned: the clone is this repository;
a command after a placeholder ``cd PATH_TO_PROJECT``, ``cd <dir>``
or ``cd path/to/x``, naming no folder of the repository, is a ``rejected`` candidate: its
working directory is unknown), and ``export NAME=value`` lines recorded in the finding's note.
Every command :func:`~reprobridge.detect._text.parse_run` recognises (``python x.py``,
``python -m pkg``, ``torchrun``/``accelerate launch``/``deepspeed``, ``bash x.sh``,
``make target``; an environment manager's ``poetry run``/``uv run``/``pipenv run``/
``conda run -n X`` prefix is dropped) becomes an ``experiment`` finding with high confidence; install lines
(``pip``, ``conda``, ``git clone``...) are not commands it recognises.

Ids come from the nearest preceding heading (not the document's title, its first
level-1 heading, nor a heading that names no experiment: "Note", "Usage", "Quick start");
when one heading covers several commands, or the heading names no experiment, ids come
from the comment above each command or else the script and config names. A command that
appears in several files (translated READMEs) is reported once, with every place as
evidence. A distributed launcher's literal process count becomes a ``hardware`` finding.
A command its code block installs an optional requirement set for first (``uv pip install
".[atari]"``, ``pip install -r requirements/requirements-atari.txt``; see
:mod:`~reprobridge.detect.procedure._installs`) gets an ``optional_set`` finding naming the
sets: the environment rb builds leaves them out, so the ranking puts it below the others.

The top-level README's mentions of scripts and notebooks (in prose, links or code) become
``mention`` findings (key: the file; a mentioned folder such as ``projects/adder`` names
the script in it named like it, or its only script), which the merge uses to rank experiment candidates;
its sentences about results ("This reproduces the ... row of Table 2") become
``reproduces`` findings, whose words help match paper table rows to experiments.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Set
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from reprobridge.detect._text import (
    RunCommand,
    continued_lines,
    normalize_path,
    parse_run,
    skip_path,
    slugify,
    split_shell,
    unique_id,
)
from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding, rejected
from reprobridge.detect.declared.requirements import optional_run_sets
from reprobridge.detect.findings import (
    ExperimentValue,
    ExtraValue,
    HardwareValue,
    MentionValue,
    ReproducesValue,
    extra_key,
)
from reprobridge.detect.index import RepoIndex
from reprobridge.detect.procedure._installs import optional_sets

_SHELL_LANGS = frozenset(
    {
        "",
        "bash",
        "sh",
        "shell",
        "console",
        "zsh",
        "shell-session",
        "shellsession",
        "terminal",
        "cmd",
    }
)
_FENCE_RE = re.compile(r"^(\s{0,8})(`{3,}|~{3,})\s*([\w+-]*)")
_INDENTED_RE = re.compile(r"^(?: {4}|\t)\s*\S")
_ATX_RE = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_SETEXT_RE = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_RST_UNDERLINE_RE = re.compile(r"^([=\-~^*#+`'\"])\1{2,}\s*$")
_RST_DIRECTIVE_RE = re.compile(r"^(\s*)\.\.\s+(?:code-block|code|sourcecode)::\s*([\w+-]*)\s*$")
_PROMPT_RE = re.compile(r"^\s*(?:\(\w[\w.-]*\)\s*)?[$%]\s+")
_CONFIG_FLAGS = frozenset(
    {"--config", "--configs", "--cfg", "--config-file", "--config_file", "-c"}
)
_CONFIG_OVERRIDE_RE = re.compile(r"^(?:\+?experiment|--config-name|--config_name|config)=(.+)$")
_MD_MARKUP_RE = re.compile(r"[*_`\[\]]|<[^>]+>|\(http[^)]*\)")


@dataclass
class _Block:
    path: str
    heading: str
    lines: list[tuple[int, str]]  # (line number, text)


@dataclass
class _Command:
    run: RunCommand
    path: str
    line: int
    heading: str
    comment: str
    workdir: str
    env: list[str] = field(default_factory=list)
    more: list[Evidence] = field(default_factory=list)
    #: The placeholder folder of a ``cd`` before it (``PATH_TO_PROJECT``), or "".
    placeholder: str = ""
    #: The optional requirement sets its block installs before it, with the line of each.
    extras: dict[str, Evidence] = field(default_factory=dict)
    #: The working directory before a ``cd`` into a folder the block cloned, where the
    #: clone may be the repository itself (``git clone <url> && cd <repo>``).
    clone_root: str | None = None


#: Section headings and comments that say how to read a README, not which experiment a
#: command is: a command under "Note" or "Usage", or after a ``# e.g.`` comment line, is
#: named for what it runs (``char_cnn_test``, ``reinforce``).
_GENERIC_HEADINGS = frozenset(
    {
        "note", "notes", "usage", "example", "examples", "run", "running", "how-to-run",
        "quick-start", "quickstart", "getting-started", "instructions", "commands", "code",
        "overview", "details", "setup", "command", "to-run", "run-the-code", "e-g", "eg",
        "for-example", "for-instance", "i-e",
    }
)  # fmt: skip


def _generic(heading: str) -> bool:
    return (slugify(heading) or "") in _GENERIC_HEADINGS


def _clean_heading(text: str) -> str:
    return " ".join(_MD_MARKUP_RE.sub("", text).split())


def _markdown_blocks(path: str, text: str) -> list[_Block]:
    blocks: list[_Block] = []
    heading = ""
    titled = False
    lines = text.splitlines()
    i = 0
    prev = ""
    while i < len(lines):
        line = lines[i]
        fence = _FENCE_RE.match(line)
        if fence:
            indent, marker, lang = len(fence.group(1)), fence.group(2), fence.group(3).lower()
            body: list[tuple[int, str]] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker[0] * len(marker)):
                body.append((i + 1, lines[i][indent:] if lines[i][:indent].isspace() else lines[i]))
                i += 1
            if lang in _SHELL_LANGS:
                blocks.append(_Block(path, heading, body))
            i += 1
            prev = ""
            continue
        if _INDENTED_RE.match(line) and not prev.strip():
            # An indented code block (CommonMark: four spaces after a blank line; it cannot
            # interrupt a paragraph). Blank lines inside it belong to it.
            body = []
            while i < len(lines) and (_INDENTED_RE.match(lines[i]) or not lines[i].strip()):
                if lines[i].strip():
                    body.append((i + 1, lines[i].strip()))
                i += 1
            blocks.append(_Block(path, heading, body))
            prev = ""
            continue
        atx = _ATX_RE.match(line)
        if atx:
            # The document's first level-1 heading is its title (the project's name), not a
            # section: commands under it take their names from what they run.
            title = not titled and line.lstrip().startswith("# ")
            heading = "" if title else _clean_heading(atx.group(1))
            titled = True
        elif _SETEXT_RE.match(line) and prev.strip() and not prev.startswith((" ", "\t")):
            heading = _clean_heading(prev)
            titled = True
        prev = line
        i += 1
    return blocks


def _rst_blocks(path: str, text: str) -> list[_Block]:
    blocks: list[_Block] = []
    heading = ""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if (
            line.strip()
            and not line[0].isspace()
            and _RST_UNDERLINE_RE.match(nxt)
            and len(nxt.strip()) >= len(line.strip())
            and not _RST_UNDERLINE_RE.match(line)
        ):
            heading = _clean_heading(line)
            i += 2
            continue
        directive = _RST_DIRECTIVE_RE.match(line)
        literal = line.rstrip().endswith("::") and not line.lstrip().startswith("..")
        if directive or literal:
            if directive and directive.group(2).lower() not in _SHELL_LANGS:
                i += 1
                continue
            base = len(line) - len(line.lstrip())
            body: list[tuple[int, str]] = []
            i += 1
            while i < len(lines):
                cur = lines[i]
                if cur.strip() and len(cur) - len(cur.lstrip()) <= base:
                    break
                if cur.strip() and not cur.lstrip().startswith(":"):  # directive options
                    body.append((i + 1, cur.strip()))
                i += 1
            blocks.append(_Block(path, heading, body))
            continue
        i += 1
    return blocks


def _repo_path(path: str) -> str:
    """A path inside the repository: :func:`~reprobridge.detect._text.normalize_path` (a
    ``cd ..`` never climbs above the root), with ``.`` for the root."""
    return normalize_path(path) or "."


def _logical_lines(block: _Block) -> list[tuple[int, str]]:
    """Prompt-stripped, continuation-joined lines of a block (with their first line number)."""
    prompted = any(_PROMPT_RE.match(t) for _, t in block.lines)

    def lines() -> Iterator[tuple[int, str]]:
        continued = False
        for number, raw in block.lines:
            if continued:
                text = raw.strip()
                if prompted and text.startswith("> "):
                    text = text[2:].strip()  # the shell's continuation prompt (PS2)
            elif prompted:
                match = _PROMPT_RE.match(raw)
                if not match:
                    continue  # program output in a console transcript
                text = raw[match.end() :].strip()
            else:
                text = raw.strip()
            yield number, text
            continued = text.endswith("\\")

    joined = (
        (start, " ".join(p for p in (part.rstrip() for part in parts) if p))
        for start, parts in continued_lines(lines())
    )
    return [(start, text) for start, text in joined if text]


#: A ``cd`` target that stands for the reader's own folder, in any case: ``<path>``,
#: ``{dir}``, ``path/to/x``, ``your_folder``.
_PLACEHOLDER_RE = re.compile(r"[<>{}]|(?:^|/)path/to(?:/|$)|(?:^|/)your[\w-]*(?:/|$)", re.I)
#: ... or in capitals (``PATH_TO_PROJECT``, ``YOUR_DIR``; ``cd project`` is a folder).
_PLACEHOLDER_CAPS_RE = re.compile(
    r"(?:^|/)[A-Z0-9_]*(?:PATH|DIR|FOLDER|PROJECT|REPO)[A-Z0-9_]*(?:/|$)"
)


def placeholder_folder(target: str) -> bool:
    """Whether a ``cd`` target looks like a placeholder for the reader's folder (the caller
    still checks that no such folder is in the repository)."""
    return bool(_PLACEHOLDER_RE.search(target) or _PLACEHOLDER_CAPS_RE.search(target))


def _clone_folder(words: list[str]) -> str | None:
    """The folder ``git clone <url> [<folder>]`` clones into (the URL's last part, less
    ``.git``, without a folder), else None."""
    if words[:2] != ["git", "clone"]:
        return None
    args = [w for w in words[2:] if not w.startswith("-")]
    if not args:
        return None
    folder = args[1] if len(args) > 1 else args[0].rstrip("/").rsplit("/", 1)[-1]
    return folder.removesuffix(".git").rstrip("/") or None


def _commands(block: _Block, base_dir: str, optional_files: Set[str]) -> list[_Command]:
    """The commands of ``block``, each with the working directory, environment and
    optional requirement sets (``optional_files``: the optional requirement files) the
    lines before it in the block set."""
    found: list[_Command] = []
    workdir = base_dir
    placeholder = ""
    comment = ""
    env: list[str] = []
    extras: dict[str, Evidence] = {}
    clones: set[str] = set()
    clone_root: str | None = None
    for number, text in _logical_lines(block):
        if text.startswith("#"):
            comment = text.lstrip("#").strip()
            continue
        for segment in split_shell(text):
            words = segment.split()
            clone = _clone_folder(words)
            if clone is not None:
                clones.add(clone)
                continue
            if words[0] == "cd" and len(words) == 2:
                target = words[1]
                if target.startswith(("/", "~", "$")):
                    continue  # outside the repository (or unknowable): keep the last one
                # `git clone <url> && cd <repo>`: the clone's folder may be the repository
                # itself (its root), even where a folder of the same name is in it.
                clone_root = workdir if target.rstrip("/") in clones else None
                # A placeholder (`cd PATH_TO_PROJECT`) names no folder: what follows it has
                # no known working directory, so it is a rejected candidate.
                placeholder = target if placeholder_folder(target) else ""
                workdir = _repo_path(f"{workdir}/{target}") if target != "-" else base_dir
                continue
            if words[0] == "export" and len(words) >= 2:
                env.extend(w for w in words[1:] if "=" in w)
                continue
            for name in optional_sets(segment, workdir, optional_files):
                extras.setdefault(name, Evidence(block.path, number))
            run = parse_run(segment)
            if run is not None:
                found.append(
                    _Command(
                        run,
                        block.path,
                        number,
                        block.heading,
                        comment,
                        workdir,
                        [*env],
                        placeholder=placeholder,
                        extras=dict(extras),
                        clone_root=clone_root,
                    )
                )
        comment = ""
    return found


def _is_folder(index: RepoIndex, path: str) -> bool:
    prefix = f"{path}/"
    return any(f.path.startswith(prefix) for f in index)


def _readme_rejected(cmd: _Command, entry: str, reason: str) -> Finding:
    return rejected(entry, reason, Evidence(cmd.path, cmd.line), ReadmeCommandsDetector.name)


def entry_path(index: RepoIndex, run: RunCommand, workdir: str) -> tuple[str, bool]:
    """(path of the thing ``run`` executes, whether that path is in the index)."""
    if run.kind == "module":
        stem = run.entry.replace(".", "/")
        candidates = [
            f"{stem}.py",
            f"{stem}/__main__.py",
            f"src/{stem}.py",
            f"src/{stem}/__main__.py",
        ]
        for cand in candidates:
            full = _repo_path(f"{workdir}/{cand}")
            if full in index:
                return full, True
        return _repo_path(f"{workdir}/{candidates[0]}"), False
    if run.kind == "make":
        full = _repo_path(f"{workdir}/Makefile")
        return full, full in index
    full = _repo_path(f"{workdir}/{run.entry}")
    return full, full in index


def entry_label(run: RunCommand) -> str:
    """A short name for what ``run`` runs: script/module/target stem plus its config name."""
    if run.kind == "module":
        stem = run.entry.rsplit(".", 1)[-1]
        if stem == "__main__":
            stem = run.entry.split(".")[-2] if "." in run.entry else run.entry
    elif run.kind == "make":
        stem = run.entry
    else:
        stem = PurePosixPath(run.entry).stem
    config = ""
    words = list(run.words)
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name in _CONFIG_FLAGS:
            config = value if eq else (words[i + 1] if i + 1 < len(words) else "")
        override = _CONFIG_OVERRIDE_RE.match(word)
        if override:
            config = override.group(1)
        if config:
            break
    if config:
        config_stem = PurePosixPath(config).stem
        if config_stem and config_stem != stem:
            return f"{stem}-{config_stem}"
    return stem


_FILE_REF_RE = re.compile(r"[\w./-]*[\w-]+\.(?:ipynb|py|sh)\b")
#: A folder path of two or more parts (``projects/adder``), not inside a URL.
_DIR_REF_RE = re.compile(r"(?<![\w./:-])(?:\./)?[\w-]+(?:/[\w.-]+)+/?(?![\w./-])")


def _folder_script(folder: str, by_dir: dict[str, list[str]]) -> str | None:
    """The script a README's mention of ``folder`` names: the one named like the folder
    (``projects/adder`` -> ``projects/adder/adder.py``), else the folder's only script or
    notebook; None for a folder that is not one of the repository's or holds several."""
    here = by_dir.get(folder, [])
    named = [p for p in here if PurePosixPath(p).stem == PurePosixPath(folder).name]
    if len(named) == 1:
        return named[0]
    return here[0] if len(here) == 1 else None


def _mentions(index: RepoIndex) -> list[Finding]:
    """``mention`` findings: scripts and notebooks the top-level README names in its text
    (prose, links, code), which tells a reader which of many candidates matter."""
    readme = next((p for p in _doc_files(index) if "/" not in p), None)
    text = index.try_read_text(readme) if readme else None
    if readme is None or text is None:
        return []
    by_name: dict[str, list[str]] = {}
    for f in index.files:
        if f.suffix in {".ipynb", ".py", ".sh"} and not skip_path(f.path):
            by_name.setdefault(f.name, []).append(f.path)
    by_dir: dict[str, list[str]] = {}
    for paths in by_name.values():
        for path in paths:
            by_dir.setdefault(str(PurePosixPath(path).parent), []).append(path)
    found: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        for ref in _FILE_REF_RE.findall(line):
            ref = _repo_path(ref.removeprefix("./"))
            paths = [ref] if ref in index else by_name.get(PurePosixPath(ref).name, [])
            if len(paths) == 1:  # an ambiguous bare name names nothing in particular
                found.setdefault(paths[0], number)
        for ref in _DIR_REF_RE.findall(line):
            script = _folder_script(_repo_path(ref.removeprefix("./").rstrip("/")), by_dir)
            if script is not None:
                found.setdefault(script, number)
    return [
        Finding(
            kind="mention",
            key=path,
            value=MentionValue(path),
            evidence=(Evidence(readme, line),),
            detector=ReadmeCommandsDetector.name,
            confidence="medium",
        )
        for path, line in sorted(found.items())
    ]


_SENTENCE_RE = re.compile(r"[^.!?\n]*(?:\.(?=\d)[^.!?\n]*)*(?:[.!?](?!\d)|$)")
_RESULT_REF_RE = re.compile(
    r"\b(?:tables?|tab\.|figures?|fig\.|rows?|reproduc\w*|results?)\b", re.I
)


def _reproduces(index: RepoIndex) -> list[Finding]:
    """``reproduces`` findings: sentences of the top-level README that say which paper
    result the code gives ("This reproduces the logistic-regression row of Table 2"), whose
    words the merge uses to match paper table rows to experiments."""
    readme = next((p for p in _doc_files(index) if "/" not in p), None)
    text = index.try_read_text(readme) if readme else None
    if readme is None or text is None:
        return []
    found: list[Finding] = []
    in_fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE_RE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or line.startswith(("    ", "\t", "#", "|")):
            continue
        for sentence in _SENTENCE_RE.findall(line):
            sentence = _clean_heading(sentence).strip()
            if len(sentence) > 12 and _RESULT_REF_RE.search(sentence):
                found.append(
                    Finding(
                        kind="reproduces",
                        key=f"{readme}:{number}",
                        value=ReproducesValue(sentence[:300]),
                        evidence=(Evidence(readme, number),),
                        detector=ReadmeCommandsDetector.name,
                        confidence="medium",
                    )
                )
    return found


def _doc_files(index: RepoIndex) -> list[str]:
    readmes = [
        p
        for p in index.files
        if p.name.lower().startswith("readme")
        and p.suffix in {".md", ".markdown", ".rst", ""}
        and not skip_path(p.path)
    ]
    docs = [p for p in index.glob("docs/*.md", "doc/*.md") if not skip_path(p)]
    ordered = sorted(
        (f.path for f in readmes),
        key=lambda p: (p.count("/"), PurePosixPath(p).name != "README.md", p),
    )
    return ordered + [d for d in docs if d not in ordered]


def _workdir(index: RepoIndex, cmd: _Command, base_dir: str) -> str:
    """Where ``cmd`` runs when its script is not in its tracked working directory: a
    subdirectory README's relative script may be meant from the root, and after ``git
    clone <url> && cd <repo>`` the clone may be this repository (the folder the block
    cloned from); else its working directory as tracked."""
    if entry_path(index, cmd.run, cmd.workdir)[1]:
        return cmd.workdir
    if base_dir != ".":
        rooted = _repo_path(cmd.workdir.removeprefix(base_dir).lstrip("/") or ".")
        if entry_path(index, cmd.run, rooted)[1]:
            return rooted
    if cmd.clone_root is not None and entry_path(index, cmd.run, cmd.clone_root)[1]:
        return cmd.clone_root
    return cmd.workdir


class ReadmeCommandsDetector(Detector):
    """Experiments from the shell commands in README and docs code blocks (see module doc)."""

    name = "readme"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        index = ctx.index
        commands: list[_Command] = []
        seen: dict[tuple[str, str], _Command] = {}
        optional_files = optional_run_sets(f.path for f in index.files)
        for path in _doc_files(index):
            text = ctx.text_or_warn(path)
            if text is None:
                continue
            blocks = (
                _rst_blocks(path, text)
                if path.lower().endswith(".rst")
                else _markdown_blocks(path, text)
            )
            base_dir = str(PurePosixPath(path).parent)
            for block in blocks:
                for cmd in _commands(block, base_dir, optional_files):
                    cmd.workdir = _workdir(index, cmd, base_dir)
                    key = (" ".join(cmd.run.command.split()), cmd.workdir)
                    if key in seen:
                        seen[key].more.append(Evidence(cmd.path, cmd.line))
                        for name, where in cmd.extras.items():
                            seen[key].extras.setdefault(name, where)
                        continue
                    seen[key] = cmd
                    commands.append(cmd)
        return self._findings(index, commands) + _mentions(index) + _reproduces(index)

    def _findings(self, index: RepoIndex, commands: list[_Command]) -> list[Finding]:
        per_heading: dict[tuple[str, str], int] = {}
        for cmd in commands:
            per_heading[(cmd.path, cmd.heading)] = per_heading.get((cmd.path, cmd.heading), 0) + 1
        taken: set[str] = set()
        findings: list[Finding] = []
        for cmd in commands:
            label = entry_label(cmd.run)
            alone = per_heading[(cmd.path, cmd.heading)] == 1
            comment = "" if _generic(cmd.comment) else cmd.comment
            base = (
                (slugify(cmd.heading) if alone and not _generic(cmd.heading) else None)
                or slugify(comment)
                or slugify(label)
                or slugify(cmd.heading)
                or "experiment"
            )
            exp_id = unique_id(base, taken)
            entry, exists = entry_path(index, cmd.run, cmd.workdir)
            if cmd.placeholder and not _is_folder(index, cmd.workdir):
                findings.append(
                    _readme_rejected(
                        cmd,
                        entry,
                        f"`{cmd.run.command}` runs after `cd {cmd.placeholder}`, a placeholder "
                        "for the reader's folder, not a folder of the repository: its working "
                        "directory is unknown",
                    )
                )
                continue
            if not exists and cmd.run.kind in {"script", "shell", "notebook"}:
                # `python train.py` from the root where the file is src/train.py, or a
                # placeholder folder (`cd PATH_TO_PROJECT`): the command cannot run as
                # written, so it is a rejected candidate, not an experiment.
                findings.append(
                    _readme_rejected(
                        cmd,
                        entry,
                        f"`{cmd.run.command}` runs {entry}, which is not in the repository",
                    )
                )
                continue
            description = ": ".join(p for p in (cmd.heading, comment) if p)
            notes: list[str] = []
            if not exists:
                notes.append(f"{cmd.path} runs {entry}, which is not in the repository")
            env = [*cmd.env, *cmd.run.env]
            if env:
                notes.append("environment: " + " ".join(env))
            evidence = (Evidence(cmd.path, cmd.line), *cmd.more)
            value = ExperimentValue(cmd.run.command, cmd.run.kind, description, entry, cmd.workdir)
            findings.append(
                Finding(
                    kind="experiment",
                    key=exp_id,
                    value=value,
                    evidence=evidence,
                    detector=self.name,
                    confidence="high" if exists else "medium",
                    note="; ".join(notes),
                )
            )
            if cmd.extras:
                findings.append(
                    Finding(
                        kind="optional_set",
                        key=extra_key(value),
                        value=ExtraValue(entry, tuple(cmd.extras)),
                        evidence=tuple(dict.fromkeys(cmd.extras.values())),
                        detector=self.name,
                        confidence="medium",
                        note=f"installed before experiment {exp_id}",
                    )
                )
            if cmd.run.gpus:
                findings.append(
                    Finding(
                        kind="hardware",
                        key=entry,
                        value=HardwareValue(cmd.run.gpus),
                        evidence=evidence,
                        detector=self.name,
                        confidence="medium",
                        note=f"process count of the launcher in experiment {exp_id}",
                    )
                )
        return findings
