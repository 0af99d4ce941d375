"""``sapa norms`` for any activation expression, several heads, values, and the certified spectral norm: the options
read into an activation and a layer (the norms themselves: :mod:`sapa.api.norms`, whose ``run_norms`` is importable
from here too, as before).

``--activation EXPR`` (anything ``sapa audit`` accepts, with ``--normalize`` and ``--mask``) or
``softmax`` / ``poly`` (read as ``exp(τx)`` row-normalised and ``c·x^p``) on X and either W (S = XWXᵀ),
``--wq/--wk`` [``--wv`` [``--wo``]] split into ``--heads``, or one ``.safetensors`` file of a layer.
Exact Frobenius norms come from :mod:`sapa.empirics.kernels.expr_norms`; ``--spectral`` adds σ₁ of ∂φ/∂X per head
(and of the whole layer when it has values) as the certified bracket of :mod:`sapa.empirics.kernels.spectral`.
"""

from __future__ import annotations

from pathlib import Path

from sapa.api.norms import run_norms  # noqa: F401  (re-exported: the tests and notebooks import it from here)
from sapa.common.validate import InputError

__all__ = ["activation_from_args", "config_heads", "file_heads", "layer_from_args", "run_norms", "load_layer_file"]


def activation_from_args(args):
    """The parsed :class:`sapa.theory.activation_audit.Activation` of ``--activation`` (softmax/poly mapped to expressions)."""
    from sapa.api.inputs import CLI
    from sapa.api.norms import norms_activation

    return norms_activation(args.activation, args.p, args.scale, args.normalize, args.mask, names=CLI)


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
