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
