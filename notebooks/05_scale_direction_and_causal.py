# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 — Which way should the scale move with N, and what does a causal mask change?
#
# **The claim** (arXiv 2410.18613, Figure 1 and lines 240–245): "as the sequence length decreases the scale should
# decrease". The paper's activation is $x^p/\sqrt N$. A reviewer objects that $1/\sqrt N$ *increases* as $N$ decreases
# ($1/\sqrt{256} = 0.0625$, $1/\sqrt 8 = 0.354$). The reviews also ask a question the paper is silent on: under a causal
# mask row $i$ sees only $i$ tokens, so should the scale follow the effective length $i$ rather than $N$?
#
# **What this notebook shows.** The two readings of "scale" give opposite answers, and the exact moments decide
# each. For $\varphi(x) = c\, x^p$,
#
# $$\mathbb{E}\|c\, S^{\circ p}\|_F^2 = c^2 \big[N(N-1)\, m_\text{off} + N\, m_\text{diag}\big] .$$
#
# The coefficient $c(N)$ that keeps this at softmax's size is $c \approx \sqrt{N}/\sqrt{N^2 m_\text{off}} \propto N^{-1/2}$ (matching
# the bound $\sqrt N$) or $\propto N^{-1}$ (matching softmax's typical norm, which is nearly flat in $N$): the coefficient
# *increases* as $N$ decreases, as the reviewer says; the divisor $\alpha = 1/c \propto \sqrt N$ *decreases*, as the paper
# says. Under a causal mask row $i$ has $i$ entries, so with a scale $c_i$ per row
#
# $$\mathbb{E}\|\varphi(S)_i\|^2 = c_i^2 \big[(i-1)\, m_\text{off} + m_\text{diag}\big] ,$$
#
# which grows like $i$ with one global $c = 1/\sqrt N$ and is flat with $c_i = 1/\sqrt i$ once $i \gg N^*$.
# `SAPA_SMALL=1` for a fast run; every check prints `expected / measured / agree` (see notebooks/README.md).

# %%
import math
import os

import matplotlib.pyplot as plt

from sapa.empirics.experiments.causal import bin_samples, binned_agreement, exact_row_profile, row_profiles
from sapa.empirics.experiments.scale_direction import matching_scales
from sapa.empirics.montecarlo.stats import loglog_slope

SMALL = os.environ.get("SAPA_SMALL") == "1"


def report(name, expected, measured, agree):
    print(f"{name}: expected {expected} / measured {measured} / agree: {agree}")


# %% [markdown]
# ## 1. Scale direction: the coefficient $c(N)$ that matches softmax
#
# For $p = 1$, i.i.d. weights and $D = d = 64$, per $N$: `softmax_mean` is the Monte Carlo mean of
# $\|\mathrm{softmax}(S/\sqrt d)\|_F$, `c_typical` the coefficient that makes the RMS of $\|c\, S\|_F$ equal to it, `c_bound` the
# one that makes it equal to softmax's bound $\sqrt N$ (exact), `inv_sqrt_n` the paper's $1/\sqrt N$ for comparison, and
# `poly_z` the z-score of the Monte Carlo $\|S\|_F^2$ against its exact mean. Then three checks: the log-log slope of
# `c_bound` in $N$ (exact: $-\tfrac12$ once $N \gg N^* \approx 2$); the slope of `c_typical` (negative: the coefficient must
# *increase* as $N$ shrinks); and the largest $|z|$ over $N$ (*agree* below 4).

# %%
Ns = [8, 16, 32, 64, 128] if SMALL else [8, 16, 32, 64, 128, 256, 512, 1024]
tab = matching_scales(Ns, 1, "iid", d=64, D=64, trials=16 if SMALL else 64, seed=0)
print(tab[["N", "softmax_mean", "c_typical", "c_bound", "inv_sqrt_n", "poly_z"]].to_string(index=False))
slope = lambda col: loglog_slope(tab["N"], tab[col])  # noqa: E731  OLS slope of log c on log N
report("c_bound(N) ∝ N^b (exact: b = −½ in the N² regime)", "−0.5 ± 0.05", f"{slope('c_bound'):.3f}",
       abs(slope("c_bound") + 0.5) < 0.05)
report("c_typical decreases as N grows (the scale must INCREASE as N shrinks)", "b < 0", f"{slope('c_typical'):.3f}",
       slope("c_typical") < 0)
report("Monte Carlo ‖S‖² vs exact, max |z| over N", "< 4", f"{tab['poly_z'].abs().max():.2f}",
       tab["poly_z"].abs().max() < 4)
print("reviewer's numbers, 1/√N at N = 256, 64, 16, 8:", [round(1 / math.sqrt(n), 4) for n in (256, 64, 16, 8)])

# %% [markdown]
# ## 2. Causal mask: per-row norms with a global $1/\sqrt N$ scale and a per-row $1/\sqrt i$ scale
#
# The figure plots the RMS norm of row $i$ against $i$, log-log: exact curves from the formula above and Monte Carlo
# points, for the two scale policies. Below it four checks. First, Monte Carlo against exact per geometric bin of
# rows: early rows (one or two entries, heavy-tailed squares) get many more trials, each bin gets a t-test, and the
# critical value is Bonferroni-corrected over the bins at a 1 % family-wise level (*expected* $|t| \le$ that value,
# *measured* the largest $|t|$). Then the exact last-row / first-row ratio under each policy: about $\sqrt N$ with one
# global scale (rows grow like $\sqrt i$, unlike softmax, whose every row has norm at most 1), about 1 with $1/\sqrt i$.

# %%
N = 128 if SMALL else 512
fig, ax = plt.subplots(figsize=(6, 4))
for k, policy in enumerate(("inv_sqrt_n", "inv_sqrt_i")):
    ex = exact_row_profile(N, 1, "iid", 64, 64, policy)
    ax.loglog(ex["i"], ex["exact_rms"], lw=2, ls=["-", "--"][k], label=f"exact, scale {policy}")
    mc = row_profiles(N, 1, "iid", 64, 64, policy, trials=8 if SMALL else 32, seed=1)
    ax.loglog(mc["i"][::7], mc["mc_rms"][::7], "o", ms=3, label=f"Monte Carlo, {policy}")

# Agreement per geometric row bin: early rows (one or two entries, heavy-tailed squares) get many
# more trials; a t-test per bin, Bonferroni over the bins at a 1% family-wise level.
bins = bin_samples(N, "iid", 64, 64, trials=8 if SMALL else 32, seed=2, ps=(1,), max_trials=512 if SMALL else 2048)
for policy in ("inv_sqrt_n", "inv_sqrt_i"):
    agr = binned_agreement(bins, 1, "iid", 64, 64, policy)
    report(f"row profile {policy}: Monte Carlo vs exact in {len(agr)} row bins", f"|t| ≤ {agr['t_crit'].max():.2f}",
           f"max |t| = {agr['z'].abs().max():.2f}", bool(agr["agree"].all()))
ratio = lambda pol: float(exact_row_profile(N, 1, "iid", 64, 64, pol)["exact_rms"].iloc[[-1, 0]].pipe(  # noqa: E731
    lambda s: s.iloc[0] / s.iloc[1]))
report("global 1/√N: last row / first row E-RMS (grows like √i)", f"≈ √{N} = {math.sqrt(N):.1f} (for N ≫ N*)",
       f"{ratio('inv_sqrt_n'):.1f}", ratio("inv_sqrt_n") > 0.5 * math.sqrt(N))
report("per-row 1/√i: last row / first row (flat, like softmax's row bound 1)", "≈ 1", f"{ratio('inv_sqrt_i'):.3f}",
       abs(ratio("inv_sqrt_i") - 1) < 0.1)
ax.axhline(1.0, color="black", lw=0.8, label="softmax row bound 1")
ax.set_xlabel("row index i (tokens visible under the causal mask)")
ax.set_ylabel("E-RMS ‖φ(S)_i‖")
ax.set_title(f"Causal x/√· attention, N = {N}, iid weights, D = d = 64")
ax.legend(fontsize=7)
plt.show()
