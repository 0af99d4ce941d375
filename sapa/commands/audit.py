"""``sapa audit EXPR``: the N-scaling of any attention activation (the audit itself: :mod:`sapa.commands.audit_activation`)."""

from __future__ import annotations


def add_parser(sub) -> None:
    """Declare ``sapa audit`` and its arguments on the subparsers ``sub``."""
    from pathlib import Path
    from sapa.commands.arguments import finite_float, nonneg_int, positive_factor, positive_int
    from sapa.commands.audit_conventions import CONVENTIONS, DEFAULT
    from sapa.theory.symbols import symbols_words

    a = sub.add_parser("audit", help="N-scaling of any attention activation φ(x, N, i): exact, quadrature or Monte Carlo")
    a.add_argument("expr", help=f'sympy expression in {symbols_words()}, e.g. "x**3/sqrt(N)", or an activation '
                                'family id of theory/families.py, e.g. x3_sqrtN')
    a.add_argument("--normalize", choices=("none", "row"), default="none", help="row: divide each row by its sum")
    a.add_argument("--mask", choices=("none", "causal"), default="none")
    a.add_argument("--model", choices=("paper", "shared", "iid", "tied", "corr"), default="iid")
    a.add_argument("--N", type=positive_int, default=196, help="sequence length")
    a.add_argument("--D", type=positive_int, help="token dimension (default 768; inferred from --w for shared)")
    a.add_argument("--d", type=positive_int, default=64, help="head dimension")
    a.add_argument("--rho", type=finite_float, help="weight correlation for --model corr (default 0.5)")
    a.add_argument("--sigma", type=finite_float, help="weight std (default 1/√D; paper model: 1)")
    a.add_argument("--w", type=Path, help="W = W_Q W_Kᵀ as .npy (D, D), for --model shared")
    a.add_argument("--sigma-x", type=Path, help="token covariance Σ as .npy (D, D), for --model shared")
    a.add_argument("--trials", type=positive_int, default=200, help="Monte Carlo draws per N (row-normalised φ)")
    a.add_argument("--seed", type=nonneg_int, default=0)
    a.add_argument("--force", action="store_true",
                   help="run even beyond the work limit of sapa sweep or the available memory (estimated up front)")
    a.add_argument("--logit-scale", choices=CONVENTIONS, default=DEFAULT,
                   help="what x is in the headline: an entry of S/√d (as transformers compute it: x → x/√d is "
                        "substituted; the default, the ledger's convention) or of S = X W_Q W_Kᵀ Xᵀ (the paper's "
                        "theory); the verdict under the other convention is printed beside it")
    a.add_argument("--size-factor", type=positive_factor, default=None,
                   help="the size reading's threshold K: E-RMS ‖φ‖_F within K× of softmax's √N (default: "
                        "sapa.rules.like_softmax.SIZE_FACTOR = 10)")
    a.add_argument("--json", action="store_true",
                   help="print one JSON object (nested: range, readings, named_sizes, verdict_evidence)")


def run(args) -> int:
    """Audit ``args.expr`` (an expression or an activation family id) and print the result, as text or JSON."""
    from sapa.commands.audit_activation import audit_and_print

    return audit_and_print(args)
