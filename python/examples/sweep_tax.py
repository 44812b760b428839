# %% [markdown]
# # How the tax rate moves Chameleon's trade-off, from Python
#
# A notebook-style script (cells split by `# %%`; it runs as a plain script
# too, writing `sweep_tax.png`): run a sweep of Figure 7's mix over the tax
# rate with `dyncore.sweep`, look at the table in pandas, and draw the median
# with its min–max band over the seeds, as `dyncore sweep`'s own summary does.
#
# Run from the repository's root after `pip install ./python matplotlib`:
#
#     python python/examples/sweep_tax.py

# %%
import pathlib

import matplotlib

matplotlib.use("Agg")  # a file, not a window
import matplotlib.pyplot as plt

import dyncore

root = pathlib.Path(__file__).resolve().parents[2]

# %% [markdown]
# The sweep: the dynamic-binding run of Figure 7 (`DB tax 1`), its N-Queens'
# tax swept over four decades, 3 seeds per point, on every local core.

# %%
df = dyncore.sweep(
    root / "scenarios/fig7-underprovisioned.toml",
    {"run.*.workload.*.tax": [0.01, 0.1, 0.5, 1, 2, 10, 100]},
    seeds=3,
    runs=["DB tax 1"],
)
print(df[["point", "seed", "series", "run.*.workload.*.tax", "speedup", "fused_share"]].head(8))

# %% [markdown]
# One row per point × seed × run × series: the median and range over the
# seeds per tax rate and program.

# %%
tax = "run.*.workload.*.tax"
summary = df.groupby(["series", tax])["speedup"].agg(["median", "min", "max"]).reset_index()
print(summary)

# %%
# Two panels: the programs' speedups differ by a factor of ten.
fig, axes = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
for ax, (series, color) in zip(axes, (("N-Queen", "#0072B2"), ("parallel", "#E69F00"))):
    s = summary[summary["series"] == series]
    ax.fill_between(s[tax], s["min"], s["max"], color=color, alpha=0.2, linewidth=0, label="min–max over seeds")
    ax.plot(s[tax], s["median"], marker="o", color=color, label="median")
    ax.set_ylabel(f"{series}: speedup\n(× one baseline CPU)")
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
axes[-1].set_xscale("log")
axes[-1].set_xlabel("N-Queen's tax rate")
fig.suptitle("Figure 7's mix, dynamic binding: the tax trades N-Queen's speed\nfor the parallel program's")
out = pathlib.Path(__file__).with_name("sweep_tax.png")
fig.tight_layout()
fig.savefig(out, dpi=100)
print(f"wrote {out}")
