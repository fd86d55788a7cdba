"""Executors: where and how one experiment run happens (host shell, nix; later Slurm).

The seam is :class:`Executor`: a second executor (a cluster, a container) is a new module
implementing it, not a change to its callers. Executors run the generated launcher and
then the generated threshold check, so every backend judges with the same code.
"""

from __future__ import annotations

from reprobridge.execute.base import Executor, RunOutcome, RunRequest, choose_executor

__all__ = ["Executor", "RunOutcome", "RunRequest", "choose_executor"]
