"""The CPU thread share of a run: which variables carry it, and a fair share of this machine.

An operator setting (``rb audit --threads N``, ``RB_THREADS``, ``threads`` in the user
config; never the repository) sets every variable of :data:`THREAD_VARS` to ``N`` in each
run's environment. Why: torch, NumPy's BLAS and friends start one thread per core by
default, so several runs side by side (``rb bench -j J``) each start a pool as large as the
machine and the pools fight over the cores; measured on a 2-core machine, 3 parallel
smoke runs with 2 threads each ran 10-20x slower than alone, and 4 of them hit a
10-minute limit they meet in 30 s alone.

The variables are the ones joblib sets for its workers (``MAX_NUM_THREADS_VARS``:
OpenMP, which torch's intra-op pool reads, OpenBLAS, MKL, BLIS, Apple's Accelerate,
Numba, NumExpr) plus TensorFlow's two pools. JAX/XLA has no variable for it: its
``XLA_FLAGS`` thread flags change between releases and an unknown flag aborts the
process (``Unknown flags in XLA_FLAGS``), so it is not touched. A run's own code can still
ask for more threads (``torch.set_num_threads``); nothing here pins it to cores.
"""

from __future__ import annotations

import os

#: Every variable the thread setting sets (and that a host value of passes through).
THREAD_VARS: tuple[str, ...] = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMBA_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
)


def thread_env(threads: int) -> dict[str, str]:
    """The variables that limit a run to ``threads`` CPU threads (``threads`` >= 1)."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1, not {threads}")
    return dict.fromkeys(THREAD_VARS, str(threads))


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask where the OS has one (a
    container's or ``taskset``'s limit), else every CPU the OS reports; at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS has no sched_getaffinity
        return max(1, os.cpu_count() or 1)


def share_per_job(jobs: int, cpus: int | None = None) -> int:
    """Threads for each of ``jobs`` runs at once on ``cpus`` CPUs (default
    :func:`usable_cpus`): an equal share, at least one."""
    return max(1, (usable_cpus() if cpus is None else cpus) // max(1, jobs))
