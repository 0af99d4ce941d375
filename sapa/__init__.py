"""sapa — checking, with evidence, the theory of softmax versus polynomial attention.

Reference: Saratchandran, Zheng, Ji, Zhang, Lucey, *Rethinking Softmax: Self-Attention with
Polynomial Activations*, arXiv 2410.18613. The command line (``sapa.cli``) and the claims
ledger (``sapa.ledger``) tie together ``theory`` (exact), ``empirics`` (numbers) and
``figures`` (pictures).
"""

import sapa.empirics  # noqa: F401  (pins CPU kernel dispatch before torch is imported: sapa.common.numerics)

__version__ = "0.1.0"
