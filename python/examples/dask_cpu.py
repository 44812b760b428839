"""Where the Dask engine's CPU goes: one sweep on a LocalCluster of 2
single-threaded worker processes, with the CPU time (user + system, from
getrusage) of the client process (which runs the scheduler and the nannies
too) and of each worker, measured around each sweep; and their CPU at idle.
Compare the workers' sum with `dyncore sweep --jobs 2`'s user + system time
on the same sweep file (`/usr/bin/time`).

    python python/examples/dask_cpu.py SWEEP [--rounds N]
"""

from __future__ import annotations

import argparse
import importlib
import resource
import tempfile
import time


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import pandas  # noqa: F401  (imported at the first sweep of a session)
    import pyarrow.parquet  # noqa: F401
    from dask.distributed import Client, LocalCluster

    import dyncore

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            client.wait_for_workers(2)
            client.run(importlib.import_module, "dyncore._dask")
            time.sleep(1)
            w0, c0 = client.run(cpu), cpu()
            time.sleep(2)
            w1, c1 = client.run(cpu), cpu()
            idle = [round((w1[k] - w0[k]) / 2, 3) for k in w0]
            print(f"idle, CPU s per s: workers {idle}, client {(c1 - c0) / 2:.3f}")
            with tempfile.TemporaryDirectory() as out:
                for _ in range(args.rounds):
                    w0, c0, t0 = client.run(cpu), cpu(), time.monotonic()
                    dyncore.sweep(args.sweep, engine="dask", client=client, out=out, fresh=True)
                    t1, c1, w1 = time.monotonic(), cpu(), client.run(cpu)
                    workers = [round(w1[k] - w0[k], 3) for k in w0]
                    print(f"sweep: wall {t1 - t0:.3f} s; CPU s: client {c1 - c0:.3f}, workers {workers}")


if __name__ == "__main__":
    main()
