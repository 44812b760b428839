"""Type hints of the native module (the Rust core). Use the functions of
:mod:`dyncore`; these are its building blocks."""

__version__: str

class ScenarioError(ValueError):
    """A scenario or sweep that dyncore refuses: ``file:line:col: field: message``."""

def check(path: str, text: str | None = None, sweep: bool = False) -> str: ...
def run(path: str, text: str | None = None, seeds: int = 5, seed: int | None = None, jobs: int | None = None) -> bytes:
    """Parquet bytes of the scenario's table."""
def sweep(path: str, text: str | None = None, jobs: int | None = None) -> bytes:
    """Parquet bytes of the sweep's table (as ``dyncore sweep`` writes it)."""
def sweep_plan(path: str, text: str | None = None) -> tuple[int, int, str]:
    """(points, seeds per point, the base scenario's text)."""
def sweep_point(path: str, text: str, base: str, point: int) -> bytes:
    """Arrow IPC stream of one point's rows, all its seeds."""
def sweep_assemble(path: str, text: str, base: str, points: list[bytes]) -> bytes:
    """Parquet bytes of the table from every point's IPC stream."""

class SweepFolder:
    """A sweep folder (``dyncore sweep --out``), locked while it lives."""
    def todo(self) -> tuple[list[tuple[int, int]], int, str | None]:
        """(units left to run, units kept, why parts of an earlier run run again)."""
    def run_local(self, units: list[tuple[int, int]], jobs: int | None = None) -> int: ...
    def put_parts(self, parts: list[tuple[int, int, bytes]]) -> None: ...
    def finish(self, command: str) -> bytes:
        """Writes the report folder; the Parquet bytes."""
    def base_text(self) -> str: ...
    def folder(self) -> str: ...

def sweep_folder(path: str, text: str | None, out: str, fresh: bool = False) -> SweepFolder: ...
def sweep_point_parts(path: str, text: str, base: str, point: int, seeds: list[int] | None = None, call: str | None = None) -> list[tuple[int, bytes]]:
    """One point's units as ``dyncore sweep``'s part files: [(seed, bytes)]."""
