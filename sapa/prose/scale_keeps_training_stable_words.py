"""The words of ``scale-keeps-training-stable``: its statement, tested contract, headline, corrected claim and findings.

Every threshold comes from the rule's constants (:mod:`sapa.rules.stability`) or the shared study's
(:mod:`sapa.evidence.training_study`); nothing here decides a verdict.
"""

from __future__ import annotations

import math

import pandas as pd

from sapa.empirics.training.study_config import ARMS, arm_label
from sapa.evidence.training_study import HEADLINE_ARMS, PLATEAU_MARGIN
from sapa.ledger import Reading
from sapa.rules.stability import ALPHA_FAILS, ALPHA_HOLDS, MARGIN


STATEMENT = ("With φ(x) = x^p/√N, accuracy and stability relative to softmax do not degrade as the sequence length N "
             "grows (the 1/√N scale transfers across N); unscaled x^p and a fixed α tuned at one N are predicted to "
             "degrade. Whether x^p/√N matches softmax's accuracy at a given N is a different statement, reported as a "
             "finding (the level at every N).")


TESTED = ("Learning dynamics: every run logs a log-spaced learning curve to a step cap; per (task, N, arm) "
          "the steps to leave the floor (bigram predictor on text, chance on digits; first evaluation above floor + "
          "0.03; censored at the cap where never left: not converged within the cap), accuracy at matched steps and "
          "the final accuracy with a converged flag. The headline HOLDS only if, in addition to the accuracy "
          "conjunction below, the slowdown relative to softmax (log2 of the exit-step ratio, paired seeds, exits "
          "interval-censored on the evaluation grid) is shown not to grow with N for x/√N and x³/√N (slowdown-growth; "
          "slowdown-doubling asks whether it grows by more than 2×; Holm over the entry's slowdown readings); the "
          "final-gap-trend readings stand beside. Headline: for x/√N and x³/√N on each task (8×8 digits with N = 16, 64 patches; a causal character model with "
          "context N over the study's grid), every arm at its own best learning rate (validation median over seeds) "
          "and with diverged members at chance accuracy, the change Δ over the studied N range of the mean paired gap "
          "test_acc(arm, seed r) − test_acc(softmax, seed r) (OLS in log2 N over the (arm, N) cells, seeds nested) is "
          f"no worse than −{MARGIN}: HOLDS if the one-sided {1 - ALPHA_HOLDS:.0%} lower bound of Δ exceeds −{MARGIN} for "
          f"every one of the readings, FAILS if the one-sided {1 - ALPHA_FAILS:.2%} upper bound of any is below "
          f"−{MARGIN}. Beside it the same reading for "
          "x^p/α* (fixed α), unscaled x^p, x^p/N and x³/√i, and the diverged share of each arm's learning-rate grid "
          "relative to softmax's (margin 0.10). Validity gates on text (floor: the bigram predictor's accuracy; a "
          "cell left it when every seed's test accuracy exceeds it by 0.02): N where softmax did not leave it are left "
          "out of the trends, and an arm that left it at no N of the trend is not judged (censored at the floor, its "
          "gap would move only with softmax).")


def _f(v, nd: int = 3) -> str:
    return "undefined" if v is None or not math.isfinite(v) else f"{v:+.{nd}f}"


def trend_why(ev) -> str:
    """The decisive numbers of one trend reading in a line."""
    from sapa.rules.stability import ALPHA_FAILS, ALPHA_HOLDS, bounds

    if len(ev.N) < 2:
        return f"only N = {ev.N[0] if ev.N else '?'} in the study: no trend over N to judge"
    from sapa.rules.stability import MARGIN_STABLE, no_events, zero_event_floor, zero_event_seeds

    if no_events(ev):  # the t bound is undefined; the zero-event bound decides (sapa.rules.stability)
        need = zero_event_seeds(ev)
        return (f"no member of the arm or of softmax diverged at any N ({ev.N[0]}→{ev.N[-1]}; {min(ev.n)}–{max(ev.n)} "
                f"seeds per cell): no variation, so no t bound; with seeds as units, all-zero cells allow the "
                f"stable-share gap to fall by up to Δ = {zero_event_floor(ev):.2f} ({1 - ALPHA_HOLDS:.0%} bound, "
                f"Bonferroni over {len(ev.N)} cells) against −{MARGIN_STABLE}; "
                + (f"{need} seeds per cell with no divergence would read HOLDS" if need is not None
                   else "no number of seeds up to 10 000 would decide it"))
    lo, hi = bounds(ev)
    cells = ", ".join(f"{n}: {_f(m)}" for n, m in zip(ev.N, ev.cell_mean))
    what = "accuracy gap" if ev.quantity == "test_acc" else "stable-share gap"
    div = f"; arm members diverged per N {list(ev.diverged)}" if ev.diverged else ""
    return (f"Δ = {_f(ev.delta)} over N {ev.N[0] if ev.N else '?'}→{ev.N[-1] if ev.N else '?'} (se {_f(ev.se)}, "
            f"df {ev.df}); one-sided bounds {1 - ALPHA_HOLDS:.0%} lower {_f(lo)}, {1 - ALPHA_FAILS:.2%} upper {_f(hi)}; "
            f"cell-mean {what} per N {{{cells}}}{div}")


def table_lines(table: pd.DataFrame) -> tuple[str, ...]:
    """One line per (task, arm): at each N the best lr, median test accuracy and [min, max] over seeds."""
    out = []
    order = {a: k for k, a in enumerate(ARMS)}
    keys = sorted({(t, a) for t, a in zip(table["task"], table["arm"])}, key=lambda ta: (ta[0], order.get(ta[1], 99)))
    for task, arm in keys:
        g = table[(table["task"] == task) & (table["arm"] == arm)]
        cells = "; ".join(f"N={r.N}: lr {r.lr:.3g}, {r.median:.3f} [{r.lo:.3f}, {r.hi:.3f}]"
                          + (f", {r.diverged}/{r.seeds} diverged" if r.diverged else "")
                          for r in g.sort_values("N").itertuples())
        out.append(f"{task} {arm_label(arm)}: {cells}")
    return tuple(out)


def divergence_lines(counts: pd.DataFrame) -> tuple[str, ...]:
    """Per task: members diverged at the best lr and over the whole grid, per arm and N (only arms with any)."""
    out = []
    for task, t in counts.groupby("task", sort=False):
        parts = []
        for arm, g in t.groupby("arm", sort=False):
            if g["grid_diverged"].sum() == 0:
                continue
            g = g.sort_values("N")
            parts.append(f"{arm_label(arm)} " + ", ".join(f"N={r.N} {r.best_diverged}/{r.seeds} at best lr, "
                                                          f"{r.grid_diverged}/{r.grid_runs} over the grid"
                                                          for r in g.itertuples()))
        total = f"{int(t['grid_diverged'].sum())}/{int(t['grid_runs'].sum())} members diverged"
        out.append(f"{task} divergence: {total}" + ("; " + "; ".join(parts) if parts else ""))
    return tuple(out)


def edge_lines(best: pd.DataFrame) -> tuple[str, ...]:
    e = best[best["edge"] != ""]
    if not len(e):
        return ("no best learning rate sits at an edge of its grid",)
    cells = ", ".join(f"{r.task} N={r.N} {arm_label(r.arm)} ({r.edge}: {r.lr:.3g})" for r in e.itertuples())
    line = (f"best learning rate at an edge of its grid in {len(e)}/{len(best)} (task, N, arm) cells — the optimum "
            f"may lie outside the grid: {cells}")
    return (line,)


def level_lines(table: pd.DataFrame) -> tuple[str, ...]:
    """Per task: the level, not the trend — x^p/√N's median test accuracy minus softmax's at every N."""
    out = []
    for task in ("digits", "text"):
        t = table[table["task"] == task]
        if t.empty:
            continue
        med = {(r.arm, int(r.N)): float(r.median) for r in t.itertuples()}
        cells = []
        for N in sorted(set(int(n) for n in t["N"])):
            if ("softmax", N) in med:
                gaps = " / ".join(f"{med[(a, N)] - med[('softmax', N)]:+.3f}" for a in HEADLINE_ARMS if (a, N) in med)
                cells.append(f"N={N}: {gaps}")
        out.append(f"{task} level (x/√N / x³/√N minus softmax, median test accuracy at each arm's best lr): "
                   + ", ".join(cells))
    return tuple(out)


def floor_line(floored, table: pd.DataFrame, bigram: dict) -> str | None:
    """Which text arms never left the bigram plateau, with their best and softmax's accuracy at every N."""
    arms = sorted({a for t, a in floored if t == "text"}, key=lambda a: list(ARMS).index(a) if a in ARMS else 99)
    if not arms:
        return None
    t = table[table["task"] == "text"]
    med = {(r.arm, int(r.N)): float(r.median) for r in t.itertuples()}
    cells = ", ".join(f"N={n}: softmax {med[('softmax', n)]:.3f}, best median of these "
                      f"{max(med[(a, n)] for a in arms if (a, n) in med):.3f}, bigram {bigram[n]:.3f}"
                      for n in sorted(bigram) if bigram[n] is not None and ("softmax", n) in med)
    return (f"text floor: {', '.join(arm_label(a) for a in arms)} did not leave the bigram plateau (every seed by > "
            f"{PLATEAU_MARGIN}) at any N within the step cap while softmax did — not converged within the cap (censored, "
            f"not evidence that they cannot learn: see the learning curves), so their final-accuracy trend over N is "
            f"not judged; {cells}")


def plateau_line(p: dict | None) -> str:
    if not p:
        return "text bigram plateau: not measured (no text runs or no corpus)"
    cells = ", ".join(f"N={n}: softmax {v['softmax_acc']:.3f} vs bigram {v['bigram_acc']:.3f} ({v['gap']:+.3f})"
                      for n, v in p["per_N"].items())
    left = [n for n, v in p["per_N"].items() if v["left"]]
    verdict = ("softmax left the bigram plateau at every N" if p["left_at_every_N"] else
               f"softmax left the bigram plateau (every seed by > {p['margin']}) only at N = {left}" if left else
               f"softmax has not left the bigram plateau (every seed by > {p['margin']}) at any N: the text arms are "
               f"compared near "
               f"that plateau, not on what attention adds to it")
    return f"text bigram plateau: {verdict}; {cells}"


def flattening_line(flat: pd.DataFrame) -> str:
    """Softmax's validation curve per (task, N): the step it flattened at (within FLAT_TOL), or still rising."""
    from sapa.empirics.training.study_analysis import FLAT_TOL

    if flat is None or flat.empty:
        return "softmax's learning curve: not measured"
    cells = [f"{r.task} N={r.N}: " + (f"flat from step {r.flat_step} of {r.steps}" if r.past else
                                      f"still rising at step {r.steps}") + f" (last gain {r.last_gain:+.3f})"
             for r in flat.itertuples()]
    rising = [f"{r.task} N={r.N}" for r in flat.itertuples() if not r.past]
    head = (f"softmax's validation accuracy (median over seeds, best lr) stopped rising by more than {FLAT_TOL} before "
            f"the last step at every (task, N): training went past its flattening point" if not rising else
            f"softmax's validation accuracy was still rising by more than {FLAT_TOL} at the last step at "
            f"{', '.join(rising)}: longer training could still move those cells")
    return f"{head}; " + ", ".join(cells)


def alpha_line(prov: dict) -> str:
    a = {task: d for task, d in ((prov or {}).get("alpha_star") or {}).items() if d}  # a task without x/α* arms: none
    if not a:
        return "α*: not reported by the study (no fixed-α arm was trained)"
    return "α* (tuned at the smallest N, then fixed): " + "; ".join(
        f"{task} " + ", ".join(f"p={p}: {v:g}" for p, v in sorted(d.items())) for task, d in a.items())


def corrected(rs: tuple[Reading, ...], floored=()) -> str | None:
    """The claim as the headline readings support it; ``floored``: the (task, arm) pairs not judged (on the floor)."""
    if rs and rs[0].verdict == "HOLDS":
        return None
    heads = [r for r in rs if r.key[:1] == ("accuracy",) and r.key[2] in HEADLINE_ARMS]
    by = {v: [f"{r.key[1]}: {arm_label(r.key[2])}" for r in heads if r.verdict == v]
          for v in ("HOLDS", "FAILS", "UNDETERMINED")}
    floored = [f"{t}: {arm_label(a)}" for t, a in sorted(floored) if a in HEADLINE_ARMS]
    und = [n for n in by["UNDETERMINED"] if n not in floored]
    return (f"In these tiny-model runs: no degradation beyond {MARGIN} accuracy relative to softmax is shown for "
            f"{', '.join(by['HOLDS']) or 'none'}; a degradation beyond it is shown for {', '.join(by['FAILS']) or 'none'}; "
            f"undetermined for {', '.join(und) or 'none'} (more seeds or N values would narrow Δ)"
            + (f"; {', '.join(floored)} did not leave the task's floor within the step cap at any N (censored: not "
               "converged within the cap), so its final-accuracy trend over N cannot be measured there; the slowdown "
               "readings say how its learning speed changes with N." if floored else "."))


def headline(rs: tuple[Reading, ...], a: dict) -> str:
    from sapa.rules.stability import decide_accuracy

    fl = set(a.get("floored", ()))
    parts = [f"{task} {arm_label(arm)} Δ {_f(ev.delta)}" + (" (on the floor, not judged)" if (task, arm) in fl else "")
             for task in a["tasks"] for arm in HEADLINE_ARMS if (ev := a["accuracy"].get((task, arm))) is not None]
    fails = [f"{task} {arm_label(arm)} (Δ {_f(ev.delta)})" for (task, arm), ev in a["accuracy"].items()
             if arm not in HEADLINE_ARMS and (task, arm) not in fl and decide_accuracy(ev) == "FAILS"]
    floor = sorted({t for t, _ in fl})
    on_floor = "".join(f"; {t}: {sum(1 for u, _ in fl if u == t)} polynomial arm(s) not converged within the cap "
                       f"(bigram plateau) at any N while softmax left it" for t in floor)
    return (f"x^p/√N accuracy gap to softmax over N: {', '.join(parts) or 'no runs'} → {rs[0].verdict if rs else '?'}; "
            f"other arms degrading beyond {MARGIN}: {', '.join(fails) or 'none shown'}{on_floor}")
