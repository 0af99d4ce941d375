"""Tests for `sapa/claims/overhead.py`: the verdict comes from the rule, on synthetic tables and a tiny run."""

from __future__ import annotations

import json
import math

import pytest

import sapa.empirics.timing.overhead as ov
from sapa.empirics.timing.overhead import OverheadGrid
from sapa.budget import budget_named
from sapa.claims import overhead
from sapa.claims.overhead import CLAIM, FACTOR, best_ratios, split_cells
from sapa.rules.timing import TimingEvidence
from sapa.rules.timing import decide as decide_timing
from sapa.ledger import Context, reading_keyed, run_claim

TINY = OverheadGrid(Ns=(16, 32), d=8, ps=(1, 3), repeats=5, methods=("naive", "causal_blocked", "linearised"),
                    crossover_ds=(8,), crossover_masks=("none",), time_cap_s=5.0, block_s=0.004, block=8,
                    linearised_flop_cap=1e9)


# ----------------------------------------------------------------------------- the rule, branch by branch


def test_split_cells_counts_the_boundary_as_within():
    split = split_cells({"p1/none/fwd@N=16": 0.4, "p3/causal/fwd+bwd@N=32": FACTOR, "b": 7.0, "c": None})
    assert split == {"within": ["p1/none/fwd@N=16", "p3/causal/fwd+bwd@N=32"], "outside": ["b"], "unmeasured": ["c"]}


def test_best_ratios_takes_the_fastest_form_per_cell():
    def row(method, p, N, s, mask="none", pas="fwd"):
        return {"method": method, "p": p, "mask": mask, "pass": pas, "N": N, "d": 64, "seconds": s}

    rows = [row("softmax", None, 16, 2.0), row("naive", 3, 16, 5.0), row("compiled", 3, 16, 3.0),
            row("linearised", 3, 16, None), row("softmax", None, 32, None), row("naive", 3, 32, 1.0),
            row("naive", 3, 16, 0.1, mask="causal")]  # no softmax timing in that cell
    cells = best_ratios(rows, 64)
    assert cells["p3/none/fwd@N=16"]["ratio"] == 1.5 and cells["p3/none/fwd@N=16"]["method"] == "compiled"
    assert cells["p3/none/fwd@N=32"]["ratio"] is None and cells["p3/causal/fwd@N=16"]["ratio"] is None


def test_the_best_form_is_chosen_by_its_median_not_by_its_luckiest_block():
    """One lucky block must not choose a form whose other rounds are slower than its rival's (x³ causal forward +
    backward at N = 128 in a quick ledger: causal_blocked at 1.22× by one block, 1.54× by its median; naive 1.38×)."""
    def row(method, p, s, s_min):
        return {"method": method, "p": p, "mask": "causal", "pass": "fwd+bwd", "N": 128, "d": 64, "seconds": s,
                "seconds_min": s_min, "ratio_rounds": [s / 1.0] * 5}

    cells = best_ratios([row("softmax", None, 1.0, 0.95), row("naive", 3, 1.38, 1.30), row("causal_blocked", 3, 1.54, 1.16)],
                        64)
    c = cells["p3/causal/fwd+bwd@N=128"]
    assert c["method"] == "naive" and c["ratio"] == pytest.approx(1.38) and c["rounds"] == (1.38,) * 5


# ----------------------------------------------------------------------------- the check, on a tiny grid


def in_process_reruns(grid, cells, runs, **kw):
    """rerun_cells's result, each run timed in this process (replicates 1…runs): the structure without the
    interpreters' start-up (3 s each)."""
    from dataclasses import replace

    out: dict = {}
    for k in range(1, runs + 1):
        for name, got in ov.time_cells(replace(grid, replicate=k), cells, device="cpu").items():
            out.setdefault(name, []).append(got)
    return out


@pytest.fixture(scope="module")
def entry(tmp_path_factory):
    import torch

    mp = pytest.MonkeyPatch()
    mp.setattr(ov, "QUICK", TINY)
    out = tmp_path_factory.mktemp("ledger")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the caller's setting, which the check records; 1 is steady on a shared machine
    real = ov.bench_overhead
    seen = []  # the bench result the check read, kept for the planted runs below
    mp.setattr(ov, "bench_overhead", lambda **kw: seen.append(real(**kw)) or seen[-1])
    mp.setattr(ov, "rerun_cells", in_process_reruns)  # fresh interpreters: tests/empirics/timing/test_overhead.py
    try:
        yield out, run_claim(CLAIM, Context(budget_named("quick", seed=3), out)), seen[0]
    finally:
        torch.set_num_threads(threads)
        mp.undo()


def test_claim_and_contract():
    c = CLAIM
    assert c.id == "overhead"
    assert c.contract is not None and c.check is not None and "1.5" in c.contract.refuted_by
    assert c.kind == "question"  # the paper is silent on runtime; only the reviews ask


def test_verdict_follows_the_rule(entry):
    out, e, _ = entry
    ev = e.evidence
    ratios = {k: v for k, v in ev["best_ratio"].items()}
    assert len(ratios) == 2 * 2 * 2 * 2  # p × mask × pass × N
    assert ev["cells"] == split_cells(ratios)
    # one reading per (factor, p, mask, pass), each decided by timing-ratio from its cells on the CPU clock
    assert len(e.readings) == 2 * 2 * 2 * 2  # factors 1.5 and 3, p = 1, 3, masks none / causal, fwd / fwd+bwd
    assert ev["clock"] == "process"
    m = ev["provenance"]["machine"]
    for r in e.readings:
        _, factor, _, p, _, mask, _, pas = r["key"]  # ("factor", 1.5, "p", 1, "mask", "none", "pass", "fwd")
        more = ev["more_runs"]  # the runs of the cells the first look left marginal, each in a fresh process
        cells = tuple((k, (tuple(v), *map(tuple, more[k])) if k in more else tuple(v))
                      for k, v in sorted(ev["round_ratios"].items()) if k.startswith(f"p{p}/{mask}/{pas}@"))
        assert len(cells) == 2  # N = 16, 32
        load = m["load_during"]["mean"]  # recorded; on a CPU clock it does not gate
        assert r["rule"] == "timing-ratio"
        chose = tuple((k, f["choices"]) for k, f in sorted(ev["second_look"]["forms"].items())
                      if f["choices"] > 1 and k in dict(cells))  # the forms a second look chose among (Bonferroni)
        assert r["verdict"] == decide_timing(TimingEvidence(cells, factor, load=load, cores=m["cores"], clock="process",
                                                            choices=chose))
    # one meaning per label: ANSWERED only when every reading is decided
    assert e.verdict == ("ANSWERED" if all(r["verdict"] != "UNDETERMINED" for r in e.readings) else "UNDETERMINED")
    assert set(m) >= {"cpu_model", "cores", "torch_threads", "load_before", "load_during", "load_after"}
    assert m["load_during"]["samples"] >= 1 and m["load_during"]["mean"] >= 1  # the timed work itself runs
    assert all(len(v) == TINY.repeats for v in ev["round_ratios"].values() if v)
    assert e.answer and "CPU time" in e.answer and "load gate" not in e.answer
    from dataclasses import asdict

    from sapa.labels import violations

    assert violations(asdict(e)) == []
    ctrl = e.falsifiability["negative_control"]
    assert e.falsifiability["kind"] == "could_fail" and ctrl["verdict"] in ("FAILS", "UNDETERMINED")
    assert ctrl["control_ok"] == (ctrl["verdict"] == "FAILS")  # under load the gate holds the control back: reported
    per_p = ctrl["how"].split("per p: ")[1].split(", ")  # "for every p" is refuted by any p that FAILS
    assert ctrl["verdict"] == ("FAILS" if "FAILS" in per_p else "HOLDS" if set(per_p) == {"HOLDS"} else "UNDETERMINED")
    assert (e.corrected_claim is None) == (not ev["cells"]["outside"])
    assert e.headline.startswith("best polynomial / softmax SDPA at N = 32") and "float32" in e.headline
    assert ev["dtype"] == "float32" and ev["threads"] == 1 and ev["provenance"]["dtype"] == "float32"
    assert ev["grid"]["seed"] == 3 and tuple(ev["grid"]["Ns"]) == (16, 32)
    assert set(ev["complexity"]) == {"softmax", "naive", "causal_blocked", "compiled", "linearised"}
    # the causal form that skips the blocks above the diagonal is timed under the mask only, with its peak memory
    blocked = [k for k in ev["seconds"] if k.startswith("causal_blocked/")]
    assert blocked and all("/causal/" in k for k in blocked) and all(k in ev["peak_bytes"] for k in blocked)
    assert set(ev["wall_round_ratios"]) == set(ev["round_ratios"])
    model = ev["analytic_model"]
    assert set(model["cells"]) == {k for k, v in ev["best_ratio"].items() if v is not None}
    assert all(c["predicted"] > 0 for c in model["cells"].values())
    assert "p3/d8/none" in ev["crossover"] and ev["crossover"]["p3/d8/none"]["F"] == 120
    assert ev["linearisation_exact"]["max_rel_err_float64"] < 1e-13
    assert any(k.startswith("linearised/p3/causal/fwd+bwd@N=") for k in ev["ratios_per_method"])
    json.dumps(ev)


def test_figures_and_stored_data(entry, tmp_path):
    out, e, _ = entry
    assert len(e.figures) == 6 and all((out / f).is_file() for f in e.figures)  # times, crossover, cost model
    assert all(f.startswith("figures/overhead_d8_N16-32_threads1_dtypefloat32_budgetquick") for f in e.figures)
    from sapa.common import figdata
    from sapa.figures import overhead as fig

    res, stem = figdata.read(out / "data" / "overhead.json")
    assert "budgetquick" in stem and set(res) >= {"rows", "crossover", "grid", "provenance"}
    assert len(fig.draw(res, tmp_path, stem)) == 6  # `sapa figures` can redraw it


def test_full_budget_uses_the_full_grid(monkeypatch, tmp_path):
    seen = {}
    real = ov.bench_overhead

    def spy(*args, grid=None, threads=None, **kwargs):
        seen["grid"], seen["threads"] = grid, threads
        return real(*args, grid=TINY, threads=1, **kwargs)

    from sapa.figures import overhead as fig

    monkeypatch.setattr(ov, "bench_overhead", spy)
    monkeypatch.setattr(ov, "rerun_cells", lambda grid, cells, runs, **kw: seen.setdefault("rerun", grid) and {})
    monkeypatch.setattr(fig, "draw", lambda res, out_dir, stem: [])  # drawing is tested above
    e = run_claim(CLAIM, Context(budget_named("full", seed=5), tmp_path))
    assert seen["grid"].Ns == ov.FULL.Ns and seen["grid"].seed == 5
    assert seen["threads"] == 1  # the ledger times single-threaded (steadier medians on a shared machine)
    assert seen.get("rerun", ov.FULL).Ns == ov.FULL.Ns  # a second look, if any, on the same grid
    assert e.evidence and e.readings  # the entry ran on the (patched) grid the full budget asked for


def _planted(res: dict, ratio: float) -> dict:
    """The tiny run's bench result with every polynomial form's round ratios (CPU and wall) set to ``ratio``."""
    import copy

    out = copy.deepcopy(res)
    for r in out["rows"]:
        if r["method"] != "softmax" and r.get("ratio_rounds"):
            r["ratio_rounds"] = [ratio] * len(r["ratio_rounds"])
            r["wall_ratio_rounds"] = [ratio] * len(r.get("wall_ratio_rounds") or r["ratio_rounds"])
    return out


@pytest.mark.parametrize("ratio,headline", [(0.5, "HOLDS"), (6.0, "FAILS")])
def test_a_planted_timing_gives_its_known_verdict(entry, monkeypatch, tmp_path, ratio, headline):
    """Every polynomial form at ratio× softmax in every round: the headline reading (p = 1, no mask, forward, within
    1.5×) is HOLDS far below 1.5 and FAILS far above 3, and the question is ANSWERED either way, with no second look."""
    from sapa.rules.timing import DRIFT

    _, _, res = entry
    far = 10 * DRIFT["process"]  # ten drift sd from both factors in log ratio
    assert math.log(ratio) < math.log(FACTOR) - far or math.log(ratio) > math.log(3.0) + far
    monkeypatch.setattr(ov, "bench_overhead", lambda **kw: _planted(res, ratio))
    monkeypatch.setattr(overhead, "_figure", lambda ctx, res: ())
    o = overhead.check(Context(budget_named("quick", seed=3), tmp_path))
    head = reading_keyed(o.readings, "factor", FACTOR, "p", 1, "mask", "none", "pass", "fwd")
    assert head.verdict == headline and o.verdict == "ANSWERED"
    assert {r.verdict for r in o.readings} == {headline}  # 3× too: 0.5 is within it, 6 outside
    assert o.evidence["more_runs"] == {} and o.evidence["second_look"]["forms"] == {}  # nothing marginal


def test_a_marginal_cell_is_timed_again_and_decided_on_all_its_runs(entry, monkeypatch, tmp_path):
    """One cell planted at the factor (marginal on one run), the rest far within: only that cell is timed again,
    EXTRA_RUNS times, with its best form; its reading is decided on all its runs; the evidence keeps them."""
    from sapa.rules.timing import EXTRA_RUNS

    _, _, res = entry
    planted = _planted(res, 0.5)
    target = "p1/none/fwd@N=32"
    best = best_ratios(planted["rows"], 8)[target]["method"]
    for r in planted["rows"]:
        if r["method"] == best and r["p"] == 1 and r["mask"] == "none" and r["pass"] == "fwd" and r["N"] == 32:
            r["ratio_rounds"] = [1.45, 1.55, 1.50, 1.40, 1.60]
    asked = []

    def rerun(grid, cells, runs, **kw):
        asked.append((cells, runs))
        return {f"p{c['p']}/{c['mask']}/{c['pass']}@N={c['N']}": [
            {"method": c["method"], "ratio_rounds": [1.10, 1.12, 1.09, 1.11, 1.10],
             "wall_ratio_rounds": [1.10, 1.12, 1.09, 1.11, 1.10], "status": "ok"}] * runs for c in cells}

    monkeypatch.setattr(ov, "bench_overhead", lambda **kw: planted)
    monkeypatch.setattr(ov, "rerun_cells", rerun)
    monkeypatch.setattr(overhead, "_figure", lambda ctx, res: ())
    o = overhead.check(Context(budget_named("quick", seed=3), tmp_path))
    assert len(asked) == 1 and asked[0][1] == EXTRA_RUNS
    assert [(c["p"], c["mask"], c["pass"], c["N"], c["method"]) for c in asked[0][0]] == [(1, "none", "fwd", 32, best)]
    others = [r["method"] for r in planted["rows"] if r["method"] not in ("softmax", best) and r["p"] == 1
              and r["mask"] == "none" and r["pass"] == "fwd" and r["N"] == 32 and r["seconds"] is not None]
    assert asked[0][0][0]["methods"] == [best, *others] and others  # every form the first run timed, its choice first
    assert list(o.evidence["more_runs"]) == [target] and len(o.evidence["more_runs"][target]) == EXTRA_RUNS
    head = reading_keyed(o.readings, "factor", FACTOR, "p", 1, "mask", "none", "pass", "fwd")
    assert head.verdict == "HOLDS" and o.verdict == "ANSWERED"
    assert o.evidence["second_look"]["forms"] == {target: {"timed": [best], "first_run": best, "chosen": best,
                                                           "choices": 1}}


def test_the_second_look_times_every_form_and_takes_the_one_all_runs_put_first(entry, monkeypatch, tmp_path):
    """The first run chose a form whose rounds sit at the factor while another form's fresh runs sit at 1.05×: the
    cell takes the other form (least median over all runs), the rule's p(within) counts the choice among the forms
    (Bonferroni), and the reading is decided on that form's runs."""
    from sapa.rules.timing import EXTRA_RUNS, cell_test, tests_of

    _, _, res = entry
    planted = _planted(res, 0.5)
    target = "p1/none/fwd@N=32"
    best = best_ratios(planted["rows"], 8)[target]["method"]
    for r in planted["rows"]:
        if r["p"] == 1 and r["mask"] == "none" and r["pass"] == "fwd" and r["N"] == 32 and r["method"] != "softmax":
            r["ratio_rounds"] = r["wall_ratio_rounds"] = [1.45, 1.55, 1.50, 1.40, 1.60] if r["method"] == best else \
                [1.52, 1.58, 1.55, 1.50, 1.62]
    fast = [1.06, 1.04, 1.05, 1.07, 1.03]

    def rerun(grid, cells, runs, **kw):
        out = {}
        for c in cells:
            forms = {m: {"ratio_rounds": fast if m != best else [1.5] * 5, "wall_ratio_rounds": fast if m != best
                         else [1.5] * 5, "status": "ok"} for m in c["methods"]}
            out[f"p{c['p']}/{c['mask']}/{c['pass']}@N={c['N']}"] = [
                {"method": c["method"], **forms[c["method"]], "forms": forms}] * runs
        return out

    monkeypatch.setattr(ov, "bench_overhead", lambda **kw: planted)
    monkeypatch.setattr(ov, "rerun_cells", rerun)
    monkeypatch.setattr(overhead, "_figure", lambda ctx, res: ())
    o = overhead.check(Context(budget_named("quick", seed=3), tmp_path))
    look = o.evidence["second_look"]["forms"][target]
    assert look["first_run"] == best and look["chosen"] != best and look["choices"] == len(look["timed"]) >= 2
    assert o.evidence["more_runs"][target] == [fast] * EXTRA_RUNS
    head = reading_keyed(o.readings, "factor", FACTOR, "p", 1, "mask", "none", "pass", "fwd")
    assert head.verdict == "HOLDS" and o.verdict == "ANSWERED"
    runs = ((1.52, 1.58, 1.55, 1.50, 1.62), *[tuple(fast)] * EXTRA_RUNS)
    ev = overhead.timing_evidence({target: {"p": 1, "mask": "none", "pass": "fwd", "runs": runs,
                                            "choices": len(look["timed"])}}, 1, FACTOR, {"clock": "process"})
    k = len(look["timed"])
    assert ev.choices == ((target, k),)
    assert tests_of(ev)[target].p_within == pytest.approx(min(1.0, k * cell_test(runs).p_within), rel=1e-12)


def test_rerun_seconds_counts_both_forms_and_the_cap_leaves_a_costly_cell_alone():
    g = OverheadGrid(repeats=5, block_s=0.04)
    cheap = {"seconds": 0.001, "ratio": 1.4}
    assert overhead.rerun_seconds(cheap, g) == pytest.approx(2 * (5 * 0.04) + 3 * 0.001 + 3 * 0.001 / 1.4)
    costly = {"seconds": 10.0, "ratio": 1.4}  # 3 calls a block of 10 s: far beyond the cap
    assert overhead.rerun_seconds(costly, g) > overhead.RERUN_CAP_S
    compiled = {**cheap, "method": "compiled"}  # a fresh process compiles again
    assert overhead.rerun_seconds(compiled, g) == pytest.approx(overhead.rerun_seconds(cheap, g) + overhead.COMPILE_S)
    assert overhead.rerun_seconds(compiled, g) > overhead.RERUN_CAP_S


def test_a_marginal_compiled_cell_is_named_not_timed_again(monkeypatch):
    """A cell whose best form is torch.compile would compile again in each fresh process: past the cap, the second
    look names it in not_rerun with its predicted seconds and starts no process."""
    monkeypatch.setattr(ov, "rerun_cells", lambda *a, **k: pytest.fail("no process for a capped cell"))
    cell = {"p": 1, "mask": "none", "pass": "fwd", "N": 128, "method": "compiled", "seconds": 0.001, "ratio": 1.5,
            "rounds": (1.45, 1.55, 1.50, 1.40, 1.60)}
    got = overhead.second_look(OverheadGrid(), {"p1/none/fwd@N=128": cell}, {"clock": "process"})
    assert got["cells"] == {} and list(got["not_rerun"]) == ["p1/none/fwd@N=128"]
    assert got["not_rerun"]["p1/none/fwd@N=128"].startswith("one run predicts 4")


# ----------------------------------------------------------------------------- machine states and platform rows


def _stored_like(ratio_by_cell: dict[str, float], runs: int, rounds: int = 5, jitter: float = 0.0, seed: int = 0):
    """Stored-run dicts ({"process": {cell: rounds}}) with every round at the cell's ratio (× e^(±jitter))."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [{"process": {c: list(r * np.exp(jitter * rng.standard_normal(rounds))) for c, r in ratio_by_cell.items()}}
            for _ in range(runs)]


def test_stored_cells_parse_the_names_and_keep_every_run():
    runs = _stored_like({"p3/causal/fwd+bwd@N=128": 1.2, "p1/none/fwd@N=1024": 0.5}, runs=3)
    cells = overhead.stored_cells(runs)
    c = cells["p3/causal/fwd+bwd@N=128"]
    assert (c["p"], c["mask"], c["pass"], c["N"]) == (3, "causal", "fwd+bwd", 128)
    assert len(c["runs"]) == 3 and c["rounds"] == c["runs"][0] and c["ratio"] == pytest.approx(1.2, rel=1e-12)
    with pytest.raises(ValueError, match="not a cell name"):
        overhead.stored_cells([{"process": {"softmax@N=1": [1.0]}}])


def test_a_load_row_flags_the_readings_that_flip_between_holds_and_fails(monkeypatch):
    """Stored compute runs far inside 1.5× and memory runs far outside it: the memory row names the flipped
    readings, the compute row none; both judged by the same rule as the run's own readings."""
    from sapa.empirics.timing import drift as dr

    names = [f"p1/{m}/{p}@N={n}" for m in ("none", "causal") for p in ("fwd", "fwd+bwd") for n in (128, 512)]
    quiet, inside, outside = ({n: r for n in names} for r in (1.0, 1.05, 4.0))
    stored = ([{**r, "state": "quiet", "series": dr.STATES_SERIES} for r in _stored_like(quiet, 3, jitter=0.01)]
              + [{**r, "state": "compute", "series": dr.STATES_SERIES} for r in _stored_like(inside, 3, jitter=0.01)]
              + [{**r, "state": "memory", "series": dr.STATES_SERIES} for r in _stored_like(outside, 3, jitter=0.01)])
    monkeypatch.setattr(dr, "stored_runs", lambda series=None, **kw: [r for r in stored if r["series"] == series])
    prov = {"clock": "process", "machine": {"cores": 2, "load_during": {"mean": 1.0}}}
    cells = overhead.stored_cells([r for r in stored if r["state"] == "quiet"])
    mine = list(overhead.readings_of(cells, [1], ["none", "causal"], ["fwd", "fwd+bwd"], prov))
    assert {r.verdict for r in mine if r.key[1] == FACTOR} == {"HOLDS"}
    rows = {r["condition"].split(" (")[0]: r for r in overhead.machine_state_rows(mine, [1], ["none", "causal"],
                                                                                   ["fwd", "fwd+bwd"], prov)}
    assert set(rows) == {"beside a compute load", "beside a memory-bandwidth load"}  # no platform series stored
    assert rows["beside a compute load"]["verdict"] == "ANSWERED"
    assert "no reading flips" in rows["beside a compute load"]["note"]
    mem = rows["beside a memory-bandwidth load"]
    assert "flips between HOLDS and FAILS against this run: " in mem["note"]
    assert mem["note"].count("p = 1") >= 4  # the four (mask, pass) readings at factor 1.5 (and 3: 4.0 > 3)
    assert f"{math.log(4.0):+.3f} on average" in mem["note"]


def test_the_device_row_says_the_gpu_question_is_open_without_one():
    cpu = overhead.device_row({"device": "cpu"})
    assert cpu["verdict"] is None and cpu["note"].startswith("not run: no GPU")
    gpu = overhead.device_row({"device": "cuda:0", "device_name": "NVIDIA H100"})
    assert gpu["verdict"] is None and "NVIDIA H100" in gpu["note"] and gpu["note"].startswith("not applicable")


def test_the_entry_carries_the_machine_state_and_platform_rows(entry):
    """The stored series are shipped: the entry shows the compute-load, memory-load, default-thread, quiet-drift
    and device rows, each decided from data (none typed in)."""
    _, e, _ = entry
    conds = [r["condition"] for r in e.robustness["varied"]]
    for start in ("beside a compute load", "beside a memory-bandwidth load", "torch's default thread count",
                  "drift of a quiet machine only", "device: GPU (CUDA)"):
        assert any(c.startswith(start) for c in conds), start
    rows = {r["condition"].split(" (")[0]: r for r in e.robustness["varied"]}
    for name in ("beside a compute load", "beside a memory-bandwidth load", "torch's default thread count"):
        assert rows[name]["verdict"] in ("ANSWERED", "UNDETERMINED") and "readings decided" in rows[name]["note"]
