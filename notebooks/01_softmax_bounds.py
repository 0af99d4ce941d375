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
# # 01 — Theorem 4.1: the softmax norm and Jacobian bounds
#
# arXiv 2410.18613, Theorem 4.1 and Eq. 4.2: ‖softmax(S)‖_F ≤ √N and the Jacobian has
# ‖·‖_F ≤ 2√N. A reviewer doubts the factor 2 (a one-hot row would give "1 − 0 = 2").
# Here: derive the row Jacobian symbolically, find the sharp constant, check it numerically
# and against autograd, and draw the landscape. Set `SAPA_SMALL=1` for a fast run.

# %%
import math
import os
import tempfile

import numpy as np
import sympy as sp
import torch

from theory.softmax import (
    jacobian_fro2_in_power_sums,
    kkt_maxima,
    reviewer_one_hot_example,
    row_jacobian_fro,
    sharp_row_jacobian_fro_bound,
    softmax_jacobian_closed_form,
    softmax_jacobian_symbolic,
)

SMALL = os.environ.get("SAPA_SMALL") == "1"


def report(name, expected, measured, agree):
    print(f"{name}: expected {expected} / measured {measured} / agree: {agree}")


# %% [markdown]
# ## Derive: J(s) = diag(s) − s sᵀ and ‖J‖²_F = p₂ − 2p₃ + p₂²

# %%
n = 3
J = softmax_jacobian_symbolic(n)
z = sp.symbols(f"z1:{n + 1}", real=True)
s = [sp.exp(zi) / sum(sp.exp(zj) for zj in z) for zi in z]
diff = sp.simplify(J - softmax_jacobian_closed_form(s))
report("differentiated softmax − (diag(s) − ssᵀ)", "zero matrix", diff, diff == sp.zeros(n, n))
print("‖J‖²_F in power sums:", jacobian_fro2_in_power_sums())

# %% [markdown]
# ## The sharp constant: Cauchy–Schwarz gives p₂² ≤ p₃, so ‖J‖²_F ≤ p₂ − p₂² ≤ ¼

# %%
sharp = sharp_row_jacobian_fro_bound()
kkt = kkt_maxima(4)
report("sharp max of ‖J(s)‖_F over the simplex", "1/2", sharp, sharp == sp.Rational(1, 2))
report("KKT maximum of ‖J‖²_F for n = 4", "1/4", kkt[0][1], kkt[0][1] == sp.Rational(1, 4))
print("attained at", kkt[0][0], "(mass ½ on two entries)")
ex = reviewer_one_hot_example(4)
report("reviewer's one-hot row: ‖J‖²_F", 0, ex["lhs_jac_fro2"], ex["jacobian_is_zero"])

# %% [markdown]
# ## Check numerically: random and adversarial rows, and the full N×N map with autograd

# %%
rng = np.random.default_rng(0)
rows = 2_000 if SMALL else 50_000
worst = 0.0
for N in (2, 3, 8, 64):
    logits = rng.standard_normal((rows, N)) * rng.choice([0.01, 1.0, 10.0, 100.0], size=(rows, 1))
    P = np.exp(logits - logits.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    worst = max(worst, float(np.max(row_jacobian_fro(P))))
report("max row Jacobian norm over random rows", "≤ 0.5", round(worst, 6), worst <= 0.5 + 1e-12)

ratios = []
for N in (2, 4, 8):
    S = torch.full((N, N), -60.0, dtype=torch.float64)
    S[:, :2] = 0.0  # every row puts mass ½ on two entries
    Jfull = torch.func.jacrev(lambda x: torch.softmax(x, -1))(S)
    ratios.append(float(torch.linalg.vector_norm(Jfull)) / math.sqrt(N))
report("autograd ‖∂softmax(S)/∂S‖_F / √N at two-point rows", 0.5, [round(r, 12) for r in ratios],
       all(abs(r - 0.5) < 1e-12 for r in ratios))
print(f"paper's constant 2 is {2 / float(sharp):g}× the sharp constant {sharp}")

# %% [markdown]
# ## Draw: the landscape over the simplex Δ₃

# %%
from IPython.display import Image, display  # noqa: E402

from figures import jacobian_landscape  # noqa: E402

out = tempfile.mkdtemp()
png = [p for p in jacobian_landscape.main(out, small=SMALL) if p.suffix == ".png"][0]
display(Image(filename=str(png)))
