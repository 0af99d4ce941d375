"""The words of ``overhead``: its readings, answer, headline, corrected claim, findings and control, from the timings
``sapa.claims.overhead`` measured and the verdicts of rule ``timing-ratio``."""

from __future__ import annotations

from sapa.ledger import Reading, readings_keyed
from sapa.rules.timing import ALPHA_FAILS, ALPHA_HOLDS, DRIFT, EXTRA_RUNS, FACTOR

RULE = ("cell = (p, mask, pass, N) at d = 64; best form = fastest block over measured polynomial forms; evidence = "
        "its per-round ratios to softmax SDPA in process CPU time (≥ 5 rounds of blocks, the forms in shuffled order); "
        "per cell a one-sided t-test of the mean log ratio against the factor, se² = s²/R + σ_b² per run (σ_b the "
        f"drift between runs, {DRIFT['process']:g}, measured across machine states: stored runs on a quiet machine, beside "
        "a compute load and beside a memory-bandwidth load); a cell the first run leaves "
        f"marginal is timed in {EXTRA_RUNS} more runs, each in a fresh process (two looks, Bonferroni); within at "
        f"{ALPHA_HOLDS:g}, outside by Holm at {ALPHA_FAILS:g}; one reading per (p, mask, pass) and factor by "
        "timing-ratio; the load is recorded, and gates only the wall-clock variant in the robustness section; "
        "ANSWERED when every reading is decided.")


def reading(factor: float, p: int, mask: str, pas: str, verdict: str, why: str) -> Reading:
    """The best form of c·(QKᵀ)^∘p V within ``factor`` of softmax SDPA at every N (one p, mask and pass)."""
    return Reading(
        name=f"{label(p, mask, pas)}: best form within {factor:g}× of softmax SDPA", rule="timing-ratio",
        verdict=verdict, key=("factor", factor, "p", p, "mask", mask, "pass", pas),
        statement=f"the fastest form of c·(QKᵀ)^∘{p} V ({'causal' if mask == 'causal' else 'no'} mask, "
                  f"{'forward' if pas == 'fwd' else 'forward + backward'}) is within {factor:g}× of "
                  "softmax's fused kernel at every N of the grid",
        why=why)


def label(p: int, mask: str, pas: str) -> str:
    """'p = 1, mask none, fwd'."""
    return f"p = {p}, mask {mask}, {pas}"


def label_of(r: Reading) -> str:
    _, _, _, p, _, mask, _, pas = r.key
    return label(p, mask, pas)


def decided_note(vs: list[Reading]) -> str:
    undecided = [label_of(r) for r in vs if r.verdict == "UNDETERMINED"]
    return (f"{len(vs) - len(undecided)} of {len(vs)} readings decided"
            + (f"; undecided: {', '.join(undecided)}" if undecided else ""))


def _fmt_ratio(cells: dict[str, dict], p: int, mask: str, N: int) -> str:
    vals = []
    for pas in ("fwd", "fwd+bwd"):
        c = cells.get(f"p{p}/{mask}/{pas}@N={N}")
        vals.append("—" if c is None or c["ratio"] is None else f"{c['ratio']:.2f}")
    return "|".join(vals)


def headline(cells: dict, split: dict, features: dict, cross: dict, g: dict, prov: dict) -> str:
    measured_N = sorted({c["N"] for c in cells.values() if c["ratio"] is not None})
    n_ref = measured_N[-1] if measured_N else g["Ns"][-1]
    pieces = [f"p{p} {m} {_fmt_ratio(cells, p, m, n_ref)}" for p in sorted(g["ps"]) for m in list(g["masks"])]
    n_cells = len(split["within"]) + len(split["outside"])
    F3, x3 = features.get("p3", {}).get("sym"), cross.get(f"p3/d{g['d']}/none")
    return (f"best polynomial / softmax SDPA at N = {n_ref} (fwd|fwd+bwd): " + ", ".join(pieces)
            + f"; within {FACTOR:g}× in {len(split['within'])}/{n_cells} measured cells"
            + (f"; exact x³ linearisation has F = {F3} features (flop crossover N ≈ {x3['flop_N']:.0f})"
               if F3 and x3 else "")
            + f" [{prov['device']}, {prov['threads']} thread(s), float32]")


def corrected(cells: dict, split: dict, regime: dict, cross: dict, g: dict, prov: dict) -> str:
    """Where the best form is within the factor, the worst cell, and what the linearisation costs."""
    d = g["d"]
    worst = max((c for c in cells.values() if c["ratio"] is not None), key=lambda c: c["ratio"], default=None)
    where = "; ".join(f"{k}: " + ("every N" if v["N_within"] == list(g["Ns"]) else f"N ∈ {v['N_within']}")
                      for k, v in regime.items() if v["N_within"])
    lin = []
    for p in sorted(g["ps"]):
        c = cross.get(f"p{p}/d{d}/none")
        if c is not None:
            got = f"N ≈ {c['measured_N']:.0f}" if c["measured_N"] else c["measured_status"]
            lin.append(f"p = {p}: F = {c['F']}, flop crossover N ≈ {c['flop_N']:.0f}, measured {got}")
    return (f"On this machine ({prov['device']}, {prov['threads']} torch thread(s), float32, torch {prov['torch']}), the "
            f"best form of c·(QKᵀ)^∘p V runs within {FACTOR:g}× of softmax's fused kernel "
            + (f"only in: {where}" if where else "in no measured cell")
            + (f"; the worst cell is p{worst['p']}/{worst['mask']}/{worst['pass']} at N = {worst['N']} "
               f"({worst['ratio']:.2f}×, {worst['method']})" if worst else "")
            + ". Element-wise polynomials drop softmax's exponentials and row sums but not its O(N²·d) cost: the "
              "naive and compiled forms are O(N²·d) like softmax (and materialise the N×N matrix, O(N²) memory, "
              "which softmax's fused kernel avoids). The exact linearisation φ_p(Q)(φ_p(K)ᵀV) costs "
              f"O(N·C(d+p−1,p)·d_v) — linear attention for p = 1 — but its feature count grows like d^p/p!: at d = {d}, "
            + ("; ".join(lin) or "see the crossover table") + ".")


def answer(readings, prov: dict, model: dict, features: dict, cross: dict, d: int, load_cores: tuple,
           same_order: float, apart: float) -> str:
    """Which (p, mask, pass) are within the factor, within the same order, the cost model, the linearisation."""
    clock = prov.get("clock", "wall")
    main = readings_keyed(readings, "factor", FACTOR)
    by = {v: [label_of(r) for r in main if r.verdict == v] for v in ("HOLDS", "FAILS", "HOLDS_IN_REGIME", "UNDETERMINED")}
    F3, x3 = features.get("p3", {}).get("sym"), cross.get(f"p3/d{d}/none")
    apart_cells = model["disagree_beyond_1.5x"]
    text = (
        f"The paper is silent on runtime. Platform: {platform(prov, d)}. " + measured_how(clock) + " "
        f"within {FACTOR:g}× of softmax's fused kernel — "
        + tally(by)
        + f". Within {same_order:g}×: "
        + ", ".join(sorted({r.verdict for r in readings_keyed(readings, "factor", same_order)}))
        + ". Under the causal mask the materialised form pays for the full N×N products and a tril pass; the form that "
          "skips the blocks above the diagonal (causal_blocked) removes that. The cost model (flops, element-wise "
          f"work and N×N bytes at this machine's measured rates) differs from the measurement by more than {apart:g}× "
          f"in {len(apart_cells)} of {len(model['cells'])} cells"
        + (f" ({', '.join(apart_cells[:4])}{'…' if len(apart_cells) > 4 else ''})" if apart_cells else "") + ". "
        + ("Independent of the machine: the exact linearisation φ_p(Q)(φ_p(K)ᵀV) equals the quadratic form to float64 "
           f"round-off and costs O(N·C(d+p−1,p)·d_v); at d = {d} it needs F = {F3} features for x³, so it beats the "
           f"quadratic form by flop count only beyond N ≈ {x3['flop_N']:.0f}." if F3 and x3 else ""))
    if not any(r.verdict != "UNDETERMINED" for r in readings):
        text += " No reading is settled in this run (each reading's line says why, with its power)."
    load, cores = load_cores
    if clock == "wall" and load is not None and cores is not None and load > cores:
        text += (f" The machine's load ({load:.2f} runnable tasks) exceeded its {cores} cores during the timings: "
                 "every reading is UNDETERMINED by the load gate (the ratios are kept in the evidence).")
    return text


def measured_how(clock: str) -> str:
    """How the run timed its cells and the drift its rule uses: the answer's second sentence, up to its colon.

    >>> measured_how("cuda_event")[:60]
    'Measured in one run on this machine with CUDA events around '
    """
    again = f"and a cell one run leaves marginal is timed in {EXTRA_RUNS} more fresh runs, every form again): "
    if clock == "cuda_event":
        return ("Measured in one run on this machine with CUDA events around each block of calls (the device's own "
                "time; the forms interleaved in shuffled order; each cell is judged by a t-test on its rounds plus the "
                f"drift between runs, σ_b = {DRIFT['cuda_event']:g}, the wall clock's, standing in until GPU runs are "
                "stored to measure it, " + again)
    return (f"Measured in one run on this machine in {clock} {'clock' if clock == 'wall' else 'CPU'} time (blocks of "
            "calls, the forms interleaved in shuffled order; a compute neighbour costs wall time, not CPU time, but a "
            "memory-bandwidth neighbour costs CPU time too, so each cell is judged by a t-test on its rounds plus the "
            "drift between runs measured across quiet, compute-loaded and memory-loaded machines, "
            f"σ_b = {DRIFT.get(clock, DRIFT['process']):g}, " + again)


def platform(prov: dict, d: int = 64) -> str:
    """What the timings are about, in one phrase; without a GPU, that the GPU question is open.

    >>> platform({"device": "cpu", "device_name": "x86_64", "threads": 1, "batch": 1}, 64)
    'CPU (x86_64), 1 torch thread, float32, batch 1, one head, d = 64; no GPU on this machine: how the forms compare on a GPU is not answered'
    """
    dev = str(prov.get("device", "cpu"))
    t = prov.get("threads")
    head = (f"{'CUDA' if dev.startswith('cuda') else 'CPU'} ({prov.get('device_name')}), {t} torch "
            f"thread{'' if t == 1 else 's'}, float32, batch {prov.get('batch', 1)}, one head, d = {d}")
    return head if dev.startswith("cuda") else head + "; no GPU on this machine: how the forms compare on a GPU is not answered"


def tally(by: dict[str, list[str]], most: int = 3) -> str:
    """The readings per verdict in words: a count of each, the labels of a verdict only when few readings have it
    (the report shows the whole p × mask × pass grid as a table).

    >>> tally({"HOLDS": ["a", "b", "c", "d"], "FAILS": ["e"], "UNDETERMINED": []})
    'HOLDS in 4 of 5 (p, mask, pass) readings; FAILS in 1 (e)'
    """
    n = sum(len(v) for v in by.values())
    parts = [f"{v} in {len(names)}" + (f" of {n} (p, mask, pass) readings" if k == 0 else "")
             + (f" ({'; '.join(names)})" if len(names) <= most and len(names) < n else "")
             for k, (v, names) in enumerate((v, x) for v, x in by.items() if x)]
    return "; ".join(parts) or "no reading"


def findings(split: dict) -> tuple[str, ...]:
    n_cells = len(split["within"]) + len(split["outside"])
    return (f"within {FACTOR:g}× (fastest rounds, no test) in {len(split['within'])}/{n_cells} measured cells — one run, "
            "load-dependent",)


def tested(ps: list[int], masks: list[str], g: dict, prov: dict) -> str:
    return (f"Polynomial attention c·(QKᵀ)^∘p V, p ∈ {ps}, in its best available form (minimum over the naive N² "
            f"form, torch.compile of it, and the exact linearisation φ_p(Q)(φ_p(K)ᵀV) with symmetric features) runs "
            f"within {FACTOR:g}× of softmax's fused kernel (torch scaled_dot_product_attention), forward and "
            f"forward+backward, masks {masks}, at every N ∈ {list(g['Ns'])}; batch 1, {g['heads']} head(s), "
            f"d = d_v = {g['d']}, float32, {prov['device']} with {prov['threads']} torch thread(s).")


def falsifiability(worst: str, control: list[str], false_factor: float, factor: float) -> dict:
    from sapa.conditions import could_fail

    return could_fail("a timing can come out either way: each cell's rounds are measured, and a polynomial form slower "
                      "than the factor is outside",
                      f"the best polynomial form runs within {false_factor:g}× of softmax SDPA in every cell, for every p "
                      f"(deliberately false: no form is {factor / false_factor:g}× faster than the fused kernel)", worst,
                      how="the same round ratios, machine state and rule timing-ratio, per p: " + ", ".join(control))
