"""The Dask engine: the same table as the local sweep, byte for byte, and a
killed worker's points run again, not lost."""

import os
import signal
import threading
import time

import pytest

distributed = pytest.importorskip("dask.distributed")

import dyncore  # noqa: E402
from dyncore import _dask, _native  # noqa: E402

from conftest import small_sweep_text  # noqa: E402

PATH = os.path.join(os.getcwd(), "<sweep>")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def test_dask_gives_the_local_sweeps_bytes(client):
    text = small_sweep_text()
    assert _dask.sweep_parquet(PATH, text, client) == _native.sweep(PATH, text, 2)
    df = dyncore.sweep(
        os.path.join(os.path.dirname(__file__), "..", "..", "scenarios/newtos/governors.toml"),
        {"run.*.cpu.0.mhz": [1600, 800]},
        seeds=2,
        runs=["menu 1600/600"],
        engine="dask",
        client=client,
    )
    assert len(df) == 4 and list(df["point"]) == [0, 0, 1, 1]


def test_a_killed_workers_points_run_again(client):
    # Longer runs, so that the kill comes while points are running.
    text = small_sweep_text(seeds=3, duration_ms=200)
    local = _native.sweep(PATH, text, 2)
    result = {}

    def go():
        result["bytes"] = _dask.sweep_parquet(PATH, text, client)

    t = threading.Thread(target=go)
    t.start()
    pids = client.run(os.getpid)
    victim = None
    deadline = time.time() + 120
    while victim is None and time.time() < deadline and t.is_alive():
        busy = [w for w, keys in client.processing().items() if any(str(k).startswith("dyncore-points-") for k in keys)]
        if busy and len(busy) == len(pids):
            victim = busy[0]
        time.sleep(0.05)
    assert victim is not None, "no point was running on both workers"
    os.kill(pids[victim], signal.SIGKILL)
    t.join(timeout=300)
    assert not t.is_alive(), "the sweep did not finish after a worker was killed"
    assert result["bytes"] == local, "every point came back, the same as the local sweep"
    # The killed worker is gone (its nanny starts a new process).
    assert pids[victim] not in client.run(os.getpid).values()
