"""Probes of the machine the benchmark runs on: CPU, memory, library versions, numpy's BLAS
and the BLAS of attnlib's tiles (library, kernel, threads), and this process's resident
memory (current and peak, Linux).

Used by the driver (:mod:`benchmarks.attention`, for ``machine.csv``) and the workers
(:mod:`benchmarks.workers`).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path


def _belongs_to(pool: dict, package: str) -> bool:
    """Whether the library of a threadpoolctl ``pool`` was installed with ``package``: its file
    lies in the package's folder or in the ``<package>.libs`` folder its wheel ships."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin or not pool.get("filepath"):
        return False
    root = Path(spec.origin).resolve().parent
    path = Path(pool["filepath"]).resolve()
    return any(path.is_relative_to(folder) for folder in (root, root.parent / f"{package}.libs"))


def blas_info() -> dict:
    """numpy's BLAS (library, kernel, thread count), and the BLAS that attnlib's compiled
    kernels call for their tile products (SciPy's, when SciPy is loaded), by threadpoolctl.

    numpy and SciPy wheels each ship their own OpenBLAS, and a process that imports attnlib
    loads both: numpy's runs the exact core and numpy's matmul, SciPy's runs the tiles of
    ``flash_*``. Which one threadpoolctl lists first depends on the order of loading, so each
    is picked by the folder its file lies in, never by its position in the list."""
    from threadpoolctl import threadpool_info

    pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]

    def describe(pool, prefix):
        if pool is None:
            return {f"{prefix}_{k}": "not loaded" for k in ("threads", "kernel", "library")}
        return {
            f"{prefix}_threads": str(pool.get("num_threads")),
            f"{prefix}_kernel": str(pool.get("architecture")),
            f"{prefix}_library": f"{pool.get('internal_api')} {pool.get('version')}",
        }

    numpy_pool = next((p for p in pools if _belongs_to(p, "numpy")), pools[0] if pools else None)
    tiles_pool = next((p for p in pools if _belongs_to(p, "scipy")), None)
    return {
        **describe(numpy_pool, "blas"),
        **describe(tiles_pool, "tiles_blas"),
        "blas_libraries_loaded": str(len(pools)),
    }


def machine_info() -> dict:
    import numba
    import numpy as np

    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    isa = "unknown"  # the widest vector instructions the CPU offers (x86 Linux)
    try:
        flags = next(
            set(line.split(":", 1)[1].split())
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("flags")
        )
        isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "other"
    except (OSError, StopIteration):
        pass
    mem = "unknown"
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    info = {
        "cpu": cpu,
        "cpu_vector_isa": isa,
        "logical_cores": str(os.cpu_count()),
        "memory": mem,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "unset"),
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE", "unset"),
    }
    info.update(blas_info())
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except ImportError:
        info["torch"] = "not installed"
    return info


def rss_now() -> int:
    """Current resident set size in bytes (Linux)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def reset_peak_rss() -> bool:
    """Reset this process's peak RSS (VmHWM) to its current RSS; Linux >= 4.0 only.

    ``ru_maxrss`` alone is not enough: Linux carries the parent's peak over ``fork`` and
    ``exec``, so a worker started by a large parent would report the parent's peak.
    """
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss() -> int:
    """Peak RSS of this process in bytes: VmHWM, or ru_maxrss where /proc is missing."""
    import resource

    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
