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
# # 02 — Theorem 4.2 and Corollary 4.3: φ(x) = x and x/√N
#
# **The theorems** (arXiv 2410.18613). With the linear activation $\varphi(x) = x$ the attention matrix is the logit
# matrix $S = X W_Q W_K^\top X^\top$ itself. Theorem 4.2: when the tokens $X$ and the projections $Q$, $K$ have i.i.d.
# Gaussian entries, $\|\varphi(S)\|_F$ (and its Jacobian) grows like $O(N)$. Corollary 4.3: scaled,
# $\varphi(x) = x/\sqrt N$, it grows like $O(\sqrt N)$, like softmax's $\sqrt N$ (notebook 01). Both are statements in
# expectation over the Gaussian draws.
#
# **The weight models.** The paper's proof treats $A = XW_Q$ and $B = XW_K$ as independent Gaussian matrices
# (model `paper`). In a transformer both come from the same $X$; sapa also checks shared $X$ with independent
# weights (`iid`), tied weights $W_Q = W_K$ (`tied`) and weights with correlation $\rho = 0.5$ (`corr`). Tokens are
# $x_i \sim N(0, I_D)$, weight entries have variance $\sigma^2 = 1/D$, $W_Q, W_K \in \mathbb{R}^{D \times d}$.
#
# **What this notebook shows.** One exact formula decides both statements in every model:
#
# $$\mathbb{E}\|S\|_F^2 = N(N-1)\, m_\text{off} + N\, m_\text{diag}, \qquad m_\text{off} = \mathbb{E} S_{12}^2,\quad
#   m_\text{diag} = \mathbb{E} S_{11}^2 .$$
#
# $O(N)$ and $O(\sqrt N)$ hold as upper bounds in every model; but with shared $X$ the scaled norm only starts to
# grow like $\sqrt N$ past the crossover $N^* = 1 + m_\text{diag}/m_\text{off}$, which is 62 tokens at ViT-Base widths
# with tied weights. We derive the moments (sympy), check the formula by Monte Carlo, and draw it.
# `SAPA_SMALL=1` for a fast run; every check prints `expected / measured / agree` (see notebooks/README.md).

# %%
import math
import os

import matplotlib.pyplot as plt
import numpy as np

from sapa.empirics.kernels.norms import attention_norms_batched
from sapa.empirics.montecarlo.samplers import RandomnessModel, sample_trials
from sapa.common.seeds import trial_generators
from sapa.theory.families import power
from sapa.theory.moments import exact_moments, symbolic_moments

SMALL = os.environ.get("SAPA_SMALL") == "1"
TRIALS = 64 if SMALL else 400


def report(name, expected, measured, agree):
    print(f"{name}: expected {expected} / measured {measured} / agree: {agree}")


# %% [markdown]
# ## 1. Derive: the two entry moments, symbolic in $D$, $d$, $\sigma$
#
# Tokens are exchangeable, so all $N(N-1)$ off-diagonal entries $S_{ij} = x_i^\top W x_j$ ($W = W_Q W_K^\top$, $i \ne j$)
# share one second moment $m_\text{off}$ and all $N$ diagonal entries $S_{ii} = x_i^\top W x_i$ share $m_\text{diag}$;
# adding them up gives the formula above. For $i \ne j$ the tokens are independent, so
# $\mathbb{E} S_{12}^2 = \mathbb{E}\, x_1^\top W x_2 x_2^\top W^\top x_1 = \mathbb{E}\, \mathrm{tr}(W W^\top)$. The diagonal entry is a
# Gaussian quadratic form, $\mathbb{E}(x^\top W x)^2 = (\mathrm{tr}\, W)^2 + \mathrm{tr}(W W^\top) + \mathrm{tr}(W^2)$, then
# averaged over the weights. The cell prints both (`sapa.theory.moments`, Isserlis/Wick).
#
# *How to read it.* Under the paper's model $m_\text{off} = m_\text{diag} = d\sigma^4$, so $\mathbb{E}\|S\|_F^2 = N^2 d\sigma^4$
# exactly: RMS $\propto N$ (Theorem 4.2) and $\mathbb{E}\|S/\sqrt N\|_F^2 = N d \sigma^4$, RMS $\propto \sqrt N$
# (Corollary 4.3). With shared $X$ the diagonal is larger: $r = m_\text{diag}/m_\text{off} = (D+2)/D \approx 1$ for `iid`,
# but $(D+2)(d+2)/(D+d+1) \approx 61$ for `tied` at $D = 768$, $d = 64$. The RMS of the scaled matrix is
# $\sqrt{(N-1)\, m_\text{off} + m_\text{diag}}$: flat while $N - 1 \ll r$, like $\sqrt{N m_\text{off}}$ once $N - 1 \gg r$;
# its local exponent is $\tfrac12 \cdot N/(N - 1 + r)$, and $N^* = 1 + r$ is where the off-diagonal and diagonal totals
# are equal.

# %%
for model in ("paper", "iid", "tied"):
    sym = symbolic_moments(1, model)
    print(model, " m_off =", sym["m_off"], "  m_diag =", sym["m_diag"])

# %% [markdown]
# ## 2. Check: exact $\mathbb{E}\|S\|_F^2$ against Monte Carlo
#
# For each shared-$X$ model and $N = 4, 32$ ($D = 32$, $d = 16$), draw `TRIALS` independent $(X, W_Q, W_K)$ from seeded
# generators and compute $\|S\|_F^2$ of each draw. *expected* is the exact $\mathbb{E}\|S\|_F^2$; *measured* is the sample
# mean with $z = (\text{mean} - \text{expected}) / (s/\sqrt{T})$, $s$ the sample standard deviation. If the formula is right,
# $z$ is close to a standard normal draw; *agree* is $|z| < 4$, which a correct formula fails about once in 16 000
# lines, while a wrong moment would not pass: taking $m_\text{diag} = m_\text{off}$ (as under the paper's model) predicts 392
# instead of 1518 for `tied` at $N = 4$, $|z| \approx 29$ at 400 trials.

# %%
D, d = 32, 16
sigma = 1 / math.sqrt(D)
act = power(1)  # x itself: S = X W Xᵀ
for model in ("iid", "tied", "corr"):
    cfg = RandomnessModel(weights=model, rho=0.5 if model == "corr" else (1.0 if model == "tied" else 0.0))
    for N in (4, 32):
        X, W = sample_trials(cfg, N, D, d, TRIALS, trial_generators(1, {"nb": 2, "m": model, "N": N}, range(TRIALS)))
        v = attention_norms_batched(X, W, act)["fro"].numpy() ** 2
        e = float(exact_moments(1, model, N, D, d, rho=0.5, sigma=sigma).expected_fro2)
        z = (v.mean() - e) / (v.std(ddof=1) / math.sqrt(TRIALS))
        report(f"{model:5s} N={N:3d} E‖S‖²", f"{e:.5g}", f"{v.mean():.5g} (z = {z:+.2f}, {TRIALS} trials)", abs(z) < 4)

# %% [markdown]
# ## 3. Draw: the RMS of $\|S/\sqrt N\|_F$ against $N$ at ViT-Base widths
#
# Exact curves ($D = 768$, $d = 64$), one per weight model, with each model's $N^*$ as a dotted vertical line
# (where it is above 2.5) and a $\sqrt N$ reference. Under `paper` and `iid` the curves are parallel to $\sqrt N$ from
# the start; under `tied` and `corr` they are flat until $N^*$, and ViT-Base's $N = 196$ (red) sits only a little way
# past the tied $N^* \approx 62$.

# %%
Ns = np.unique(np.geomspace(2, 8192, 60).astype(int))
fig, ax = plt.subplots(figsize=(6, 4))
for i, (model, rho) in enumerate((("paper", 0.0), ("iid", 0.0), ("tied", 1.0), ("corr", 0.5))):
    rms = [math.sqrt(float(exact_moments(1, model, int(N), 768, 64, rho=rho, sigma=1 / math.sqrt(768)).expected_fro2) / N)
           for N in Ns]
    ax.loglog(Ns, rms, label=f"{model}", lw=2, ls=["-", "--", "-.", ":"][i])
    nstar = exact_moments(1, model, 196, 768, 64, rho=rho, sigma=1 / math.sqrt(768)).crossover_n
    if nstar > 2.5:
        ax.axvline(nstar, color="grey", lw=0.8, ls=":")
        ax.annotate(f"N* = {nstar:.0f} ({model})", (nstar, rms[0]), rotation=90, fontsize=7, va="bottom")
ax.loglog(Ns, 0.3 * np.sqrt(Ns), color="black", lw=0.8, label="∝ √N")
ax.axvline(196, color="red", lw=0.8, ls="--", label="ViT-Base N = 196")
ax.set_xlabel("sequence length N (tokens)")
ax.set_ylabel("√E‖S/√N‖²_F")
ax.set_title("x/√N at ViT-Base widths (D = 768, d = 64)")
ax.legend(fontsize=7)
plt.show()
