"""conda environment files: environment.yml/.yaml, conda.yml/.yaml.

Each ``dependencies`` entry is a conda match spec (``[channel::]name[ version[ build]]``,
``name=1.21``, ``name>=1.20``); it becomes, depending on the package:

* ``python`` -> ``python_version`` (``=3.8`` is exact ``3.8``; a range is a specifier);
* CUDA packages (``cudatoolkit``, ``pytorch-cuda``, ``cuda-version``, ...) -> ``cuda``;
  the channel ``nvidia/label/cuda-11.8.0`` too;
* compilers (``gcc``, ``gxx_linux-64``) -> ``compiler``;
* native tools and libraries (ffmpeg, libsndfile, ...) -> ``system_library`` (nixpkgs attr);
* other non-Python packages (mkl, cudnn, libgcc, ...) -> nothing;
* everything else -> ``python_requirement`` under its PyPI name (pytorch -> torch), with
  conda's fuzzy ``=1.21`` as ``==1.21.*`` and build strings dropped.

The ``pip:`` subsection is parsed exactly like a requirements file. Lines come from the
YAML node marks, so every finding points at its own line.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement

from reprobridge.detect._pkgmap import (
    CONDA_CUDA,
    CONDA_GCC,
    CONDA_NOT_PYTHON,
    CONDA_SYSTEM,
    CONDA_TO_PYPI,
)
from reprobridge.detect._text import skip_path
from reprobridge.detect.base import Confidence, DetectContext, Detector, Evidence, Finding
from reprobridge.detect.declared.requirements import (
    RequirementsParser,
    logical_lines,
    requirement_finding,
)
from reprobridge.detect.envscope import env_scope
from reprobridge.detect.findings import (
    CompilerValue,
    CudaValue,
    PythonVersionValue,
    SystemLibraryValue,
)
from reprobridge.errors import DetectionError, UnsafePathError

if TYPE_CHECKING:  # loaded when a conda file is read: ~20 ms of every small `rb init`
    import yaml

ENV_FILES = ("environment.yml", "environment.yaml", "conda.yml", "conda.yaml")

_SPEC_RE = re.compile(r"^(?:[\w./-]+::)?([A-Za-z0-9_][A-Za-z0-9_.+-]*)\s*(.*)$")
_BRACKET_VERSION_RE = re.compile(r"""\[.*?version\s*=\s*['"]?([^'"\],]+)""")
_MAJOR_MINOR_RE = re.compile(r"(\d+)\.(\d+)")
_EXACT_MINOR_RE = re.compile(r"^==(\d+)\.(\d+)(?:\.[0-9*]+)*$")
_CUDA_CHANNEL_RE = re.compile(r"nvidia/label/cuda-(\d+)\.(\d+)")


def _fuzzy(version: str) -> str:
    """conda's ``1.21``/``1.21*`` (meaning 1.21.*) as a PEP 440 ``==1.21.*``."""
    version = version.rstrip(".")
    if version.endswith(".*"):
        return f"=={version}"
    if version.endswith("*"):
        return f"=={version[:-1].rstrip('.')}.*"
    return f"=={version}.*"


def conda_version(rest: str) -> str:
    """The PEP 440 specifier of what follows a conda package name ("" for none).

    ``=1.21`` -> ``==1.21.*``; ``=1.21=py38_0`` -> ``==1.21.*``; ``==1.21.5`` -> ``==1.21.5``;
    ``>=1.20,<2`` kept; ``1.21 py38_0`` -> ``==1.21``; ``1.21.*`` -> ``==1.21.*``. An ``|``
    alternative keeps its first branch.
    """
    rest = rest.strip()
    bracket = _BRACKET_VERSION_RE.search(rest)
    if bracket:
        rest = bracket.group(1).strip()
    if not rest:
        return ""
    rest = rest.split("|", 1)[0].strip()
    if rest.startswith("=="):
        return "==" + rest[2:].split("=", 1)[0].split()[0]
    if rest.startswith("="):
        return _fuzzy(rest[1:].split("=", 1)[0].split()[0])
    token = rest.split()[0]
    if token[0] in "<>!~":
        return token
    return _fuzzy(token) if "*" in token else f"=={token}"


class CondaDetector(Detector):
    """Python, CUDA, compiler, system libraries and Python packages of conda env files.

    Malformed YAML in a root environment file raises DetectionError with the path and the
    line; so does a top level that is not a mapping or ``dependencies`` that is not a list,
    since a declared environment conda itself would reject cannot be reproduced from. A
    broken file in a subdirectory is skipped with a warning.
    """

    name = "conda"

    def detect(self, ctx: DetectContext) -> list[Finding]:
        findings: list[Finding] = []
        scope = env_scope(ctx.index)
        for path in ctx.index.named(*ENV_FILES):
            if skip_path(path) or scope.ignores(path):
                continue
            if scope.declared(path):
                findings += _EnvFile(ctx, self.name, path).run()
                continue
            try:
                findings += _EnvFile(ctx, self.name, path).run()
            except (DetectionError, UnsafePathError) as exc:
                ctx.warn(f"skipped: {exc}", path)
        return findings


class _EnvFile:
    def __init__(self, ctx: DetectContext, detector: str, path: str) -> None:
        self.ctx = ctx
        self.detector = detector
        self.path = path
        self.findings: list[Finding] = []
        self.pip = RequirementsParser(ctx, detector, note="conda pip: section")

    def run(self) -> list[Finding]:
        import yaml

        text = self.ctx.index.read_text(self.path)
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            problem = getattr(exc, "problem", None) or "malformed"
            raise DetectionError(
                f"is not valid YAML: {problem}",
                path=self.path,
                field=f"line {mark.line + 1}" if mark is not None else None,
            ) from exc
        if root is None:
            return []
        if not isinstance(root, yaml.MappingNode):
            raise DetectionError(
                "is not a conda environment (the top level must be a mapping)", path=self.path
            )
        for key, value in root.value:
            if key.value == "channels" and isinstance(value, yaml.SequenceNode):
                for node in value.value:
                    self._channel(node)
            elif key.value == "dependencies":
                if not isinstance(value, yaml.SequenceNode):
                    raise DetectionError(
                        "dependencies must be a list",
                        path=self.path,
                        field=f"line {value.start_mark.line + 1}",
                    )
                for node in value.value:
                    self._dependency(node)
        return self.findings + self.pip.result()

    def _evidence(self, node: yaml.Node) -> Evidence:
        return Evidence(self.path, node.start_mark.line + 1)

    def _channel(self, node: yaml.Node) -> None:
        import yaml

        match = (
            _CUDA_CHANNEL_RE.search(str(node.value)) if isinstance(node, yaml.ScalarNode) else None
        )
        if match:
            self._cuda(f"{match.group(1)}.{match.group(2)}", node, "conda channel")

    def _cuda(self, version: str, node: yaml.Node, why: str) -> None:
        self.findings.append(
            Finding(
                kind="cuda",
                key="cuda",
                value=CudaValue(version),
                evidence=(self._evidence(node),),
                detector=self.detector,
                note=f"{why} {node.value}",
            )
        )

    def _dependency(self, node: yaml.Node) -> None:
        import yaml

        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.value == "pip" and isinstance(value, yaml.SequenceNode):
                    for item in value.value:
                        if isinstance(item, yaml.ScalarNode):
                            line = item.start_mark.line + 1
                            lines = [(line, text) for _, text in logical_lines(str(item.value))]
                            self.pip.parse_lines(self.path, lines)
            return
        if not isinstance(node, yaml.ScalarNode):
            return
        spec = str(node.value).strip()
        match = _SPEC_RE.match(spec)
        if not match:
            raise DetectionError(
                f"not a conda package spec: {spec!r}",
                path=self.path,
                field=f"line {node.start_mark.line + 1}",
            )
        conda_name, rest = match.group(1).lower(), match.group(2)
        version = conda_version(rest)
        if conda_name == "python":
            self._python(version, node)
        elif conda_name in CONDA_CUDA:
            found = _MAJOR_MINOR_RE.search(version)
            if found:
                self._cuda(f"{found.group(1)}.{found.group(2)}", node, "conda package")
        elif conda_name in CONDA_GCC:
            major = re.search(r"(\d+)", version)
            if major:
                self.findings.append(
                    Finding(
                        kind="compiler",
                        key="gcc",
                        value=CompilerValue(major.group(1)),
                        evidence=(self._evidence(node),),
                        detector=self.detector,
                        note=f"conda package {spec}",
                    )
                )
        elif conda_name in CONDA_SYSTEM:
            self.findings.append(
                Finding(
                    kind="system_library",
                    key=CONDA_SYSTEM[conda_name],
                    value=SystemLibraryValue(conda_name),
                    evidence=(self._evidence(node),),
                    detector=self.detector,
                    note="conda package",
                )
            )
        # A leading `_`: conda's own bookkeeping packages (`_libgcc_mutex`, `_openmp_mutex`,
        # `_tflow_select` in aamini/evidential-deep-learning's export): never a
        # distribution, and no valid PyPI name.
        elif conda_name in CONDA_NOT_PYTHON or conda_name.startswith(("magma-cuda", "r-", "_")):
            return
        elif conda_name.startswith("lib") and conda_name not in CONDA_TO_PYPI:
            self.ctx.warn(
                f"conda package {conda_name} looks like a native library; skipped", self.path
            )
        else:
            self._python_package(conda_name, version, spec, node)

    def _python(self, version: str, node: yaml.Node) -> None:
        exact = _EXACT_MINOR_RE.match(version)
        value = (
            PythonVersionValue(exact=f"{exact.group(1)}.{exact.group(2)}")
            if exact
            else PythonVersionValue(specifier=version)
        )
        if not version:
            return
        self.findings.append(
            Finding(
                kind="python_version",
                key="python",
                value=value,
                evidence=(self._evidence(node),),
                detector=self.detector,
                note=f"conda package {node.value}",
            )
        )

    def _python_package(self, conda_name: str, version: str, spec: str, node: yaml.Node) -> None:
        pypi = CONDA_TO_PYPI.get(conda_name, conda_name)
        note = f"conda package {spec}" if pypi != conda_name else ""
        confidence: Confidence = "high"
        try:
            req = Requirement(f"{pypi}{version}")
        except InvalidRequirement:
            # conda versions need not be PEP 440 (e.g. "1.1.1k"); keep the package.
            try:
                req = Requirement(pypi)
            except InvalidRequirement:
                # A conda name PyPI cannot spell is no Python distribution to install.
                return
            confidence = "medium"
            note = f"conda version of {spec!r} is not PEP 440; dropped"
        self.findings.append(
            requirement_finding(
                req, self._evidence(node), self.detector, confidence=confidence, note=note
            )
        )
