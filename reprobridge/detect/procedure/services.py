"""Experiments that need a service the audit's sandbox lacks (docker, a cluster, the network).

The audit runs each experiment offline in a sandbox with no container runtime, no cluster
client configured and no network. An experiment whose command, shell script or Makefile
runs one of :data:`SERVICE_TOOLS` as a command (the first word of a pipeline segment, after
variable assignments, ``sudo``, ``exec`` or ``time``) cannot run there: it gets a
``service`` finding with each tool once and the first line that runs it, and the ranking
puts such a candidate below one that needs nothing (a repository of examples whose
README first shows ``bash run.sh`` for a Kubernetes deployment).

Python code that shells out (``subprocess.run(["docker", ...])``) is not read: a script's
own downloads are the fetch detector's.
"""

from __future__ import annotations

import re
import shlex

from reprobridge.detect.base import DetectContext, Detector, Evidence, Finding
from reprobridge.detect.findings import ExperimentValue, ServiceValue
from reprobridge.detect.procedure.makefile import Makefile, expand, parsed_makefile

#: Commands that need a daemon, a cluster or the network: the offline sandbox has none.
SERVICE_TOOLS = frozenset(
    {
        "docker", "docker-compose", "podman", "nerdctl", "kubectl", "helm", "minikube",
        "kind", "skaffold", "gcloud", "gsutil", "aws", "az", "ssh", "scp", "rsync",
        "sbatch", "srun", "salloc", "qsub", "bsub", "wget", "curl", "aria2c",
        "huggingface-cli", "kaggle", "gdown",
    }
)  # fmt: skip
#: Words that run the next word as the command.
_PREFIXES = frozenset({"sudo", "exec", "time", "nohup", "env", "command"})
_SEGMENT = re.compile(r"&&|\|\||[;|&]")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def command_tools(line: str) -> list[str]:
    """The :data:`SERVICE_TOOLS` that shell ``line`` runs as commands, in order."""
    found: list[str] = []
    code = line.split("#", 1)[0] if line.lstrip().startswith("#") else line
    for segment in _SEGMENT.split(code):
        try:
            words = shlex.split(segment, comments=True)
        except ValueError:
            words = segment.split()
        while words and (_ASSIGNMENT.match(words[0]) or words[0] in _PREFIXES):
            words = words[1:]
        if words:
            name = words[0].rsplit("/", 1)[-1]
            if name in SERVICE_TOOLS and name not in found:
                found.append(name)
    return found


#: make options whose value is the next word (``make -C dir train``).
_MAKE_VALUE_OPTIONS = frozenset({"-C", "-f", "--directory", "--file", "--makefile", "-I", "-j"})


def _make_target(command: str) -> str | None:
    """The target ``make [options] [VAR=value] target`` runs (None: make's default)."""
    words = command.split()[1:]
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in _MAKE_VALUE_OPTIONS:
            skip = True
        elif not word.startswith("-") and "=" not in word:
            return word
    return None


def _recipe(parsed: Makefile, command: str) -> list[tuple[int, str]]:
    """The recipe lines, variables expanded, of the target ``command`` runs (make's
    default, the first rule not starting with ``.``, without one) in the Makefile
    ``parsed`` (:func:`~reprobridge.detect.procedure.makefile.parse_makefile`'s result): a Makefile's other targets
    (``docker-build``) are not this experiment's."""
    variables, _, rules = parsed
    want = _make_target(command)
    if want is None:
        want = next((r.target for r in rules if not r.target.startswith(".")), None)
    return [
        (number, expand(line, variables))
        for rule in rules
        if rule.target == want
        for number, line in rule.recipe
    ]


def service_key(value: ExperimentValue, key: str = "") -> str:
    """The key of the ``service`` finding of an experiment: a shell script's path (what it
    runs is in the file), ``Makefile::target`` for make (each target has its own recipe),
    else the command itself (``docker run img python train.py`` needs docker;
    ``python train.py`` beside it does not)."""
    entry = value.entry or key
    if value.kind == "shell":
        return entry
    if value.kind != "make":
        return " ".join(value.command.split())
    return f"{entry}::{_make_target(value.command) or ''}"


class ServicesDetector(Detector):
    """``service`` findings for experiments that run docker, kubectl, sbatch, wget, ..."""

    name = "services"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        tools: dict[str, list[str]] = {}  # service key -> tools, in order
        first: dict[str, Evidence] = {}
        entries: dict[str, str] = {}
        for f in ctx.of(ExperimentValue):
            entry = f.value.entry or f.key
            key = service_key(f.value, f.key)
            lines: list[tuple[Evidence, str]] = [(f.evidence[0], f.value.command)]
            if f.value.kind in ("shell", "make") and entry in ctx.index:
                text = ctx.index.try_read_text(entry) or ""
                numbered = (
                    _recipe(parsed_makefile(ctx, entry, text), f.value.command)
                    if f.value.kind == "make"
                    else list(enumerate(text.splitlines(), 1))
                )
                lines += [(Evidence(entry, n), t) for n, t in numbered]
            for evidence, line in lines:
                for tool in command_tools(line):
                    have = tools.setdefault(key, [])
                    if tool not in have:
                        have.append(tool)
                        first.setdefault(key, evidence)
                        entries[key] = entry
        return [
            Finding(
                kind="service",
                key=key,
                value=ServiceValue(entries[key], tuple(found)),
                evidence=(first[key],),
                detector=self.name,
                confidence="medium",
            )
            for key, found in sorted(tools.items())
        ]
