"""One module per claim or question of arXiv 2410.18613, each built on the kernels and the Monte Carlo:
which way the scale should move with N (``scale_direction``), per-row norms under causal masking
(``causal``), the measured worst case over bounded inputs (``worst_case``), softmax's bounds of Thm 4.1
(``softmax_bounds``) and the Monte Carlo side of the audit of any activation (``audit``).
"""
