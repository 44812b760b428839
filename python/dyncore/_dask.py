"""The Dask engine of :func:`dyncore.sweep`: a task per point, with all its
seeds, run in the worker's process by the same Rust code; each task sends
back its units' part files (the bytes ``dyncore sweep`` keeps in its parts
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
from typing import Any, Optional


def sweep_parquet(path: str, text: Optional[str], client: Any) -> bytes:
    """The sweep's Parquet bytes, its points run as tasks on ``client``."""
    from . import _native

    if client is None:
        raise ValueError('engine="dask" needs client=dask.distributed.Client(...)')
    if text is None:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    points, _seeds, base = _native.sweep_plan(path, text)
    digest = hashlib.sha1((text + "\0" + base).encode()).hexdigest()[:16]
    futures = client.map(
        run_point_parts,
        [path] * points,
        [text] * points,
        [base] * points,
        list(range(points)),
        [None] * points,
        key=[f"dyncore-point-{i}-{digest}" for i in range(points)],
    )
    per_point = client.gather(futures)
    parts = [(p, seed, bytes(b)) for p, units in enumerate(per_point) for seed, b in units]
    return _native.sweep_assemble(path, text, base, parts)


def run_point_parts(path: str, text: str, base: str, point: int, seeds: Optional[list]):
    """One point's units as part files (runs on a worker): [(seed, bytes)];
    ``seeds`` None: every seed of the sweep."""
    from . import _native

    return _native.sweep_point_parts(path, text, base, point, seeds)


def run_into(folder: Any, path: str, text: Optional[str], todo: list, client: Any) -> None:
    """Runs the units ``todo`` as a task per point on ``client``'s cluster,
    putting each point's parts in ``folder`` as its task finishes: a client
    that dies keeps every point gathered before it died."""
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
    digest = hashlib.sha1((text + "\0" + base).encode()).hexdigest()[:16]
    points = sorted(by_point)
    futures = client.map(
        run_point_parts,
        [path] * len(points),
        [text] * len(points),
        [base] * len(points),
        points,
        [by_point[p] for p in points],
        key=[f"dyncore-parts-{p}-{'-'.join(map(str, by_point[p]))}-{digest}" for p in points],
    )
    point_of = {f.key: p for f, p in zip(futures, points)}
    for fut in as_completed(futures):
        p = point_of[fut.key]
        folder.put_parts([(p, seed, bytes(b)) for seed, b in fut.result()])
