"""What ``sapa train`` prints: accuracy per arm and N at the best learning rate, as a table, and what was reused.

A rerun of a finished study trains nothing: the summary then says how many finished ensemble chunks it reused and
from which folder (``sapa verify`` fills ``results/train``, the default ``--out`` of ``sapa train``).
"""

from __future__ import annotations

from pathlib import Path

from sapa.display import arm_name, sig, text_table


def summary(res, out: Path, seconds: float) -> str:
    """The table (task, N, arm, best lr, test accuracy, divergences, ‖φ(S)‖_F) and the lines below it."""
    from sapa.empirics.training.study_analysis import best_lr, flattening
    from sapa.empirics.training.train_study import best_lr_summary
    from sapa.prose.scale_keeps_training_stable_words import flattening_line

    best = best_lr(res.runs)
    tab = best_lr_summary(res.runs, best)
    rows = [[r.task, r.N, arm_name(r.arm), f"{r.lr:.0e}", f"{r.test_acc_median:.3f}",
             f"{r.test_acc_min:.3f}–{r.test_acc_max:.3f}", f"{int(r.diverged)} of {r.seeds}",
             f"{int(r.diverged_grid)} of {r.runs_grid}", sig(r.attn_fro_median, 4)] for r in tab.itertuples()]
    lines = text_table(["task", "N", "arm", "best lr", "test acc", "min–max over seeds", "diverged at best lr",
                        "diverged over lr grid", "‖φ(S)‖_F"], rows,
                       right=[False, True, False, True, True, True, True, True, True])
    prov = res.provenance
    lines += ["",
              "test acc: median over seeds at the arm's best learning rate (chosen on validation accuracy; a diverged "
              "member counts at chance); diverged: members whose training loss went non-finite or ended above its "
              "start; ‖φ(S)‖_F: median final attention norm (float64, exact kernels).",
              alpha_line(prov), flattening_line(flattening(res.history, best)), look2_line(prov),
              reuse_line(prov, out, seconds)]
    return "\n".join(lines)


def look2_line(prov: dict) -> str:
    """Which dose-response strata the second look trained again on the finer grid of c (norm-vs-accuracy)."""
    cfg = (prov or {}).get("config") or {}
    if int(cfg.get("look2_refine") or 0) < 2:
        return "dose-response: one look (this budget's design has no second look)"
    got = (prov or {}).get("second_look") or []
    if not got:
        return "dose-response second look: none needed (every open stratum was out of its reach, or none was open)"
    from types import SimpleNamespace

    from sapa.empirics.training.study_config import look2_doses

    added = len(look2_doses(SimpleNamespace(alphas=cfg.get("alphas") or (), look2_refine=int(cfg["look2_refine"]))))
    fam = {1: "x/c", 3: "x³/c"}
    return ("dose-response second look (the strata the grid left open that its finer grid can decide): "
            + "; ".join(f"{s['task']} {fam.get(s['p'], s['p'])} at lr {s['lr']:g}" for s in got)
            + f", each with {added} more doses of c")


def main_train(budget: str, out: Path, seed: int = 0, workers: int = 2, progress: bool = True,
               scheduler: str | None = None, device: str = "cpu", seeds: int | None = None) -> int:
    """``sapa train``: run (or resume) the study, then print :func:`summary`, the learning curves and the mechanism tasks.

    ``seeds``: the study's replicates instead of the budget's (the mechanism probes keep theirs).
    Chunks run serially (``workers`` 1), in a pool of ``workers`` single-threaded processes that die with
    this one, or on the Dask cluster of ``scheduler`` (:func:`sapa.empirics.montecarlo.distributed.executor_for`,
    the executor ``sapa sweep`` uses); every path hands a ``concurrent.futures.Executor`` to ``run_study``.
    """
    import time

    from sapa.common.interrupt import sigterm_as_interrupt
    from sapa.empirics.montecarlo.distributed import executor_for
    from sapa.empirics.training.activation_train import print_mechanism
    from sapa.empirics.training.study_analysis import best_lr
    from sapa.empirics.training.train_study import print_learning, run_study
    from sapa.evidence.dose_looks import second_look
    from sapa.evidence.training_study import study_design
    from sapa.rules.learning import verdicts_line

    t0 = time.perf_counter()
    with sigterm_as_interrupt(), executor_for(workers=1, scheduler=scheduler) as ex:
        study = budget
        if seeds is not None:  # the budget's study with another replicate count, beside the budget's own mechanisms
            from dataclasses import replace

            from sapa.empirics.training.mechanism import mech_config
            from sapa.empirics.training.train_study import study_config

            study = replace(study_config(budget, seed), seeds=seeds)
        res = run_study(study, out, seed=seed, workers=workers if ex is None else 1, progress=progress, executor=ex,
                        device=device, mechanism="budget" if seeds is None else mech_config(budget, seed),
                        second_look=second_look, design=study_design(budget, seed))
    print(summary(res, out, time.perf_counter() - t0))
    print_learning(res, best_lr(res.runs))
    if res.mechanism is not None:
        print_mechanism(res.mechanism, verdicts_line)
    return 0


def alpha_line(prov: dict) -> str:
    """The tuned α* of the fixed-α arms per task, never an empty line: a task with none tuned says so and why."""
    a = (prov or {}).get("alpha_star")
    if not a:
        return "α*: none tuned in this run (the study reported no fixed-α arm, x^p/α*)"
    tuned = {task: d for task, d in a.items() if d}
    untuned = [task for task, d in a.items() if not d]
    if not tuned:
        return (f"α*: none tuned ({', '.join(untuned)}: no fixed-α arm x^p/α* on {'this task' if len(untuned) == 1 else 'these tasks'})")
    text = "α* (tuned at the smallest N, then fixed): " + "; ".join(
        f"{task} " + ", ".join(f"p={p}: {sig(float(v))}" for p, v in sorted(d.items())) for task, d in tuned.items())
    if untuned:
        text += f"; none tuned for {', '.join(untuned)} (no fixed-α arm x^p/α* on {'it' if len(untuned) == 1 else 'them'})"
    return text


def reuse_line(prov: dict, out: Path, seconds: float) -> str:
    """How much of the study this run trained and how much it found finished in ``out/chunks``.

    Counted in ensemble chunks (what is trained or found on disk); the members an alias reads under a second arm's
    name (x^p at c = 1 is the dose grid's member) were trained once and are neither trained now nor reused.
    """
    members, chunks = int(prov["members"]), int(prov["chunks"])
    now = int(prov.get("members_trained_now", 0))
    aliased = int(prov.get("members_aliased", 0))
    chunks_now = prov.get("chunks_trained_now")
    if chunks_now is None:  # a study.json of before the count: all, none or some
        chunks_now = chunks if now >= members - aliased else 0 if now == 0 else None
    else:
        chunks_now = int(chunks_now)
    where = Path(out) / "chunks"
    also = (f"; {aliased} more rows are members read under a second arm's name (trained once)" if aliased else "")
    if chunks_now == 0:
        return (f"Nothing to train in the study: all {members - aliased} members ({chunks} ensemble chunks) were "
                f"already finished in {where} (same budget, seed and design; `sapa verify` trains into results/train)"
                f"{also}; {seconds:.1f} s in all, with any mechanism chunks trained now (listed below). To train again, "
                f"give another --out or delete that folder.")
    if chunks_now is None or chunks_now < chunks:
        reused = members - aliased - now
        counted = "" if chunks_now is None else f" ({chunks - chunks_now} ensemble chunks)"
        return (f"Trained {now} of {members - aliased} members now and reused the other {reused}{counted}, finished "
                f"earlier in {where}{also}; {seconds:.1f} s. Training float32, norms float64; results in {out}.")
    return (f"Trained all {now} members ({chunks} ensemble chunks) in {seconds:.1f} s{also}. Training float32, norms "
            f"float64; results in {out}.")
