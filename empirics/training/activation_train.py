"""``sapa train --activation EXPR``: φ(x, N, i) beside softmax on the mechanism tasks across N, with curve statistics.

The training counterpart of ``sapa audit EXPR``: any expression the audit parser accepts
(:func:`theory.activation.parse_activation`) becomes an ensemble family (:func:`empirics.training.ensemble.torch_activation`)
and trains on copy (lag 1, 2), induction and MQAR at the budget's N grid, paired with softmax at the same
seeds (:mod:`empirics.training.mechanism`). Printed per (task, N, arm): runs that left chance + 0.03 within the
cap (the rest censored: not converged within the cap), the Kaplan–Meier median exit step, the solved fraction
and median steps to solve, the final accuracy and its gap to softmax; per task the slowdown trend over N.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

__all__ = ["main_activation", "print_mechanism"]


def print_mechanism(mech: dict, decide=None) -> None:
    """The mechanism runs' statistics, one line per (task, N, arm), then the slowdown trend per (task, arm).

    ``decide``: the verdict rule of a slowdown trend (the CLI passes :func:`sapa.rules.learning.decide_slowdown`;
    empirics does not import the judgement layer).
    """
    from empirics.training.learning_analysis import mechanism_learning, slowdown_trends
    from empirics.training.study_config import arm_label

    cells = mechanism_learning(mech)
    cap = mech["config"]["steps"]
    print(f"mechanism tasks (cap {cap} steps; a run that never left chance + 0.03 is censored: not converged within "
          f"the cap)")
    print(f"{'task':9s} {'N':>4s} {'arm':16s} {'left floor':>10s} {'median exit':>11s} {'solved':>6s} "
          f"{'median solve':>12s} {'final acc':>9s} {'gap@cap':>8s}")
    for c in cells:
        ex, so = c["exits"], c["solve"]
        m = c.get("acc_at_matched_steps")
        lab = arm_label(c["arm"])
        print(f"{c['task']:9s} {c['N']:4d} {lab:16s} {ex['n'] - ex['censored']:>4d}/{ex['n']:<5d} "
              f"{ex['median'] if ex['median'] is not None else '>cap':>11} {so['n'] - so['censored']:>2d}/{so['n']:<3d} "
              f"{so['median'] if so['median'] is not None else '>cap':>12} {c['final_acc_median']:9.3f} "
              f"{(f'{m[-1][3]:+.3f}' if m else ''):>8s}")
    for (task, arm), ev in slowdown_trends(cells).items():
        t = ev.trend
        lab = arm_label(arm)
        cells_txt = ", ".join(f"N={n}: {v:+.2f}" for n, v in zip(t.N, t.cell_mean))
        print(f"slowdown {task} {lab}: log2(exit steps / softmax's) per N {{{cells_txt}}}, Δ over N "
              f"{t.delta:+.2f} (se {t.se:.2f})" + (f" → {decide(ev)}" if decide is not None else "")
              + (f"; censored per N {list(ev.censored)}" if any(ev.censored) else ""))


def main_activation(expr: str, budget: str, out: Path, seed: int = 0, workers: int = 1, scheduler: str | None = None,
                    device: str = "cpu", decide=None, progress: bool | str = True) -> int:
    """Train ``expr`` and softmax on the mechanism tasks of ``budget`` into ``out/activation``; print the statistics.

    ``progress``: a bar of trained members (a terminal) or a line every 10 s (a log), with its ETA; chunks found
    finished (a resumed run) count as done without entering the rate.
    """
    from common.interrupt import sigterm_as_interrupt
    from common.progress import progress_bar, skip
    from empirics.montecarlo.distributed import executor_for
    from empirics.training.mechanism import expr_arm, mech_config, plan_mech_chunks, run_mechanisms

    arm = expr_arm(expr)  # parse and translate first: a bad expression is one clear line
    cfg = replace(mech_config(budget, seed, activation=expr), arms=("softmax",))
    t0 = time.perf_counter()
    from common.pool import process_pool, terminate_workers

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
                terminate_workers(pool)
            raise
        finally:
            bar.close()
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
    print(f"{arm.label} beside softmax (lr {cfg.lr:g}, {cfg.seeds} seeds, width {cfg.model.width}, "
          f"{cfg.model.layers} layers, vocabulary {cfg.vocab}; training float32 on {device})")
    print_mechanism(mech, decide)
    print(f"{len(mech['chunks'])} ensemble chunks in {time.perf_counter() - t0:.1f} s; results in "
          f"{Path(out) / 'activation'}")
    return 0
