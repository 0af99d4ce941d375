"""Issue 53's done-when walk: every activation sapa knows, and two it has never seen, through every tool.

The walkers: each row of :data:`sapa.theory.families.FAMILY_TABLE` (a free parameter α, c, τ replaced by a number:
x/4, x³/4, x/8, x³/8, exp(x/2)), and the expressions ``Max(x,0)**2/N`` and ``x/(1+Abs(x))``, which no table, test case
or special path of the code names. Each goes through

1. the audit (:func:`sapa.api.audit.audit`, the paper's model at N = 16, d = 4, both logit conventions): a verdict,
   its method and E‖φ(S)‖²_F at the logit S, which must agree with a direct numpy Monte Carlo of the same model (its own RNG and its own φ, from
   sympy's lambdify) within a z-score of 5;
2. the norms (:func:`sapa.api.norms.norms` on a 4×3 X): ‖φ(S)‖_F against numpy and ‖∂φ/∂X‖_F against central
   differences of that numpy φ;
3. the sweep (a tiny config whose ``[[activation]]`` is the family id, or ``expr`` for an expression): its
   E‖φ(S)‖²_F and E‖∂φ/∂(A, B)‖²_F against the audit's, and E‖φ‖² against the direct Monte Carlo (z-scores from the
   sample sizes);
4. training (:func:`sapa.empirics.training.study_config.arm_of`: the table arm, or ``expr:<φ>``; one tiny digits chunk,
   text for a causal-only row): finite loss, accuracy in [0, 1], a finite positive probe norm;
5. a mechanism probe (:mod:`sapa.empirics.training.mechanism`: the kernel arm, or the ``expr`` arm; one tiny copy task);
6. timing (:func:`sapa.empirics.timing.overhead.time_cells` with the form key ``expr:<φ>`` / ``row:<ψ>``): positive
   ratios, and :func:`~sapa.empirics.timing.overhead.expr_attention` equal to numpy's φ(QKᵀ)V;
7. the Lipschitz ascent (:func:`sapa.empirics.experiments.lipschitz_ball.run_ball` on ``expr:<φ>`` / ``row:<ψ>``):
   positive certified lower bounds, and the head's J·dX (:func:`sapa.empirics.kernels.head_jacobian.jvp`) equal to
   autograd's;
8. compare (:func:`sapa.api.compare.compare`, budget "tiny", all walkers in one scorecard): a row per walker, every
   cell a finite value or a note saying why not.

A row-normalised ψ other than softmax trains as a ``row:<ψ>`` arm (each row of ψ(S) divided by its sum; the
normalised x⁴, and softmax(S/τ) in the mechanism study, which has no temperature arm). The audit of sigmoid(x − log N) (and so compare with it) costs ≈ 30–45 CPU-s
(quadrature of an N-dependent φ over N = 2 … 2²⁰), so the default run walks it through every other step and the slow
run (``-m slow``) through these two, with every walker at larger sizes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import pytest
import sympy as sp
import torch

from sapa.theory.families import FAMILY_TABLE, Family

VALUES = {"alpha": 4, "c": 8, "tau": 2}  # the numbers put in place of the free parameters
UNSEEN = ("Max(x,0)**2/N", "x/(1+Abs(x))")
SLOW_AUDIT = ("sigmoid_logN",)  # quadrature over N = 2 … 2²⁰ of an N-dependent φ: ≈ 30–45 CPU-s (slow run only)
Z = 5.0  # z-score tolerance of every Monte Carlo comparison (seeded: a pass is reproducible)


@dataclass(frozen=True)
class Walker:
    """One activation as the tools take it: id, expression in x (numbers substituted), normalisation, mask."""

    id: str
    expr: str
    normalize: str
    mask: str
    family: Family | None = None
    substituted: bool = False

    @property
    def row(self) -> bool:
        return self.normalize == "row"

    @property
    def form(self) -> str:
        """The timing form key and the Lipschitz head's activation: ``expr:<φ>`` or ``row:<ψ>``."""
        return ("row:" if self.row else "expr:") + self.expr

    @property
    def sweep_entry(self) -> dict:
        if self.family is not None and not self.substituted:
            return {"family": self.id}
        return {"expr": self.expr, "normalize": self.normalize}

    @property
    def compare_name(self) -> str:
        if self.family is not None and not self.substituted:
            return self.id
        return self.expr + ("@row" if self.row else "")


def _substituted(f: Family) -> str:
    e = sp.sympify(f.expr, locals={p: sp.Symbol(p) for p in ("x", "N", "i", "j", *f.params)})
    return str(e.subs({sp.Symbol(p): VALUES[p] for p in f.params}))


def _walkers() -> list[Walker]:
    out = [Walker(f.id, _substituted(f) if f.params else f.expr, f.normalize, f.masks[0], f, bool(f.params))
           for f in FAMILY_TABLE]
    return out + [Walker(e, e, "none", "none") for e in UNSEEN]


WALKERS = _walkers()
IDS = [w.id for w in WALKERS]


def test_the_walkers_are_the_whole_table_and_two_unseen_expressions():
    assert IDS[: len(FAMILY_TABLE)] == [f.id for f in FAMILY_TABLE] and len(set(IDS)) == len(IDS)
    assert {w.id: w.expr for w in WALKERS if w.substituted} == {
        "x_alpha": "x/4", "x3_alpha": "x**3/4", "x_dose": "x/8", "x3_dose": "x**3/8", "softmax_tau": "exp(x/2)"}
    x, N = sp.symbols("x N")
    table = [sp.sympify(f.expr, locals={"x": x, "N": N}) for f in FAMILY_TABLE]
    probe = {x: sp.Rational(-3, 7), N: 5}  # exact: a difference nonzero here is not identically zero
    for text in UNSEEN:  # no row of the table: the tools reach it only as an expression
        e = sp.sympify(text, locals={"x": x, "N": N})
        assert all((e - t).subs(probe) != 0 or sp.simplify(e - t) != 0 for t in table), text


# --------------------------------------------------------------------------- an independent φ (numpy, lambdify)


@lru_cache(maxsize=None)
def _lambdified(expr: str):
    x, N, i, j = sp.symbols("x N i j")
    return sp.lambdify((x, N, i, j), sp.sympify(expr, locals={"x": x, "N": N, "i": i, "j": j}), "numpy")


def phi_np(w: Walker, S: np.ndarray) -> np.ndarray:
    """φ(S) for logits S (..., N, N): element-wise from the text, masked (j > i: 0), rows divided by their sums."""
    n = S.shape[-1]
    i = np.arange(1, n + 1, dtype=np.float64)[:, None]
    j = np.arange(1, n + 1, dtype=np.float64)[None, :]
    with np.errstate(over="ignore"):
        P = _lambdified(w.expr)(S, float(n), i, j) * np.ones_like(S)
    if w.mask == "causal":
        P = np.where(np.tri(n, dtype=bool), P, 0.0)
    return P / P.sum(-1, keepdims=True) if w.row else P


def _z(a: float, se_a: float, b: float, se_b: float) -> float:
    return abs(a - b) / math.sqrt(se_a**2 + se_b**2)


def _mean_se(v: np.ndarray) -> tuple[float, float]:
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))


N_AUDIT, D_HEAD = 16, 4  # the paper's model: S = A Bᵀ, A, B (N, d) with N(0, 1) entries


@lru_cache(maxsize=None)
def direct_mc(w: Walker, draws: int = 4000) -> tuple[float, float]:
    """(mean, se) of ‖φ(A Bᵀ)‖²_F over ``draws`` draws of the paper's model at N_AUDIT, d = D_HEAD (numpy only)."""
    rng = np.random.default_rng(53)
    A, B = rng.standard_normal((2, draws, N_AUDIT, D_HEAD))
    P = phi_np(w, A @ B.transpose(0, 2, 1))
    return _mean_se((P * P).sum(axis=(1, 2)))


# --------------------------------------------------------------------------- the steps


@lru_cache(maxsize=None)
def audit_step(w: Walker) -> dict:
    from sapa.api.audit import audit

    r = audit(w.expr, normalize=w.normalize, mask=w.mask, model="paper", N=N_AUDIT, d=D_HEAD, trials=64,
              logit_scale="S")
    assert r.verdict in ("HOLDS", "HOLDS_IN_REGIME", "FAILS", "UNDETERMINED"), r.verdict
    assert r.method in ("exact", "quadrature", "monte_carlo"), r.method
    assert set(r.conventions) == {"S", "S/sqrt(d)"}
    data = r.data
    for k in ("expected_fro2", "expected_jac_fro2"):
        assert math.isfinite(data[k]) and data[k] > 0, (k, data[k])
    mean, se = direct_mc(w)
    err = data["error_bound"] * data["expected_fro2"]  # relative: an a-posteriori bound (exact, quadrature) or the MC se
    assert _z(data["expected_fro2"], err, mean, se) < Z, (r.method, data["expected_fro2"], mean, se)
    return data


def norms_step(w: Walker) -> None:
    from sapa.api.norms import norms

    rng = np.random.default_rng(7)
    X, W = rng.standard_normal((4, 3)), rng.standard_normal((3, 3)) / math.sqrt(3)
    name = w.id if (w.family is not None and not w.substituted) else w.expr
    r = norms(X, W, activation=name, normalize="none" if w.family is not None and not w.substituted else w.normalize,
              mask=w.mask)

    def P(Y: np.ndarray) -> np.ndarray:
        return phi_np(w, Y @ W @ Y.T)

    np.testing.assert_allclose(r.fro_norm, np.linalg.norm(P(X)), rtol=1e-10)
    h = 1e-6
    J = np.stack([(P(X + h * E) - P(X - h * E)).ravel() / (2 * h)
                  for E in np.eye(X.size).reshape(X.size, *X.shape)], axis=1)  # (N², N·D) central differences
    np.testing.assert_allclose(r.jac_fro_norm, np.linalg.norm(J), rtol=1e-5)


def sweep_step(w: Walker, trials: int) -> None:
    from sapa.empirics.montecarlo.sweep import cells, config_from_dict, run_cell

    cfg = config_from_dict({"seed": 0, "trials": trials, "N": [N_AUDIT], "D": [D_HEAD], "d": [D_HEAD],
                            "weight_model": ["paper"], "mask": [w.mask], "activation": [w.sweep_entry]})
    (cell,) = cells(cfg)
    df = run_cell(cfg, cell)
    assert np.all(np.isfinite(df["value"])) and set(df["quantity"]) == {"fro", "jac_fro", "max_abs"}
    fro2 = df.loc[df["quantity"] == "fro", "value"].to_numpy() ** 2
    jac2 = df.loc[df["quantity"] == "jac_fro", "value"].to_numpy() ** 2
    assert fro2.size == jac2.size == trials
    m, s = _mean_se(fro2)
    mean, se = direct_mc(w)
    assert _z(m, s, mean, se) < Z, (m, s, mean, se)
    if w.id not in SLOW_AUDIT:
        r = audit_step(w)
        mj, sj = _mean_se(jac2)
        assert _z(mj, sj, r["expected_jac_fro2"], r["error_bound"] * r["expected_jac_fro2"]) < Z, \
            (mj, sj, r["expected_jac_fro2"])


def training_step(w: Walker) -> None:
    from sapa.empirics.training import study_chunk as SC
    from sapa.empirics.training.study_config import ARMS, CAUSAL_ONLY, TINY, arm_of, plan_chunks

    arm = w.id if w.id in ARMS else ("row:" if w.row else "expr:") + w.expr  # a table arm, or the expression
    assert arm_of(arm).normalize == w.normalize  # the arm exists (an expression is parsed and translated here)
    task = "text" if arm in CAUSAL_ONLY else "digits"
    plan = replace(TINY.plan(task), Ns=TINY.plan(task).Ns[:1], lrs=(1e-2,), steps=3)
    cfg = replace(TINY, seeds=1, arms=(arm,), tasks=(task,), **{task: plan})
    rows = [r for c in plan_chunks(cfg, task, plan.Ns[0], None) for r in SC.train_chunk(c, cfg)["rows"]]
    assert rows and all(r["arm"] == arm for r in rows)
    for r in rows:
        assert 0.0 <= r["val_acc_final"] <= 1.0 and math.isfinite(r["val_loss_final"]) and r["val_loss_final"] > 0
        assert math.isfinite(r["attn_fro"]) and r["attn_fro"] > 0


def mechanism_step(w: Walker) -> None:
    from sapa.empirics.training import mechanism as M

    kernel_arm = w.id if (w.id in M.MECH_ARMS) else None  # softmax, x/√N, x³/√N; any other φ: the "expr" arm
    cfg = replace(M.MECH_TINY, probes=(M.Probe("copy1", (16,), 3, 1, vocab=16),), arms=(kernel_arm,) if kernel_arm
                  else (), activation="" if kernel_arm else ("row:" if w.row else "") + w.expr)
    (chunk,) = M.plan_mech_chunks(cfg)
    r = M.train_mechanism_chunk(chunk, cfg)
    assert [m[0] for m in chunk.members] == [kernel_arm or "expr"]
    acc, loss = np.asarray(r["val_acc"], dtype=float), np.asarray(r["val_loss"], dtype=float)
    assert acc.shape[0] == len(r["steps"]) and np.all((acc >= 0) & (acc <= 1)) and np.all(np.isfinite(loss))
    assert np.all(np.isfinite(np.asarray(r["attn_fro"], dtype=float)))


def timing_step(w: Walker) -> None:
    from sapa.empirics.timing import overhead as ov

    g = ov.OverheadGrid(Ns=(16,), d=4, ps=(1,), repeats=2, methods=("naive",), crossover_ds=(), block_s=0.001,
                        memory=False)
    got = ov.time_cells(g, [{"p": w.form, "mask": w.mask, "pass": "fwd", "N": 16, "method": "naive"}], device="cpu")
    (cell,) = got.values()
    assert cell["status"] == "ok" and len(cell["ratio_rounds"]) == 2 and all(x > 0 for x in cell["ratio_rounds"])
    gen = torch.Generator().manual_seed(3)
    Q, K, V = (torch.randn(1, 6, 3, generator=gen, dtype=torch.float64) for _ in range(3))
    out = ov.expr_attention(Q, K, V, w.expr, w.row, w.mask == "causal", None)
    want = phi_np(w, (Q[0] @ K[0].T).numpy()) @ V[0].numpy()
    np.testing.assert_allclose(out[0].detach().numpy(), want, rtol=1e-10, atol=1e-12)


def lipschitz_step(w: Walker) -> None:
    from sapa.empirics.experiments.lipschitz_ball import BallConfig, make_head, run_ball
    from sapa.empirics.kernels.ball_ascent import AscentConfig
    from sapa.empirics.kernels.head_jacobian import forward, jvp

    if w.mask == "causal":  # the ball's head attends without a mask: x³/√i is defined under the causal one only
        assert w.family is not None and w.family.masks == ("causal",)
        return
    res = run_ball(BallConfig(ns=(2, 3), betas=(1.0,), activations=(w.form,), D=4, d=4, d_v=4,
                              ascent=AscentConfig(restarts=3, steps=3, polish_iters=10)))
    assert [r["n"] for r in res.rows] == [2, 3]
    assert all(math.isfinite(r["sigma_lower"]) and r["sigma_lower"] > 0 and r["bound"] is None for r in res.rows)
    h = make_head(0, 4, 4, 4, w.form)
    gen = torch.Generator().manual_seed(11)
    X, dX = (torch.randn(1, 3, 4, generator=gen, dtype=torch.float64) for _ in range(2))
    _, want = torch.autograd.functional.jvp(lambda Y: forward(h, Y), X, dX)
    torch.testing.assert_close(jvp(h, X, dX), want, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- the walks


@pytest.mark.parametrize("w", WALKERS, ids=IDS)
def test_every_activation_walks_through_every_tool(w):
    if w.id not in SLOW_AUDIT:
        audit_step(w)
    norms_step(w)
    sweep_step(w, trials=48)
    training_step(w)
    mechanism_step(w)
    timing_step(w)
    lipschitz_step(w)


def compare_names(walkers: list[Walker] | None = None) -> list[str]:
    """What the walk asks ``compare`` for: each walker's name (a family id or its expression), softmax left out (it is
    always the first row); by default the walkers of the default run (not SLOW_AUDIT)."""
    walkers = [w for w in WALKERS if w.id not in SLOW_AUDIT] if walkers is None else walkers
    return [w.compare_name for w in walkers if w.compare_name != "softmax"]


def _check_scorecard(names: list[str], sc) -> None:
    from sapa.api.compare import AXES

    assert [r.id for r in sc.rows] == ["softmax"] + names
    for r, cs in zip(sc.rows, sc.cells):
        assert [c.axis for c in cs] == list(AXES)
        for c in cs:
            assert (c.value is not None and math.isfinite(c.value)) or c.note.startswith("not computed"), (r.id, c)
        assert cs[AXES.index("train")].note.startswith("not computed")  # the tiny budget trains nothing
        size = cs[AXES.index("size")]
        assert size.value is not None and size.value > 0, (r.id, size)


def test_compare_scores_every_activation_in_one_scorecard(tiny_scorecard):
    """tests/conftest.py's one tiny scorecard: every walker's name first, in the walk's order."""
    names, sc = tiny_scorecard
    assert names[:len(compare_names())] == compare_names()
    _check_scorecard(names, sc)


@pytest.mark.slow
@pytest.mark.parametrize("w", WALKERS, ids=IDS)
def test_every_activation_walks_at_larger_sizes(w):
    """The slow walk: the audits the default run leaves out, and a sweep of 4× the draws."""
    audit_step(w)
    sweep_step(w, trials=192)


@pytest.mark.slow
def test_compare_scores_the_whole_table():
    from sapa.api.compare import compare

    names = compare_names(WALKERS)
    _check_scorecard(names, compare(names, budget="tiny", workers=1))
