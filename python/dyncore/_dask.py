"""The Dask engine of :func:`dyncore.sweep`: a task per chunk of points, with
all their seeds, run in the worker's process by the same Rust code; each
task sends back its units' part files (the bytes ``dyncore sweep`` keeps in its parts
folder). Without a sweep folder, the client hands every part to Rust, which
checks each is its unit's, puts the rows in (point, seed) order and writes
the Parquet bytes the local sweep writes, through the same function. With a
sweep folder (``out=``), the client puts the parts in the folder as each
task finishes (:func:`run_into`), so that a sweep whose client dies resumes
from them, with any engine.

A worker needs the ``dyncore`` package installed (the same version as the
client's), nothing else: the sweep file's text and the base scenario's text
travel with each task, so no file has to exist on the workers (machine
profiles that a base names by path excepted). A worker that dies takes its
running and finished-but-ungathered tasks with it; the scheduler runs them
again on another worker (``distributed.scheduler.allowed-failures``, 3 by
default), so no point is lost.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any, Optional

#: Tasks per worker thread. Dask spends about 2 ms on a task (measured: 64
#: empty tasks on a 2-worker local cluster took 0.12 s), as long as one run
#: of a small point, so a task per point would spend half the time on Dask;
#: a few chunks per thread keep that small while the scheduler still
#: balances them and a dead worker loses only its chunks.
TASKS_PER_THREAD = 4


def chunks(points: list, client: Any) -> list:
    """``points`` in chunks, :data:`TASKS_PER_THREAD` per worker thread of
    ``client`` (one point per chunk at most as many chunks as points). A
    chunk takes every n-th point, so that chunks of a grid whose points grow
    in cost along an axis cost about the same."""
    threads = sum(client.nthreads().values()) or 1
    n = max(1, min(len(points), TASKS_PER_THREAD * threads))
    return [points[k::n] for k in range(n)]


def sweep_parquet(path: str, text: Optional[str], client: Any) -> bytes:
    """The sweep's Parquet bytes, its points run as tasks on ``client``."""
    from . import _native

    if client is None:
        raise ValueError('engine="dask" needs client=dask.distributed.Client(...)')
    if text is None:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    points, _seeds, base = _native.sweep_plan(path, text)
    parts = []
    for chunk in client.gather(_submit(client, path, text, base, {p: None for p in range(points)})):
        parts.extend((p, seed, bytes(b)) for p, seed, b in chunk)
    return _native.sweep_assemble(path, text, base, parts)


def _submit(client: Any, path: str, text: str, base: str, seeds_of: dict) -> list:
    """A task per chunk of the points ``seeds_of`` names (point -> its
    seeds to run, None: every seed)."""
    digest = hashlib.sha1((text + "\0" + base).encode()).hexdigest()[:16]
    call = secrets.token_hex(8)
    cs = chunks(sorted(seeds_of), client)
    return client.map(
        run_points_parts,
        [path] * len(cs),
        [text] * len(cs),
        [base] * len(cs),
        cs,
        [[seeds_of[p] for p in c] for c in cs],
        [call] * len(cs),
        key=[f"dyncore-points-{c[0]}-{len(c)}-{hashlib.sha1(repr((c, [seeds_of[p] for p in c])).encode()).hexdigest()[:12]}-{digest}" for c in cs],
    )


def run_points_parts(path: str, text: str, base: str, points: list, seeds: list, call: Optional[str] = None):
    """The units of ``points`` as part files (runs on a worker): [(point,
    seed, bytes)]; ``seeds[i]`` the seeds of ``points[i]`` to run (None:
    every seed of the sweep). ``call``: the client's token for this sweep
    call; a worker loads the sweep once per call, not once per task."""
    from . import _native

    return [
        (p, seed, b)
        for p, ss in zip(points, seeds)
        for seed, b in _native.sweep_point_parts(path, text, base, p, ss, call)
    ]


def run_into(folder: Any, path: str, text: Optional[str], todo: list, client: Any) -> None:
    """Runs the units ``todo`` as tasks of chunks of points on ``client``'s
    cluster, putting each chunk's parts in ``folder`` as its task finishes: a
    client that dies keeps every chunk gathered before it died."""
    from distributed import as_completed

    if client is None:
        raise ValueError('engine="dask" needs client=dask.distributed.Client(...)')
    if text is None:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    base = folder.base_text()
    by_point: dict = {}
    for p, s in todo:
        by_point.setdefault(p, []).append(s)
    for fut in as_completed(_submit(client, path, text, base, by_point)):
        folder.put_parts([(p, seed, bytes(b)) for p, seed, b in fut.result()])
