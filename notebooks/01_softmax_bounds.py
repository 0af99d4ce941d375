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
# **The theorem** (arXiv 2410.18613, Theorem 4.1 and its Eq. 4.2). In the paper's notation the $N$ tokens are the
# rows of $X \in \mathbb{R}^{N \times D}$, the logits are $S = X W_Q W_K^\top X^\top \in \mathbb{R}^{N \times N}$ and
# softmax acts on each row of $S$. For every $N$ and every $S$,
#
# $$\|\mathrm{softmax}(S)\|_F \le \sqrt{N}, \qquad
#   \Big\|\frac{\partial\, \mathrm{softmax}(S)}{\partial S}\Big\|_F \le 2\sqrt{N} \quad \text{(Eq. 4.2)}.$$
#
# The paper uses this $\sqrt N$ as the yardstick: an activation "behaves like softmax" when its norm grows like
# $\sqrt N$ (notebooks 02–05 hold $x^p/\sqrt N$ to it). A reviewer doubts the factor 2 in the appendix proof of
# Eq. 4.2: for a one-hot row ($F_{i1} = 1$, all other entries 0) its equation reads "$1 - 0 = 2$".
#
# **What this notebook shows.** Both bounds are true, but Eq. 4.2 is 4× loose: the sharp constant is $\sqrt N / 2$,
# approached when every row puts mass ½ on two entries, and the reviewer's one-hot row is where the Jacobian
# *vanishes*. We (1) derive the row Jacobian with sympy, (2) prove the sharp constant, (3) check it against random
# rows and against torch autograd, (4) draw it. (The Jacobian here is taken with respect to $S$, the object of
# Eq. 4.2; with respect to $X$ no input-independent bound exists, see `sapa verify --only thm4.1-jacobian`.)
#
# **How to read the checks.** Each prints one line `name: expected … / measured … / agree: True|False`:
# *expected* is the exact value or the bound, *measured* comes from an independent computation, *agree* says
# whether they match by the criterion stated above the cell. Set `SAPA_SMALL=1` for a fast run.

# %%
import math
import os
import tempfile

import numpy as np
import sympy as sp
import torch

from sapa.theory.softmax import (
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
# ## 1. Derive: $J(s) = \mathrm{diag}(s) - s s^\top$ and $\|J\|_F^2 = p_2 - 2p_3 + p_2^2$
#
# Take one row, $s = \mathrm{softmax}(z)$ with $s_i = e^{z_i} / \sum_k e^{z_k}$. Differentiating,
# $\partial s_i / \partial z_j = s_i(\delta_{ij} - s_j)$, that is $J(s) = \mathrm{diag}(s) - s s^\top$. With the power
# sums $p_k = \sum_i s_i^k$ (so $p_1 = 1$), squaring and adding the entries gives
#
# $$\|J(s)\|_F^2 = \sum_{i,j} (s_i \delta_{ij} - s_i s_j)^2 = \sum_i s_i^2 - 2 \sum_i s_i^3 + \Big(\sum_i s_i^2\Big)^2
#   = p_2 - 2p_3 + p_2^2 .$$
#
# Softmax acts on each row separately, so $\partial\,\mathrm{softmax}(S)/\partial S$ is block-diagonal with one
# block $J(s_r)$ per row $r$, and $\|\partial\,\mathrm{softmax}(S)/\partial S\|_F^2 = \sum_r \|J(s_r)\|_F^2$: a bound
# $c$ on every row gives $c\sqrt N$ for the matrix. The same argument proves the norm bound: $\|s\|^2 = p_2 \le p_1^2 = 1$,
# so $\|\mathrm{softmax}(S)\|_F^2 = \sum_r p_2(s_r) \le N$; equality needs one-hot rows, which no finite $S$ gives:
# $\sqrt N$ is a supremum, never attained.
#
# The cell differentiates softmax with sympy for $n = 3$ and subtracts $\mathrm{diag}(s) - ss^\top$: *expected* the
# zero matrix, *agree* is True only when sympy simplifies the difference to exactly 0.

# %%
n = 3
J = softmax_jacobian_symbolic(n)
z = sp.symbols(f"z1:{n + 1}", real=True)
s = [sp.exp(zi) / sum(sp.exp(zj) for zj in z) for zi in z]
diff = sp.simplify(J - softmax_jacobian_closed_form(s))
report("differentiated softmax − (diag(s) − ssᵀ)", "zero matrix", diff, diff == sp.zeros(n, n))
print("‖J‖²_F in power sums:", jacobian_fro2_in_power_sums())

# %% [markdown]
# ## 2. The sharp constant: $\|J(s)\|_F \le \tfrac12$, so $\sqrt N/2$ for the matrix
#
# Cauchy–Schwarz, $p_2^2 = \big(\sum_i s_i^{1/2} s_i^{3/2}\big)^2 \le \big(\sum_i s_i\big)\big(\sum_i s_i^3\big) = p_3$, gives
#
# $$\|J(s)\|_F^2 = p_2 - 2p_3 + p_2^2 \le p_2 - p_2^2 = p_2(1 - p_2) \le \tfrac14 ,$$
#
# with equality iff $s$ is constant on its support (equality in Cauchy–Schwarz) and $p_2 = \tfrac12$: mass ½ on
# exactly two entries. Hence $\|\partial\,\mathrm{softmax}(S)/\partial S\|_F \le \sqrt N/2$, a quarter of Eq. 4.2's
# $2\sqrt N$. At the reviewer's one-hot row $p_2 = p_3 = 1$ and $\|J\|_F^2 = 1 - 2 + 1 = 0$.
#
# Three exact lines: the maximum of $\|J(s)\|_F$ over the simplex (expected ½), the largest of all Karush–Kuhn–Tucker
# points of $\|J\|_F^2$ on the simplex of length-4 rows, solved exactly on every face (expected ¼, at mass ½ on two
# entries), and $\|J\|_F^2$ at the one-hot row (expected 0). *agree* is exact equality of rationals.

# %%
sharp = sharp_row_jacobian_fro_bound()
kkt = kkt_maxima(4)
report("sharp max of ‖J(s)‖_F over the simplex", "1/2", sharp, sharp == sp.Rational(1, 2))
report("KKT maximum of ‖J‖²_F for n = 4", "1/4", kkt[0][1], kkt[0][1] == sp.Rational(1, 4))
print("attained at", kkt[0][0], "(mass ½ on two entries)")
ex = reviewer_one_hot_example(4)
report("reviewer's one-hot row: ‖J‖²_F", 0, ex["lhs_jac_fro2"], ex["jacobian_is_zero"])

# %% [markdown]
# ## 3. Check numerically: random rows, and the full $N \times N$ map with autograd
#
# Two checks that do not use the derivation. (a) Random logit rows of lengths 2, 3, 8, 64 at scales 0.01 to 100
# (near-uniform to near-one-hot rows): *measured* is the largest $\|J(s)\|_F$ found, which must stay ≤ 0.5.
# (b) torch autograd builds the whole $N^2 \times N^2$ Jacobian of $S \mapsto \mathrm{softmax}(S)$ at an $S$ whose rows
# put mass ½ on two entries (the other logits at −60, so their mass is $e^{-60}$): *measured* is
# $\|\partial\,\mathrm{softmax}(S)/\partial S\|_F / \sqrt N$ for $N = 2, 4, 8$, which must equal ½ to 12 digits. The last line
# says how far the paper's constant is from the sharp one.

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
# ## 4. Draw: $\|J(s)\|_F$ over the simplex of rows of length 3
#
# Each point of the triangle is a row $s = (s_1, s_2, s_3)$; the corners are the one-hot rows ($\|J\|_F = 0$), the
# centre the uniform row ($\sqrt2/3 \approx 0.471$). The maximum ½ sits at the three edge midpoints (red stars): mass ½
# on two entries. The figure module asserts this maximum before it draws.

# %%
from IPython.display import Image, display  # noqa: E402

from sapa.figures import jacobian_landscape  # noqa: E402
from sapa.commands.notebooks import small_png  # noqa: E402

with tempfile.TemporaryDirectory() as out:
    png = [p for p in jacobian_landscape.main(out, small=SMALL) if p.suffix == ".png"][0]
    display(Image(data=small_png(png, 560)))  # the saved PNG is print-sized (150 dpi)
