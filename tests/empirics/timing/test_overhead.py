"""Tests for `empirics/timing/overhead.py`: the benchmark runs on tiny grids and returns the documented structure.

No timing assertions: speed is measured, not tested.
"""

from __future__ import annotations

import contextlib
import json
import math

import numpy as np
import pytest
import torch

import sapa.empirics.timing.overhead as ov
from sapa.empirics.timing.overhead import OverheadGrid, bench_overhead, measured_crossover
from sapa.common.validate import InputError

TINY = OverheadGrid(Ns=(32, 64), d=8, ps=(1, 3), repeats=1, methods=("naive", "linearised"), crossover_ds=(4, 8),
                    crossover_masks=("none",), time_cap_s=5.0, block_s=0.002, linearised_flop_cap=1e9)
ROW_KEYS = {"method", "p", "mask", "N", "d", "d_v", "heads", "pass", "seconds", "seconds_min", "first_call_s",
            "ratio_vs_softmax", "ratio_min_vs_softmax", "status", "repeats", "features", "chunk"}


@pytest.fixture(scope="module")
def tiny():
    return bench_overhead(grid=TINY, device="cpu", threads=1)  # 1 thread: steady on a shared machine


def test_structure(tiny):
    res = tiny
    assert {"rows", "ratios", "crossover", "complexity", "features", "compile", "grid", "provenance",
            "seconds_total", "scales"} <= set(res)
    main = [r for r in res["rows"] if r["d"] == 8]
    # per (mask, pass, N): softmax + 2 methods × 2 powers
    assert len(main) == 2 * 2 * 2 * 5
    for r in res["rows"]:
        assert ROW_KEYS <= set(r)
        assert r["status"] == "ok" and r["seconds"] > 0 and r["seconds_min"] <= r["seconds"]
        if r["method"] == "softmax":
            assert r["p"] is None and r["ratio_vs_softmax"] is None
        else:
            assert r["ratio_vs_softmax"] > 0 and r["ratio_min_vs_softmax"] > 0
    extra = [r for r in res["rows"] if r["d"] == 4]
    assert {r["pass"] for r in extra} == {"fwd"} and {r["mask"] for r in extra} == {"none"}
    assert res["ratios"]["linearised/p3/causal/fwd+bwd@N=64"] == next(
        r["ratio_vs_softmax"] for r in main if (r["method"], r["p"], r["mask"], r["pass"], r["N"])
        == ("linearised", 3, "causal", "fwd+bwd", 64))
    assert len(res["ratios"]) == 2 * 2 * 2 * 4
    assert res["provenance"]["dtype"] == "float32" and res["provenance"]["threads"] == 1
    assert res["provenance"]["device"] == "cpu" and res["provenance"]["batch"] == 1
    assert res["features"]["p3"] == {"sym": math.comb(10, 3), "full": 512}
    assert "O(N²·d)" in res["complexity"]["naive"] and "C(d+p−1,p)" in res["complexity"]["linearised"]
    json.dumps(res)


def test_flat_summary_and_lines(tiny):
    flat = ov.flat_summary(tiny)
    assert flat["overhead_ratio_vs_softmax"] == tiny["ratios"] and flat["overhead_dtype"] == "float32"
    assert set(flat["overhead_crossover_n"]) == {"p1/d4/none", "p3/d4/none", "p1/d8/none", "p3/d8/none"}
    json.dumps(flat)
    lines = ov.summary_lines(tiny)
    assert any("softmax" in ln for ln in lines) and any(ln.startswith("crossover") for ln in lines)
    assert lines[-1].startswith("cpu, 1 thread(s), float32")


def test_crossover_table(tiny):
    table = tiny["crossover"]
    assert [(c["p"], c["d"]) for c in table] == [(1, 4), (3, 4), (1, 8), (3, 8)]
    for c in table:
        assert c["N_measured"] == [32, 64] and len(c["linearised_over_naive"]) == 2
        assert c["measured_status"] in ("crossed", "below grid") or c["measured_status"].startswith("none")
        assert c["flop_crossover_N"] > 0 and c["F"] == math.comb(c["d"] + c["p"] - 1, c["p"])


def test_measured_crossover_interpolates_in_log_log():
    Ns = [128, 256, 512, 1024]
    r = [(n / 300.0) ** -1 for n in Ns]  # ratio ∝ 1/N, equal to 1 at N = 300
    m = measured_crossover(Ns, r)
    assert m["status"] == "crossed" and m["N"] == pytest.approx(300.0, rel=1e-12)
    assert measured_crossover(Ns, [0.5, 0.4, 0.3, 0.2]) == {"status": "below grid", "N": 128.0}
    assert measured_crossover(Ns, [3, 2, 1.5, 1.2]) == {"status": "none ≤ 1024", "N": None}
    # faster at 256 but slower again at 512: the crossover is the last entry into "faster"
    assert measured_crossover(Ns, [2, 0.5, 1.5, 0.5])["N"] == pytest.approx(math.sqrt(512 * 1024) * 1.0, rel=0.3)
    assert measured_crossover([], []) == {"status": "no data", "N": None}


def test_caps_skip_and_say_why():
    base = dict(d=4, ps=(2,), masks=("none",), passes=("fwd",), repeats=1, crossover_ds=())
    # memory: naive holds 2·N² float32 = 2 KiB at N = 16, 8 KiB at N = 32
    res = bench_overhead(grid=OverheadGrid(Ns=(16, 32), methods=("naive",), mem_cap_bytes=5000, **base),
                         device="cpu", threads=1)
    by = {(r["method"], r["N"]): r["status"] for r in res["rows"]}
    assert by[("naive", 16)] == "ok" and by[("naive", 32)].startswith("skipped: estimated memory")
    assert "naive/p2/none/fwd@N=32" not in res["ratios"] and res["crossover"] == []
    # time: any measured time predicts more than 1 ns at the next N
    res = bench_overhead(grid=OverheadGrid(Ns=(16, 32, 64), methods=("linearised",), time_cap_s=1e-9, **base),
                         device="cpu", threads=1)
    by = {(r["method"], r["N"]): r["status"] for r in res["rows"]}
    assert by[("linearised", 16)] == "ok" and by[("linearised", 32)].startswith("skipped: predicted")
    assert by[("linearised", 64)].startswith("skipped: predicted")
    assert all(by[("softmax", n)] == "ok" for n in (16, 32, 64))  # the baseline is always timed


def test_compile_failure_is_recorded_not_raised(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(torch, "compile", broken)
    monkeypatch.setattr(ov, "_dynamo_limits", lambda needed: contextlib.nullcontext())  # skip importing dynamo
    g = OverheadGrid(Ns=(16, 32), d=4, ps=(1,), masks=("none",), passes=("fwd",), repeats=1, methods=("compiled",),
                     crossover_ds=())
    rows = [r for r in bench_overhead(grid=g, device="cpu", threads=1)["rows"] if r["method"] == "compiled"]
    assert [r["status"] for r in rows] == ["unavailable: RuntimeError: no compiler here"] * 2
    assert all(r["seconds"] is None and r["ratio_vs_softmax"] is None for r in rows)


def test_quick_grid_and_threads_restored(monkeypatch):
    monkeypatch.setattr(ov, "QUICK", TINY)
    before = torch.get_num_threads()
    res = bench_overhead(quick=True, threads=1)
    assert res["provenance"]["threads"] == 1 and torch.get_num_threads() == before
    assert tuple(res["grid"]["Ns"]) == (32, 64)
    assert ov.QUICK.methods == ("naive", "linearised") and ov.FULL.Ns[0] == 128 and ov.FULL.Ns[-1] == 16384


@pytest.mark.parametrize("grid,needle", [
    (OverheadGrid(Ns=(64, 32)), "increasing"),
    (OverheadGrid(Ns=()), "increasing"),
    (OverheadGrid(Ns=(0, 32)), "N must be a positive integer"),
    (OverheadGrid(methods=("fast",)), "method must be one of"),
    (OverheadGrid(passes=("bwd",)), "pass must be one of"),
    (OverheadGrid(time_cap_s=float("nan")), "time_cap_s"),
    ("quick", "OverheadGrid"),
])
def test_bad_grids(grid, needle):
    with pytest.raises(InputError, match=needle):
        bench_overhead(grid=grid)
    with pytest.raises(InputError, match="device"):
        bench_overhead(grid=TINY, device="tpu")


@pytest.mark.slow
def test_real_compile_runs_or_says_unavailable():
    """torch.compile for real (tens of seconds cold): each compiled cell is timed or 'unavailable: …', never a crash."""
    g = OverheadGrid(Ns=(32, 64), d=8, ps=(1, 3), masks=("causal",), repeats=1, methods=("naive", "compiled"),
                     crossover_ds=())
    rows = [r for r in bench_overhead(grid=g, device="cpu", threads=1)["rows"] if r["method"] == "compiled"]
    assert rows and all(r["status"] == "ok" or r["status"].startswith("unavailable: ") for r in rows)
    assert all(r["first_call_s"] is not None for r in rows if r["status"] == "ok")


@pytest.mark.parametrize("N, block", [(37, 8), (64, 16), (5, 128)])
@pytest.mark.parametrize("p", [1, 3])
def test_the_causal_blocked_form_is_the_masked_form_and_its_gradient(N, block, p):
    # float64: the blocks on and below the diagonal give exactly what the full product with tril gives
    from sapa.empirics.kernels.linearised import _quadratic

    g = torch.Generator().manual_seed(N * 10 + p)
    Q, K, V = (torch.randn(2, N, 6, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    a, b = ov.causal_blocked(Q, K, V, p, block), _quadratic(Q, K, V, p, causal=True)
    assert float((a - b).abs().max().detach()) <= 1e-12 * float(b.abs().max().detach())
    ga = torch.autograd.grad(a.sum(), (Q, K, V))
    gb = torch.autograd.grad(b.sum(), (Q, K, V))
    assert all(float((x - y).abs().max()) <= 1e-12 * float(y.abs().max()) for x, y in zip(ga, gb))


def test_peak_memory_sees_the_materialised_matrix_that_sdpa_never_writes():
    import torch.nn.functional as Fn

    N, d = 512, 16
    Q, K, V = (torch.randn(1, 1, N, d) for _ in range(3))
    naive = ov.peak_bytes(lambda: ov._naive_fn(3, False)(Q, K, V, torch.ones(N)))
    fused = ov.peak_bytes(lambda: Fn.scaled_dot_product_attention(Q, K, V))
    assert naive >= 2 * 4 * N * N  # S and S^3 at least (float32)
    assert fused < 4 * N * N        # never an N × N matrix


def test_cpu_clock_readings_ignore_noise_in_wall_time_and_the_wall_readings_do_not(monkeypatch):
    """A stubbed wall clock that adds load-like noise (each block stretched by an exponential delay of mean 0.1 s, ten
    blocks' worth): the CPU-time readings are what they are without it, while the same blocks' wall-clock rounds
    scatter several times wider — so a rule on wall time would see the noise. The delay is far above what a loaded
    CPU clock scatters (a uniform 0–0.03 s delay once left the wall rounds only 1.8× the CPU rounds' spread in CI,
    where the CPU rounds of 0.01 s blocks scattered by 13 %): the log of a ratio of two such delays has sd π/√3."""
    import numpy as np

    from sapa.claims.overhead import best_ratios, timing_evidence
    from sapa.rules.timing import decide, tests_of

    grid = OverheadGrid(Ns=(64, 128), d=16, ps=(1,), masks=("none",), passes=("fwd",), methods=("naive",),
                        crossover_ds=(), repeats=5, block_s=0.01, memory=False)

    def evidence(res, wall):
        return timing_evidence(best_ratios(res["rows"], 16), 1, 3.0, res["provenance"], "none", "fwd", wall=wall)

    def widest(ev):  # the largest se over the cells, without the drift: the rounds' own scatter
        return max(math.sqrt(t.s2 / t.rounds) for t in tests_of(ev).values())

    quiet = bench_overhead(grid=grid, device="cpu", threads=1)
    rng, real, lag = np.random.default_rng(0), ov._wall, [0.0]

    def noisy() -> float:  # each reading of the wall clock lags by a random, growing amount: a loaded machine
        lag[0] += float(rng.exponential(0.1))
        return real() + lag[0]

    monkeypatch.setattr(ov, "_wall", noisy)
    loaded = bench_overhead(grid=grid, device="cpu", threads=1)
    assert decide(evidence(quiet, False)) == decide(evidence(loaded, False)) == "HOLDS"
    # the same blocks on the two clocks: only the stubbed wall clock carries the noise (a "quiet" wall-clock run is
    # no reference here: beside the other test worker the real wall clock is loaded too)
    assert widest(evidence(loaded, True)) > 3 * widest(evidence(loaded, False))


@pytest.mark.slow
def test_beside_two_busy_loops_the_cpu_time_readings_are_those_of_a_quiet_machine():
    """The validation the entry rests on, for real: one busy loop per core. On the CPU clock no reading flips
    (HOLDS never becomes FAILS); a reading may become UNDETERMINED — oversubscribed cores (two loops beside the
    other test worker) widen the rounds' spread, which the rule's interval reports rather than hides."""
    import subprocess
    import sys

    from sapa.claims.overhead import best_ratios, timing_evidence
    from sapa.rules.timing import decide

    grid = OverheadGrid(Ns=(64, 256), d=32, ps=(1, 3), masks=("none", "causal"), passes=("fwd",),
                        methods=("naive", "causal_blocked"), crossover_ds=(), repeats=5, block_s=0.02, memory=False)

    def verdicts(res):
        cells = best_ratios(res["rows"], 32)
        return [decide(timing_evidence(cells, p, 3.0, res["provenance"], m, "fwd")) for p in (1, 3)
                for m in ("none", "causal")]

    quiet = verdicts(bench_overhead(grid=grid, device="cpu", threads=1))
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        loaded = bench_overhead(grid=grid, device="cpu", threads=1)
    finally:
        for proc in loops:
            proc.kill()
            proc.wait()
    assert "FAILS" not in quiet  # at 3× every form is well within softmax's time
    assert "FAILS" not in verdicts(loaded)  # the load costs decisions, never a flip to the opposite label
    assert loaded["provenance"]["machine"]["load_during"]["mean"] > 2  # the loops did load the machine


@pytest.mark.slow  # two fresh interpreters importing torch (~4 CPU-s); time_cells, which each runs, is tested below
def test_cells_timed_again_in_fresh_processes():
    """rerun_cells: each run in its own interpreter, the cell's best form against softmax, ``repeats`` rounds each,
    in the order stream of its replicate."""
    g = OverheadGrid(Ns=(32,), d=8, ps=(2,), repeats=5, methods=("naive", "causal_blocked"), crossover_ds=(),
                     block_s=0.002, block=8, memory=False)
    cells = [{"p": 2, "mask": "causal", "pass": "fwd", "N": 32, "method": "causal_blocked",
              "methods": ["causal_blocked", "naive"]},
             {"p": 2, "mask": "none", "pass": "fwd+bwd", "N": 32, "method": "naive"}]
    got = ov.rerun_cells(g, cells, 2)
    assert all(set(r["forms"]) == {"causal_blocked", "naive"} and all(len(f["ratio_rounds"]) == 5
               for f in r["forms"].values()) for r in got["p2/causal/fwd@N=32"])  # every form, in each process
    assert set(got) == {"p2/causal/fwd@N=32", "p2/none/fwd+bwd@N=32"}
    for name, runs in got.items():
        assert len(runs) == 2 and all(r["status"] == "ok" and len(r["ratio_rounds"]) == 5 for r in runs)
        assert all(x > 0 for r in runs for x in r["ratio_rounds"] + r["wall_ratio_rounds"])
    assert got["p2/causal/fwd@N=32"][0]["method"] == "causal_blocked"
    here = ov.time_cells(g, cells[:1], device="cpu")  # the same function in this process
    assert len(here["p2/causal/fwd@N=32"]["ratio_rounds"]) == 5
    assert ov.rerun_cells(g, [], 3) == {}


def test_a_cell_timed_again_with_several_forms_keeps_every_forms_rounds():
    """time_cells with ``methods``: each form of the cell timed against the same softmax rounds; the first listed is
    the cell's ``method`` and its rounds stand at the top level as before."""
    g = OverheadGrid(Ns=(32,), d=8, ps=(2,), repeats=5, methods=("naive",), crossover_ds=(), block_s=0.002, block=8,
                     memory=False)
    got = ov.time_cells(g, [{"p": 2, "mask": "causal", "pass": "fwd", "N": 32, "method": "causal_blocked",
                             "methods": ["causal_blocked", "naive"]}], device="cpu")["p2/causal/fwd@N=32"]
    assert got["method"] == "causal_blocked" and set(got["forms"]) == {"causal_blocked", "naive"}
    assert got["ratio_rounds"] == got["forms"]["causal_blocked"]["ratio_rounds"]
    assert all(len(f["ratio_rounds"]) == 5 and f["status"] == "ok" for f in got["forms"].values())


class _Event:
    """A stand-in for ``torch.cuda.Event`` on the host's clock (no GPU here): record() reads a counter that each
    timed call advances by a known amount, so the events' elapsed time is known exactly."""

    now = [0.0]  # milliseconds

    def __init__(self, enable_timing: bool = False):
        assert enable_timing
        self.t, self.synced = None, False

    def record(self) -> None:
        self.t = _Event.now[0]

    def synchronize(self) -> None:
        self.synced = True

    def elapsed_time(self, end: "_Event") -> float:
        assert end.synced and end.t is not None and self.t is not None
        return end.t - self.t


def test_cuda_events_time_a_block_as_the_devices_elapsed_time_per_call(monkeypatch):
    """event_seconds: elapsed ms between the two events / 1000 / calls, after the end event is synchronised; _rounds
    on the CUDA clock times each block that way (each call here costs 2.5 ms of the stand-in's clock for naive and
    1 ms for softmax, so every round's ratio is 2.5 exactly)."""
    def call(ms):
        def run():
            _Event.now[0] += ms
        return run

    assert ov.event_seconds(call(2.5), 4, event=_Event) == pytest.approx(2.5e-3, rel=1e-12)
    monkeypatch.setattr(torch.cuda, "Event", _Event)
    runners = {("softmax", None): call(1.0), ("naive", 2): call(2.5)}
    rows = {k: {} for k in runners}
    runs, walls = ov._rounds(runners, {k: 3 for k in runners}, 5, torch.device("cpu"), rows, {}, ov.CUDA_CLOCK)
    assert runs[("naive", 2)] == pytest.approx([2.5e-3] * 5, rel=1e-12)
    assert [a / b for a, b in zip(runs[("naive", 2)], runs[("softmax", None)])] == pytest.approx([2.5] * 5, rel=1e-12)
    assert len(walls[("naive", 2)]) == 5 and all(w >= 0 for w in walls[("naive", 2)])


def test_a_replicate_has_its_own_order_and_must_be_a_count():
    from sapa.common.seeds import rng_for

    a = rng_for(0, "overhead-order", 8, "none", "fwd", 32).permutation(4)
    b = rng_for(0, "overhead-order", 8, "none", "fwd", 32, 1).permutation(4)
    c = rng_for(0, "overhead-order", 8, "none", "fwd", 32, 2).permutation(4)
    assert not (np.array_equal(a, b) and np.array_equal(b, c))
    for bad in (-1, 1.5, True):
        with pytest.raises(InputError, match="replicate"):
            ov._validated(OverheadGrid(replicate=bad))


@pytest.mark.parametrize("row", [False, True])
@pytest.mark.parametrize("causal, block", [(False, None), (True, None), (True, 8), (True, 128)])
def test_the_expression_form_is_phi_of_the_scores_masked_after_phi(row, causal, block):
    """float64, against a brute-force loop: φ(q_i·k_j, N, i, j) for j ≤ i (causal: masked after φ, φ(0) ≠ 0 here),
    rows divided by their sums when row-normalised, then V; blocked = unblocked, gradients too."""
    text = "1/(1 + exp(-x)) + i/N"  # φ(0) ≠ 0, and i-dependent: the mask must act on φ(S), not on S
    g = torch.Generator().manual_seed(7)
    N = 21
    Q, K, V = (torch.randn(2, N, 5, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(3))
    got = ov.expr_attention(Q, K, V, text, row, causal, block)
    want = torch.zeros(2, N, 5, dtype=torch.float64)
    with torch.no_grad():
        for b in range(2):
            for i in range(N):
                w = [1 / (1 + math.exp(-float(Q[b, i] @ K[b, j]))) + (i + 1) / N for j in range(N)]
                w = [x if (j <= i or not causal) else 0.0 for j, x in enumerate(w)]
                w = [x / sum(w) for x in w] if row else w
                want[b, i] = sum(x * V[b, j] for j, x in enumerate(w))
    torch.testing.assert_close(got.detach(), want, rtol=1e-12, atol=1e-12)
    if block is not None:
        full = ov.expr_attention(Q, K, V, text, row, causal, None)
        ga, gb = (torch.autograd.grad(o.sum(), (Q, K, V)) for o in (got, full))
        for x, y in zip(ga, gb):
            torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)


def test_expression_cells_are_timed_and_the_linearised_form_says_why_not():
    """time_cells takes an expression form key; linearised is skipped for it, with the reason."""
    g = OverheadGrid(Ns=(32,), d=8, ps=(3,), repeats=3, methods=("naive", "causal_blocked", "linearised"),
                     crossover_ds=(), block_s=0.002, block=8, memory=False)
    cells = [{"p": "expr:Max(x, 0)**2/N", "mask": m, "pass": s, "N": 32, "method": meth}
             for m, s, meth in (("none", "fwd", "naive"), ("causal", "fwd+bwd", "causal_blocked"),
                                ("causal", "fwd", "linearised"))]
    got = ov.time_cells(g, cells, device="cpu")
    ok = got["pexpr:Max(x, 0)**2/N/none/fwd@N=32"]
    assert ok["status"] == "ok" and len(ok["ratio_rounds"]) == 3 and all(x > 0 for x in ok["ratio_rounds"])
    assert got["pexpr:Max(x, 0)**2/N/causal/fwd+bwd@N=32"]["status"] == "ok"
    assert "no finite feature map" in got["pexpr:Max(x, 0)**2/N/causal/fwd@N=32"]["status"]
    with pytest.raises(InputError):
        ov.time_cells(g, [{"p": "expr:foo(", "mask": "none", "pass": "fwd", "N": 32, "method": "naive"}])
