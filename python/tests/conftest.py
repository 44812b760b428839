import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def root() -> pathlib.Path:
    return ROOT


def small_sweep_text(seeds: int = 2, duration_ms: int = 20) -> str:
    """A sweep of the network-stack model: 2 governors × 4 TCP speeds."""
    base = ROOT / "scenarios/newtos/governors.toml"
    return (
        f'base = "{base}"\nruns = ["menu 1600/600"]\nseeds = {seeds}\n[grid]\n'
        '"run.*.governor" = ["always-c1", "always-c6"]\n"run.*.cpu.0.mhz" = [1600, 1200, 800, 400]\n'
        f'"net.duration_ms" = [{duration_ms}]\n'
    )
