"""Evidence the ledger's checks share, computed once per ``sapa verify`` run and cached on its context.

:mod:`sapa.evidence.monte_carlo` — the budget's seeded sweep, the run's process pool and the log of first-pass Monte
Carlo-vs-exact comparisons; :mod:`sapa.evidence.growth_worst_case` — the worst case over bounded inputs of the
growth claims. The modules here gather and cache; the entries of :mod:`sapa.claims` decide.
"""
