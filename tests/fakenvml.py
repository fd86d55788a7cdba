"""A pynvml-shaped fake for tests of rb's NVML readers (the fingerprint, rb doctor, the
sampler). (tests/ is on sys.path through its conftest.py: ``from fakenvml import FakeNvml``.)
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pynvml

#: (name, memory bytes, compute capability, uuid)
Gpu = tuple[str, int, tuple[int, int], str]


class FakeNvml:
    """pynvml-shaped, raising pynvml's real error classes: ``gpus`` as :data:`Gpu`;
    ``init_error`` is raised by ``nvmlInit``; asking for the handle of GPU ``fail_on_gpu``
    raises GPU_IS_LOST. ``shut_down`` tells whether ``nvmlShutdown`` was called. A test
    that reads more (optional queries, live readings) subclasses it."""

    NVMLError = pynvml.NVMLError
    NVMLError_LibraryNotFound = pynvml.NVMLError_LibraryNotFound
    NVMLError_DriverNotLoaded = pynvml.NVMLError_DriverNotLoaded
    NVMLError_NoPermission = pynvml.NVMLError_NoPermission
    NVMLError_LibRmVersionMismatch = pynvml.NVMLError_LibRmVersionMismatch

    def __init__(
        self,
        gpus: Sequence[Any] = (),
        *,
        init_error: BaseException | None = None,
        fail_on_gpu: int | None = None,
    ) -> None:
        self.gpus = list(gpus)
        self.init_error = init_error
        self.fail_on_gpu = fail_on_gpu
        self.shut_down = False

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"550.54.15"  # older nvidia-ml-py returns bytes

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if index == self.fail_on_gpu:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:
        return str(self.gpus[handle][0])

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        total = self.gpus[handle][1]
        return SimpleNamespace(total=total, used=0, free=total)

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        return tuple(self.gpus[handle][2])  # type: ignore[return-value]

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return str(self.gpus[handle][3])
