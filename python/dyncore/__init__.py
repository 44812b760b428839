"""dyncore from Python: run scenarios and design-space sweeps of the
deterministic simulator and get their results as pandas DataFrames.

* :func:`run` runs one scenario (a file, or TOML text) with several seeds.
* :func:`sweep` runs a grid of a scenario's fields (or a sweep file), on all
  local cores or on a Dask cluster (``engine="dask"``); the DataFrame is the
  table ``dyncore sweep`` writes as ``results.parquet``, row for row.
* :func:`check` validates a scenario or a sweep and raises
  :class:`ScenarioError` with the command's ``file:line:col: field: message``.

Everything runs in the Rust core (``dyncore._native``); the same scenario
and seeds give the same numbers as ``dyncore run`` and ``dyncore sweep``.
"""

from __future__ import annotations

import io
import math
import os
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from . import _native
from ._native import ScenarioError

__all__ = ["Results", "ScenarioError", "check", "run", "sweep", "sweep_file_text", "__version__"]
__version__ = _native.__version__

PathOrToml = Union[str, "os.PathLike[str]"]


def _source(path_or_toml: PathOrToml, name: str) -> tuple[str, Optional[str]]:
    """(path, text): a path to read, or TOML text named ``name`` in errors."""
    s = os.fspath(path_or_toml)
    if os.path.exists(s):
        return os.path.abspath(s), None
    if "\n" in s or "=" in s:
        return os.path.join(os.getcwd(), name), s
    return s, None


def _table(parquet: bytes):
    import pyarrow.parquet as pq

    return pq.read_table(io.BytesIO(parquet))


class Results:
    """The results of :func:`run`: a row per seed × run × series.

    Attributes:
        table: the rows as a ``pyarrow.Table`` (columns ``point`` (0),
            ``seed``, ``run``, ``series``, then the figures).
        seeds: the seeds that ran, in order.
        runs: the runs' labels, in the scenario's order.
    """

    def __init__(self, table) -> None:
        self.table = table
        self.seeds: list[int] = sorted(set(table.column("seed").to_pylist()))
        runs: list[str] = []
        for r in table.column("run").to_pylist():
            if r not in runs:
                runs.append(r)
        self.runs = runs

    def to_pandas(self):
        """The rows as a pandas DataFrame (without the ``point`` column)."""
        return self.table.drop_columns(["point"]).to_pandas()

    def __len__(self) -> int:
        return self.table.num_rows

    def __repr__(self) -> str:
        return f"<dyncore.Results: {len(self.runs)} runs × {len(self.seeds)} seeds, {self.table.num_rows} rows>"


def check(path_or_toml: PathOrToml, *, sweep: Optional[bool] = None) -> str:
    """Validates a scenario or sweep (a path, or TOML text).

    Returns one line describing it (``"ok  path  (name: 3 runs)"``). Raises
    :class:`ScenarioError` whose message is ``file:line:col: field: what is
    accepted; found X``. ``sweep`` defaults to whether the TOML has a
    top-level ``base`` key (a sweep file).
    """
    path, text = _source(path_or_toml, "<scenario>")
    if sweep is None:
        body = text if text is not None else _read(path)
        sweep = _is_sweep(body)
    return _native.check(path, text, sweep)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def _is_sweep(text: str) -> bool:
    return any(line.split("=")[0].strip() == "base" for line in text.splitlines() if "=" in line and not line.startswith((" ", "\t", "#", "[")))


def run(path_or_toml: PathOrToml, seeds: int = 5, *, seed: Optional[int] = None, jobs: Optional[int] = None) -> Results:
    """Runs one scenario with ``seeds`` seeds (from its ``seed``, or ``seed``).

    Args:
        path_or_toml: a scenario file, or its TOML text.
        seeds: how many seeds each run is run with.
        seed: the first seed (default: the scenario's).
        jobs: worker threads (default: every CPU).

    Returns:
        :class:`Results`; ``.to_pandas()`` gives the DataFrame.

    Raises:
        ScenarioError: the scenario does not load.
    """
    path, text = _source(path_or_toml, "<scenario>")
    return Results(_table(_native.run(path, text, seeds, seed, jobs)))


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"a sweep value must be finite; found {v}")
        r = repr(v)
        return r if any(c in r for c in ".en") else r + ".0"
    if isinstance(v, str):
        import json

        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if hasattr(v, "item"):  # numpy scalars
        return _toml_value(v.item())
    raise TypeError(f"a sweep value must be a number, string, boolean, list or dict; found {type(v).__name__}")


def _toml_key(k: str) -> str:
    import json

    return json.dumps(str(k), ensure_ascii=False)


def sweep_file_text(
    base: PathOrToml,
    grid: Optional[Mapping[str, Sequence[Any]]] = None,
    *,
    zip: Optional[Mapping[str, Sequence[Any]]] = None,
    seeds: int = 5,
    seed: Optional[int] = None,
    runs: Optional[Iterable[str]] = None,
    name: str = "python",
) -> str:
    """The sweep file (TOML) that :func:`sweep` runs for these arguments."""
    lines = [f"name = {_toml_value(name)}", f"base = {_toml_value(os.path.abspath(os.fspath(base)))}", f"seeds = {int(seeds)}"]
    if seed is not None:
        lines.append(f"seed = {int(seed)}")
    if runs is not None:
        lines.append(f"runs = {_toml_value(list(runs))}")
    for table, fields in (("grid", grid), ("zip", zip)):
        if fields:
            lines.append(f"[{table}]")
            lines.extend(f"{_toml_key(k)} = {_toml_value(list(v))}" for k, v in fields.items())
    return "\n".join(lines) + "\n"


def sweep(
    base: PathOrToml,
    grid: Optional[Mapping[str, Sequence[Any]]] = None,
    seeds: int = 5,
    jobs: Optional[int] = None,
    *,
    zip: Optional[Mapping[str, Sequence[Any]]] = None,
    runs: Optional[Iterable[str]] = None,
    seed: Optional[int] = None,
    engine: str = "local",
    client: Any = None,
    out: Optional[PathOrToml] = None,
    fresh: bool = False,
):
    """Runs a design-space sweep and returns its table as a pandas DataFrame.

    Either a sweep file (``sweep("sweeps/tax-vs-node.toml")``: ``base`` is
    its path and ``grid`` is None), or a base scenario and a grid::

        sweep("scenarios/fig7-underprovisioned.toml",
              {"run.*.workload.*.tax": [0.01, 1, 100]}, runs=["DB tax 1"])

    Args:
        base: the base scenario file, or a sweep file when ``grid`` is None.
        grid: field path → values; the cartesian product of them.
        seeds: seeds per point.
        jobs: local worker threads (default: every CPU).
        zip: field path → values, paired (one axis, after the grid's).
        runs: keep only the base's runs with these labels.
        seed: the first seed (default: the base's).
        engine: ``"local"`` (threads in this process) or ``"dask"`` (a task
            per point with all its seeds, on ``client``'s cluster).
        client: a ``dask.distributed.Client`` for ``engine="dask"``.
        out: a sweep folder, as ``dyncore sweep --out``: every finished run is
            kept there as it finishes (the command's part files, keyed on the
            point's scenario, the files it reads, the build and the seed), so
            a sweep whose client dies resumes where it stopped, with any
            engine or the command; the table is also written there
            (``sweep-NAME/results.parquet``, the same bytes), with the
            command's summary. Without ``out``, nothing is kept.
        fresh: with ``out``, drop the runs kept by earlier sweeps first.

    Returns:
        The table, a row per point × seed × run × series: ``point``,
        ``seed``, ``run``, ``series``, a column per swept field, a column per
        figure; equal to ``dyncore sweep``'s ``results.parquet``.

    Raises:
        ScenarioError: the sweep or one of its points does not validate.
    """
    if grid is None and zip is None:
        path, text = _source(base, "<sweep>")
    else:
        path, text = os.path.join(os.getcwd(), "<sweep>"), sweep_file_text(
            base, grid, zip=zip, seeds=seeds, seed=seed, runs=runs
        )
    if engine not in ("local", "dask"):
        raise ValueError(f'engine: expected "local" or "dask"; found {engine!r}')
    if out is not None:
        return _table(_sweep_into(path, text, os.fspath(out), engine, jobs, client, fresh)).to_pandas()
    if engine == "local":
        return _table(_native.sweep(path, text, jobs)).to_pandas()
    from ._dask import sweep_parquet

    return _table(sweep_parquet(path, text, client)).to_pandas()


def _sweep_into(path: str, text: Optional[str], out: str, engine: str, jobs, client, fresh: bool) -> bytes:
    """A sweep into folder ``out``, resuming what it holds; the Parquet bytes."""
    import sys

    folder = _native.sweep_folder(path, text, out, fresh)
    todo, kept, stale = folder.todo()
    if stale:
        print(stale, file=sys.stderr)
    if todo:
        if engine == "local":
            folder.run_local(todo, jobs)
        else:
            from ._dask import run_into

            run_into(folder, path, text, todo, client)
    how = f"dyncore.sweep(..., out={out!r}, engine={engine!r})"
    if kept:
        how += f"  # {kept} runs kept from an earlier sweep"
    return folder.finish(how)
