"""Local Lipschitz constant σ₁(∂F/∂X) of whole multi-head softmax attention layers (with W_O) against N, certified.

Castin, Ablin & Peyré (ICML 2024, "How Smooth Is Attention?") bound the local Lipschitz constant of
(multi-head) self-attention on inputs of bounded token norm and report that it grows like √n up to a
constant (their abstract). This module measures the quantity their bound is about, at real and random
layers, as the certified bracket of :func:`sapa.empirics.kernels.spectral.certified_spectral_norm` (Lanczos lower
bound; trace-and-residual upper bound; ‖J‖_F), with the layer
F(X) = Σ_h softmax((XW_Q^h + b_Q^h)(XW_K^h + b_K^h)ᵀ/√d) X W_V^h W_O^h (value and output biases are
constant and drop out of the Jacobian, softmax rows summing to 1):

* **all-MiniLM-L6-v2** (every layer l, 12 heads, D = 384, d = 32): X the hidden states entering layer l
  for the first N tokens ``[CLS] t_1 … t_{N−2} [SEP]`` of the first shipped passage (:mod:`sapa.empirics.realmodel.real_model`,
  offline), R = max_i ‖x_i‖ recorded;
* **ViT-Base-sized random layers** (D = 768, 12 heads, d = 64): W entries N(0, 1/D), tokens N(0, I_D)
  (‖x_i‖ ≈ √D, as after LayerNorm), seeded.

The published upper bound is not computed here: its exact statement (constant, assumptions) could not be
read in this session (see ``PUBLISHED_BOUND``), and sapa does not guess a formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["LayerLipschitzResult", "PUBLISHED_BOUND", "measure_layer", "minilm_layer", "vit_layer",
           "run_layer_lipschitz"]

PUBLISHED_BOUND = ("not computed: the theorem of Castin, Ablin & Peyré (ICML 2024) bounding multi-head "
                   "self-attention's Lipschitz constant on bounded inputs could not be retrieved in full text here "
                   "(the search tool returned the abstract only: '√n up to a constant factor'); sapa does not "
                   "guess its constant or assumptions")


KW_DELTA = 1e-3  # each random-start upper bound fails with at most this probability (lanczos_random_start)


def measure_layer(X: np.ndarray, layer, *, max_steps: int, seed: int, tol: float = 1e-6) -> dict:
    """Certified σ₁ bracket, ‖J‖_F, R = max ‖x_i‖ and the published estimator's √‖JᵀF(X)‖ of the softmax layer
    ``layer`` at X (N, D)."""
    from sapa.empirics.kernels.expr_norms import LayerOperator, expr_norms
    from sapa.empirics.kernels.spectral import certified_spectral_norm
    from sapa.theory.activation_audit import parse_activation

    act = parse_activation("exp(x)", "row")  # the 1/√d is folded into W_Q
    fro = expr_norms(X, layer, act).layer_jac_fro
    op = LayerOperator(X, layer, act)
    # Lanczos only: the dense certificate's n³/3 flops (n = N·D up to 16 384) would not fit the ledger's budgets
    b = certified_spectral_norm(op.matvec, op.rmatvec, op.in_shape, fro**2, tol=tol, max_steps=max_steps, seed=seed,
                                dense="never")
    from sapa.empirics.kernels.lanczos_random_start import upper_bound as kw_upper

    n = int(np.prod(op.in_shape))
    prob = min(b.upper, kw_upper(b.estimate, b.steps, n, KW_DELTA))  # except with probability ≤ KW_DELTA
    return {"N": int(X.shape[0]), "sigma_lower": b.lower, "sigma_upper": b.upper, "sigma_estimate": b.estimate,
            "sigma_upper_prob": prob, "kw_delta": KW_DELTA,
            "jac_fro": fro, "converged": b.converged, "steps": b.steps,
            "R": float(np.max(np.linalg.norm(X, axis=1))), "published_estimator": _published(X, layer, op)}


def _published(X: np.ndarray, layer, op) -> float | None:
    """√‖J(X)ᵀ F(X)‖, what the published power iteration returns (:mod:`sapa.empirics.realmodel.peer_estimator`);
    None for a layer without values (its output is not a layer's)."""
    import torch

    from sapa.empirics.realmodel.peer_estimator import layer_function, published_from_operator

    if not layer.has_values:
        return None
    with torch.no_grad():
        FX = layer_function(layer)(torch.as_tensor(X, dtype=torch.float64)).numpy()  # (N, D)
    return published_from_operator(op, FX)


def minilm_layer(weights, l: int):
    """Layer l of all-MiniLM-L6-v2 as an :class:`sapa.empirics.kernels.expr_norms.Layer` (float64; 1/√d folded into W_Q)."""
    from sapa.empirics.kernels.expr_norms import layer_from_qk
    from dataclasses import replace

    c = weights.config
    pre = f"encoder.layer.{l}."
    t = lambda name: weights.t(pre + name).double().numpy()  # noqa: E731 - nn.Linear weights are (out, in)
    s = 1.0 / math.sqrt(c.d_head)
    lay = layer_from_qk(t("attention.self.query.weight").T * s, t("attention.self.key.weight").T,
                        t("attention.self.value.weight").T, t("attention.output.dense.weight").T, heads=c.n_heads)
    return replace(lay, bq=(t("attention.self.query.bias") * s).reshape(c.n_heads, c.d_head),
                   bk=t("attention.self.key.bias").reshape(c.n_heads, c.d_head))


def vit_layer(seed: int, D: int = 768, H: int = 12, d: int = 64):
    """A random layer of ViT-Base size: W_Q, W_K, W_V (D, H·d), W_O (H·d, D), entries N(0, 1/D); 1/√d in W_Q."""
    from sapa.empirics.kernels.expr_norms import layer_from_qk
    from sapa.common.seeds import rng_for

    rng = rng_for(int(seed), "layer_lipschitz", "vit", D, H, d)
    s = 1.0 / math.sqrt(D)
    W = [rng.standard_normal(shape) * s for shape in ((D, H * d),) * 3 + ((H * d, D),)]
    return layer_from_qk(W[0] / math.sqrt(d), W[1], W[2], W[3], heads=H)


@dataclass(frozen=True)
class LayerLipschitzResult:
    """Rows (model, layer, N, sigma_lower, sigma_upper, sigma_estimate, jac_fro, converged, steps, R,
    published_estimator)."""

    rows: list
    max_steps: int
    seed: int
    published_bound: str = PUBLISHED_BOUND

    def to_json(self) -> dict:
        return {"rows": self.rows, "max_steps": self.max_steps, "seed": self.seed,
                "published_bound": self.published_bound}

    @classmethod
    def from_json(cls, data: dict) -> LayerLipschitzResult:
        return cls(list(data["rows"]), int(data["max_steps"]), int(data["seed"]), str(data["published_bound"]))

    def series(self, model: str, layer: int) -> dict:
        rs = sorted((r for r in self.rows if r["model"] == model and r["layer"] == layer), key=lambda r: r["N"])
        out = {k: np.array([r[k] for r in rs], dtype=np.float64) for k in ("N", "sigma_lower", "sigma_upper",
                                                                        "sigma_estimate", "jac_fro", "R")}
        # rows stored before the published estimator was measured lack it: NaN there
        out["published_estimator"] = np.array([np.nan if r.get("published_estimator") is None
                                               else r["published_estimator"] for r in rs], dtype=np.float64)
        # rows stored before the random-start bound was recorded lack it: the certified upper bound there
        out["sigma_upper_prob"] = np.array([r.get("sigma_upper_prob", r["sigma_upper"]) for r in rs], dtype=np.float64)
        return out


def run_layer_lipschitz(minilm_Ns=(8, 16, 32, 64), vit_Ns=(8, 16, 32, 64), *, minilm_layers=range(6),
                        vit_seeds=(0,), max_steps: int = 60, seed: int = 0) -> LayerLipschitzResult:
    """The brackets of every MiniLM layer (if the model is installed) and of random ViT-B layers at each N."""
    from sapa.empirics.realmodel import real_model as rm
    from sapa.common.seeds import rng_for

    rows = []
    if rm.available():
        weights = rm.load_weights()
        tok = rm.load_tokenizer()
        corpus = rm.load_corpus()
        ids = rm.encode(tok, next(iter(corpus.passages.values())))
        for N in minilm_Ns:
            hs = rm.forward(weights, rm.prefix_ids(ids, N), dtype=__import__("torch").float64).numpy()  # (L+1, N, D)
            for l in minilm_layers:
                r = measure_layer(hs[l], minilm_layer(weights, l), max_steps=max_steps, seed=seed)
                rows.append({"model": "all-MiniLM-L6-v2", "layer": int(l), **r})
    for s in vit_seeds:
        lay = vit_layer(s)
        for N in vit_Ns:
            X = rng_for(int(seed), "layer_lipschitz", "tokens", s, N).standard_normal((N, lay.D))
            rows.append({"model": "ViT-B random", "layer": int(s), **measure_layer(X, lay, max_steps=max_steps,
                                                                                     seed=seed)})
    return LayerLipschitzResult(rows, int(max_steps), int(seed))
