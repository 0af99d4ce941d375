"""``sapa norms`` for any activation expression, several heads, values, and the certified spectral norm.

``--activation EXPR`` (anything ``sapa audit`` accepts, with ``--normalize`` and ``--mask``) or
``softmax`` / ``poly`` (read as ``exp(τx)`` row-normalised and ``c·x^p``) on X and either W (S = XWXᵀ),
``--wq/--wk`` [``--wv`` [``--wo``]] split into ``--heads``, or one ``.safetensors`` file of a layer.
Exact Frobenius norms come from :mod:`sapa.empirics.kernels.expr_norms`; ``--spectral`` adds σ₁ of ∂φ/∂X per head
(and of the whole layer when it has values) as the certified bracket of :mod:`sapa.empirics.kernels.spectral`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from sapa.common.validate import InputError
from sapa.commands.shared import LOG10_MIN_NORMAL

__all__ = ["activation_from_args", "config_heads", "file_heads", "layer_from_args", "run_norms", "load_layer_file"]

def activation_from_args(args):
    """The parsed :class:`sapa.theory.activation_audit.Activation` of ``--activation`` (softmax/poly mapped to expressions)."""
    from sapa.common.validate import positive_float
    from sapa.theory.activation_audit import parse_activation

    if args.activation == "softmax":
        tau = positive_float("--scale", args.scale)
        return parse_activation(f"exp({tau!r}*x)", "row", args.mask)
    if args.activation == "poly":
        c = positive_float("--scale", args.scale)
        return parse_activation(f"{c!r}*x**{int(args.p)}", "none", args.mask)
    from sapa.theory.families import resolve

    return parse_activation(*resolve(args.activation, args.normalize, args.mask))  # a family id: its row


def load_layer_file(path: Path, prefix: str = "", D: int | None = None, heads: int = 1) -> dict:
    """{wq, wk[, wv, wo]} of a .safetensors layer, every shape and size checked from its header (:mod:`sapa.commands.norms_layerfile`)."""
    from sapa.commands.norms_layerfile import load_layer_file as load

    return load(path, prefix, D, heads)


def config_heads(path: Path) -> int | None:
    """``num_attention_heads`` of the model's config.json beside the weights ``path`` (None: no file, or no such key);
    an unreadable file or a value that is not a positive integer: one-line InputError."""
    import json

    cfg = Path(path).parent / "config.json"
    if not cfg.is_file():
        return None
    try:
        data = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"--safetensors: {cfg} beside the weights cannot be read ({type(exc).__name__}); "
                         "mend it or move it aside and give --heads H") from None
    if not isinstance(data, dict) or "num_attention_heads" not in data:
        return None
    h = data["num_attention_heads"]
    if isinstance(h, bool) or not isinstance(h, int) or h < 1:
        raise InputError(f"--safetensors: {cfg}: num_attention_heads = {h!r} is not a positive integer")
    return h


def file_heads(path: Path, given: int | None) -> tuple[int, str]:
    """(H, where it came from) for a layer file, before any tensor is read: ``--heads`` if given (it must agree with
    config.json beside the file), else config.json's; with neither, a one-line refusal (one head is an assumption
    the file cannot confirm: a multi-head layer read as one head has other norms)."""
    cfg = config_heads(path)
    where = Path(path).parent / "config.json"
    if given is not None and cfg is not None and given != cfg:
        raise InputError(f"--heads {given} contradicts {where}: num_attention_heads = {cfg}; drop --heads or give "
                         f"--heads {cfg}")
    if given is not None:
        return given, "--heads" if cfg is None else "--heads, as config.json"
    if cfg is not None:
        return cfg, "config.json"
    raise InputError(f"--safetensors {path}: the number of heads is unknown (no config.json with num_attention_heads "
                     "beside it), and W_Q's columns are H·d for any H that divides them: give --heads H (--heads 1 "
                     "reads the layer as one head)")


def layer_from_args(args, D: int):
    """The :class:`sapa.empirics.kernels.expr_norms.Layer` of --w, --wq/--wk/--wv/--wo or --safetensors."""
    from sapa.common.validate import finite_matrix
    from sapa.empirics.kernels.expr_norms import layer_from_qk, layer_from_w
    from sapa.npyfile import load_npy as _load_npy

    given = [n for n in ("w", "wq", "safetensors") if getattr(args, n, None) is not None]
    if len(given) != 1:
        raise InputError("give exactly one of --w W.npy, --wq/--wk (with optional --wv, --wo), --safetensors FILE")
    if args.w is not None:
        if any(getattr(args, n) is not None for n in ("wk", "wv", "wo")):
            raise InputError("--w is the whole bilinear form W = W_Q W_Kᵀ: it does not combine with --wk/--wv/--wo "
                             "(give --wq/--wk for heads with values)")
        if args.heads not in (None, 1):
            raise InputError("--heads needs --wq/--wk or --safetensors (--w is one head)")
        return layer_from_w(finite_matrix("--w", _load_npy(args.w, "--w"), (D, D)))
    if args.wq is not None:
        if args.wk is None:
            raise InputError("--wq needs --wk")
        from sapa.commands.norms_layerfile import check_npy_layer

        given = {n: getattr(args, n) for n in ("wq", "wk", "wv", "wo") if getattr(args, n) is not None}
        shapes = check_npy_layer(given, 1 if args.heads is None else args.heads)  # the headers, before any is loaded
        for n in ("wq", "wk", "wv"):
            if n in shapes and shapes[n][0] != D:
                raise InputError(f"--x and --{n} do not match: --x has D = {D} columns but --{n} has shape "
                                 f"{shapes[n]}; it must have D = {D} rows (x_i W_{n[1].upper()} is a (1, D) @ (D, d) "
                                 "product)")
        m = {n: finite_matrix(f"--{n}", _load_npy(path, f"--{n}"), (None, None)) for n, path in given.items()}
    else:
        if any(getattr(args, n) is not None for n in ("wk", "wv", "wo")):
            raise InputError("--safetensors already holds the weights: drop --wk/--wv/--wo")
        try:
            heads, args.heads_from = file_heads(args.safetensors, args.heads)  # the file's shapes are checked with it
        except InputError:
            load_layer_file(args.safetensors, args.prefix or "", D, 1)  # what is wrong with the file itself comes first
            raise
        m = load_layer_file(args.safetensors, args.prefix or "", D, heads)
        if m["wq"].shape[0] != D:
            raise InputError(f"the layer's W_Q has D = {m['wq'].shape[0]} rows but X has D = {D}")
        return layer_from_qk(m["wq"], m["wk"], m.get("wv"), m.get("wo"), heads=heads)
    return layer_from_qk(m["wq"], m["wk"], m.get("wv"), m.get("wo"), heads=1 if args.heads is None else args.heads)


def run_norms(X: np.ndarray, layer, act, *, spectral: bool = False, tol: float = 1e-8, max_steps: int = 200,
              seed: int = 0, progress: bool | str = True, certificate: str = "auto") -> dict:
    """The flat result of ``sapa norms`` with an expression (see the module docstring).

    ``progress``: with ``spectral``, a bar (or log lines) per bracket: Lanczos steps, the current bracket and its
    relative width; an unconverged bracket adds ``spectral_advice`` (and says it on stderr). ``certificate``:
    "auto", "lanczos" or "dense" (:func:`sapa.empirics.kernels.spectral.certified_spectral_norm`'s ``dense`` auto,
    never, always).
    """
    from sapa.empirics.kernels.expr_norms import LayerOperator, expr_norms
    from sapa.empirics.kernels.spectral import certified_spectral_norm

    r = expr_norms(X, layer, act)

    def rss(v):
        return math.hypot(*v)  # scaled: no square underflows

    def rss_log10(v):
        m = max(v)
        return m + 0.5 * math.log10(sum(10.0 ** (2 * (x - m)) for x in v)) if math.isfinite(m) else None

    def fin(v):
        return v if v is not None and math.isfinite(v) else None

    from sapa.commands.shared import mark_below_range

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
    if spectral:
        per_head, advice = [], []
        for k in range(layer.H):
            Xk, lay_k, e2 = _scaled_for_spectral(X, layer, act, k)
            scale = 0  # ‖J‖_F far from 1: the operator is 2^{−scale}·J (no under/overflow in JᵀJ and its residuals)
            if e2 is None and act.normalize == "row" and math.isfinite(r.log10_jac_fro[k]) \
                    and abs(r.log10_jac_fro[k]) > SCALE_BEYOND:
                scale = round(r.log10_jac_fro[k] / math.log10(2))
                e2 = scale
            op = LayerOperator(Xk, lay_k, act, head=0 if e2 is not None and not scale else k, log2_scale=scale)
            what = "σ₁ of ∂φ/∂X" + (f", head {k + 1}/{layer.H}" if layer.H > 1 else "")
            fro2 = r.jac_fro[k] ** 2 if e2 is None else 10.0 ** (2 * (r.log10_jac_fro[k] - e2 * math.log10(2)))
            b = _bracket_with_progress(certified_spectral_norm, what, progress, op.matvec, op.rmatvec, op.in_shape,
                                       fro2, tol=tol, max_steps=max_steps, seed=seed, gram=op.gram,
                                       dense=DENSE[certificate], e2=e2 or 0)
            per_head.append(_widened(_rescaled(b.as_dict(), e2 or 0), _logit_rounding(X, layer, act, k)))
            mark_below_range(per_head[-1], SIGMA_KEYS + ("residual", "trace_rest"))
            advice += [] if per_head[-1]["converged"] else [unconverged_advice(what, b, max_steps, e2 or 0)]
        if layer.H == 1:
            below = out.pop("below_double_range") + per_head[0].pop("below_double_range")
            out.update({f"{k}": v for k, v in per_head[0].items()})
            out["below_double_range"] = below
        else:
            out["spectral_per_head"] = per_head
        if layer.has_values:
            op = LayerOperator(X, layer, act)
            b = _bracket_with_progress(certified_spectral_norm, "σ₁ of the layer's Jacobian", progress, op.matvec,
                                       op.rmatvec, op.in_shape, r.layer_jac_fro ** 2, tol=tol, max_steps=max_steps,
                                       seed=seed, gram=op.gram, dense=DENSE[certificate])
            out.update({f"layer_{k}": v for k, v in b.as_dict().items()})
            advice += [] if b.converged else [unconverged_advice("σ₁ of the layer's Jacobian", b, max_steps)]
        if advice:
            from sapa.common.progress import say

            out["spectral_advice"] = " ".join(advice)
            for line in advice:
                say(f"sapa: note: {line}")
        out["spectral_certificate"] = CERTIFICATE
    out["dtype"] = "float64"
    out["logit_scale"] = "S"  # x = S_ij with S = X W Xᵀ as given; an expression dividing x by √d computes S/√d
    out["logit"] = "S = X W Xᵀ as given (no 1/√d unless the expression divides x by √d, e.g. x/8 for d = 64)"
    return out


DENSE = {"auto": "auto", "lanczos": "never", "dense": "always"}
SCALE_BEYOND = 30  # |log₁₀ ‖J‖_F| beyond which the bracket is found for 2^{−e}J (JᵀJ's residuals square it again)
SIGMA_KEYS = ("sigma_lower", "sigma_upper", "sigma_estimate", "sigma_upper_frobenius")


def _scaled_for_spectral(X: np.ndarray, layer, act, k: int):
    """(X', the one-head layer of head k on scaled weights, e) with ∂φ/∂X = 2^e·∂φ'/∂X' for φ homogeneous in x.

    X = 2^a X', W_Q = 2^b W_Q', W_K = 2^c W_K': S = 2^s S' (s = 2a + b + c), φ(S) = 2^{ps} φ(S') (row-normalised:
    unchanged) and ∂/∂X = 2^{−a} ∂/∂X', so e = ps − a (row: −a), exact. The bracket is then found where the
    products neither underflow nor overflow. (X, layer, None) when φ is not homogeneous or the head has a bias.
    """
    from dataclasses import replace as dc_replace

    from sapa.empirics.kernels.expr_norms import _pow2, homogeneous_degree

    p = homogeneous_degree(act) if layer.bq is None else None
    if p is None:
        return X, layer, None
    a, b, c = _pow2(X), _pow2(layer.Wq[k]), _pow2(layer.Wk[k])
    one = dc_replace(layer, Wq=np.ldexp(layer.Wq[k:k + 1], -b), Wk=np.ldexp(layer.Wk[k:k + 1], -c), Wv=None, Wo=None)
    s = 2 * a + b + c
    return np.ldexp(X, -a), one, (-a if act.normalize == "row" else p * s - a)


def _logit_rounding(X: np.ndarray, layer, act, k: int) -> float:
    """ρ: a first-order bound on the relative change of σ₁ that the float64 rounding of the logits causes (row-normalised
    exp-type φ of head k; 0 otherwise).

    S = (X W_Q)(X W_K)ᵀ is formed with errors |δS_ij| ≤ γ_m (|X||W_Q|)(|X||W_K|)ᵀ_ij, m = 2D + d (γ_m = mε/(1 − mε)),
    and log φ moves by |(log φ)'|·|δS|; each P_ik then moves by a factor e^{±2 max|δ log φ|}, each entry of R_i (a
    product of two) by ±4 max|δ log φ| relative, and y, z by γ_m. At a logit gap of 10⁴ this is ~1e−11 — far below
    --tol, but above the bracket's own width, so the bracket is widened by it: it then holds σ₁ of the exact inputs.
    First order and entrywise: where the sums Σ_l R_kl y_l of an entry of J cancel (Σ_l R_kl = 0), and when
    W x_l itself cancels, the change can exceed ρ by that cancellation's factor (not bounded here).
    """
    from sapa.empirics.kernels.activation_fns import activation_functions

    fns = activation_functions(act)
    if act.normalize != "row" or fns.logf is None:
        return 0.0
    N, D = X.shape
    Wq, Wk = layer.Wq[k], layer.Wk[k]
    m = 2 * D + Wq.shape[1]
    gam = m * EPS / (1 - m * EPS)
    M = (np.abs(X) @ np.abs(Wq)) @ (np.abs(X) @ np.abs(Wk)).T  # (N, d) @ (d, N): |δS| ≤ γ_m M
    S = (X @ Wq) @ (X @ Wk).T
    i = np.arange(1, N + 1, dtype=np.float64)[:, None]
    j = np.arange(1, N + 1, dtype=np.float64)[None, :]
    with np.errstate(all="ignore"):
        dl = np.abs(np.broadcast_to(fns.dlogf(S, float(N), i, j), (N, N)))
    if act.mask == "causal":
        dl = np.tril(dl)
    move = float(np.max(dl * M)) * gam  # max |δ log φ|
    return 4.0 * math.expm1(2.0 * move) + 4.0 * gam


def _widened(d: dict, rho: float) -> dict:
    """A rescaled bracket dict widened by the relative amount ``rho`` (``logit_rounding``); converged re-judged."""
    out = dict(d)
    out["logit_rounding"] = rho
    if rho <= 0.0 or not d["sigma_upper"] and d["log10_sigma_upper"] is None:
        return out
    for key, f in (("sigma_lower", 1.0 - rho), ("sigma_upper", 1.0 + rho)):
        out[key] = d[key] * f if d[key] is not None else None
        if d[f"log10_{key}"] is not None:
            out[f"log10_{key}"] = d[f"log10_{key}"] + math.log10(max(f, 0.0)) if f > 0 else None
    lo, up = out["log10_sigma_lower"], out["log10_sigma_upper"]
    width = 1.0 - 10 ** (lo - up) if lo is not None and up is not None else 1.0
    out["rel_width"] = width
    out["converged"] = bool(width <= d["tol"])
    return out


EPS = float(np.finfo(np.float64).eps)


def _rescaled(d: dict, e: int) -> dict:
    """A bracket of ∂φ'/∂X' as one of ∂φ/∂X = 2^e·∂φ'/∂X', with log10 ends that survive under- and overflow."""
    out = dict(d)
    for key, k in [(s, e) for s in SIGMA_KEYS] + [("residual", 2 * e), ("trace_rest", 2 * e)]:  # the last two: of JᵀJ
        v = float(d[key])
        out[f"log10_{key}"] = math.log10(v) + k * math.log10(2) if v > 0 else None
        out[key] = math.ldexp(v, k) if v > 0 and out[f"log10_{key}"] < 308 else (0.0 if v == 0 else math.inf)
    return out  # values below float64's range: sapa.commands.shared.mark_below_range
CERTIFICATE = ("Lanczos on JᵀJ with Jacobian products: lower = ‖Jx‖ of the top Ritz vector; upper = "
               "λ_max[[T, UΣ], [ΣUᵀ, t_⊥I]]^½ with t_⊥ = ‖J‖²_F − tr T (JᵀJ ⪰ 0), and ≤ ‖J‖_F. Where spectral_method is "
               "dense-cholesky (N·D ≤ 16 384, when the Lanczos bracket stays open), JᵀJ is formed from products, "
               "lower = ‖Jx‖ of ARPACK's top eigenvector and upper = √(μ + δ) with λ₁ < μ proven by a floating-point "
               "Cholesky factorisation of (μ − c)I − JᵀJ (Rump 2006) and δ the round-off of the formed matrix. For a "
               "row-normalised exp-type φ (softmax) both ends are then widened by logit_rounding, a first-order bound "
               "on what the float64 rounding of S moves σ₁ by. converged: (upper − lower) ≤ tol·upper")


def bracket_text(b, e2: int = 0) -> str:
    """``[lower, upper], rel. width w`` of a :class:`~sapa.empirics.kernels.spectral.SpectralBracket` (of 2^e2·J)."""
    return f"[{_times_pow2(b.lower, e2)}, {_times_pow2(b.upper, e2)}], rel. width {b.rel_width:.3g}"


def _times_pow2(v: float, e2: int) -> str:
    """v·2^e2 as text, also where it under- or overflows float64 (as m·10^k)."""
    if v <= 0 or e2 == 0:
        return f"{v:.6g}"
    l10 = math.log10(v) + e2 * math.log10(2)
    if -300 < l10 < 300:
        return f"{math.ldexp(v, e2):.6g}"
    k = math.floor(l10)
    return f"{10 ** (l10 - k):.6g}e{k:+d}"


def unconverged_advice(what: str, b, max_steps: int, e2: int = 0) -> str:
    """What to do when a bracket stayed open: it is still certified; a looser --tol, more steps, or a smaller X."""
    head = (f"{what}: the bracket {bracket_text(b, e2)} did not close to --tol {b.tol:g}; it holds as it is (σ₁ lies "
            "inside it).")
    if b.method == "dense-cholesky":
        return (f"{head} It comes from the dense certificate, whose round-off allowance (about 64·ε·N·D·‖J‖²_F/σ₁² "
                "relative) is wider than --tol here: loosen --tol.")
    n = int(np.prod(b.v.shape))
    return (f"{head} Lanczos ran {b.steps} steps and the dense certificate needs N·D ≤ 16 384 (here {n}). To narrow "
            f"it, raise --max-steps above {max_steps} (each step costs one Jacobian product and one transposed "
            "product, and the check every few steps O(k²·N·D)), or loosen --tol; a bracket whose lower end no longer "
            "moves needs a smaller X or fewer heads.")


def _bracket_with_progress(certify, what: str, progress, *args, e2: int = 0, **kwargs):
    """``certify(*args, **kwargs, on_step=…)`` under a bar of Lanczos steps whose postfix is the current bracket."""
    from sapa.common.progress import progress_bar

    bar = progress_bar(min(int(kwargs["max_steps"]), int(np.prod(args[2]))), desc=what, unit="step",
                       progress=progress)
    seen = {"k": 0, "bracket": ""}

    def on_step(k, k_max, b):
        if b is not None:
            seen["bracket"] = f"bracket {bracket_text(b, e2)}"
            bar.set_postfix_str(seen["bracket"])
        if k_max != bar.total:  # the basis' memory cap lowered the step limit, or the dense certificate took over
            bar.total = k_max
        bar.update(k - seen["k"])
        seen["k"] = k

    def on_dense(stage, done, total):  # the Lanczos steps are over: the bar stops counting them (no stale ETA)
        if bar.total != max(seen["k"], 1):
            bar.total = max(seen["k"], 1)
        where = f"{stage} {done}/{total}" if total > 1 else stage
        bar.set_postfix_str(f"{seen['bracket']}; dense certificate: {where}".lstrip("; "), refresh=True)

    try:
        return certify(*args, **kwargs, on_step=on_step, on_dense=on_dense)
    finally:
        bar.close()
