"""The ids of the ledger's entries in ledger order (claims, then the reviewers' questions, then other papers).

A plain data module: the command line lists these ids in ``sapa verify --only``'s help without importing a single
claim (which would load torch, pandas and the rest). ``sapa.claims.all_claims`` builds the ledger in this order, and
a test checks that these are exactly the ids of the claims built there.
"""

ORDER: list[str] = [
    "thm4.1-norm", "thm4.1-jacobian", "thm4.2-linear", "cor4.3-linear-scaled", "thm4.4-cubic", "cor4.5-cubic-scaled",
    "fig1-scale-direction", "causal-masking", "other-powers", "overhead", "scale-keeps-training-stable",
    "norm-vs-accuracy", "mechanism-across-n", "real-model-regime", "alibi-scaling",
    "lipschitz-on-a-ball", "relu-over-n", "sigmoid-bias-logn", "poly4-normalised",
]
