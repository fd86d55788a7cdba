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
    "reprobridge.detect.project:ProjectDetector",
    "reprobridge.detect.requirements:RequirementsDetector",
    "reprobridge.detect.setuppy:SetupPyDetector",
    "reprobridge.detect.setupcfg:SetupCfgDetector",
    "reprobridge.detect.pyproject:PyprojectDetector",
    "reprobridge.detect.pipfile:PipfileDetector",
    "reprobridge.detect.conda:CondaDetector",
    "reprobridge.detect.lockfiles:LockfilesDetector",
    "reprobridge.detect.imports:ImportsDetector",
    "reprobridge.detect.pyversion:PythonVersionDetector",
    "reprobridge.detect.cuda:CudaDetector",
    "reprobridge.detect.syslibs:SystemLibsDetector",
    "reprobridge.detect.readme:ReadmeCommandsDetector",
    "reprobridge.detect.shell:ShellScriptsDetector",
    "reprobridge.detect.makefile:MakefileDetector",
    "reprobridge.detect.entrypoints:EntryPointsDetector",
    "reprobridge.detect.notebooks:NotebooksDetector",
    "reprobridge.detect.services:ServicesDetector",
    "reprobridge.detect.gpu:GpuDetector",
    "reprobridge.detect.params:ParamsDetector",
    "reprobridge.detect.bounds:BoundsDetector",
    "reprobridge.detect.configs:ConfigsDetector",
    "reprobridge.detect.datasets:DatasetsDetector",
    "reprobridge.detect.fetch:FetchDetector",
    "reprobridge.detect.outputs:OutputsMetricsDetector",
    "reprobridge.detect.paper:PaperDetector",
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
