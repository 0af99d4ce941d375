"""Random inputs and weights for Monte Carlo checks of arXiv 2410.18613 (Thms 4.1–4.5).

Models (``σ_w² = 1/D`` by default, so that ``A = X W_Q`` has unit-variance entries when
``X`` has i.i.d. N(0, 1) entries):

* inputs ``X ∈ R^{N×D}``: i.i.d. N(0, σ_x² I_D) (``"iso"``); anisotropic N(0, Σ) for a given
  or power-law Σ (``"aniso"``); spiked ``√s·g Uᵀ + ε`` with ``k`` orthonormal spikes
  (``"spiked"``, covariance ``I + s UUᵀ``, like real hidden states); optionally a shared
  mean token ``μ`` of fixed norm added to every row.
* weights ``W_Q, W_K ∈ R^{D×d}`` with N(0, σ_w²) entries: independent (``"iid"``), tied
  ``W_Q = W_K`` (``"tied"``), ρ-correlated ``W_K = ρ W_Q + √(1−ρ²) W_⊥`` (``"corr"``), or a
  given ``W``. The bilinear form is ``W = W_Q W_Kᵀ ∈ R^{D×D}`` so that ``S = X W Xᵀ``.
* the paper's independent model (``"paper"``): ``A, B ∈ R^{N×d}`` with i.i.d. N(0, σ_ab²)
  entries (σ_ab = 1 by default, the marginal law of ``X W_Q`` above), ``S = A Bᵀ``.

Randomness comes only from explicit ``torch.Generator`` objects. :func:`sapa.common.seeds.trial_generator`
derives one from ``(seed, key, trial)`` with ``np.random.SeedSequence`` and a SHA-256 of the
canonical JSON of ``key``, so a trial's numbers never depend on execution order or on how
trials are batched. Sampling is done in float64 on the CPU; cast afterwards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from sapa.common.validate import InputError, choice, finite_matrix, positive_float, positive_int, unit_interval

WEIGHT_MODELS = ("paper", "iid", "tied", "corr")
INPUT_MODELS = ("iso", "aniso", "spiked")

Rng = torch.Generator | Sequence[torch.Generator]


def _normals(rng: Rng, T: int, shapes: Sequence[tuple[int, ...]]) -> list[torch.Tensor]:
    """Standard normals of shapes (T, *shape), float64: all trials from one generator, or
    trial t's draws (in the order of ``shapes``) from ``rng[t]`` when ``rng`` is a sequence.

    Only raw draws happen per trial; callers transform whole batches at once (one batched
    matmul rather than T small ones).
    """
    if isinstance(rng, torch.Generator):
        return [torch.randn(T, *sh, generator=rng, dtype=torch.float64) for sh in shapes]
    gens = list(rng) if isinstance(rng, (list, tuple)) else None
    if gens is None or not all(isinstance(g, torch.Generator) for g in gens):
        raise InputError(f"rng must be a torch.Generator or a list of them, got {type(rng).__name__}")
    if len(gens) != T:
        raise InputError(f"rng: got {len(gens)} generators for T={T} trials")
    per = [[torch.randn(*sh, generator=g, dtype=torch.float64) for sh in shapes] for g in gens]
    return [torch.stack([p[k] for p in per]) for k in range(len(shapes))]


def nonneg_float(name: str, value: object) -> float:
    """Return ``value`` as a float if it is finite and ≥ 0, else raise InputError."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise InputError(f"{name} must be a finite number ≥ 0, got {value!r}")
    if not math.isfinite(float(value)) or value < 0:
        raise InputError(f"{name} must be a finite number ≥ 0, got {value!r}")
    return float(value)


def _randn(g: torch.Generator, *shape: int) -> torch.Tensor:
    if not isinstance(g, torch.Generator):
        raise InputError(f"g must be a torch.Generator, got {type(g).__name__}")
    return torch.randn(*shape, generator=g, dtype=torch.float64)


# --------------------------------------------------------------------------- configs


@dataclass(frozen=True)
class RandomnessModel:
    """Randomness model of one Monte Carlo cell: the law of the inputs X and of the weights W_Q, W_K."""

    weights: str = "iid"  # "paper" | "iid" | "tied" | "corr"
    rho: float = 0.0  # corr only: W_K = ρ W_Q + √(1−ρ²) W_⊥
    sigma_w: float | None = None  # weight entry std; None -> 1/√D
    sigma_ab: float = 1.0  # paper model: A, B entry std
    inputs: str = "iso"  # "iso" | "aniso" | "spiked"
    sigma_x: float = 1.0  # iso / noise std of X
    aniso_alpha: float = 1.0  # aniso: eigenvalues ∝ j^(−α), trace D·σ_x²
    spikes: int = 4  # spiked: k
    spike_strength: float = 10.0  # spiked: s (variance added along each spike)
    mean_norm: float = 0.0  # ‖μ‖ of the shared mean token (0: none)

    def __post_init__(self) -> None:
        choice("weights", self.weights, WEIGHT_MODELS)
        choice("inputs", self.inputs, INPUT_MODELS)
        unit_interval("rho", self.rho)
        if self.sigma_w is not None:
            positive_float("sigma_w", self.sigma_w)
        positive_float("sigma_ab", self.sigma_ab)
        positive_float("sigma_x", self.sigma_x)
        nonneg_float("aniso_alpha", self.aniso_alpha)
        positive_int("spikes", self.spikes)
        positive_float("spike_strength", self.spike_strength)
        nonneg_float("mean_norm", self.mean_norm)

    def weight_std(self, D: int) -> float:
        """σ_w, defaulting to 1/√D."""
        return float(self.sigma_w) if self.sigma_w is not None else 1.0 / math.sqrt(D)

    def population_key(self, D: int) -> dict:
        """The fields that fix the per-cell population (Σ, spikes, μ) — not N, not the weights."""
        return {
            "population": self.inputs,
            "D": D,
            "sigma_x": self.sigma_x,
            "aniso_alpha": self.aniso_alpha if self.inputs == "aniso" else None,
            "spikes": self.spikes if self.inputs == "spiked" else None,
            "spike_strength": self.spike_strength if self.inputs == "spiked" else None,
            "mean_norm": self.mean_norm,
        }


@dataclass(frozen=True)
class Population:
    """Fixed per-cell structure of the input law: ``x = z Lᵀ (+ √s g Uᵀ) + μ``."""

    factor: torch.Tensor | None = None  # (D, D) L with Σ = L Lᵀ; None: σ_x I
    spikes: torch.Tensor | None = None  # (D, k) orthonormal U
    spike_strength: float = 0.0
    mean: torch.Tensor | None = None  # (D,) μ
    sigma_x: float = 1.0


# --------------------------------------------------------------------------- populations


def random_orthonormal(D: int, k: int, g: torch.Generator) -> torch.Tensor:
    """Haar-random ``U ∈ R^{D×k}`` with ``UᵀU = I_k`` (QR of a Gaussian, sign-fixed)."""
    D, k = positive_int("D", D), positive_int("k", k)
    if k > D:
        raise InputError(f"k={k} orthonormal directions need k ≤ D={D}")
    q, r = torch.linalg.qr(_randn(g, D, k))  # (D, k), (k, k)
    return q * torch.sign(torch.diagonal(r)).where(torch.diagonal(r) != 0, torch.ones(k, dtype=q.dtype))


def random_mean(D: int, norm: float, g: torch.Generator) -> torch.Tensor:
    """A uniformly random direction in R^D scaled to ``‖μ‖ = norm``."""
    v = _randn(g, D)
    return v * (float(norm) / torch.linalg.vector_norm(v))


def power_law_cov(D: int, alpha: float, g: torch.Generator, sigma_x: float = 1.0) -> torch.Tensor:
    """Σ = Q diag(λ) Qᵀ with ``λ_j ∝ j^(−α)``, ``tr Σ = D σ_x²`` and Haar-random ``Q``."""
    D, alpha, sigma_x = positive_int("D", D), nonneg_float("alpha", alpha), positive_float("sigma_x", sigma_x)
    lam = torch.arange(1, D + 1, dtype=torch.float64) ** (-alpha)
    lam = lam * (D * sigma_x * sigma_x / lam.sum())  # a float product: inf, not OverflowError, when too big
    if not bool(torch.isfinite(lam).all()):
        raise InputError(f"power-law covariance overflows float64 (D={D}, sigma_x={sigma_x:g})")
    q = random_orthonormal(D, D, g)
    return (q * lam) @ q.T  # (D, D)


def cov_factor(cov: object) -> torch.Tensor:
    """``L`` with ``L Lᵀ = Σ`` for a symmetric positive semi-definite Σ (eigen square root)."""
    S = torch.as_tensor(finite_matrix("cov", np.asarray(cov), (None, None)))
    if S.shape[0] != S.shape[1] or not torch.allclose(S, S.T, rtol=1e-10, atol=1e-12 * float(S.abs().max())):
        raise InputError(f"cov must be a symmetric square matrix, got shape {tuple(S.shape)}")
    lam, q = torch.linalg.eigh((S + S.T) / 2)
    if float(lam.min()) < -1e-10 * max(1.0, float(lam.max())):
        raise InputError(f"cov must be positive semi-definite (smallest eigenvalue {float(lam.min()):.3g})")
    return q * lam.clamp_min(0).sqrt()  # (D, D)


def make_population(cfg: RandomnessModel, D: int, g: torch.Generator, cov: object | None = None) -> Population:
    """Draw the fixed structure (Σ, spikes, μ) of ``cfg.inputs`` in dimension ``D`` from ``g``."""
    D = positive_int("D", D)
    factor = spikes = None
    if cfg.inputs == "aniso":
        factor = cov_factor(cov) if cov is not None else cov_factor(power_law_cov(D, cfg.aniso_alpha, g, cfg.sigma_x))
        if factor.shape[0] != D:
            raise InputError(f"cov has shape {tuple(factor.shape)}; expected ({D}, {D})")
    elif cfg.inputs == "spiked":
        spikes = random_orthonormal(D, cfg.spikes, g)
    mean = random_mean(D, cfg.mean_norm, g) if cfg.mean_norm > 0 else None
    return Population(factor=factor, spikes=spikes, spike_strength=cfg.spike_strength, mean=mean, sigma_x=cfg.sigma_x)


# --------------------------------------------------------------------------- samplers


def _x_shapes(pop: Population, N: int, D: int) -> list[tuple[int, ...]]:
    return [(N, D)] + ([(N, pop.spikes.shape[1])] if pop.spikes is not None else [])


def _make_x(pop: Population, z: torch.Tensor, g: torch.Tensor | None) -> torch.Tensor:
    """``z Lᵀ`` (or ``σ_x z``) ``+ √s g Uᵀ + μ`` for batches z (T, N, D), g (T, N, k)."""
    x = z @ pop.factor.T if pop.factor is not None else pop.sigma_x * z  # (T, N, D)
    if g is not None:
        x = x + math.sqrt(pop.spike_strength) * (g @ pop.spikes.T)  # (T, N, k) @ (k, D)
    if pop.mean is not None:
        x = x + pop.mean
    return x


def _w_shapes(cfg: RandomnessModel, D: int, d: int) -> list[tuple[int, ...]]:
    return [(D, d)] if cfg.weights == "tied" else [(D, d), (D, d)]


def _make_qk(cfg: RandomnessModel, D: int, draws: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(W_Q, W_K)`` from standard normals: ``W_K = ρ W_Q + √(1−ρ²) W_⊥`` (ρ = 0 iid, tied: W_Q)."""
    s = cfg.weight_std(D)
    wq = s * draws[0]
    if cfg.weights == "tied":
        return wq, wq.clone()
    rho = 0.0 if cfg.weights == "iid" else float(cfg.rho)
    return wq, rho * wq + math.sqrt(max(0.0, 1.0 - rho * rho)) * (s * draws[1])


def sample_x(pop: Population, T: int, N: int, D: int, rng: Rng) -> torch.Tensor:
    """``X_t = σ_x Z_t`` (or ``Z_t Lᵀ``) ``+ √s G_t Uᵀ + 1 μᵀ``; returns (T, N, D) float64."""
    T, N, D = (positive_int(n, v) for n, v in (("T", T), ("N", N), ("D", D)))
    _check_population(pop, D)
    draws = _normals(rng, T, _x_shapes(pop, N, D))
    return _make_x(pop, draws[0], draws[1] if len(draws) > 1 else None)


def sample_qk(cfg: RandomnessModel, T: int, D: int, d: int, rng: Rng) -> tuple[torch.Tensor, torch.Tensor]:
    """``(W_Q, W_K)``, each (T, D, d) with N(0, σ_w²) entries, coupled as ``cfg.weights`` says."""
    if cfg.weights == "paper":
        raise InputError("weights='paper' has no W_Q, W_K (use sample_paper_ab)")
    T, D, d = (positive_int(n, v) for n, v in (("T", T), ("D", D), ("d", d)))
    return _make_qk(cfg, D, _normals(rng, T, _w_shapes(cfg, D, d)))


def sample_paper_ab(cfg: RandomnessModel, T: int, N: int, d: int, rng: Rng) -> tuple[torch.Tensor, torch.Tensor]:
    """The paper's independent model: ``A, B`` each (T, N, d) with i.i.d. N(0, σ_ab²) entries."""
    T, N, d = (positive_int(n, v) for n, v in (("T", T), ("N", N), ("d", d)))
    a, b = _normals(rng, T, [(N, d), (N, d)])
    return cfg.sigma_ab * a, cfg.sigma_ab * b


def sample_trials(
    cfg: RandomnessModel,
    N: int,
    D: int,
    d: int,
    T: int,
    rng: Rng,
    *,
    population: Population | None = None,
    W: object | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """T trials ``(X (T, N, D), W (T, D, D))`` with ``W = W_Q W_Kᵀ``, float64.

    Args:
      cfg: the model (``cfg.weights`` must not be ``"paper"``; see :func:`sample_paper_ab`).
      N, D, d: tokens, model width, head width.
      T: trials.
      rng: one ``torch.Generator`` for all trials, or a sequence of ``T`` generators (trial
        ``t`` uses ``rng[t]``; results then do not depend on how trials are batched).
      population: fixed Σ/spikes/μ; default isotropic N(0, σ_x² I) (``cfg.inputs`` must be "iso").
      W: a given (D, D) bilinear form, used for every trial instead of sampled weights.
    """
    N, D, d, T = (positive_int(n, v) for n, v in (("N", N), ("D", D), ("d", d), ("T", T)))
    if cfg.weights == "paper":
        raise InputError("weights='paper' samples A, B directly; use sample_paper_ab")
    if population is None:
        if cfg.inputs != "iso" or cfg.mean_norm > 0:
            raise InputError(f"inputs={cfg.inputs!r} / mean_norm need a population (make_population)")
        population = Population(sigma_x=cfg.sigma_x)
    _check_population(population, D)
    if W is not None:
        Wt = torch.as_tensor(finite_matrix("W", W, (D, D)))
        return _finite(sample_x(population, T, N, D, rng), Wt.expand(T, D, D).clone(), cfg)
    xs, ws = _x_shapes(population, N, D), _w_shapes(cfg, D, d)
    draws = _normals(rng, T, xs + ws)  # per trial: X's normals, then the weights'
    x = _make_x(population, draws[0], draws[1] if len(xs) > 1 else None)  # (T, N, D)
    wq, wk = _make_qk(cfg, D, draws[len(xs) :])  # (T, D, d) each
    return _finite(x, wq @ wk.transpose(-1, -2), cfg)  # (T, D, d) @ (T, d, D) -> (T, D, D)


def _check_population(pop: object, D: int) -> None:
    """InputError unless ``pop`` is a :class:`Population` of dimension ``D``."""
    if not isinstance(pop, Population):
        raise InputError(f"population must be a Population (make_population), got {type(pop).__name__}")
    for name, t in (("factor", pop.factor), ("spikes", pop.spikes), ("mean", pop.mean)):
        if t is not None and t.shape[0] != D:
            raise InputError(f"population {name} has shape {tuple(t.shape)}; it was made for D={t.shape[0]}, not D={D}")


def _finite(X: torch.Tensor, W: torch.Tensor, cfg: RandomnessModel) -> tuple[torch.Tensor, torch.Tensor]:
    """``(X, W)``, or InputError if a draw overflowed float64 (huge σ_x, σ_w, spike strength or mean)."""
    for name, t in (("X", X), ("W = W_Q W_Kᵀ", W)):
        if not bool(torch.isfinite(t).all()):
            raise InputError(f"sampled {name} overflows float64 (sigma_x={cfg.sigma_x:g}, sigma_w={cfg.sigma_w}, "
                             f"spike_strength={cfg.spike_strength:g}, mean_norm={cfg.mean_norm:g}); rescale them")
    return X, W
