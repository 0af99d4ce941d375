"""Monte Carlo: seeded random inputs and weights (``samplers``), sweeps of norms against N over a grid of
cells (``sweep``, on one machine or a Dask cluster: ``distributed``), their statistics and growth exponents
(``stats``, ``growth_series``), and the work and memory limits checked before a run (``workload``).

Every random stream derives from an explicit seed and a key; a cell is a pure function of (config, cell).
"""
