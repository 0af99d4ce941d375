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
# arXiv 2410.18613: for φ(x) = x, ‖φ(S)‖_F grows like O(N) with i.i.d. Gaussian X, Q, K;
# scaled by 1/√N it grows like O(√N). Exactly, in every shared-X model,
# E‖S‖²_F = N(N−1)·m_off + N·m_diag. Under the paper's independent A, B the two moments are
# equal; with A = XW_Q and B = XW_K sharing X they are not, and the diagonal term dominates
# below the crossover N* = 1 + m_diag/m_off. `SAPA_SMALL=1` for a fast run.

# %%
import math
import os

import matplotlib.pyplot as plt
import numpy as np

from empirics.norms import Activation, attention_norms_batched
from empirics.samplers import ModelConfig, sample_trials, trial_generators
from theory.moments import exact_moments, symbolic_moments

SMALL = os.environ.get("SAPA_SMALL") == "1"
TRIALS = 64 if SMALL else 400


def report(name, expected, measured, agree):
    print(f"{name}: expected {expected} / measured {measured} / agree: {agree}")


# %% [markdown]
# ## Derive: the per-entry moments for p = 1 (symbolic in N, D, d, σ)

# %%
for model in ("paper", "iid", "tied"):
    sym = symbolic_moments(1, model)
    print(model, " m_off =", sym["m_off"], "  m_diag =", sym["m_diag"])

# %% [markdown]
# ## Check: exact E‖S‖²_F against Monte Carlo (z-score with the sample's standard error)

# %%
D, d = 32, 16
sigma = 1 / math.sqrt(D)
act = Activation("poly", 1, 1.0)
for model in ("iid", "tied", "corr"):
    cfg = ModelConfig(weights=model, rho=0.5 if model == "corr" else (1.0 if model == "tied" else 0.0))
    for N in (4, 32):
        X, W = sample_trials(cfg, N, D, d, TRIALS, trial_generators(1, {"nb": 2, "m": model, "N": N}, range(TRIALS)))
        v = attention_norms_batched(X, W, act)["fro"].numpy() ** 2
        e = float(exact_moments(1, model, N, D, d, rho=0.5, sigma=sigma).expected_fro2)
        z = (v.mean() - e) / (v.std(ddof=1) / math.sqrt(TRIALS))
        report(f"{model:5s} N={N:3d} E‖S‖²", f"{e:.5g}", f"{v.mean():.5g} (z = {z:+.2f}, {TRIALS} trials)", abs(z) < 4)

# %% [markdown]
# ## Draw: the RMS of the scaled norm ‖S/√N‖_F against N, exact, with N* marked

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
