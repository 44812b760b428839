"""A sweep folder (``out=``) keeps every run as it finishes, so a sweep whose
client is killed midway resumes with any engine or the command: the runs
kept are not run again (their part files are untouched), and the table is
the fresh sweep's, byte for byte."""

import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

import dyncore
from dyncore import _native

from conftest import small_sweep_text

UNITS = 8 * 3  # 8 points × 3 seeds


def _parts(out: pathlib.Path, name: str) -> dict:
    d = out / f".sweep-{name}.parts"
    return {p.name: p.stat().st_mtime_ns for p in d.glob("*.json")} if d.exists() else {}


def _kill_midway(code: str, out: pathlib.Path, name: str, timeout: float = 300) -> dict:
    """Runs ``code`` in a child Python (a session of its own, so its Dask
    workers go with it) and kills the whole session with SIGKILL once a
    run's part is in ``out``; the parts kept then."""
    child = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    deadline = time.time() + timeout
    while time.time() < deadline and child.poll() is None and not _parts(out, name):
        time.sleep(0.01)
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()
    return _parts(out, name)


def _sweep_file(tmp_path: pathlib.Path) -> pathlib.Path:
    f = tmp_path / "resume.toml"
    # Runs long enough that the kill comes midway.
    f.write_text(small_sweep_text(seeds=3, duration_ms=200))
    return f


def _check_resumed(out: pathlib.Path, f: pathlib.Path, kept: dict) -> None:
    assert 0 < len(kept) < UNITS, f"the kill did not come midway: {len(kept)} of {UNITS} runs kept"
    after = _parts(out, "resume")
    assert len(after) == UNITS
    assert all(after[k] == t for k, t in kept.items()), "a run kept by the killed client was run again"
    fresh = _native.sweep(str(f), None, 2)
    assert (out / "sweep-resume" / "results.parquet").read_bytes() == fresh, "the resumed table is the fresh one"


def test_a_killed_local_client_resumes_with_the_same_bytes(tmp_path):
    f = _sweep_file(tmp_path)
    out = tmp_path / "out"
    kept = _kill_midway(f"import dyncore; dyncore.sweep({str(f)!r}, out={str(out)!r}, jobs=1)", out, "resume")
    assert not (out / "sweep-resume").exists(), "no table from a killed sweep"
    df = dyncore.sweep(str(f), out=str(out), jobs=2)
    assert len(df) == UNITS
    _check_resumed(out, f, kept)


def test_the_command_resumes_a_folder_python_began(tmp_path):
    exe = os.environ.get("DYNCORE_BIN")
    if not exe:
        pytest.skip("DYNCORE_BIN is not set (.ci/python sets it to the dyncore command)")
    f = _sweep_file(tmp_path)
    out = tmp_path / "out"
    kept = _kill_midway(f"import dyncore; dyncore.sweep({str(f)!r}, out={str(out)!r}, jobs=1)", out, "resume")
    r = subprocess.run([exe, "sweep", str(f), "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert f"({len(kept)} done by an earlier run, kept)" in r.stderr, r.stderr
    _check_resumed(out, f, kept)


def test_a_killed_dask_client_resumes_with_the_same_bytes(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    f = _sweep_file(tmp_path)
    out = tmp_path / "out"
    code = (
        "import dyncore, distributed\n"
        "if __name__ == '__main__':\n"
        "    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,"
        " dashboard_address=None, silence_logs=40)\n"
        "    client = distributed.Client(cluster)\n"
        f"    dyncore.sweep({str(f)!r}, out={str(out)!r}, engine='dask', client=client)\n"
    )
    kept = _kill_midway(code, out, "resume")
    assert not (out / "sweep-resume").exists(), "no table from a killed sweep"
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
    )
    with distributed.Client(cluster) as client:
        df = dyncore.sweep(str(f), out=str(out), engine="dask", client=client)
    cluster.close()
    assert len(df) == UNITS
    _check_resumed(out, f, kept)
    # And the local engine, on the finished folder, runs nothing.
    before = _parts(out, "resume")
    dyncore.sweep(str(f), out=str(out))
    assert _parts(out, "resume") == before
