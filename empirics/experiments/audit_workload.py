"""Work and memory of ``sapa audit`` before it starts, with the limits of sweeps (sapa.empirics.montecarlo.workload).

Monte Carlo (row-normalised or non-separable φ) at N' ∈ grid with T trials costs, as a sweep cell,
Σ_N' T·(6N'²D + 4N'D² + 2D²d) flops, and holds one chunk of draws at a time: the kernels of
:mod:`sapa.empirics.experiments.activation_sampling` keep about :data:`NN_ARRAYS` (t, N, N) float64 arrays and 4 (t, N, D) ones,
t = the chunk's draws. Exact and quadrature audits cost nothing that grows with N, except a row
index i (sums and worst case over N rows: about :data:`ROW_ARRAYS` float64 arrays of N, and a
(2048, 203) block). Beyond :data:`sapa.empirics.montecarlo.workload.MAX_FLOPS` flops, or more memory than is
available (MemAvailable; :data:`MEMORY_IF_UNKNOWN` when it cannot be read), the audit is refused
unless ``--force``.
"""

from __future__ import annotations

from sapa.empirics.montecarlo.workload import MEMORY_IF_UNKNOWN, Cost, _cell_flops, check_cost  # noqa: F401

__all__ = ["AuditWork", "NN_ARRAYS", "ROW_ARRAYS", "audit_work", "check_audit_work"]

NN_ARRAYS = 16
ROW_ARRAYS = 8
AuditWork = Cost  # flops (exact integer) and peak bytes of one audit; ``how`` names the path


def audit_work(monte_carlo: bool, model: str, D: int, d: int, Ns, trials: int, uses_i: bool) -> AuditWork:
    """The :class:`AuditWork` of an audit at the grid ``Ns`` (Monte Carlo) or at max(Ns) (exact or quadrature)."""
    from sapa.empirics.experiments.activation_sampling import CHUNK_ELEMS

    n_top = max(int(n) for n in Ns)
    k = d if model == "paper" else D
    rows = 8 * n_top * ROW_ARRAYS + 8 * 2048 * 203 if uses_i else 0
    if not monte_carlo:
        return AuditWork(flops=203 * n_top if uses_i else 0, bytes=rows, how="exact or quadrature")
    flops = sum(_cell_flops(int(n), k, d, trials) for n in Ns)
    t = max(1, min(trials, CHUNK_ELEMS // max(1, n_top * max(k, 3 * n_top))))  # draws per chunk (sapa.empirics.experiments.activation_sampling)
    per = 8 * t * (NN_ARRAYS * n_top * n_top + 4 * n_top * k + 3 * (D or 0) * d)  # the paper model (D None): no weights
    return AuditWork(flops=flops, bytes=per + rows, how=f"Monte Carlo, N = {', '.join(str(int(n)) for n in Ns)}, "
                                                         f"trials = {trials:,}")


def check_audit_work(work: AuditWork, force: bool = False, memory: int | None = -1) -> AuditWork:
    """``work``; InputError beyond MAX_FLOPS or the available memory unless ``force`` (``memory=-1``: MemAvailable):
    :func:`sapa.empirics.montecarlo.workload.check_cost`, the check every command's up-front estimate goes through."""
    return check_cost(work, "the audit", "reduce --N or --trials", "reduce --N", force, memory)
