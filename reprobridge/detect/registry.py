"""The ordered list of detectors.

Order matters only where a detector reads earlier findings (``ctx.findings``): dependency
files first, then imports (which flags what no file declares), then CUDA and system
libraries (derived from the Python packages), then procedure (experiments, parameters,
datasets, metrics), then the paper (matched to the metrics found before it).

A third-party detector is a new module and a line here (or an entry point in the
``reprobridge.detectors`` group, loaded after these).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from reprobridge.detect.base import Detector

#: "module:Class" of every built-in detector, in run order.
BUILTIN: tuple[str, ...] = (
    "reprobridge.detect.declared.project:ProjectDetector",
    "reprobridge.detect.declared.requirements:RequirementsDetector",
    "reprobridge.detect.declared.setuppy:SetupPyDetector",
    "reprobridge.detect.declared.setupcfg:SetupCfgDetector",
    "reprobridge.detect.declared.pyproject:PyprojectDetector",
    "reprobridge.detect.declared.pipfile:PipfileDetector",
    "reprobridge.detect.declared.conda:CondaDetector",
    "reprobridge.detect.declared.lockfiles:LockfilesDetector",
    "reprobridge.detect.declared.inline:InlineDetector",
    "reprobridge.detect.derived.imports:ImportsDetector",
    "reprobridge.detect.derived.pyversion:PythonVersionDetector",
    "reprobridge.detect.derived.cuda:CudaDetector",
    "reprobridge.detect.derived.syslibs:SystemLibsDetector",
    "reprobridge.detect.procedure.readme:ReadmeCommandsDetector",
    "reprobridge.detect.procedure.shell:ShellScriptsDetector",
    "reprobridge.detect.procedure.makefile:MakefileDetector",
    "reprobridge.detect.procedure.entrypoints:EntryPointsDetector",
    "reprobridge.detect.procedure.notebooks:NotebooksDetector",
    "reprobridge.detect.procedure.services:ServicesDetector",
    "reprobridge.detect.procedure.gpu:GpuDetector",
    "reprobridge.detect.procedure.params:ParamsDetector",
    "reprobridge.detect.procedure.bounds:BoundsDetector",
    "reprobridge.detect.procedure.drift:DriftDetector",
    "reprobridge.detect.procedure.configs:ConfigsDetector",
    "reprobridge.detect.procedure.datasets:DatasetsDetector",
    "reprobridge.detect.procedure.fetch:FetchDetector",
    "reprobridge.detect.procedure.outputs:OutputsMetricsDetector",
    "reprobridge.detect.paper.paper:PaperDetector",
    "reprobridge.detect.paper.readme_results:ReadmeResultsDetector",
)

ENTRY_POINT_GROUP = "reprobridge.detectors"


def _load(spec: str) -> type[Detector]:
    module, _, cls = spec.partition(":")
    loaded = getattr(importlib.import_module(module), cls)
    if not (isinstance(loaded, type) and issubclass(loaded, Detector)):
        raise TypeError(f"{spec} is not a Detector subclass")
    if loaded.name != module.rsplit(".", 1)[1]:
        raise TypeError(f"{spec}.name must be its module's base name")
    return loaded


def detectors(only: set[str] | None = None) -> list[Detector]:
    """Instances of every detector, built-ins first, in run order.

    ``only`` restricts to detectors by name; a built-in's name is its module's base name
    (``requirements``, ``setuppy``, ...), so choosing some does not import the others.
    """
    if only is not None:
        known = {spec.partition(":")[0].rsplit(".", 1)[1] for spec in BUILTIN}
        unknown = only - known
        if unknown:
            raise ValueError(f"unknown detector(s): {sorted(unknown)}")
        return [
            _load(spec)() for spec in BUILTIN if spec.partition(":")[0].rsplit(".", 1)[1] in only
        ]
    found = [_load(spec)() for spec in BUILTIN]
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        cls = ep.load()
        if isinstance(cls, type) and issubclass(cls, Detector):
            found.append(cls())
    return found
