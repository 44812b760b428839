"""Points per second of one sweep through every engine, in one run: the
`dyncore sweep` command with --jobs 1 and 2 (if DYNCORE_BIN names it), the
Python package's local engine with jobs=1 and 2, and the Dask engine on a
LocalCluster of 2 single-threaded worker processes. Each is checked to give
the same table as the first; ratios are to the local jobs=1 run measured in
this same run (the machine's load changes between runs, not within one).

    DYNCORE_BIN=target/release/dyncore python python/examples/bench_engines.py [SWEEP] [--repeat N]

Prints a Markdown table for docs/results.md.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import subprocess
import tempfile
import time

import pandas as pd

import dyncore
from dyncore import _dask, _native

ROOT = pathlib.Path(__file__).resolve().parents[2]


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sweep", nargs="?", default=str(ROOT / "sweeps/newtos-tcp-speed.toml"))
    ap.add_argument("--repeat", type=int, default=1, help="take the best of N runs of each engine")
    a = ap.parse_args()
    path = os.path.abspath(a.sweep)
    text = pathlib.Path(path).read_text()
    points, seeds, _ = _native.sweep_plan(path, text)
    rows: list[tuple[str, float]] = []
    reference = None

    def record(name: str, run) -> None:
        nonlocal reference
        best = None
        for _ in range(a.repeat):
            secs, parquet = timed(run)
            best = secs if best is None else min(best, secs)
        if reference is None:
            reference = parquet
        assert parquet == reference, f"{name}: another table than the first engine's"
        rows.append((name, best))
        print(f"{name:<34} {best:7.2f} s  {points / best:6.2f} points/s", flush=True)

    binary = os.environ.get("DYNCORE_BIN")
    with tempfile.TemporaryDirectory() as tmp:
        for jobs in (1, 2):
            if binary:
                out = pathlib.Path(tmp) / f"cli{jobs}"

                def cli(jobs=jobs, out=out):
                    subprocess.run(
                        [binary, "sweep", "--fresh", "--quiet", "--jobs", str(jobs), "--out", str(out), path],
                        check=True,
                        stdout=subprocess.DEVNULL,
                    )
                    name = next(p for p in out.iterdir() if p.name.startswith("sweep-"))
                    return (name / "results.parquet").read_bytes()

                record(f"dyncore sweep --jobs {jobs}", cli)
        for jobs in (1, 2):
            record(f"python, local engine, jobs={jobs}", lambda jobs=jobs: _native.sweep(path, text, jobs))
        from dask.distributed import Client, LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            with Client(cluster) as client:
                client.run(lambda: __import__("dyncore") and None)  # every worker has imported the package
                record("python, Dask engine, 2 workers", lambda: _dask.sweep_parquet(path, text, client))
    base = next(s for n, s in rows if n.startswith("python, local engine, jobs=1"))
    print()
    print(f"Sweep `{pathlib.Path(path).relative_to(ROOT) if path.startswith(str(ROOT)) else path}`: "
          f"{points} points × {seeds} seeds; {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at the end; best of {a.repeat}.")
    print()
    print("| engine | wall time (s) | points/s | × local jobs=1 |")
    print("|---|---:|---:|---:|")
    for name, secs in rows:
        print(f"| {name} | {secs:.2f} | {points / secs:.2f} | {base / secs:.2f} |")


if __name__ == "__main__":
    pd.options.display.width = 120
    main()
