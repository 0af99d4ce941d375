"""Exact ‖φ(S)‖_F, ‖∂φ/∂S‖_F and ‖∂φ(S)/∂X‖_F of given matrices, and the certified σ₁ of ∂φ/∂X (``sapa norms``).

``activation`` is ``softmax`` or ``poly`` (read as softmax(scale·S) and scale·S^p) or any expression ``sapa audit``
accepts (with ``normalize`` and ``mask``); the weights are W (S = X W Xᵀ) or ``wq``/``wk`` [``wv`` [``wo``]] split
into ``heads``. softmax and poly on one W take the closed-form kernels of :mod:`sapa.empirics.kernels.norms`;
everything else :mod:`sapa.empirics.kernels.expr_norms`, with ``spectral`` the bracket of :mod:`sapa.api.spectral`.
:func:`norms` (``sapa.norms``) returns a :class:`NormsResult`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sapa.api.floats import LOG10_MIN_NORMAL, finite_or_none, mark_below_range
from sapa.api.inputs import PY, Names, matrix, nonneg_int
from sapa.api.results import Result
from sapa.common.validate import InputError, choice, positive_float, positive_int

__all__ = ["NormsResult", "check_expression_options", "is_plain", "norms", "norms_activation", "plain_norms",
           "run_norms"]

NAMED = ("softmax", "poly")


@dataclass(frozen=True, repr=False)
class NormsResult(Result):
    """The exact norms of one attention layer on given X (:func:`norms`); no verdict: the numbers are the answer.

    ``fro_norm`` is ‖φ(S)‖_F, ``jac_s_fro_norm`` ‖∂φ/∂S‖_F and ``jac_fro_norm`` ‖∂φ(S)/∂X‖_F (root sum of squares over
    heads); with ``spectral``, ``sigma_lower`` ≤ σ₁(∂φ/∂X) ≤ ``sigma_upper`` (one head). ``data`` / ``to_dict()`` is
    the whole ``sapa norms --json`` object (log10 values, per-head lists, the certificate)."""

    activation: str
    n: int
    d_model: int
    fro_norm: float | None
    jac_s_fro_norm: float | None
    jac_fro_norm: float | None
    sigma_lower: float | None
    sigma_upper: float | None


def norms(X, W=None, *, wq=None, wk=None, wv=None, wo=None, heads: int | None = None, activation: str = "softmax",
          p: int = 1, scale: float = 1.0, normalize: str = "none", mask: str = "none", spectral: bool = False,
          tol: float = 1e-8, max_steps: int = 200, seed: int = 0, certificate: str = "auto",
          progress: bool = False) -> NormsResult:
    """‖φ(S)‖_F, ‖∂φ/∂S‖_F, ‖∂φ(S)/∂X‖_F for S = X W Xᵀ (or per head X W_Q^h W_K^hᵀ Xᵀ), exactly, in float64.

    Args:
      X: (N, D) tokens, a numpy array or a torch tensor (read as float64).
      W: (D, D) bilinear form W = W_Q W_Kᵀ; or ``wq``, ``wk`` (D, H·d), ``wv`` (D, H·d_v), ``wo`` (H·d_v, D_out)
        with ``heads`` H.
      activation: "softmax", "poly" (with ``p``; ``scale`` multiplies: softmax(scale·S), scale·S^p), an activation
        family id or an expression in x, N, i, j such as ``"x**3/sqrt(N)"`` (with ``normalize``, ``mask``).
      spectral: also the certified bracket of σ₁(∂φ/∂X) (``tol``, ``max_steps``, ``seed``, ``certificate``).
    Returns:
      :class:`NormsResult`; a bad argument raises :class:`sapa.common.validate.InputError` (one line).
    """
    X = matrix("X", X)
    for name, value, options in (("normalize", normalize, ("none", "row")), ("mask", mask, ("none", "causal")),
                                 ("certificate", certificate, ("auto", "lanczos", "dense"))):
        choice(name, value, options)
    p, max_steps, seed = positive_int("p", p), positive_int("max_steps", max_steps), nonneg_int("seed", seed)
    heads = positive_int("heads", heads) if heads is not None else None
    if not isinstance(activation, str):
        raise InputError(f"activation must be a string (softmax, poly or an expression), got {activation!r}")
    if is_plain(activation, W is not None, spectral, normalize, heads, any(w is not None for w in (wq, wk, wv, wo))):
        from sapa.npyfile import square_matrix

        return NormsResult.of(plain_norms(X, square_matrix("W", matrix("W", W)), activation, p, scale, mask))
    check_expression_options(activation, normalize, p, scale, tol)
    act = norms_activation(activation, p, scale, normalize, mask)
    layer = _layer(X.shape[1], W, wq, wk, wv, wo, heads)
    return NormsResult.of(run_norms(X, layer, act, spectral=bool(spectral), tol=float(tol), max_steps=max_steps,
                                    seed=seed, progress=progress, certificate=certificate))


def is_plain(activation: str, has_w: bool, spectral: bool, normalize: str, heads: int | None, qkvo: bool) -> bool:
    """Whether the closed-form kernels answer: softmax or poly on one W, no spectral norm, no normalize."""
    return (activation in NAMED and has_w and not spectral and normalize == "none" and heads in (None, 1)
            and not qkvo)


def check_expression_options(activation: str, normalize: str, p: int, scale: float, tol: float,
                             names: Names = PY) -> None:
    """InputError where an option does not apply to ``activation`` (or ``tol`` is not in (0, 1))."""
    if activation in NAMED and normalize != "none":
        raise InputError(f"{names('normalize')} applies to expressions; {activation} fixes its own")
    if activation not in NAMED and (p != 1 or scale != 1.0):
        raise InputError(f"{names('p')} and {names('scale')} apply to softmax/poly; write them into the expression")
    if not 0 < tol < 1:
        raise InputError(f"{names('tol')} must be in (0, 1), got {tol}")


def norms_activation(activation: str, p: int, scale: float, normalize: str, mask: str, names: Names = PY):
    """The parsed :class:`sapa.theory.activation_audit.Activation` of ``activation`` (softmax/poly mapped to
    expressions: exp(scale·x) row-normalised, scale·x^p; a family id: its row)."""
    from sapa.theory.activation_audit import parse_activation

    if activation == "softmax":
        tau = positive_float(names("scale"), scale)
        return parse_activation(f"exp({tau!r}*x)", "row", mask)
    if activation == "poly":
        c = positive_float(names("scale"), scale)
        return parse_activation(f"{c!r}*x**{int(p)}", "none", mask)
    from sapa.theory.families import resolve

    return parse_activation(*resolve(activation, normalize, mask))


def _layer(D: int, W, wq, wk, wv, wo, heads: int | None):
    """The :class:`sapa.empirics.kernels.expr_norms.Layer` of W or wq/wk[/wv/wo] (arrays or tensors)."""
    from sapa.empirics.kernels.expr_norms import layer_from_qk, layer_from_w

    if (W is None) == (wq is None):
        raise InputError("give exactly one of W or wq/wk (with optional wv, wo)")
    if W is not None:
        if any(a is not None for a in (wk, wv, wo)):
            raise InputError("W is the whole bilinear form W = W_Q W_Kᵀ: it does not combine with wk/wv/wo")
        if heads not in (None, 1):
            raise InputError("heads needs wq/wk (W is one head)")
        return layer_from_w(matrix("W", W, (D, D)))
    if wk is None:
        raise InputError("wq needs wk")
    m = {n: matrix(n, a) for n, a in (("wq", wq), ("wk", wk), ("wv", wv), ("wo", wo)) if a is not None}
    for n in ("wq", "wk", "wv"):
        if n in m and m[n].shape[0] != D:
            raise InputError(f"X and {n} do not match: X has D = {D} columns but {n} has shape {m[n].shape}; it must "
                             f"have D = {D} rows")
    return layer_from_qk(m["wq"], m["wk"], m.get("wv"), m.get("wo"), heads=1 if heads is None else heads)


def plain_norms(X: np.ndarray, W: np.ndarray, activation: str, p: int, scale: float, mask: str,
                names: Names = PY) -> dict:
    """The flat result of ``sapa norms`` for softmax or poly on one W (closed-form kernels)."""
    from sapa.empirics.kernels.norms import attention_norms, kernel_family

    if W.shape[0] != X.shape[1]:  # neither matrix is wrong alone: S = X W Xᵀ needs W to be D × D for X's D
        x, w = names("x"), names("w")
        raise InputError(f"{x} and {w} do not match: {x} has D = {X.shape[1]} columns (shape {X.shape}) but {w} is "
                         f"{W.shape[0]} × {W.shape[1]}; S = X W Xᵀ needs W of shape ({X.shape[1]}, {X.shape[1]})")
    scale = positive_float(names("scale"), scale)
    r = attention_norms(X, W, kernel_family(activation, p, scale), mask=mask)
    out = {
        "activation": activation,
        "p": p if activation == "poly" else None,
        "scale": scale,
        "mask": mask,
        "n": int(X.shape[0]),
        "d_model": int(X.shape[1]),
        "fro_norm": r.fro,
        "jac_fro_norm": r.jac_fro,
        "jac_s_fro_norm": r.jac_s_fro,
        "log10_fro_norm": finite_or_none(r.log10_fro),  # exact even where the norm is below float64's range
        "log10_jac_fro_norm": finite_or_none(r.log10_jac_fro),
        "log10_jac_s_fro_norm": finite_or_none(r.log10_jac_s_fro),
        "max_abs": r.max_abs,
        "dtype": "float64",
        "logit_scale": "S",
        "logit": "S = X W Xᵀ as given (no 1/√d); --scale multiplies: softmax(S/τ) with 1/τ = --scale, c·S^p "
                 "(--scale 1/√d, i.e. τ = √d, or c = d^(-p/2) gives the S/√d convention)",
    }
    mark_below_range(out, ("fro_norm", "jac_fro_norm", "jac_s_fro_norm"))
    return out


def run_norms(X: np.ndarray, layer, act, *, spectral: bool = False, tol: float = 1e-8, max_steps: int = 200,
              seed: int = 0, progress: bool | str = True, certificate: str = "auto") -> dict:
    """The flat result of ``sapa norms`` with an expression (see the module docstring).

    ``progress``: with ``spectral``, a bar (or log lines) per bracket: Lanczos steps, the current bracket and its
    relative width; an unconverged bracket adds ``spectral_advice`` (and says it on stderr). ``certificate``:
    "auto", "lanczos" or "dense" (:func:`sapa.empirics.kernels.spectral.certified_spectral_norm`'s ``dense`` auto,
    never, always).
    """
    from sapa.api.spectral import spectral_keys
    from sapa.empirics.kernels.expr_norms import expr_norms

    r = expr_norms(X, layer, act)
    out = _frobenius_keys(X, layer, act, r)
    if spectral:
        spectral_keys(out, X, layer, act, r, tol=tol, max_steps=max_steps, seed=seed, progress=progress,
                      certificate=certificate)
    out["dtype"] = "float64"
    out["logit_scale"] = "S"  # x = S_ij with S = X W Xᵀ as given; an expression dividing x by √d computes S/√d
    out["logit"] = "S = X W Xᵀ as given (no 1/√d unless the expression divides x by √d, e.g. x/8 for d = 64)"
    return out


def _frobenius_keys(X: np.ndarray, layer, act, r) -> dict:
    """The Frobenius norms of :func:`run_norms` (summed over heads, and per head), their log10, below-range marks."""
    def rss(v):
        return math.hypot(*v)  # scaled: no square underflows

    def rss_log10(v):
        m = max(v)
        return m + 0.5 * math.log10(sum(10.0 ** (2 * (x - m)) for x in v)) if math.isfinite(m) else None

    def fin(v):
        return v if v is not None and math.isfinite(v) else None

    N, D = X.shape
    out = {"activation": act.text, "expression": str(act.expr), "normalize": act.normalize, "mask": act.mask,
           "n": int(N), "d_model": int(D), "heads": layer.H, "values": layer.has_values,
           "fro_norm": rss(r.fro), "jac_s_fro_norm": rss(r.jac_s_fro), "jac_fro_norm": rss(r.jac_fro),
           "log10_fro_norm": fin(rss_log10(r.log10_fro)), "log10_jac_s_fro_norm": fin(rss_log10(r.log10_jac_s_fro)),
           "log10_jac_fro_norm": fin(rss_log10(r.log10_jac_fro))}
    mark_below_range(out, ("fro_norm", "jac_s_fro_norm", "jac_fro_norm"))
    if layer.H > 1:  # a head's norm below float64's normal range: null, its log10 in the log10_… list
        for key, vals, logs in (("fro_norm", r.fro, r.log10_fro), ("jac_s_fro_norm", r.jac_s_fro, r.log10_jac_s_fro),
                                ("jac_fro_norm", r.jac_fro, r.log10_jac_fro)):
            out[f"{key}_per_head"] = [None if lg < LOG10_MIN_NORMAL else v for v, lg in zip(vals, logs)]
            out[f"log10_{key}_per_head"] = [fin(lg) for lg in logs]
            if any(lg < LOG10_MIN_NORMAL for lg in logs):
                out["below_double_range"].append(f"{key}_per_head")
    if layer.has_values:
        out["layer_jac_fro_norm"] = r.layer_jac_fro
    return out
