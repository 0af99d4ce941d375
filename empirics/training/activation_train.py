"""``sapa train --activation EXPR``: φ(x, N, i) beside softmax on the mechanism tasks across N, with curve statistics.

The training counterpart of ``sapa audit EXPR``: any expression the audit parser accepts
(:func:`sapa.theory.activation.parse_activation`) becomes an ensemble family (:func:`sapa.empirics.kernels.activation_fns.torch_activation`)
and trains on copy (lag 1, 2), induction and MQAR at the budget's N grid, paired with softmax at the same
seeds (:mod:`sapa.empirics.training.mechanism`). Printed per (task, N, arm): runs that reached accuracy 0.5 within
the cap (the rest censored: not converged within the cap) and the Kaplan–Meier median step, the solved fraction
and median steps to solve, the final accuracy and whether softmax solves the cell (the gate of a verdict); per
task the interval-censored slowdown trend over N.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

__all__ = ["main_activation", "print_mechanism"]


def print_mechanism(mech: dict, decide=None) -> None:
    """The mechanism runs' statistics, one line per (task, N, arm), then the slowdown trend per (task, arm).

    ``decide``: trend → the verdicts' text (the CLI passes :func:`sapa.rules.learning.verdicts_line`; empirics does
    not import the judgement layer).
    """
    from sapa.empirics.training.learning_analysis import mechanism_learning, slowdown_trends
    from sapa.empirics.training.study_config import arm_label

    cells = mechanism_learning(mech)
    caps = ", ".join(f"{p['task']} {p['steps']}" for p in mech["config"]["probes"])
    print(f"mechanism tasks (caps: {caps} steps; a run that never reached an accuracy within its cap is censored "
          f"there: not converged within the cap; a member stops once it solves the task)")
    print(f"{'task':9s} {'N':>4s} {'arm':16s} {'acc 0.5':>8s} {'median':>7s} {'solved':>6s} {'median':>7s} "
          f"{'final acc':>9s}  gate")
    for c in cells:
        h, so = c["half"], c["solve"]
        lab = arm_label(c["arm"])
        gate = "" if c["arm"] != "softmax" else ("judged" if c["decidable"] else
                                                  "too hard: softmax < 90 %" if c["role"] == "probe" else "finding")
        print(f"{c['task']:9s} {c['N']:4d} {lab:16s} {h['n'] - h['censored']:>4d}/{h['n']:<3d} "
              f"{h['median'] if h['median'] is not None else '>cap':>7} {so['n'] - so['censored']:>2d}/{so['n']:<3d} "
              f"{so['median'] if so['median'] is not None else '>cap':>7} {c['final_acc_median']:9.3f}  {gate}")
    trends = slowdown_trends(cells, None, "half")
    role = {c["task"]: c["role"] for c in cells}
    for task in role:
        if any(t == task for t, _ in trends):
            continue
        if role[task] != "probe":
            print(f"slowdown {task}: a finding at this budget (its seeds and N cells are too few for a trend), not judged")
        else:
            print(f"slowdown {task}: softmax solves fewer than two N cells in ≥ 90 % of its seeds within the cap — no "
                  f"trend (too hard for this model at this budget)")
    for (task, arm), tr in trends.items():
        lab = arm_label(arm)
        cells_txt = ", ".join(f"N={n}: {v:+.2f}" for n, v in zip(tr.N, tr.fitted))
        print(f"slowdown {task} {lab}: fitted log2(steps to 0.5 / softmax's) per N {{{cells_txt}}}, Δ over N "
              f"{tr.delta:+.2f} (se {tr.se:.2f}, interval-censored fit)" + (f" → {decide(tr)}" if decide else "")
              + (f"; beyond the cap per N {list(tr.censored)}" if any(tr.censored) else ""))


def main_activation(expr: str, budget: str, out: Path, seed: int = 0, workers: int = 1, scheduler: str | None = None,
                    device: str = "cpu", decide=None, progress: bool | str = True) -> int:
    """Train ``expr`` and softmax on the mechanism tasks of ``budget`` into ``out/activation``; print the statistics.

    ``progress``: a bar of trained members (a terminal) or a line every 10 s (a log), with its ETA; chunks found
    finished (a resumed run) count as done without entering the rate.
    """
    from sapa.common.interrupt import sigterm_as_interrupt
    from sapa.common.progress import progress_bar, skip
    from sapa.empirics.montecarlo.distributed import executor_for
    from sapa.empirics.training.mechanism import expr_arm, mech_config, plan_mech_chunks, run_mechanisms

    arm = expr_arm(expr)  # parse and translate first: a bad expression is one clear line
    cfg = replace(mech_config(budget, seed, activation=expr), arms=("softmax",))
    t0 = time.perf_counter()
    from sapa.common.pool import process_pool, stop_pool

    with sigterm_as_interrupt(), executor_for(workers=1, scheduler=scheduler) as ex:
        pool = process_pool(workers) if ex is None and workers > 1 else None  # dies with this process
        bar = progress_bar(sum(len(c.members) for c in plan_mech_chunks(cfg)), desc=f"train {arm.label} and softmax",
                           unit="member", progress=progress)
        try:
            mech = run_mechanisms(cfg, Path(out) / "activation", ex or pool, device=device,
                                  on_chunk=lambda c: bar.update(len(c.members)),
                                  on_stored=lambda cs: skip(bar, sum(len(c.members) for c in cs)))
        except BaseException:
            if pool is not None:
                stop_pool(pool)
            raise
        finally:
            bar.close()
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
    seeds = "/".join(str(p.seeds) for p in cfg.probes)
    print(f"{arm.label} beside softmax (lr {cfg.lr:g}, {seeds} seeds per task, width {cfg.model.width}, "
          f"{cfg.model.layers} layers; training float32 on {device})")
    print_mechanism(mech, decide)
    print(f"{len(mech['chunks'])} ensemble chunks in {time.perf_counter() - t0:.1f} s; results in "
          f"{Path(out) / 'activation'}")
    return 0
