"""Every head of all-MiniLM-L6-v2 on the regime map of arXiv 2410.18613 (Cor 4.3 / 4.5), under every protocol.

:func:`analyse` runs the model over the shipped text (:mod:`sapa.empirics.realmodel.real_model`), measures
‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F of every head on every grid length under each protocol, fits the
RMS-over-texts growth exponents, and places each head on the exact Gaussian-proxy map
(:mod:`sapa.empirics.realmodel.real_geometry`). It returns a typed :class:`sapa.empirics.realmodel.real_records.RealResult`;
with ``cache_dir`` its ``to_dict()`` is stored as JSON and read back on the next call.
Conventions: :mod:`sapa.empirics.realmodel.real`.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from sapa.common.validate import InputError
from sapa.empirics.realmodel.real_geometry import (
    HeadGeometry,
    ab_correlation,
    grid_slope,
    head_geometry,
    invariants,
    paired_rms_exponents,
    participation_ratio,
    proxy_moments,
    random_weight_canonical,
    top_canonical,
)
from sapa.empirics.realmodel.real_model import (
    BertWeights,
    Protocol,
    corpus_digest,
    encode,
    forward,
    head_qk,
    load_corpus,
    load_tokenizer,
    load_weights,
    model_dir,
    prefix_ids,
    protocol_named,
    single_thread,
)
from sapa.empirics.realmodel.real_records import (
    ACTIVATIONS,
    PROXIES,
    QUICK,
    TOKEN_SETS,
    CanonicalRecord,
    HeadFit,
    HeadRecord,
    LayerRecord,
    NormGrid,
    RealConfig,
    RealMeta,
    RealResult,
)
from sapa.common.seeds import rng_for

__all__ = ["analyse", "phi_fro", "VIT_REFERENCES", "WEIGHT_MODELS", "vit_references", "layer_table"]


def analyse(config: RealConfig = QUICK, *, cache_dir=None, progress=None) -> RealResult:
    """Place every (layer, head) of all-MiniLM-L6-v2 on the regime map under every protocol.

    Steps: load weights, tokenizer and the shipped text; forward passes (float32, the model's
    precision) over every sentence and every prefix of the passages, capturing each layer's
    attention input; token covariance Σ̂_l and shifted second moment M̂_l per layer (all tokens
    of the sentences and of the longest passage prefixes); per head: invariants, exact N* and
    exponents under the three Gaussian proxies for p = 1, 3, A–B correlations, and the top
    canonical correlation against independent random weights on the same tokens (with and
    without [CLS]/[SEP]); per protocol, head and activation: ‖φ(S)‖_F and ‖∂φ(S)/∂X‖_F on every
    grid length, and the RMS exponent over texts with a paired bootstrap interval.

    Returns a :class:`RealResult`. With ``cache_dir`` it is stored as ``real_heads_<key>.json``
    (``RealResult.to_dict()``) and reused when weights, text and config are unchanged.
    """
    with single_thread():
        return _analyse(config, cache_dir, progress)


def phi_fro(S: torch.Tensor, act) -> torch.Tensor:
    """‖φ(S)‖_F per leading index of S (…, n, n): row softmax(τS), or c·S^∘p (float64; the Jacobian needs the kernels).

    ``act``: a family resolved at n (:func:`sapa.empirics.kernels.norms.at_length`: τ or c in ``coef``)."""
    if act.kernel == "softmax":
        return torch.linalg.matrix_norm(torch.softmax(act.coef * S, dim=-1))
    return act.coef * torch.linalg.matrix_norm(S**act.p)


FAMILY_OF = {"softmax": "softmax", "x/sqrt(N)": "x_sqrtN", "x^3/sqrt(N)": "x3_sqrtN"}  # ACTIVATIONS → family id


def _activation(name: str, n: int):
    """The family of an ACTIVATIONS name with its scale at matrix size n (x/√N: c = 1/√n)."""
    from sapa.empirics.kernels.norms import at_length
    from sapa.theory.families import family

    return at_length(family(FAMILY_OF[name]), n)[0]


@dataclass(frozen=True)
class _Setup:
    """The loaded model, text and grid of one analysis."""

    weights: BertWeights
    tokenizer: object
    specials: np.ndarray  # ids of [CLS], [SEP]
    names: tuple  # passages used for growth
    full: dict  # passage name -> full encoding
    sentences: tuple
    Ns: tuple
    real_k: tuple  # indices of Ns in the real range
    protocols: tuple  # Protocol
    geoms: tuple  # (L, H) HeadGeometry

    @property
    def beyond(self) -> bool:
        return len(self.real_k) < len(self.Ns)


def _setup(config: RealConfig, weights: BertWeights, corpus) -> _Setup:
    tok = load_tokenizer(Path(weights.source).parent)
    c = weights.config
    names = tuple(sorted(corpus.passages)[: config.n_texts])
    full = {n: encode(tok, corpus.passages[n]) for n in names}
    Ns = tuple(int(n) for n in config.Ns)
    M = max(Ns)
    protocols = tuple(protocol_named(n) for n in config.protocols)
    if not protocols:
        raise InputError("need at least one protocol")
    if min(len(v) for v in full.values()) < M or M > c.max_len or min(Ns) < 4 or list(Ns) != sorted(set(Ns)):
        raise InputError(f"grid lengths {Ns} must increase within [4, min(passage length, {c.max_len})]")
    lo, hi = config.real_range
    real_k = tuple(k for k, N in enumerate(Ns) if lo <= N <= hi)  # the verdict's fit range
    if len(real_k) < 2:
        raise InputError(f"need ≥ 2 grid lengths in the real range {config.real_range}, got {Ns}")
    geoms = tuple(tuple(head_geometry(head_qk(weights, l, h)) for h in range(c.n_heads)) for l in range(c.n_layers))
    specials = np.array([tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")], dtype=np.int64)
    return _Setup(weights, tok, specials, names, full, corpus.sentences, Ns, real_k, protocols, geoms)


class _TokenMoments:
    """Σ x and Σ xxᵀ of each layer's attention inputs, over all tokens and over content tokens; pooled rows."""

    def __init__(self, L: int, D: int, specials: np.ndarray):
        self.L, self.specials = L, specials
        self.n = dict.fromkeys(TOKEN_SETS, 0)
        self.s1 = {ts: np.zeros((L, D)) for ts in TOKEN_SETS}
        self.s2 = {ts: np.zeros((L, D, D)) for ts in TOKEN_SETS}
        self.pooled: list[list[np.ndarray]] = [[] for _ in range(L)]

    def add(self, hs: np.ndarray, ids: np.ndarray) -> None:
        """Accumulate one pass ``hs`` (L+1, n, D) with token ids ``ids`` (n,)."""
        keep = {"all": np.ones(len(ids), bool), "content": ~np.isin(ids, self.specials)}
        for ts, m in keep.items():
            X = hs[: self.L, m]  # (L, n, D) attention inputs
            self.n[ts] += X.shape[1]
            self.s1[ts] += X.sum(1)
            self.s2[ts] += X.transpose(0, 2, 1) @ X  # (L, D, n) @ (L, n, D)
        for l in range(self.L):
            self.pooled[l].append(hs[l])

    def mean_cov(self) -> tuple[dict, dict]:
        """Per token set: the mean (L, D) and the unbiased covariance Σ̂ (L, D, D)."""
        mean, Sigma = {}, {}
        for ts in TOKEN_SETS:
            n = self.n[ts]
            mean[ts] = self.s1[ts] / n
            Sigma[ts] = (self.s2[ts] / n - np.einsum("ld,le->lde", mean[ts], mean[ts])) * (n / (n - 1))
        return mean, Sigma


def _scores(geoms_l, X: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """X_r (H, n, r), W_r (H, r, r) and S (H, n, n) of every head of a layer on inputs X (n, D), float64."""
    Xr = torch.from_numpy(np.stack([g.reduce(X) for g in geoms_l]))  # (H, n, r)
    Wr = torch.from_numpy(np.stack([g.W_r for g in geoms_l]))  # (H, r, r)
    return Xr, Wr, Xr @ Wr @ Xr.transpose(-1, -2)  # (H, n, r) @ (H, r, r) @ (H, r, n)


class _Norms:
    """‖φ(S)‖_F and ‖∂φ/∂X‖_F of every (protocol, activation) as (L, H, T, K) arrays, filled pass by pass."""

    def __init__(self, config: RealConfig, su: _Setup):
        c = su.weights.config
        shape = (c.n_layers, c.n_heads, len(su.names), len(su.Ns))
        self.su = su
        self.fro = {(pr.name, a): np.zeros(shape) for pr in su.protocols for a in ACTIVATIONS}
        self.jac = {(pr.name, a): np.zeros(shape) for pr in su.protocols for a in ACTIVATIONS
                    if pr.name in config.jacobian_protocols}
        self.dtype = {"float32": torch.float32, "float64": torch.float64}[config.norm_dtype]
        self.softmax_bound_ok = True

    def add(self, pr: Protocol, hs: np.ndarray, t: int, k: int) -> None:
        """Norms of every head for the rows ``pr.rows(N_k)`` of the pass ``hs`` (L+1, ·, D)."""
        from sapa.empirics.kernels.norms import attention_norms_batched

        X = hs[:, pr.rows(self.su.Ns[k])]
        n = X.shape[1]
        for l, geoms_l in enumerate(self.su.geoms):
            Xr, Wr, S = _scores(geoms_l, X[l])
            for a in ACTIVATIONS:
                self.fro[pr.name, a][l, :, t, k] = phi_fro(S, _activation(a, n)).numpy()
                if (pr.name, a) in self.jac:
                    res = attention_norms_batched(Xr, Wr, _activation(a, n), device="cpu", dtype=self.dtype)
                    self.jac[pr.name, a][l, :, t, k] = res["jac_fro"].numpy()
            self.softmax_bound_ok &= bool((self.fro[pr.name, "softmax"][l, :, t, k] <= math.sqrt(n) * (1 + 1e-6)).all())

    def grids(self) -> tuple[NormGrid, ...]:
        return tuple(NormGrid(m, a, self.fro[m, a], self.jac.get((m, a))) for m, a in self.fro)


def _measure(config: RealConfig, su: _Setup, moments: _TokenMoments, say, t0: float):
    """Forward passes over sentences and passage prefixes: token moments, norms, score statistics at the longest prefix."""
    c = su.weights.config
    for text in su.sentences:
        ids = encode(su.tokenizer, text)[: c.max_len]
        moments.add(forward(su.weights, ids).double().numpy(), ids)
    say(f"sentences done ({time.perf_counter() - t0:.1f}s)")
    norms = _Norms(config, su)
    M = max(su.Ns)
    diag_stats = np.zeros((c.n_layers, c.n_heads, len(su.names), 3))  # mean S_ii, mean S_ij (i≠j), sd S_ij
    for t, name in enumerate(su.names):
        for k, N in enumerate(su.Ns):
            ids = prefix_ids(su.full[name], N)
            hs = forward(su.weights, ids).double().numpy()  # (L+1, N, D)
            for pr in su.protocols:
                if pr.context == "prefix":
                    norms.add(pr, hs, t, k)
        longest = hs  # the prefix of length M = max N: the one pass of the "fixed" protocols
        moments.add(longest, ids)
        for pr in su.protocols:
            if pr.context == "fixed":
                for k in range(len(su.Ns)):
                    norms.add(pr, longest, t, k)
        for l, geoms_l in enumerate(su.geoms):
            _, _, S = _scores(geoms_l, longest[l])  # (H, M, M)
            dg = torch.diagonal(S, dim1=-2, dim2=-1)
            off = S[:, ~torch.eye(M, dtype=torch.bool)]
            diag_stats[l, :, t] = torch.stack([dg.mean(-1), off.mean(-1), off.std(-1)], -1).numpy()
        say(f"{name} done ({time.perf_counter() - t0:.1f}s)")
    return norms, diag_stats


def _head_record(config: RealConfig, su: _Setup, g: HeadGeometry, mean_l, Sigma_l, Xpool, diag) -> HeadRecord:
    """Invariants, exact proxy moments (p = 1, 3), A–B correlation and score statistics of one head."""
    l, h = g.qk.layer, g.qk.head
    ms = mean_l + g.s
    matched = Sigma_l + np.outer(ms, ms)  # second moment of the shifted tokens x + s
    Ns_real = tuple(su.Ns[k] for k in su.real_k)
    proxies = tuple(proxy_moments(g, p, Sr, Ns_real, config.N_real, su.Ns if su.beyond else None, proxy=name)
                    for name, Sr in zip(PROXIES, (None, g.sigma_r(Sigma_l), g.sigma_r(matched))) for p in (1, 3))
    dm, om, osd = (float(v) for v in diag.mean(0))
    return HeadRecord(layer=l, head=h, shift_norm=float(np.linalg.norm(g.s)), rank=int(g.U.shape[1]),
                      invariants=invariants(g.W_r), proxies=proxies,
                      ab=ab_correlation(Xpool, g.qk, rng=rng_for(config.seed, "real", "ab-null", l, h)),
                      diag_mean_S=dm, offdiag_mean_S=om, offdiag_sd_S=osd)


def _fits(config: RealConfig, su: _Setup, norms: _Norms) -> list[HeadFit]:
    """Paired-bootstrap RMS exponents of every (protocol, activation, kind, fit range, head)."""
    c = su.weights.config
    L, H = c.n_layers, c.n_heads
    ranges = (("real", list(su.real_k)), ("all", list(range(len(su.Ns)))))[: 2 if su.beyond else 1]
    out = []
    for pr in su.protocols:
        for a in ACTIVATIONS:
            for kind, arr in (("fro", norms.fro), ("jac", norms.jac)):
                if (pr.name, a) not in arr:
                    continue
                V = arr[pr.name, a].reshape(L * H, len(su.names), len(su.Ns))
                for fr, ks in ranges:
                    f = paired_rms_exponents([pr.size(su.Ns[k]) for k in ks], V[:, :, ks], n_boot=config.n_boot,
                                             level=config.level,
                                             rng=rng_for(config.seed, "real", "bootstrap", pr.name, a, kind, fr))
                    out += [HeadFit(pr.name, a, kind, i // H, i % H, float(f["slope"][i]), float(f["lo"][i]),
                                    float(f["hi"][i]), fr, tuple(float(v) for v in f["local"][i]))
                            for i in range(L * H)]
    return out


def _analyse(config: RealConfig, cache_dir, progress) -> RealResult:
    from sapa.common.atomic import atomic_write_json
    from sapa.common.integrity import seal_record

    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    corpus = load_corpus()
    weights = load_weights(model_dir())
    digest = f"{weights.sha256}:{corpus_digest(corpus)}"
    cache = None
    if cache_dir is not None:
        cache = Path(cache_dir) / f"real_heads_{config.key(digest)}.json"
        cached = _cached(cache)
        if cached is not None:
            return cached
    su = _setup(config, weights, corpus)
    c = weights.config
    moments = _TokenMoments(c.n_layers, c.hidden, su.specials)
    norms, diag_stats = _measure(config, su, moments, say, t0)
    mean, Sigma = moments.mean_cov()
    heads, canonical = [], []
    for l, geoms_l in enumerate(su.geoms):
        Xpool = np.concatenate(moments.pooled[l])  # (n, D)
        for h, g in enumerate(geoms_l):
            heads.append(_head_record(config, su, g, mean["all"][l], Sigma["all"][l], Xpool, diag_stats[l, h]))
            canonical += [CanonicalRecord(
                tokens=ts, layer=l, head=h, real_top=top_canonical(Sigma[ts][l], g.qk.W_Q, g.qk.W_K),
                random_top=random_weight_canonical(Sigma[ts][l], g.qk.d,
                                                   rng_for(config.seed, "real", "canonical", ts, l, h)),
                participation_ratio=participation_ratio(Sigma[ts][l]), n_tokens=int(moments.n[ts]))
                for ts in TOKEN_SETS]
    layers = tuple(LayerRecord(l, participation_ratio(Sigma["all"][l]), participation_ratio(Sigma["content"][l]))
                   for l in range(c.n_layers))
    meta = RealMeta(
        config=config, weights=weights.source, weights_sha256_16=weights.sha256,
        corpus_sha256_16=corpus_digest(corpus), layers=c.n_layers, heads=c.n_heads, D=c.hidden, d_head=c.d_head,
        passages=su.names, passage_tokens=tuple(int(len(su.full[n])) for n in su.names),
        sentence_tokens=tuple(min(len(encode(su.tokenizer, s)), c.max_len) for s in su.sentences),
        n_tokens_covariance=int(moments.n["all"]), n_tokens_content=int(moments.n["content"]),
        softmax_norm_le_sqrt_n=norms.softmax_bound_ok,
        max_shift_residual=max(g.shift_residual for row in su.geoms for g in row),
        protocols={pr.name: {"context": pr.context, "specials": pr.specials, "description": pr.description,
                             "n": [pr.size(N) for N in su.Ns]} for pr in su.protocols},
        seconds=round(time.perf_counter() - t0, 2))
    res = RealResult(meta=meta, Ns=su.Ns, Ns_real=tuple(su.Ns[k] for k in su.real_k), heads=tuple(heads),
                     fits=tuple(_fits(config, su, norms)), canonical=tuple(canonical), layers=layers,
                     norms=norms.grids())
    if cache is not None:
        atomic_write_json(cache, seal_record(res.to_dict()))
    return res


def _cached(cache: Path) -> RealResult | None:
    """The stored result at ``cache`` when it is a regular, bounded file whose checksum holds; else None.

    A corrupt or edited cache (its sha256 does not match, a key or type is wrong) is recomputed, with one
    warning line; a missing one silently.
    """
    from sapa.common.integrity import CorruptResult, JSON_FIELD, check_record, warn_recompute
    from sapa.common.readfile import read_regular_text

    if not cache.exists() and not cache.is_symlink():
        return None
    try:
        rec = json.loads(read_regular_text(cache, "real-model cache"))
        check_record(rec, cache)
        return RealResult.from_dict({k: v for k, v in rec.items() if k != JSON_FIELD}).with_meta(
            from_cache=str(cache))
    except CorruptResult as exc:
        warn_recompute(exc)
    except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:  # InputError is a ValueError
        warn_recompute(CorruptResult(f"{cache}: unreadable ({' '.join(str(exc).split())[:200]})"))
    return None


# --------------------------------------------------------------------------- summaries

VIT_REFERENCES = (("ViT-B", 196, 768, 64), ("ViT-S", 196, 384, 64))  # (name, N = 14² patches, D, d)
WEIGHT_MODELS = (("iid", 0.0), ("tied", 1.0), ("corr", 0.5))


def vit_references(Ns) -> list[dict]:
    """ViT-like reference heads: random W_Q, W_K (iid / tied / ρ = 0.5), x ~ N(0, I_D), p = 1, 3.

    N*, the local exponent at the ViT length N = 196 and the grid slope over ``Ns`` (the same
    fit as the real heads'), from ``sapa.theory.moments.exact_moments``. Plain JSON rows (stored
    beside the evidence and drawn by ``sapa.figures.real_heads``).
    """
    from sapa.theory.moments import exact_moments

    out = []
    for name, N, D, d in VIT_REFERENCES:
        for model, rho in WEIGHT_MODELS:
            for p in (1, 3):
                em = exact_moments(p, model, N, D, d, rho=rho, sigma=1 / math.sqrt(D))
                out.append({"name": name, "N": N, "D": D, "d": d, "weights": model, "rho": rho, "p": p,
                            "n_star": em.crossover_n, "n_star_jac": em.crossover_n_jac,
                            "exponent_at_N": em.growth_exponent, "exponent_at_N_jac": em.growth_exponent_jac,
                            "grid_slope": grid_slope(Ns, em.crossover_n), "grid_slope_jac": grid_slope(Ns, em.crossover_n_jac)})
    return out


def layer_table(res: RealResult):
    """Per-layer medians and maxima of N* (p = 1, 3; three proxies), A–B correlations and exponents (protocol prefix).

    Returns a pandas DataFrame indexed by layer (plain columns, JSON-ready via ``to_dict``).
    """
    import pandas as pd

    rows = []
    for h in res.heads:
        row = {"layer": h.layer}
        for proxy in PROXIES:
            for p in (1, 3):
                row[f"n_star_p{p}_{proxy}"] = h.proxy(proxy, p).n_star
        ab = h.ab
        row.update({"matched_abs_mean": ab.sample.matched_abs_mean, "canonical_top": ab.sample.canonical_top,
                    "cov_norm_ratio": ab.sample.cov_norm_ratio, "null_canonical_top": ab.null.canonical_top,
                    "identity_canonical_top": ab.identity.canonical_top,
                    "diag_logit_excess_sd": ab.diag_logit_excess_sd})
        for a, tag in zip(ACTIVATIONS, ("softmax", "p1", "p3")):
            for kind in ("fro", "jac"):
                f = res.fit("prefix", a, kind, h.layer, h.head)
                row[f"exp_{tag}_{kind}"] = math.nan if f is None else f.slope
        rows.append(row)
    g = pd.DataFrame(rows).groupby("layer")
    cols = {}
    for proxy in PROXIES:
        for p in (1, 3):
            c = f"n_star_p{p}_{proxy}"
            cols[f"{c}_median"] = g[c].median()
            cols[f"{c}_max"] = g[c].max()
    for c in ("matched_abs_mean", "canonical_top", "cov_norm_ratio", "null_canonical_top", "identity_canonical_top",
              "diag_logit_excess_sd"):
        cols[c + "_median"] = g[c].median()
    for tag in ("softmax", "p1", "p3"):
        for kind in ("fro", "jac"):
            c = f"exp_{tag}_{kind}"
            cols[f"{c}_median"] = g[c].median()
            cols[f"{c}_min"] = g[c].min()
            cols[f"{c}_max"] = g[c].max()
    return pd.DataFrame(cols)
