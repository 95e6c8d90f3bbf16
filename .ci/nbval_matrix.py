"""Run nbval over every chapter on simulated reader machines: `make nbval-matrix`.

Each run forces one OpenBLAS kernel (OPENBLAS_CORETYPE), limits numpy's own SIMD dispatch to
what a CPU of that generation has (NPY_DISABLE_CPU_FEATURES), and sets the thread count of
BLAS and numba. Before a run, a probe in the same environment checks with threadpoolctl that
the kernel and thread count are really in force; a run whose settings did not take fails.
On a machine that is not x86-64 no kernel can be forced: the script says so and varies only
the thread count.

Usage: python .ci/nbval_matrix.py [KERNEL:THREADS ...] -- NOTEBOOK ...
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

# What threadpoolctl reports for each forced kernel (OpenBLAS names Prescott's kernel Katmai).
REPORTED = {"Haswell": "Haswell", "Sandybridge": "Sandybridge", "Prescott": "Katmai"}
# numpy's dispatch targets a CPU of that generation lacks: Haswell has AVX2 and FMA but no
# AVX-512; Sandybridge and Prescott have neither (numpy's baseline, x86-64-v2, stays on).
NO_AVX512 = [
    "AVX512F",
    "AVX512CD",
    "AVX512_SKX",
    "AVX512_CLX",
    "AVX512_CNL",
    "AVX512_ICL",
    "AVX512_SPR",
    "X86_V4",
]
NO_AVX2 = NO_AVX512 + ["AVX2", "FMA3", "X86_V3"]
NUMPY_DISABLED = {"Haswell": NO_AVX512, "Sandybridge": NO_AVX2, "Prescott": NO_AVX2}

PROBE = """
import json, numpy as np, threadpoolctl, numba
from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
np.ones((64, 64)) @ np.ones((64, 64))
blas = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"][0]
print(json.dumps({
    "architecture": blas.get("architecture"), "blas_threads": blas["num_threads"],
    "numba_threads": numba.config.NUMBA_NUM_THREADS,
    "numpy_dispatch": [f for f in __cpu_dispatch__ if __cpu_features__.get(f)],
    "dispatchable": list(__cpu_dispatch__),
}))
"""


def probe(env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"nbval-matrix: the probe failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def environment(kernel: str | None, threads: int, dispatchable: list[str]) -> dict:
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("NPY_DISABLE_CPU_FEATURES", None)
    if kernel is not None:
        env["OPENBLAS_CORETYPE"] = kernel
        disabled = [f for f in NUMPY_DISABLED[kernel] if f in dispatchable]
        if disabled:
            env["NPY_DISABLE_CPU_FEATURES"] = " ".join(disabled)
    return env


def nbval(notebooks: list[str], env: dict) -> int:
    """nbval over ``notebooks`` in ``env``; its exit status."""
    command = [sys.executable, "-m", "pytest", "--nbval", *notebooks]
    command += ["--nbval-sanitize-with", "tests/nbval_sanitize.cfg", "--nbval-cell-timeout=600"]
    return subprocess.run(command + ["-q", "-p", "no:cacheprovider"], env=env).returncode


def run_config(kernel: str, threads: str, x86: bool, dispatchable: list[str], notebooks):
    """One machine of the matrix: probe that its settings are in force, then run nbval.
    Returns (label, probe result, status, seconds)."""
    if kernel not in REPORTED:
        raise SystemExit(f"nbval-matrix: unknown kernel {kernel!r}; one of {list(REPORTED)}")
    env = environment(kernel if x86 else None, int(threads), dispatchable)
    got = probe(env)
    label = f"{kernel if x86 else 'native'}, {threads} thread(s)"
    expected = REPORTED[kernel] if x86 else got["architecture"]
    if got["architecture"] != expected or got["blas_threads"] != int(threads):
        print(
            f"nbval-matrix: {label}: asked for {expected} with {threads} thread(s), "
            f"OpenBLAS reports {got['architecture']} with {got['blas_threads']}"
        )
        return label, got, "settings not in force", 0.0
    print(
        f"\n=== nbval: {label}: OpenBLAS kernel {got['architecture']}, "
        f"{got['blas_threads']} BLAS / {got['numba_threads']} numba thread(s), numpy "
        f"dispatch {got['numpy_dispatch'] or 'baseline only'}",
        flush=True,
    )
    start = time.monotonic()
    code = nbval(notebooks, env)
    status = "passed" if code == 0 else f"FAILED (exit {code})"
    return label, got, status, time.monotonic() - start


def report(results: list) -> int:
    """The summary table; 1 when any machine failed."""
    print("\nnbval-matrix summary")
    for label, got, status, seconds in results:
        print(
            f"  {label:28s} kernel {got['architecture']:12s} numpy "
            f"{'+'.join(got['numpy_dispatch']) or 'baseline':22s} {seconds:6.0f} s  {status}"
        )
    failed = [r for r in results if r[2] != "passed"]
    passed = len(results) - len(failed)
    print(f"nbval-matrix: {passed} passed, {len(failed)} failed")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if "--" not in argv:
        raise SystemExit(__doc__)
    split = argv.index("--")
    configs = [c.split(":") for c in argv[:split]]
    notebooks = argv[split + 1 :]
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    dispatchable = probe(dict(os.environ))["dispatchable"]
    if not x86:
        kernels = sorted({k for k, _ in configs})
        print(
            f"nbval-matrix: {platform.machine()} is not x86-64; OpenBLAS kernels "
            f"{', '.join(kernels)} cannot be forced here. Varying the thread count only."
        )
    results = [run_config(k, t, x86, dispatchable, notebooks) for k, t in configs]
    return report(results)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
