"""The argument parser of the ``sapa`` command: ``build_parser()`` and its argument types (light: no heavy import)."""

from __future__ import annotations

import argparse
from pathlib import Path

from common.validate import InputError

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line and exits 2."""

    def error(self, message: str) -> None:  # noqa: D401 - argparse hook
        raise InputError(message)


def _int_from(text: str, lo: int, what: str) -> int:
    """An integer in [lo, 2**53] parsed from ``text`` (sizes reach float64 formulas: keep them exact)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a {what} integer, got {text!r}") from None
    if v < lo:
        raise argparse.ArgumentTypeError(f"expected a {what} integer, got {text!r}")
    if v > 2**53:
        raise argparse.ArgumentTypeError(f"expected a {what} integer ≤ 2**53, got {len(text.strip())} digits")
    return v


def _positive_int(text: str) -> int:
    return _int_from(text, 1, "positive")


def _int_nonneg(text: str) -> int:
    return _int_from(text, 0, "non-negative")


def _finite_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if v != v or v in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return v


def _positive_factor(text: str) -> float:
    v = _finite_float(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive factor, got {text!r}")
    return v


def _path(text: str) -> Path:
    """A path that names something: '' (which would mean the current folder) is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a path, got {text!r} (give '.' to mean the current folder)")
    return Path(text)


def _positive_seconds(text: str) -> float:
    v = _finite_float(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    """The full ``sapa`` argument parser."""
    import sapa

    p = _Parser(prog="sapa", description="Check the claims of arXiv 2410.18613 with exact theory and numerics.")
    p.add_argument("--version", action="version", version=f"sapa {sapa.__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    v = sub.add_parser("verify", help="run every claim of the ledger; write ledger.json, report.md, figures",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    v.add_argument("--budget", choices=("quick", "full"), default="quick", help="how hard every check samples")
    v.add_argument("--out", type=_path, default=Path("results"), help="results directory")
    v.add_argument("--seed", type=_int_nonneg, default=0, help="seed of every random stream")
    v.add_argument("--only", nargs="+", metavar="ID", help="run only these entries: " + ", ".join(_claim_ids()))

    n = sub.add_parser("norms", help="exact ‖φ(S)‖_F, ‖∂φ/∂S‖_F, ‖∂φ(S)/∂X‖_F for given X (N×D) and W (D×D) or heads; "
                                     "--spectral: certified σ₁")
    n.add_argument("--x", type=Path, required=True, help="X as a .npy file, shape (N, D)")
    n.add_argument("--w", type=Path, help="W = W_Q W_Kᵀ as a .npy file, shape (D, D)")
    n.add_argument("--activation", required=True,
                   help='softmax, poly, an activation family id (theory/families.py, e.g. x3_sqrtN) or any '
                        'expression sapa audit accepts, e.g. "sigmoid(x/8 - log(N))"')
    n.add_argument("--normalize", choices=("none", "row"), default="none",
                   help="expressions: row divides each row by its sum")
    n.add_argument("--p", type=_positive_int, default=1, help="polynomial degree (poly only)")
    n.add_argument("--scale", type=_finite_float, default=1.0,
                   help="softmax: temperature τ inside softmax(τS); poly: coefficient c of c·x^p")
    n.add_argument("--mask", choices=("none", "causal"), default="none")
    n.add_argument("--wq", type=Path, help="W_Q as .npy (D, H·d); with --wk, S_h = X W_Q^h W_K^hᵀ Xᵀ")
    n.add_argument("--wk", type=Path, help="W_K as .npy (D, H·d)")
    n.add_argument("--wv", type=Path, help="W_V as .npy (D, H·d_v): the layer Σ_h φ(S_h) X W_V^h W_O^h")
    n.add_argument("--wo", type=Path, help="W_O as .npy (H·d_v, D_out) (default: heads concatenated)")
    n.add_argument("--heads", type=_positive_int, default=1, help="number of heads the columns are split into")
    n.add_argument("--safetensors", type=Path, help="a layer's weights (wq/wk/wv/wo, or BERT's attention.* names)")
    n.add_argument("--prefix", help="with --safetensors: the layer's name prefix, e.g. encoder.layer.0.")
    n.add_argument("--spectral", action="store_true",
                   help="also σ₁ of ∂φ/∂X (per head) and of the layer, as a certified bracket")
    n.add_argument("--tol", type=_finite_float, default=1e-8, help="--spectral: relative bracket width to stop at")
    n.add_argument("--max-steps", type=_positive_int, default=200, help="--spectral: Lanczos vectors at most")
    n.add_argument("--seed", type=_int_nonneg, default=0, help="--spectral: seed of the Lanczos start vectors")
    n.add_argument("--certificate", choices=("auto", "lanczos", "dense"), default="auto",
                   help="--spectral: Lanczos, then the dense Cholesky certificate where N·D ≤ 16 384 and Lanczos "
                        "stays open (auto); Lanczos only; or dense at once")
    n.add_argument("--json", action="store_true", help="print a flat JSON object")

    e = sub.add_parser("exact", help="exact E‖φ(S)‖²_F, E‖∂φ(S)/∂X‖²_F and the crossover N* for φ(x) = x^p")
    e.add_argument("--p", type=_positive_int, required=True, help="power p of φ(x) = x^p (element-wise)")
    e.add_argument("--model", choices=("paper", "shared", "iid", "tied", "corr"), required=True,
                   help="paper: independent A, B; shared: fixed W (--w); iid/tied/corr: random W_Q, W_K")
    e.add_argument("--N", type=_positive_int, required=True, help="sequence length")
    e.add_argument("--D", type=_positive_int, help="token dimension (inferred from --w for shared)")
    e.add_argument("--d", type=_positive_int, help="head dimension (paper, iid, tied, corr)")
    e.add_argument("--rho", type=_finite_float, help="weight correlation for --model corr (default 0.5)")
    e.add_argument("--sigma", type=_finite_float, help="weight std (default 1/√D; paper model: 1)")
    e.add_argument("--w", type=Path, help="W = W_Q W_Kᵀ as .npy (D, D), for --model shared")
    e.add_argument("--sigma-x", type=Path, help="token covariance Σ as .npy (D, D), for --model shared")
    e.add_argument("--json", action="store_true", help="print a flat JSON object")

    s = sub.add_parser("sweep", help="run (or resume) a Monte Carlo sweep from a TOML config into Parquet")
    s.add_argument("config", help="TOML config path, or the name of a built-in config (quick, full)")
    s.add_argument("--out", type=_path, required=True, help="results directory (resumable)")
    s.add_argument("--seed", type=_int_nonneg, help="override the config's seed")
    group = s.add_mutually_exclusive_group()
    group.add_argument("--workers", type=_positive_int, default=1, help="local worker processes (K > 1: Dask)")
    group.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. tcp://host:8786")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--force", action="store_true",
                   help="run even beyond the work limits (empirics.montecarlo.workload: 100 000 cells, 1e16 flops)")
    s.add_argument("--timeout", type=_positive_seconds, metavar="SECONDS",
                   help="with --scheduler: give up (exit 2) if no worker has joined within SECONDS (default: wait)")

    t = sub.add_parser("train", help="the training study: softmax vs x^p scale rules across N, each arm with its own "
                                     "learning-rate sweep, as vectorised ensembles (resumable)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    t.add_argument("--budget", choices=("quick", "full"), default="quick")
    t.add_argument("--out", type=_path, default=Path("results/train"), help="results directory (resumable)")
    t.add_argument("--seed", type=_int_nonneg, default=0)
    tw = t.add_mutually_exclusive_group()
    tw.add_argument("--workers", type=_positive_int, default=2,
                    help="ensemble chunks in parallel (K processes, 1 thread each, that die with sapa; 1: serial "
                         "here; identical numbers)")
    tw.add_argument("--scheduler", help="address of a running Dask scheduler (tcp://host:8786 or a scheduler file): "
                                        "train the chunks on its workers (docs/cluster.md)")
    t.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where the mechanism chunks train (float32; cuda only when present)")
    t.add_argument("--activation", metavar="EXPR",
                   help="train φ(x, N, i) (any expression `sapa audit` accepts) beside softmax on the mechanism tasks "
                        "across N and print its learning-curve statistics")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")

    b = sub.add_parser("bench", help="benchmark the exact kernels, polynomial vs softmax attention runtime, ensemble training")
    b.add_argument("--quick", action="store_true", help="small sizes (seconds), for smoke tests")
    b.add_argument("--part", choices=("all", "kernels", "overhead", "training"), default="all",
                   help="kernels: exact norm kernels vs jacrev and vs forming S; overhead: attention runtime; "
                        "training: ensemble vs one-at-a-time training (ensemble_speedup)")
    b.add_argument("--json", action="store_true", help="print one JSON object")
    b.add_argument("--out", type=_path, help="also write the JSON to this file")
    b.add_argument("--scaling", action="store_true",
                   help="also time a fixed sweep serially and on LocalCluster(2) (efficiency T1/(2·T2))")

    f = sub.add_parser("figures", help="regenerate every figure from stored results, without recomputing")
    f.add_argument("--results", type=_path, default=Path("results"), help="a directory written by sapa verify")
    f.add_argument("--out", type=_path, help="figure directory (default RESULTS/figures)")
    nb = sub.add_parser("notebooks",
                        help="execute notebooks/NN_*.py and write NN_*.ipynb with outputs (--check: only check)")
    nb.add_argument("--check", action="store_true", help="execute nothing; exit 1 if an .ipynb is stale or lacks outputs")
    nb.add_argument("--only", nargs="+", metavar="NN", help="only these notebooks, by number (default: all)")
    nb.add_argument("--dir", type=Path, help="notebook folder (default: the checkout's notebooks/)")
    nb.add_argument("--timeout", type=_positive_int, default=1200, help="seconds one cell may run")
    c = sub.add_parser("calibrate", help="measure every verdict rule's error rates on synthetic evidence with a known truth",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    c.add_argument("--rule", nargs="+", action="extend", metavar="NAME",
                   help="only these rules (default: all); repeatable: --rule A --rule B runs both")
    c.add_argument("--trials", type=_positive_int, help="synthetic evidences per truth (default: each rule's own)")
    c.add_argument("--seed", type=_int_nonneg, default=0)
    c.add_argument("--json", action="store_true", help="print one JSON object {\"rules\": [...]}")
    c.add_argument("--store", action="store_true",
                   help="also store the calibrations the ledger cites (sapa/rules/calibrations.json; default trials, "
                        "seed 0 only)")
    a = sub.add_parser("audit", help="N-scaling of any attention activation φ(x, N, i): exact, quadrature or Monte Carlo")
    a.add_argument("expr", help='sympy expression in x (logit), N (tokens), i (row index), e.g. "x**3/sqrt(N)", or an '
                                'activation family id of theory/families.py, e.g. x3_sqrtN')
    a.add_argument("--normalize", choices=("none", "row"), default="none", help="row: divide each row by its sum")
    a.add_argument("--mask", choices=("none", "causal"), default="none")
    a.add_argument("--model", choices=("paper", "shared", "iid", "tied", "corr"), default="iid")
    a.add_argument("--N", type=_positive_int, default=196, help="sequence length")
    a.add_argument("--D", type=_positive_int, help="token dimension (default 768; inferred from --w for shared)")
    a.add_argument("--d", type=_positive_int, default=64, help="head dimension")
    a.add_argument("--rho", type=_finite_float, help="weight correlation for --model corr (default 0.5)")
    a.add_argument("--sigma", type=_finite_float, help="weight std (default 1/√D; paper model: 1)")
    a.add_argument("--w", type=Path, help="W = W_Q W_Kᵀ as .npy (D, D), for --model shared")
    a.add_argument("--sigma-x", type=Path, help="token covariance Σ as .npy (D, D), for --model shared")
    a.add_argument("--trials", type=_positive_int, default=200, help="Monte Carlo draws per N (row-normalised φ)")
    a.add_argument("--seed", type=_int_nonneg, default=0)
    a.add_argument("--force", action="store_true",
                   help="run even beyond the work limit of sapa sweep or the available memory (estimated up front)")
    a.add_argument("--logit-scale", choices=("S", "S/sqrt(d)"), default="S",
                   help="what x is: an entry of S = X W_Q W_Kᵀ Xᵀ (the paper's theory) or of S/√d (as transformers "
                        "compute it: x → x/√d is substituted)")
    a.add_argument("--size-factor", type=_positive_factor, default=None,
                   help="the size reading's threshold K: E-RMS ‖φ‖_F within K× of softmax's √N (default: "
                        "sapa.rules.audit.SIZE_FACTOR = 10)")
    a.add_argument("--json", action="store_true",
                   help="print one JSON object (nested: range, readings, named_sizes, verdict_evidence)")
    return p


def _claim_ids() -> list[str]:
    """The ids ``verify --only`` accepts, in ledger order, from the light registry (no claim is imported)."""
    from sapa.claim_ids import ORDER

    return list(ORDER)
