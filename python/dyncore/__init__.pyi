import os
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

import pandas
import pyarrow

from ._native import ScenarioError as ScenarioError

__version__: str
PathOrToml = Union[str, os.PathLike[str]]

class Results:
    table: pyarrow.Table
    seeds: list[int]
    runs: list[str]
    def __init__(self, table: pyarrow.Table) -> None: ...
    def to_pandas(self) -> pandas.DataFrame: ...
    def __len__(self) -> int: ...

def check(path_or_toml: PathOrToml, *, sweep: Optional[bool] = None) -> str: ...
def run(path_or_toml: PathOrToml, seeds: int = 5, *, seed: Optional[int] = None, jobs: Optional[int] = None) -> Results: ...
def sweep_file_text(
    base: PathOrToml,
    grid: Optional[Mapping[str, Sequence[Any]]] = None,
    *,
    zip: Optional[Mapping[str, Sequence[Any]]] = None,
    seeds: int = 5,
    seed: Optional[int] = None,
    runs: Optional[Iterable[str]] = None,
    name: str = "python",
) -> str: ...
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
) -> pandas.DataFrame: ...
