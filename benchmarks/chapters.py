"""The timings behind what the chapters say about speed, measured once and committed.

Run from the repository root::

    python -m benchmarks.chapters --unset-openblas-coretype     # make bench-chapters
    python -m benchmarks.chapters --only loss-grad ov           # some experiments only
    python -m benchmarks.chapters --quick                        # a smoke run, to a temp folder

A chapter never asserts a live timing: how fast a cell runs depends on the reader's machine and
on whatever else it is doing. What a chapter says about speed (a fitted slope, a crossover,
which method is faster at which n) is asserted against these committed results, with the
machine they came from, or against counted operations. The chapters still time the same calls
live, as "on your machine", and print the result next to the committed one without checking it.

The experiments, each the one its chapter runs live (same calls, same inputs, same sizes):

- ``exact-step`` (Chapter 1): :func:`attnlib.forward_backward` with ``kernels="standard"``
  (the materialising algorithm), float64, d = 64, n = 256 ... 4096;
- ``loss-grad`` (Chapter 7): AS24's gradient dL/dX by the materialising numpy core
  (:func:`attnlib.attention_loss_grad`, ``exact``), the compiled tiled kernel
  (:func:`attnlib.flash_attention_loss_grad`, ``flash``) and the almost-linear approximation
  (``pm.approx_attention_loss_grad`` at eps = 1e-3, ``approx``), at d in {4, 6, 8}, on the
  inputs ``pm.sign_loss_inputs(n, d, 0.75, n)`` (logit range exactly 0.5625 at every n), for
  n = 64 ... 2048, 4096 and 16384 respectively;
- ``ov`` (Chapter 8): :func:`attnlib.hardness.brute_force_ov` on random NO instances with
  m = 128, n = 1024 ... 8192;
- ``attention-step`` (Chapter 9): :func:`attnlib.forward_backward` by the three algorithms a
  CPU runs, ``kernels="standard"`` (rows labelled ``exact``), ``"flash"`` and ``"polynomial"``
  (eps = 1e-3), float64, d = 32, at the points where Chapter 9 validates its CPU map;
- ``rates`` (Chapter 9): :func:`attnlib.measure.machine_rates`, one core's float64 matmul rate
  and copy bandwidth, whose ratio is the machine balance of the CPU map, with that core's L2
  cache and the main memory (``sysconf``), the map's fast and slow memory
  (:func:`attnlib.machines.book_cpu_core` reads all three).

Every timing is a round-robin on the CPU clock (the process's CPU time), as
:func:`attnlib.measure.round_robin_times` times the chapters' live cells: a first, untimed call of
each (size, method) sets how many back-to-back calls make one timing last ``min_seconds``; then
every one is timed once per round, for ``--rounds`` rounds, so that a slow spell of the machine
falls on every size alike. Each row records the fastest, the median and the slowest round. The
chapters assert on the fastest: other jobs on a shared machine can only add time (to CPU time
too, through the caches and memory bandwidth they share), so the fastest round is the closest to
the cost of the call itself. Each experiment runs in a fresh process with one thread for BLAS,
OpenMP and numba, set before any import (``OPENBLAS_THREAD_TIMEOUT`` as in
:mod:`benchmarks.attention`);
``--unset-openblas-coretype`` (which ``make bench`` passes) unsets ``OPENBLAS_CORETYPE`` and
``OPENBLAS_L2_SIZE`` in those processes, so that numpy's BLAS runs its fastest kernels.

Results go to ``benchmarks/results/``: ``chapters_time.csv`` (one row per experiment, method
and shape; columns and types in ``schema.json``) and ``chapters_machine.csv`` (the machine, the
workers' thread counts and BLAS kernel, and each experiment's command, date, minutes and load).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .attention import child_env
from .machine import blas_info, machine_info
from .schema import RESULTS, write_csv, write_schema
from .workers import add_openblas_argument

EXPERIMENTS = ("exact-step", "loss-grad", "ov", "attention-step", "rates")

# The sizes each chapter times live (with FULL = False) and asserts its statements on.
EXACT_STEP_SIZES = (256, 512, 1024, 2048, 4096)
EXACT_STEP_D = 64
LOSS_GRAD_DIMS = (4, 6, 8)
LOSS_GRAD_SIZES = {  # method: n = 64 ... 2^k
    "exact": tuple(2**k for k in range(6, 12)),
    "flash": tuple(2**k for k in range(6, 13)),
    "approx": tuple(2**k for k in range(6, 15)),
}
LOSS_GRAD_EPS = 1e-3
LOSS_GRAD_B = 0.75
OV_SIZES = (1024, 2048, 4096, 8192)
OV_M = 128
STEP_D = 32
STEP_POINTS = ((256, 0.1), (2048, 0.1), (512, 0.3), (3072, 0.3))  # (n, B)
STEP_EPS = 1e-3


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", choices=EXPERIMENTS, default=list(EXPERIMENTS))
    p.add_argument("--rounds", type=int, default=9, help="rounds of each round-robin")
    p.add_argument("--quick", action="store_true", help="small sizes, 3 rounds, temp folder")
    add_openblas_argument(p)
    p.add_argument(
        "--calm",
        type=float,
        default=None,
        metavar="LOAD",
        help="before each experiment, wait (up to --calm-minutes) until the 1-minute load "
        "average is below LOAD: on a shared machine, other people's jobs come and go",
    )
    p.add_argument("--calm-minutes", type=float, default=10.0)
    p.add_argument("--out", type=Path, default=None, help="default: benchmarks/results")
    args = p.parse_args(argv)
    if args.out is None:
        args.out = Path(tempfile.gettempdir()) / "attnlib_bench_quick" if args.quick else RESULTS
    if args.quick:
        args.rounds = min(args.rounds, 3)
    args.command = " ".join(["python -m benchmarks.chapters", *(argv or sys.argv[1:])])
    return args


# ---------------------------------------------------------------------------------------
# The workers: one experiment each, in a fresh single-threaded process
# ---------------------------------------------------------------------------------------


def emit(record: dict) -> None:
    print("RESULT " + json.dumps(record), flush=True)


def time_and_emit(experiment: str, calls: dict, shapes: dict, rounds: int, min_seconds=0.02):
    """Time ``calls`` round-robin on the CPU clock (:func:`attnlib.measure.round_robin_samples`)
    and print one row per call: ``calls`` and ``shapes`` are keyed alike, each shape a dict of
    the row's columns (method, dtype, n, d, and B, eps, rank where they apply)."""
    from attnlib.measure import round_robin_samples

    load = os.getloadavg()[0]
    samples, repeats = round_robin_samples(
        calls, rounds=rounds, clock="cpu", min_seconds=min_seconds
    )
    for key, times in samples.items():
        emit(
            {
                "experiment": experiment,
                **shapes[key],
                "clock": "cpu",
                "threads": 1,
                "status": "ok",
                "median_s": statistics.median(times),
                "min_s": min(times),
                "max_s": max(times),
                "rounds": rounds,
                "repeats": repeats[key],
                "load1": round(load, 2),
            }
        )


def worker_exact_step(opts) -> None:
    import functools

    import numpy as np

    import attnlib as al

    standard_step = functools.partial(al.forward_backward, kernels="standard")
    rng = np.random.default_rng(1)
    calls, shapes = {}, {}
    for n in opts["sizes"]:
        args = tuple(rng.standard_normal((n, EXACT_STEP_D)) for _ in range(4))
        calls[n] = (standard_step, args)
        shapes[n] = {"method": "exact", "dtype": "float64", "n": n, "d": EXACT_STEP_D}
    time_and_emit("exact-step", calls, shapes, opts["rounds"])


def worker_loss_grad(opts) -> None:
    import functools

    import attnlib as al
    from attnlib import polymethod as pm

    approx_grad = functools.partial(pm.approx_attention_loss_grad, eps=LOSS_GRAD_EPS)
    sizes = opts["sizes"]
    for d in opts["dims"]:
        args = pm.sign_loss_inputs(256, d, LOSS_GRAD_B, 0)
        al.flash_attention_loss_grad(*args)  # compiled (or loaded) outside the timing
        calls, shapes = {}, {}
        for n in sorted(set().union(*sizes.values())):
            args = pm.sign_loss_inputs(n, d, LOSS_GRAD_B, n)
            _, plan = pm.approx_attention_loss_grad(*args, eps=LOSS_GRAD_EPS, return_plan=True)
            base = {"dtype": "float64", "n": n, "d": d, "B": LOSS_GRAD_B}
            for method, fn in (
                ("approx", approx_grad),
                ("exact", al.attention_loss_grad),
                ("flash", al.flash_attention_loss_grad),
            ):
                if n in sizes[method]:
                    calls[method, n] = (fn, args)
                    shapes[method, n] = {"method": method, **base}
            shapes["approx", n].update(eps=LOSS_GRAD_EPS, rank=plan.rank)
        time_and_emit("loss-grad", calls, shapes, opts["rounds"])


def worker_ov(opts) -> None:
    import numpy as np

    from attnlib import hardness as hd

    hd.brute_force_ov(np.ones((2, 3), bool), np.ones((2, 3), bool))  # compile
    rng = np.random.default_rng(8)  # the instances of Chapter 8
    sizes = opts["sizes"]
    instances = {n: (rng.random((n, OV_M)) < 0.5, rng.random((n, OV_M)) < 0.5) for n in sizes}
    for n, (A, B) in instances.items():  # NO instances: every pair is compared
        assert hd.brute_force_ov(A, B, return_comparisons=True) == (None, n * n)
    calls = {n: (hd.brute_force_ov, instances[n]) for n in sizes}
    shapes = {n: {"method": "brute-force", "dtype": "bool", "n": n, "d": OV_M} for n in sizes}
    # every timing lasts at least 0.2 s, so that a short one is not likelier to miss the load
    time_and_emit("ov", calls, shapes, opts["rounds"], min_seconds=0.2)


def worker_attention_step(opts) -> None:
    import functools

    import numpy as np

    import attnlib as al
    from attnlib import polymethod as pm

    step = {
        "exact": functools.partial(al.forward_backward, kernels="standard"),
        "flash": functools.partial(al.forward_backward, kernels="flash"),
        "polynomial": functools.partial(al.forward_backward, kernels="polynomial", eps=STEP_EPS),
    }
    warm = np.ones((64, STEP_D))
    step["flash"](warm, warm, warm, warm)  # compiled (or loaded) outside the timing
    rng = np.random.default_rng(8)  # the inputs of Chapter 9, drawn in its order
    calls, shapes = {}, {}
    for n, B in opts["points"]:
        c = B / STEP_D**0.25  # entries ±c: AS24's bound B is attained, and R = B² exactly
        Q, K = c * rng.choice([-1.0, 1.0], (n, STEP_D)), c * rng.choice([-1.0, 1.0], (n, STEP_D))
        V, dO = rng.normal(size=(n, STEP_D)), rng.normal(size=(n, STEP_D))
        rank = pm.approx_plan(Q, K, eps=STEP_EPS).rank
        base = {"dtype": "float64", "n": n, "d": STEP_D, "B": B}
        for method, fn in step.items():
            calls[method, n, B] = (fn, (Q, K, V, dO))
            shapes[method, n, B] = {"method": method, **base}
        shapes["polynomial", n, B].update(eps=STEP_EPS, rank=rank)
    time_and_emit("attention-step", calls, shapes, opts["rounds"])


def _l2_bytes() -> int:
    """The L2 cache of the core this process runs on (Linux's sysfs), in bytes."""
    units = {"K": 2**10, "M": 2**20}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        if (index / "level").read_text().strip() == "2":
            size = (index / "size").read_text().strip()
            return int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
    raise SystemExit("benchmarks.chapters: this machine reports no L2 cache in sysfs")


def worker_rates(opts) -> None:
    from attnlib import measure

    flops_s, words_s = measure.machine_rates()
    # the rest of the CPU map's machine: one core's L2 (the fast memory) and the main memory
    l2 = _l2_bytes()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    emit(
        {
            "kind": "rates",
            "flops_per_s": flops_s,
            "words_per_s": words_s,
            "l2_bytes": l2,
            "memory_bytes": memory,
        }
    )


WORKERS = {
    "exact-step": worker_exact_step,
    "loss-grad": worker_loss_grad,
    "ov": worker_ov,
    "attention-step": worker_attention_step,
    "rates": worker_rates,
}


def worker(kind: str, opts: dict) -> None:
    """Run one experiment in this process, after reporting its threads and BLAS kernel."""
    import numba

    emit({"kind": "threads", "numba_threads": numba.get_num_threads(), **blas_info()})
    WORKERS[kind](opts)


# ---------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------


def plan(args, experiment: str) -> dict:
    """The options of one experiment's worker: its sizes (a prefix with --quick) and rounds."""
    quick = args.quick
    opts: dict = {"rounds": args.rounds}
    if experiment == "exact-step":
        opts["sizes"] = list(EXACT_STEP_SIZES[:3] if quick else EXACT_STEP_SIZES)
    elif experiment == "loss-grad":
        opts["dims"] = list(LOSS_GRAD_DIMS[:1] if quick else LOSS_GRAD_DIMS)
        opts["sizes"] = {m: list(ns[:4] if quick else ns) for m, ns in LOSS_GRAD_SIZES.items()}
    elif experiment == "ov":
        opts["sizes"] = list(OV_SIZES[:3] if quick else OV_SIZES)
    elif experiment == "attention-step":
        opts["points"] = [list(p) for p in (STEP_POINTS[:2] if quick else STEP_POINTS)]
    return opts


def wait_for_calm(args) -> float:
    """With ``--calm LOAD``: wait until the 1-minute load average is below LOAD, or
    ``--calm-minutes`` have passed; the minutes waited."""
    t0 = time.time()
    while args.calm is not None and os.getloadavg()[0] >= args.calm:
        if time.time() - t0 > 60 * args.calm_minutes:
            print(f"  the load stayed at or above {args.calm}: measuring anyway", flush=True)
            break
        time.sleep(10)
    return (time.time() - t0) / 60


def run_experiment(experiment: str, args, info: dict) -> list[dict]:
    """Run one experiment's worker in a fresh one-thread process; its rows, and its keys of
    chapters_machine.csv (threads, BLAS kernel, command, date, minutes, load)."""
    waited = wait_for_calm(args)
    t0, load0 = time.time(), os.getloadavg()[0]
    cmd = [sys.executable, "-m", "benchmarks.chapters", "worker", experiment]
    cmd.append(json.dumps(plan(args, experiment)))
    root = Path(__file__).resolve().parent.parent
    env = child_env(1, args)
    proc = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, check=False)
    rows = []
    for line in proc.stdout.splitlines():
        if not line.startswith("RESULT "):
            continue
        r = json.loads(line[7:])
        kind = r.pop("kind", None)
        if kind == "threads":
            for k, v in r.items():
                info[f"{experiment}_{k}"] = str(v)
        elif kind == "rates":
            info["rates_flops_per_s"] = f"{r['flops_per_s']:.4g}"
            info["rates_words_per_s"] = f"{r['words_per_s']:.4g}"
            info["rates_flops_per_word"] = f"{r['flops_per_s'] / r['words_per_s']:.3g}"
            info["rates_l2_bytes"] = str(r["l2_bytes"])
            info["rates_memory_bytes"] = str(r["memory_bytes"])
        else:
            rows.append(r)
            print(
                f"  {experiment:15s} {_label(r)} fastest {r['min_s'] * 1e3:9.3f} ms, median "
                f"{r['median_s'] * 1e3:9.3f} ms",
                flush=True,
            )
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no message"]
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"benchmarks.chapters: {experiment} failed: {tail[0][:300]}")
    info[f"{experiment}_command"] = args.command
    info[f"{experiment}_date"] = time.strftime("%Y-%m-%d")
    info[f"{experiment}_minutes"] = f"{(time.time() - t0) / 60:.1f}"
    # with --calm, the minutes this experiment waited for the load to fall below it
    info[f"{experiment}_calm_load"] = "not asked" if args.calm is None else f"{args.calm:g}"
    info[f"{experiment}_calm_minutes_waited"] = f"{waited:.1f}"
    info[f"{experiment}_load1_at_start"] = f"{load0:.2f}"
    info[f"{experiment}_load1_at_end"] = f"{os.getloadavg()[0]:.2f}"
    return rows


def _label(r: dict) -> str:
    text = f"{r['method']:11s} n={r['n']:6d} d={r['d']:3d}"
    if r.get("B") is not None:
        text += f" B={r['B']:g}"
    if r.get("rank") is not None:
        text += f" rank={r['rank']}"
    return text


def _read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    write_schema(args.out)
    # Keep what an experiment skipped this time measured before, unless the machine changed.
    info = {r["key"]: r["value"] for r in _read(args.out / "chapters_machine.csv")}
    rows = [r for r in _read(args.out / "chapters_time.csv") if r["experiment"] not in args.only]
    now = machine_info()
    if any(info.get(k) not in (None, now[k]) for k in ("cpu", "logical_cores")):
        print("A different machine: the earlier results are dropped.")
        info, rows = {}, []
    info.update({k: v for k, v in now.items() if not k.startswith("torch")})  # not used here
    info["workers_OPENBLAS_THREAD_TIMEOUT"] = child_env(1, args)["OPENBLAS_THREAD_TIMEOUT"]
    if args.unset_openblas_coretype:  # what the workers saw, not this process
        info["OPENBLAS_CORETYPE"] = info["OPENBLAS_L2_SIZE"] = "unset in the workers"
    elif info["OPENBLAS_CORETYPE"] != "unset":
        print(
            f"Note: OPENBLAS_CORETYPE={info['OPENBLAS_CORETYPE']} is set and slows numpy's "
            "BLAS; rerun with --unset-openblas-coretype to benchmark numpy at full speed."
        )
    for experiment in EXPERIMENTS:
        if experiment in args.only:
            print(f"{experiment} ...", flush=True)
            rows += run_experiment(experiment, args, info)
            # written after each experiment, so that an interrupted run keeps what it measured
            write_csv(args.out / "chapters_time.csv", rows)
            write_csv(
                args.out / "chapters_machine.csv",
                [{"key": k, "value": v} for k, v in info.items()],
            )
    print(f"results in {args.out} ({(time.time() - started) / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        worker(sys.argv[2], json.loads(sys.argv[3]))
    else:
        raise SystemExit(main())
