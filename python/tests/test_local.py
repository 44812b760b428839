"""dyncore.run, dyncore.sweep (local) and dyncore.check."""

import os
import shutil
import subprocess

import pandas as pd
import pytest

import dyncore
from dyncore import _native

from conftest import small_sweep_text


def test_run_returns_a_row_per_seed_run_and_series(root):
    res = dyncore.run(str(root / "scenarios/newtos/governors.toml"), seeds=2)
    df = res.to_pandas()
    assert res.seeds == [1, 2]
    assert len(res.runs) == 12 and res.runs[0] == "menu 2267/2267"
    assert len(df) == 2 * 12
    assert list(df.columns[:3]) == ["seed", "run", "series"]
    assert (df["mbps"] > 0).all() and (df["power_w"] > 0).all()
    # Deterministic: the same scenario and seeds give the same numbers.
    pd.testing.assert_frame_equal(df, dyncore.run(str(root / "scenarios/newtos/governors.toml"), seeds=2).to_pandas())


def test_run_takes_toml_text_and_a_chameleon_scenario(root):
    text = (root / "scenarios/fig3-taxation.toml").read_text()
    df = dyncore.run(text, seeds=1).to_pandas()
    assert {"speedup", "fused_share", "run_energy_j"} <= set(df.columns)
    assert df["speedup"].notna().any()


def test_check_raises_with_the_commands_message():
    bad = 'name = "x"\ntitle = "t"\n[[run]]\nlabel = "a"\nmachine = "dynamic"\npolcy = "chameleon"\n'
    with pytest.raises(dyncore.ScenarioError) as e:
        dyncore.check(bad)
    msg = str(e.value)
    assert "<scenario>:6:1: run[0].polcy: unknown field" in msg, msg
    assert isinstance(e.value, ValueError)


def test_check_of_a_sweep_points_at_the_sweep_file(tmp_path, root):
    text = small_sweep_text().replace('"run.*.cpu.0.mhz"', '"run.*.cpus.0.mhz"')
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(dyncore.ScenarioError, match=r"bad\.toml:6:\d+: grid\.\"run\.\*\.cpus\.0\.mhz\": not a field"):
        dyncore.check(str(path))
    assert dyncore.check(str(root / "sweeps/tax-vs-node.toml")).startswith("ok")


def test_a_sweep_from_a_grid_has_a_column_per_field_and_figure(root):
    df = dyncore.sweep(
        str(root / "scenarios/newtos/governors.toml"),
        {"run.*.governor": ["always-c1", "always-c6"], "run.*.cpu.0.mhz": [1600, 400]},
        seeds=2,
        runs=["menu 1600/600"],
        jobs=2,
    )
    assert len(df) == 4 * 2
    assert list(df.columns[:6]) == ["point", "seed", "run", "series", "run.*.governor", "run.*.cpu.0.mhz"]
    assert df["run.*.cpu.0.mhz"].dtype == "int64"
    slow = df[df["run.*.cpu.0.mhz"] == 400]["mbps"].median()
    fast = df[df["run.*.cpu.0.mhz"] == 1600]["mbps"].median()
    assert slow < fast


def test_the_same_sweep_whatever_jobs():
    text = small_sweep_text()
    one = _native.sweep(os.path.join(os.getcwd(), "<sweep>"), text, 1)
    two = _native.sweep(os.path.join(os.getcwd(), "<sweep>"), text, 2)
    assert one == two


@pytest.mark.skipif(not os.environ.get("DYNCORE_BIN"), reason="DYNCORE_BIN (the dyncore command) not set")
def test_the_dataframe_is_the_commands_parquet_table(tmp_path, root):
    sweep_file = tmp_path / "small.toml"
    sweep_file.write_text(small_sweep_text())
    out = tmp_path / "out"
    subprocess.run([os.environ["DYNCORE_BIN"], "sweep", "--quiet", "--out", str(out), str(sweep_file)], check=True)
    table = pd.read_parquet(out / "sweep-small" / "results.parquet")
    df = dyncore.sweep(str(sweep_file))
    pd.testing.assert_frame_equal(df, table)
    parquet = _native.sweep(str(sweep_file), None, 2)
    assert parquet == (out / "sweep-small" / "results.parquet").read_bytes()


@pytest.mark.skipif(not os.environ.get("DYNCORE_BIN"), reason="DYNCORE_BIN (the dyncore command) not set")
def test_the_commands_parquet_loads_in_polars_as_in_pandas(tmp_path):
    pl = pytest.importorskip("polars")
    sweep_file = tmp_path / "small.toml"
    sweep_file.write_text(small_sweep_text())
    out = tmp_path / "out"
    subprocess.run([os.environ["DYNCORE_BIN"], "sweep", "--quiet", "--out", str(out), str(sweep_file)], check=True)
    path = out / "sweep-small" / "results.parquet"
    frame = pl.read_parquet(path)
    assert frame.shape == (16, 4 + 3 + 6)
    assert frame.schema["run.*.cpu.0.mhz"] == pl.Int64 and frame.schema["mbps"] == pl.Float64
    pd.testing.assert_frame_equal(frame.to_pandas(), pd.read_parquet(path))
